"""The proxy records Codex (OpenAI Responses), Claude Code (Anthropic Messages) and Gemini
CLI (Gemini) as it records Chat Completions: the real captured exchanges of each CLI
(tests/fixtures/clis) fed to the recorder's session layer give the sessions, turns,
judged calls and subagent links the CLI had."""

from __future__ import annotations

import pytest
from support.cliwire import allowlist, exchanges

from agent_eval.proxy.sessions import Sessions

SHELL = {"codex": "exec_command", "claude-code": "Bash", "gemini-cli": "run_shell_command"}
PROTOCOL = {"codex": "responses", "claude-code": "messages", "gemini-cli": "gemini"}
MAIN_CALLS = {
    "codex": ["exec_command", "exec_command", "multi_agent_v1.spawn_agent",
              "multi_agent_v1.wait_agent"],
    "claude-code": ["Bash", "Read", "Agent"],
    "gemini-cli": ["run_shell_command", "read_file", "invoke_agent"],
}
CHILD_CALLS = {"codex": ["exec_command"], "claude-code": ["Bash"],
               "gemini-cli": ["run_shell_command", "complete_task"]}


def record(cli: str):
    sessions = Sessions(allowlist(), idle_s=60)
    for n, ex in enumerate(exchanges(cli)):
        sessions.take(ex, float(n))
    return sessions, sessions.close_all()


@pytest.mark.parametrize("cli", sorted(SHELL))
def test_a_cli_session_is_recorded_as_the_cli_had_it(cli: str) -> None:
    sessions, records = record(cli)
    assert sessions.counts[PROTOCOL[cli]].recorded == len(exchanges(cli))
    assert sessions.counts[PROTOCOL[cli]].not_recorded == 0
    assert len(records) == 2, [r.key for r in records]
    main = next(r for r in records if r.parent_key is None)
    child = next(r for r in records if r.parent_key is not None)
    assert child.parent_key == main.key
    assert [c.tool for c in main.calls] == MAIN_CALLS[cli]
    assert [c.tool for c in child.calls] == CHILD_CALLS[cli]
    assert main.protocol == child.protocol == PROTOCOL[cli]
    # the subagent call is linked to the child session it spawned
    spawner = next(c for c in main.calls if c.tool == MAIN_CALLS[cli][2])
    assert spawner.child_key == child.key
    # every shell call judged with its command, as the CLI ran it
    shell = [c for r in records for c in r.calls if c.tool == SHELL[cli]]
    assert [c.command for c in shell][:1] == ["ls -la"]
    assert shell[-1].command == "echo subagent shell call"
    assert all(c.decision == "deny" and c.primary == "AE307" for c in shell)
    # an allowed call's output is what the CLI sent back (a denied one keeps the denial)
    assert spawner.decision == "allow" and spawner.output
    assert main.calls[0].output.startswith("Permission denied by the allow-list (AE307")
    # every turn completed, with usage and a finish reason in Chat Completions' words
    turns = [t for r in records for t in r.turns]
    assert {t.finish_reason for t in turns} <= {"tool_calls", "stop"}
    assert all(t.prompt_tokens == 100 and t.completion_tokens == 20 for t in turns)
    assert all(t.request is not None and t.request["messages"] for t in turns)


def test_the_exit_line_counts_each_protocol() -> None:
    from agent_eval.proxy.recorder import by_protocol, protocol_counts

    sessions, _ = record("claude-code")
    line = by_protocol(protocol_counts(sessions.counts))
    assert line == "messages 7 recorded, 0 not"


def _cut(cli: str, index: int, fraction: float):
    exs = exchanges(cli)[:index + 1]
    body = bytes(exs[index].response_body)
    events = body.split(b"\n\n")
    # keep whole events up to the one holding the call, then half of that one
    at = next(i for i, e in enumerate(events)
              if b"input_json_delta" in e or b"functionCall" in e
              or b"function_call_arguments.delta" in e)
    kept = b"\n\n".join(events[:at]) + (b"\n\n" if at else b"")
    exs[index].response_body = bytearray(kept + events[at][:int(len(events[at]) * fraction)])
    return exs


