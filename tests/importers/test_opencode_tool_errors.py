"""OpenCode: a tool that crashed inside OpenCode records no source verdict; it was stored
as the source's "allow".  Parts shaped as in the captured 1.18.34 export."""

from __future__ import annotations

from agent_eval.importers.opencode import call_from_part


def _part(status: str, error: str | None = None, output: str | None = None) -> dict:
    state = {"status": status, "input": {"command": "bun run build", "description": "Build"},
             "time": {"start": 1795304436573, "end": 1795304436583}}
    if error is not None:
        state["error"] = error
    if output is not None:
        state["output"] = output
    return {"type": "tool", "tool": "bash", "callID": "call_9", "state": state,
            "id": "prt_1", "sessionID": "ses_1", "messageID": "msg_1"}


def test_a_tool_that_threw_inside_opencode_has_no_source_verdict():
    call = call_from_part(_part("error", error="TypeError: undefined is not an object (evaluating 'x.stdout')"), 0)
    assert call.source_decision is None
    assert call.source_reason == "tool error in opencode: TypeError: undefined is not an object (evaluating 'x.stdout')"
    assert (call.kind, call.text) == ("bash", "bun run build")


def test_an_aborted_tool_has_no_source_verdict():
    call = call_from_part(_part("error", error="Tool execution aborted"), 0)
    assert call.source_decision is None


def test_a_permission_rule_error_is_still_the_source_deny():
    error = "The user has specified a rule which prevents you from using this specific tool call."
    assert call_from_part(_part("error", error=error), 0).source_decision == "deny"


def test_a_completed_tool_that_exited_non_zero_ran_and_is_allow():
    assert call_from_part(_part("completed", output="error: script not found"), 0).source_decision == "allow"
