"""Imported calls are judged by our engine; source verdicts sit beside ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.importers import import_sessions
from agent_eval.policy import load_allowlist

RALF = Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml"
OPENCODE = "format-fixtures/opencode-1.18.34/opencode-export.json"
CLAUDE = "format-fixtures/claude-code-2.1.330/transcript.jsonl"
MINI = "sessions/mini-swe-agent__gemini-3-pro-preview__django__django-16661.traj.json"


@pytest.fixture(scope="module")
def ralf():
    return load_allowlist(RALF)


def _one(fmt, path, allowlist, **kw):
    [record] = import_sessions(fmt, path, allowlist, **kw)
    return record


@pytest.mark.parametrize(
    ("fmt", "path"), [("opencode", OPENCODE), ("claude-code", CLAUDE)], ids=["opencode", "claude-code"]
)
def test_source_denials_land_as_ae_coded_denials(corpora, ralf, fmt, path):
    record = _one(fmt, corpora / path, ralf)
    denied_by_source = [c for c in record.calls if c.source_decision == "deny"]
    assert denied_by_source
    assert all(c.decision == "deny" and c.primary.startswith("AE") for c in denied_by_source)


@pytest.mark.parametrize(
    ("fmt", "path"), [("opencode", OPENCODE), ("claude-code", CLAUDE)], ids=["opencode", "claude-code"]
)
def test_hallucinated_tool_is_unknown_tool_and_keeps_its_name(corpora, ralf, fmt, path):
    record = _one(fmt, corpora / path, ralf)
    [call] = [c for c in record.calls if c.tool == "execute_command"]
    assert (call.decision, call.primary, call.source_decision) == ("deny", "AE101", "deny")


@pytest.mark.parametrize(
    ("index", "primary"),
    [(0, "AE301"), (1, "AE320"), (2, "AE307"), (3, "AE320"), (4, "AE101"), (5, "AE307")],
    ids=["pipe-and-chain", "absolute-read", "rm", "etc-read", "invented-tool", "cat"],
)
def test_opencode_calls_get_our_primary_class_under_ralf(corpora, ralf, index, primary):
    record = _one("opencode", corpora / OPENCODE, ralf)
    assert record.calls[index].primary == primary


def test_record_keeps_source_tool_name_command_and_output(corpora, ralf):
    record = _one("claude-code", corpora / CLAUDE, ralf)
    call = record.calls[1]
    assert (call.tool, call.command, call.output) == ("Read", "/tmp/ccproj/hello.txt", "1\thello world\n2\t")
    assert (record.source, record.target, record.scenario) == (
        "claude-code", "claude-sonnet-4-5", "2273631c-d877-4b73-9d08-5649fc35d532")
    assert record.handshake.required == 0


def test_next_actions_follow_the_denials(corpora, ralf):
    record = _one("opencode", corpora / OPENCODE, ralf)
    assert [c.next_action for c in record.calls] == ["retry-denied"] * 5 + ["abandon"]


def test_mini_swe_agent_format_errors_are_malformed_arguments(corpora, ralf):
    record = _one("mini-swe-agent", corpora / MINI, ralf)
    errors = [c for c in record.calls if c.source_decision == "deny"]
    assert [(c.index, c.primary) for c in errors] == [(9, "AE102"), (15, "AE102")]


def test_model_option_overrides_the_recorded_model(corpora, ralf):
    record = _one("claude-code", corpora / CLAUDE, ralf, model="qwen3.5-27b")
    assert record.target == "qwen3.5-27b"


def test_allowed_script_call_records_its_script(tmp_path, ralf):
    path = tmp_path / "s.json"
    path.write_text(
        '[{"role": "user", "content": "go"}, {"role": "assistant", "content": null, "tool_calls": '
        '[{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '
        '"{\\"command\\": \\"uv run scripts/fetch_context.py --no-attach --agent researcher\\"}"}}]}, '
        '{"role": "tool", "tool_call_id": "c1", "content": "ctx"}]'
    )
    [call] = _one("openai", path, ralf).calls
    assert (call.decision, call.script, call.output) == ("allow", "fetch_context.py", "ctx")


def test_every_corpus_session_is_judged_without_an_exception(corpora, ralf):
    records = list(import_sessions("call-records", corpora / "real-tool-calls.jsonl", ralf))
    calls = [c for r in records for c in r.calls]
    assert len(calls) == 15_610 - 229
    assert all(c.decision in ("allow", "deny") for c in calls)
    assert all(c.primary for c in calls if c.decision == "deny")
    format_errors = [c for c in calls if c.tool == "__format_error__"]
    assert len(format_errors) == 200
    assert {c.primary for c in format_errors} == {"AE102"}
