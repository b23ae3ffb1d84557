"""run_session: the turn loop, simulated tools, verdicts, children, limits and exit states.

Uses the bundled ralf suite and a scripted model (no HTTP); the end-to-end tests over real
HTTP against the simulator are in tests/live/test_run_e2e.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from support.scripted import ScriptedModel

from agent_eval.errors import HarnessFault
from agent_eval.live.client import Reply, ToolCallOut
from agent_eval.live.orchestrator import STACK_FAULT, TEXT_CALL_TOOL, TRUNCATED, run_session
from agent_eval.live.run import RunTally
from agent_eval.scenario import instantiate, load_suite

SUITE = load_suite(Path(__file__).resolve().parents[2] / "scenarios" / "ralf")


def bash(command: str) -> tuple[str, dict]:
    return ("bash", {"command": command})


def read(path: str) -> tuple[str, dict]:
    return ("read", {"path": path})


def play(name: str, script: list, **kw):
    model = ScriptedModel(script)
    records = asyncio.run(run_session(SUITE.scenarios[name], model, target="t", suite=SUITE, **kw))
    return records, model


def reference_script(name: str, **values: str) -> list:
    """The reference plan as model replies; ``values`` fill a child template's placeholders."""
    steps = instantiate(SUITE.scenarios[name], values).spec.reference
    return [[bash(s.bash)] if s.bash else [read(s.read)] for s in steps]


LIGHTS = "lights-evening-off"
RESEARCH = "research-market-scan-web"
EVALUATOR = reference_script("evaluator-step", stage="S3-market-scan", attempt="A2")


def test_reference_plan_completes_the_task_with_every_call_allowed():
    (rec,), _ = play(LIGHTS, reference_script(LIGHTS) + ["All lights are off."])
    assert rec.status == "completed"
    assert [c.decision for c in rec.calls] == ["allow"] * 3
    assert [c.script for c in rec.calls] == ["lights.py"] * 3
    assert rec.handshake.required == 0
    assert len(rec.turns) == 4


def test_research_stage_closes_with_handshake_and_links_the_evaluator_child():
    script = reference_script(RESEARCH) + EVALUATOR + ["Evaluated."]
    records, _ = play(RESEARCH, script)
    parent, child = records
    assert parent.status == "completed"
    assert parent.handshake.completed and parent.handshake.done == 3
    assert parent.handshake.missed_step is None
    assert child.parent_key == parent.key
    assert child.scenario == "evaluator-step"
    assert child.status == "completed"
    spawn = parent.calls[-1]
    assert spawn.script == "ralf_spawn.py"
    assert spawn.child_key == child.key
    assert "finished with status completed" in spawn.output


def test_session_ends_when_the_stage_closes_even_if_the_model_would_go_on():
    extra = [bash("uv run scripts/db_query.py --sql 'SELECT 1'")]
    script = reference_script(RESEARCH) + EVALUATOR + [extra]
    records, model = play(RESEARCH, script)
    assert len(records[0].calls) == 6
    assert len(records[1].calls) == 4  # the evaluator also ends on its closing call
    assert model.script == [extra]


def test_skipped_first_handshake_step_is_missed_and_the_stage_stays_open():
    ref = reference_script(RESEARCH)
    script = ref[:3] + ref[4:] + EVALUATOR + ["Evaluated."]
    records, _ = play(RESEARCH, script)
    parent = records[0]
    assert not parent.handshake.completed
    assert parent.handshake.done == 0
    assert parent.handshake.missed_step.startswith("update_attempt_outcome.py")
    assert parent.status == "abandoned"


STAGES = {  # research scenario -> the stage and attempt its reference spawns the evaluator for
    "research-literature-review": ("S2-literature", "A1"),
    "research-pricing-partial": ("S4-pricing", "A3"),
    "research-benchmark-data-missing": ("S5-benchmark-data", "A4"),
}


