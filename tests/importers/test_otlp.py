"""Tool calls read out of OTLP/JSON exports (importers/otlp.py), on payloads shaped as
each emitter exports them (tests/fixtures/otlp/README.md names the sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.importers import Judge
from agent_eval.importers.otlp import (
    CLAUDE_CODE_CUT,
    PayloadError,
    Stitcher,
    imported_session,
    source_decision,
    tool_events,
)
from agent_eval.scenario.bundled import load_policy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"


def payload(name: str):
    return json.loads((FIXTURES / name).read_text())


def judged(name: str):
    """The fixture's sessions, stitched and judged under the ralf allow-list."""
    signal = "traces" if name.endswith(".traces.json") else "logs"
    stitcher = Stitcher()
    assert stitcher.add(tool_events(signal, payload(name))) == []
    judge = Judge(load_policy("allowlists/ralf.yaml"))
    return [(s, judge.session(s, key=s.id, source="otlp"))
            for s in map(imported_session, stitcher.close_all())]


def test_claude_code_decision_and_result_are_one_call_with_the_cli_decision_beside_ours():
    [(session, record)] = judged("claude_code.logs.json")
    assert session.id == "claude_code:cc-sess-1"
    bash, read = record.calls
    assert (bash.tool, bash.command, bash.decision, bash.primary) == (
        "Bash", "ls scripts/ | grep search", "deny", "AE301")
    assert (bash.source_decision, bash.source_reason) == ("allow", "claude_code accept by config")
    assert (read.command, read.decision) == ("notes/plan.md", "allow")


def test_claude_code_cut_and_missing_inputs_are_not_judged_with_the_reason():
    [(session, record)] = judged("claude_code.logs.json")
    assert len(record.calls) == 2 and "skipped_calls:2" in record.tags
    not_judged = [m["content"] for m in record.messages if m["content"].startswith("[not judged")]
    assert not_judged == [
        f"[not judged: a value of {CLAUDE_CODE_CUT} characters or more: possibly cut by the "
        "emitter; the CLI: claude_code accept by user_temporary]",
        "[not judged: no tool_result event: a decision carries no tool input; "
        "the CLI: claude_code reject by user_reject]",
    ]


def test_codex_joins_decision_and_result_by_call_id():
    [(_, record)] = judged("codex.logs.json")
    assert record.target == "gpt-5-codex"
    assert [(c.call_id, c.command, c.primary, c.source_decision, c.source_reason)
            for c in record.calls] == [
        ("call_A", "timeout 60 uv run scripts/fetch_context.py --no-attach --agent researcher",
         "AE306", "allow", "codex approved by config"),
        ("call_B", "curl -s https://example.com", "AE307", "deny", "codex denied by user"),
    ]


@pytest.mark.parametrize("index, command, primary, cli", [
    (0, "uv run scripts/fetch_context.py --no-attach --agent researcher", None, "gemini_cli auto_accept"),
    (1, "cat notes/plan.md | head -5", "AE301", "gemini_cli accept"),
], ids=["json-string-args", "kvlist-args"])
def test_gemini_cli_tool_call_is_judged_from_function_args(index, command, primary, cli):
    [(_, record)] = judged("gemini_cli.logs.json")
    call = record.calls[index]
    assert (call.tool, call.command, call.primary, call.source_reason) == (
        "run_shell_command", command, primary, cli)


def test_genai_execute_tool_span_is_judged_and_one_without_arguments_is_not():
    [(session, record)] = judged("genai.traces.json")
    assert (session.id, record.target) == ("gen_ai:conv_77", "qwen3.5-27b")
    [call] = record.calls
    assert (call.tool, call.primary, call.source_decision) == ("bash", "AE302", None)
    assert session.skipped_reasons == ["no gen_ai.tool.call.arguments on the span (content capture off)"]


def test_chat_spans_and_other_events_are_not_tool_calls():
    events = tool_events("traces", payload("genai.traces.json"))
    assert [e.tool for e in events] == ["bash", "read"]
    assert all(e.tool != "" for e in tool_events("logs", payload("claude_code.logs.json")))


@pytest.mark.parametrize("body, message", [
    ([], "not a JSON object"),
    ({"resourceLogs": {}}, "resourceLogs is not a list"),
    ({"resourceLogs": [{"scopeLogs": [{"logRecords": "x"}]}]}, "logRecords is not a list of objects"),
], ids=["list-body", "resource-not-list", "records-not-list"])
def test_a_body_not_shaped_as_an_export_is_a_payload_error(body, message):
    with pytest.raises(PayloadError, match=message):
        tool_events("logs", body)


def test_logs_posted_as_traces_hold_no_tool_call():
    assert tool_events("traces", payload("codex.logs.json")) == []


def test_arguments_that_are_not_whole_json_are_not_judged():
    body = payload("codex.logs.json")
    record = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]
    for attr in record["attributes"]:
        if attr["key"] == "arguments":
            attr["value"]["stringValue"] = '{"cmd": "uv run scripts/fetch_con'
    [event] = [e for e in tool_events("logs", body) if e.is_result and e.call_id == "call_A"]
    assert event.not_judged == "arguments are not whole JSON (cut by the emitter?)"


def test_stitcher_gives_back_the_oldest_session_past_its_bound():
    stitcher = Stitcher(max_sessions=1)
    events = tool_events("logs", payload("codex.logs.json")) + tool_events("logs", payload("gemini_cli.logs.json"))
    pushed = stitcher.add(events)
    assert [s.id for s in pushed] == ["0199a1b2-codex"]
    assert list(stitcher.open) == [("gemini_cli", "gem-sess-9")]


@pytest.mark.parametrize("word, decision", [
    ("accept", "allow"), ("approved_for_session", "allow"), ("auto_accept", "allow"),
    ("reject", "deny"), ("denied", "deny"), ("abort", "deny"), ("something", None), (None, None),
])
def test_the_clis_decision_words(word, decision):
    assert source_decision(word) == decision