@pytest.mark.parametrize("cli", sorted(SHELL))
def test_a_stream_cut_mid_event_is_a_truncated_turn_and_nothing_is_lost(cli: str) -> None:
    sessions = Sessions(allowlist(), idle_s=60)
    for n, ex in enumerate(_cut(cli, 1, 0.5)):
        sessions.take(ex, float(n))
    [record] = sessions.close_all()
    assert [t.finish_reason for t in record.turns] == ["tool_calls", "truncated"]
    assert "reply:truncated" in record.tags
    # the cut turn's call is not judged (never counted against the model) ...
    assert [c.tool for c in record.calls] == [SHELL[cli]]
    # ... and both requests are kept whole for replay
    assert all(t.request is not None for t in record.turns)
    assert record.status == "completed"


def test_a_request_its_protocol_cannot_read_is_relayed_and_counted_not_recorded() -> None:
    from datetime import UTC, datetime

    from agent_eval.proxy.relay import Exchange

    sessions = Sessions(allowlist(), idle_s=60)
    for path, body in (("/v1/responses", b'{"model": "m"}'), ("/v1/messages", b"not json"),
                       ("/v1beta/models/m:generateContent", b'{"contents": 3}')):
        sessions.take(Exchange(path=path, request_body=body, session_headers={},
                               started_at=datetime.now(UTC), status=200), 0.0)
    assert {name: (c.recorded, c.not_recorded) for name, c in sessions.counts.items()} == {
        "chat": (0, 0), "responses": (0, 1), "messages": (0, 1), "gemini": (0, 1)}
    assert sessions.close_all() == []


def test_a_responses_request_naming_its_previous_response_continues_that_session() -> None:
    """``previous_response_id``: the request carries only the new input (the server holds
    the rest); the proxy links it to the session whose reply had that id and stores the
    turn's request as the whole conversation, so replay needs no server-side state."""
    import json
    from datetime import UTC, datetime

    from agent_eval.proxy.relay import Exchange
    from agent_eval.wire import responses
    from agent_eval.wire.records import ParsedCall, ParsedReply

    def exchange(body: dict, reply: ParsedReply) -> Exchange:
        events = responses.render_reply(reply, stream=True, created=0)
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return Exchange(path="/v1/responses", request_body=json.dumps(body).encode(),
                        session_headers={}, started_at=datetime.now(UTC), status=200,
                        content_type="text/event-stream", response_body=bytearray(sse.encode()))

    command = json.dumps({"command": "uv run scripts/db_query.py --sql 'SELECT 1'"})
    tools = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
    first = ParsedReply(calls=[ParsedCall("call_1", "bash", command)], model="m",
                        response_id="resp_A", finish_reason="tool_calls")
    done = ParsedReply(content="Done.", model="m", response_id="resp_B", finish_reason="stop")
    sessions = Sessions(allowlist(), idle_s=60)
    sessions.take(exchange({"model": "m", "instructions": "You are the db agent.",
                            "input": "List the open attempts.", "tools": tools,
                            "store": True}, first), 0.0)
    sessions.take(exchange({"model": "m", "previous_response_id": "resp_A", "store": True,
                            "tools": tools, "input": [{"type": "function_call_output",
                                                       "call_id": "call_1", "output": "[]"}]},
                           done), 1.0)
    [record] = sessions.close_all()
    assert len(record.turns) == 2 and "link:response-id" in record.tags
    whole = record.turns[1].request
    assert "previous_response_id" not in whole
    assert [m["role"] for m in whole["messages"]] == ["system", "user", "assistant", "tool"]
    assert [(c.tool, c.command) for c in record.calls] == [
        ("bash", "uv run scripts/db_query.py --sql 'SELECT 1'")]
    assert record.calls[0].call_id == "call_1" and record.protocol == "responses"