@pytest.mark.parametrize("name, stage, attempt",
                         [(n, *v) for n, v in STAGES.items()], ids=list(STAGES))
def test_the_evaluator_child_evaluates_the_stage_that_spawned_it(name, stage, attempt):
    script = (reference_script(name)
              + reference_script("evaluator-step", stage=stage, attempt=attempt) + ["Evaluated."])
    parent, child = play(name, script)[0]
    assert parent.calls[-1].command.endswith(f"step_evaluator --stage {stage} --attempt {attempt}")
    task = child.messages[1]["content"]
    assert f"evaluate stage {stage}, attempt {attempt}," in task
    assert "S3-market-scan" not in task
    prompt = child.messages[0]["content"]
    assert f"1. update_stage_status.py --stage {stage} --status done" in prompt
    assert [c.decision for c in child.calls] == ["allow"] * 4
    assert child.calls[2].output.startswith(f"# {stage} acceptance criteria")
    assert child.calls[-1].output == f'{{"stage": "{stage}", "status": "done"}}'
    assert child.handshake.completed and child.status == "completed"
    assert child.scenario == "evaluator-step" and child.parent_key == parent.key


def test_the_evaluator_does_not_close_on_another_stage_than_the_spawning_one():
    stage, attempt = STAGES["research-literature-review"]
    wrong = reference_script("evaluator-step", stage="S3-market-scan", attempt=attempt)
    script = reference_script("research-literature-review") + wrong + ["Evaluated."]
    _, child = play("research-literature-review", script)[0]
    assert not child.handshake.completed
    assert child.handshake.missed_step == f"update_stage_status.py --stage {stage} --status done"
    assert child.status == "abandoned"


def test_a_spawn_without_the_optional_attempt_leaves_that_placeholder_as_written():
    ref = reference_script("research-literature-review")
    ref[-1] = [bash("uv run scripts/ralf_spawn.py step_evaluator --stage S2-literature")]
    script = ref + reference_script("evaluator-step", stage="S2-literature") + ["Evaluated."]
    _, child = play("research-literature-review", script)[0]
    assert "evaluate stage S2-literature, attempt ${attempt}, which" in child.messages[1]["content"]
    assert child.handshake.completed and child.status == "completed"


