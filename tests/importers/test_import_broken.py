"""Broken input: a clear error naming file and line, or the whole sessions only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.importers import import_sessions, read_sessions
from agent_eval.policy import load_allowlist

RALF = Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml"


def _session_line(sid: str, command: str) -> str:
    return json.dumps({"id": sid, "model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]})


def test_truncated_single_document_names_file_and_line(corpora, tmp_path):
    text = (corpora / "format-fixtures/opencode-1.18.34/opencode-export.json").read_text()
    path = tmp_path / "export.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ConfigError, match=r"export\.json: line \d+: not valid JSON") as err:
        list(read_sessions("opencode", path))
    line = int(str(err.value).split("line ")[1].split(":")[0])
    assert line == text[: len(text) // 2].count("\n") + 1


def test_jsonl_skips_the_broken_line_and_keeps_the_whole_sessions(tmp_path):
    path = tmp_path / "sessions.jsonl"
    good = [_session_line("a", "uv run scripts/lights.py status"), _session_line("c", "ls")]
    path.write_text("\n".join([good[0], _session_line("b", "x")[:40], good[1]]) + "\n")
    skipped = []
    sessions = list(read_sessions("openai", path, on_skip=lambda p, n, why: skipped.append((p.name, n))))
    assert [s.id for s in sessions] == ["a", "c"]
    assert all(len(s.calls) == 1 for s in sessions)
    assert skipped == [("sessions.jsonl", 2)]


def test_claude_code_truncated_last_line_keeps_the_calls_before_it(corpora, tmp_path):
    lines = (corpora / "format-fixtures/claude-code-2.1.330/transcript.jsonl").read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:47] + [lines[47][:50]]) + "\n")
    skipped = []
    [session] = read_sessions("claude-code", path, on_skip=lambda p, n, why: skipped.append(n))
    assert skipped == [48]
    assert len(session.calls) == 7
    assert (session.status, session.calls[-1].source_decision) == ("error", None)


@pytest.mark.parametrize("fmt", ["openai", "opencode", "claude-code", "mini-swe-agent"])
def test_empty_file_is_an_error_naming_the_file(tmp_path, fmt):
    path = tmp_path / "empty.json"
    path.write_text("\n")
    with pytest.raises(ConfigError, match=r"empty\.json: line 1: empty file"):
        list(read_sessions(fmt, path))


def test_unknown_format_lists_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="unknown import format 'cursor': use one of openai, opencode"):
        read_sessions("cursor", tmp_path)


def test_wrong_format_for_the_file_says_so(corpora):
    with pytest.raises(ConfigError, match="not a mini-swe-agent trajectory"):
        list(read_sessions("mini-swe-agent", corpora / "format-fixtures/opencode-1.18.34/opencode-export.json"))


def test_a_50_mb_session_imports_whole(tmp_path):
    big = "x" * (1 << 20)
    messages = []
    for i in range(50):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": "uv run scripts/lights.py status"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": big})
    path = tmp_path / "big.json"
    path.write_text(json.dumps(messages))
    assert path.stat().st_size > 50_000_000
    [record] = import_sessions("openai", path, load_allowlist(RALF))
    assert len(record.calls) == 50
    assert {c.decision for c in record.calls} == {"allow"}
    assert all(len(c.output) == 1 << 20 for c in record.calls)


def test_a_json_integer_over_4300_digits_skips_its_line_and_keeps_the_rest(tmp_path):
    huge = "9" * 4301  # Python's int() guard: ValueError, not JSONDecodeError
    path = tmp_path / "sessions.jsonl"
    bad_line = '{"id": "b", "model": "m", "n": ' + huge + ', "messages": []}'
    path.write_text("\n".join([_session_line("a", "uv run scripts/lights.py status"), bad_line,
                               _session_line("c", "ls")]) + "\n")
    skipped = []
    sessions = list(read_sessions("openai", path,
                                  on_skip=lambda p, n, why: skipped.append((n, why))))
    assert [s.id for s in sessions] == ["a", "c"]
    assert [n for n, _ in skipped] == [2]
    assert "4300" in skipped[0][1]


def test_arguments_holding_a_json_integer_over_4300_digits_are_judged_not_fatal(tmp_path):
    path = tmp_path / "sessions.jsonl"
    arguments = '{"command": "uv run scripts/lights.py status", "n": ' + "1" * 5000 + "}"
    path.write_text(json.dumps({"id": "a", "model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "Shell", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]}) + "\n")
    [record] = list(import_sessions("openai", path, load_allowlist(RALF)))
    [call] = record.calls
    assert call.arguments == arguments
    assert (call.decision, call.primary) == ("deny", "AE102")


@pytest.mark.parametrize("fmt", ["opencode", "mini-swe-agent", "swe-agent"])
def test_a_document_holding_a_json_integer_over_4300_digits_is_one_error(tmp_path, fmt):
    path = tmp_path / "doc.json"
    path.write_text('{"n": ' + "7" * 5000 + "}")
    with pytest.raises(ConfigError, match=r"doc\.json: "):
        list(read_sessions(fmt, path))