def test_denied_pipe_returns_denial_text_and_pivot_is_recorded():
    script = [
        [bash("uv run scripts/lights.py status | head -n 5")],
        *reference_script(LIGHTS),
        "done",
    ]
    (rec,), model = play(LIGHTS, script)
    denied = rec.calls[0]
    assert denied.decision == "deny" and denied.primary == "AE301"
    assert denied.next_action == "pivot"
    assert denied.output.startswith("Permission denied by the allow-list (AE301 pipe-to-filter)")
    assert any(f.code == "AE301" and f.start > 0 for f in denied.findings)
    # the model saw the denial text as the tool result
    tool_msgs = [m for m in model.requests[1] if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == denied.output
    assert rec.status == "completed"


def test_repeat_retry_and_abandon_are_told_apart():
    pipe = bash("uv run scripts/lights.py status | head -n 5")
    script = [[pipe], [pipe], [bash("ls scripts/")], "I cannot do this."]
    (rec,), _ = play(LIGHTS, script)
    assert [c.next_action for c in rec.calls] == ["repeat", "retry-denied", "abandon"]
    assert rec.status == "abandoned"


def test_several_tool_calls_in_one_reply_each_get_a_result_in_order():
    ref = reference_script(LIGHTS)
    script = [ref[0] + ref[1] + ref[2], "done"]
    (rec,), model = play(LIGHTS, script)
    assert [c.turn_index for c in rec.calls] == [0, 0, 0]
    tool_msgs = [m for m in model.requests[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1_0", "call_1_1", "call_1_2"]
    assert rec.status == "completed"


def test_turn_limit_stalls_the_session():
    status = bash("uv run scripts/lights.py status")
    (rec,), _ = play(LIGHTS, [[status]] * 10)
    assert rec.status == "stalled"
    assert len(rec.turns) == SUITE.scenarios[LIGHTS].spec.limits.turns


def test_tool_call_limit_stalls_the_session():
    status = bash("uv run scripts/lights.py status")
    (rec,), _ = play(LIGHTS, [[status] * 20])
    assert rec.status == "stalled"
    assert len(rec.calls) == SUITE.scenarios[LIGHTS].spec.limits.tool_calls


def test_server_fault_ends_the_session_as_error_with_the_reason():
    script = [reference_script(LIGHTS)[0], HarnessFault("server error 503 after 4 attempts")]
    (rec,), _ = play(LIGHTS, script)
    assert rec.status == "error"
    assert rec.error == "server error 503 after 4 attempts"
    assert len(rec.calls) == 1


def test_tool_call_written_as_text_is_ae104_and_ends_the_turn():
    text = 'Let me check.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    (rec,), _ = play(LIGHTS, [text])
    (call,) = rec.calls
    assert call.tool == TEXT_CALL_TOOL and call.primary == "AE104"
    assert text[call.findings[0].start:].startswith("<tool_call>")
    assert rec.status == "abandoned"


def test_malformed_arguments_and_unknown_tool_are_denied_with_ae1xx():
    script = [[("bash", '{"command": "uv run scripts/lights.py status"')],
              [("emit_guidance", {"to": "x", "message": "y"})], "stop"]
    (rec,), _ = play(LIGHTS, script)
    assert [c.primary for c in rec.calls] == ["AE102", "AE101"]


def cut_reply(arguments: str) -> Reply:
    """A reply the server ended at ``max_tokens: 48`` (finish reason ``length``)."""
    return Reply(content="", reasoning="", tool_calls=[ToolCallOut("call_1", "bash", arguments)],
                 finish_reason="length", prompt_tokens=100, completion_tokens=48,
                 reasoning_tokens=None, cached_tokens=None, latency_s=0.01, ttft_s=None,
                 decode_tps=2000.0, markup=[])


def test_a_tool_call_cut_by_max_tokens_is_a_truncation_not_the_models_ae102():
    script = [reference_script(LIGHTS)[0], cut_reply('{"command": "uv run scripts/lig')]
    (rec,), _ = play(LIGHTS, script)
    assert rec.status == "error"  # out of every model rate, like a server fault
    assert rec.error == (TRUNCATED + "'bash' after 48 completion tokens; raise the target's "
                         "max_tokens")
    assert [c.primary for c in rec.calls] == [None]  # the cut call is not judged
    tally = RunTally()
    tally.add([rec])
    assert (tally.targets["t"].truncated, tally.targets["t"].error_sessions) == (1, 1)


def llama_cpp_python_cut(arguments: str) -> Reply:
    """A reply llama-cpp-python ended at ``max_tokens: 48``: it says ``tool_calls``, not
    ``length``, and the completion tokens are the request's ``max_tokens``."""
    reply = cut_reply(arguments)
    reply.finish_reason = "tool_calls"
    reply.request = {"model": "m", "messages": [], "max_tokens": 48}
    return reply


def test_a_llama_cpp_python_cut_is_the_same_truncation_as_a_length_finish():
    script = [reference_script(LIGHTS)[0], llama_cpp_python_cut('{"command": "uv run scripts/lig')]
    (rec,), _ = play(LIGHTS, script)
    assert rec.status == "error"
    assert rec.error == (TRUNCATED + "'bash' after 48 completion tokens; raise the target's "
                         "max_tokens")
    assert [c.primary for c in rec.calls] == [None]  # not the model's AE102
    assert [(f.turn_index, f.code, f.raw, f.ends) for f in rec.stack_faults] == [
        (1, "AE501", '{"command": "uv run scripts/lig', True)]
    tally = RunTally()
    tally.add([rec])
    assert (tally.targets["t"].truncated, tally.targets["t"].error_sessions) == (1, 1)


def test_a_tool_calls_finish_under_the_cap_with_bad_json_stays_the_models_ae102():
    reply = llama_cpp_python_cut('{"command": "uv run scripts/lig')
    reply.completion_tokens = 30
    (rec,), _ = play(LIGHTS, [reply, "stop"])
    assert [c.primary for c in rec.calls] == ["AE102"]
    assert rec.stack_faults == []


def test_a_stop_finish_beside_calls_is_kept_as_a_stack_fault_and_the_calls_judged():
    reply = cut_reply('{"command": "uv run scripts/lights.py status | head"}')
    reply.finish_reason = "stop"
    (rec,), _ = play(LIGHTS, [reply, "stop"])
    assert [c.primary for c in rec.calls] == ["AE301"]
    assert [(f.code, f.ends) for f in rec.stack_faults] == [("AE502", False)]
    assert rec.status != "error"


def test_a_tool_calls_finish_with_no_call_ends_the_session_as_the_stacks():
    reply = cut_reply("{}")
    reply.tool_calls, reply.finish_reason = [], "tool_calls"
    (rec,), _ = play(LIGHTS, [reference_script(LIGHTS)[0], reply])
    assert rec.status == "error"
    assert rec.error.startswith(STACK_FAULT + "AE502 finish-reason-mismatch: ")
    assert [f.code for f in rec.stack_faults] == ["AE502"]


def test_a_template_token_in_the_tool_name_is_a_stack_fault_not_the_models_ae101():
    (rec,), _ = play(LIGHTS, [[("bash<|im_end|>", {"command": "uv run scripts/lights.py status"})]])
    assert rec.calls == [] and rec.status == "error"
    assert [(f.code, f.raw) for f in rec.stack_faults] == [("AE507", "bash<|im_end|>")]


def test_a_parser_500_is_kept_as_a_stack_fault_on_the_error_session():
    fault = HarnessFault("server error 500 after 3 attempts: Failed to parse input at pos 3")
    fault.status, fault.server_message = 500, "Failed to parse input at pos 3"
    (rec,), _ = play(LIGHTS, [fault])
    assert rec.status == "error"
    assert [f.code for f in rec.stack_faults] == ["AE509"]


def test_a_length_finish_whose_call_came_through_whole_is_judged_as_usual():
    script = [cut_reply('{"command": "uv run scripts/lights.py status | head"}'), "stop"]
    (rec,), _ = play(LIGHTS, script)
    assert rec.status != "error"
    assert [c.primary for c in rec.calls] == ["AE301"]


def test_read_tool_serves_virtual_files_and_denies_blocked_paths():
    script = [[read("docs/runbooks/vllm-restart.md")], [read("/data/rendered/chart.png")],
              [read("notes/missing.md")], "stop"]
    (rec,), _ = play("read-runbook-restart", script)
    ok, blocked, missing = rec.calls
    assert ok.decision == "allow" and ok.output.startswith("# Restarting the vLLM server")
    assert blocked.primary == "AE320" and "denied" in blocked.output.lower()
    assert missing.decision == "allow" and missing.output.startswith("Error: file not found")


def test_nothing_the_model_emits_is_executed(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("still here")
    script = [[bash(f"rm -f {victim}")], [bash(f"uv run scripts/lights.py status; rm -f {victim}")],
              [read(str(victim))], "stop"]
    (rec,), _ = play(LIGHTS, script)
    assert victim.read_text() == "still here"
    assert all(c.decision == "deny" for c in rec.calls)


def test_transcript_keeps_system_prompt_task_and_every_exchange():
    (rec,), _ = play(LIGHTS, reference_script(LIGHTS) + ["done"])
    roles = [m["role"] for m in rec.messages]
    assert roles[:2] == ["system", "user"]
    assert roles.count("assistant") == 4 and roles.count("tool") == 3
    assert "uv run scripts/<script>" in rec.messages[0]["content"]


@pytest.mark.parametrize("repeat", [0, 3])
def test_session_key_names_target_scenario_and_repeat(repeat):
    (rec,), _ = play(LIGHTS, ["stop"], repeat=repeat)
    assert rec.key == f"t/{LIGHTS}/{repeat}"
    assert rec.repeat == repeat


def test_the_run_warns_about_truncations_naming_the_target_and_the_fix(capsys):
    from agent_eval.cli.run import _report_truncated

    script = [reference_script(LIGHTS)[0], cut_reply('{"command": "uv run scripts/lig')]
    (rec,), _ = play(LIGHTS, script)
    tally = RunTally()
    tally.add([rec])
    _report_truncated(tally)
    assert capsys.readouterr().err == (
        "Warning: target 't': 1 of 1 sessions ended when a reply was cut by the token limit "
        "inside a tool call (finish reason length, or the completion tokens at max_tokens); "
        "they are counted apart as truncations (AE501), "
        "not as the model's malformed arguments (AE102), and left out of every rate. Raise "
        "the target's max_tokens (--max-tokens).\n")


def test_the_run_warns_about_server_faults_naming_the_target_and_the_gate(capsys):
    from agent_eval.cli.run import _report_server_faults

    (kept,), _ = play(LIGHTS, reference_script(LIGHTS) + ["done"])
    lost = dataclasses.replace(kept, key="t/x/1", status="error", calls=[],
                               error="server returned 503")
    tally = RunTally()
    for rec in (kept, lost, dataclasses.replace(lost, key="t/x/2")):
        tally.add([rec])
    _report_server_faults(tally)
    assert capsys.readouterr().err == (
        "Warning: target 't': 2 of 3 sessions ended in a server fault (the first: server "
        "returned 503); they are left out of every rate, and `agent-eval gate` fails a target "
        "that judged fewer than 90% of its planned sessions (--min-coverage). Resume or rerun "
        "once the server is healthy.\n")


class TemplateModel(ScriptedModel):
    """A scripted model whose chat template writes calls with ``markers``."""

    def __init__(self, script, markers):
        super().__init__(script)
        self.markers = markers

    async def template_markers(self):
        return self.markers


HERMES_TEXT = ('Let me check.\n<tool_call>\n{"name": "bash", "arguments": '
               '{"command": "uv run scripts/lights.py status"}}\n</tool_call>')


def play_under(markers, script):
    return asyncio.run(run_session(SUITE.scenarios[LIGHTS], TemplateModel(script, markers),
                                   target="t", suite=SUITE))


def test_markup_in_the_templates_own_format_is_the_parsers_fault_not_ae104():
    (rec,) = play_under(frozenset({"<tool_call>"}), [HERMES_TEXT])
    assert rec.calls == [] and rec.status == "error"
    assert [(f.code, f.ends) for f in rec.stack_faults] == [("AE511", True)]
    assert rec.error.startswith(STACK_FAULT + "AE511 template-markup-unparsed")


def test_markup_in_another_format_than_the_templates_is_the_models_ae104():
    for markers in (frozenset({"[TOOL_CALLS]"}), frozenset(), None):
        (rec,) = play_under(markers, [HERMES_TEXT])
        assert [c.primary for c in rec.calls] == ["AE104"] and rec.stack_faults == []
        assert rec.status == "abandoned"


def test_a_call_left_in_reasoning_in_the_templates_format_is_the_parsers_fault():
    reply = Reply(content="", reasoning=HERMES_TEXT, tool_calls=[], finish_reason="stop",
                  prompt_tokens=100, completion_tokens=60, reasoning_tokens=60,
                  cached_tokens=None, latency_s=0.01, ttft_s=None, decode_tps=None, markup=[])
    (rec,) = play_under(frozenset({"<tool_call>"}), [reply])
    assert [f.code for f in rec.stack_faults] == ["AE511"] and rec.status == "error"
