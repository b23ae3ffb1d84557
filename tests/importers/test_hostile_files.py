"""Truncated, garbage and hostile files never raise anything but a ConfigError from any
reader, and never a traceback from `agent-eval import`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.importers import FORMATS, read_sessions

CLIENTS = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")
SOURCES = sorted(p for p in CLIENTS.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".traj"))

HOSTILE = {
    "nested.json": "[" * 100_000 + "]" * 100_000,
    "nested.jsonl": '{"type":"user","sessionId":"s","message":' + "[" * 50_000 + "]" * 50_000 + "}\n" * 2,
    "garbage.json": "\x00\xff\xfe not json at all \x1b[31m",
    "empty.json": "",
    "wrong-types.json": json.dumps({"messages": 5, "trajectory": "x", "history": {"a": 1}, "events": None}),
    "wrong-types-list.json": json.dumps([{"role": "assistant", "content": 7, "tool_calls": [1, "x", None,
                                          {"function": "bash"}, {"function": {"name": "bash", "arguments": 3}}]}]),
    "swe-steps.traj": json.dumps({"trajectory": [1, None, {"action": 5, "observation": [1]}, "x"]}),
    "codex-odd.jsonl": "\n".join(json.dumps(x) for x in [
        {"type": "session_meta", "payload": {"id": 5}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{bad"}},
        {"type": "response_item", "payload": {"type": "local_shell_call", "action": {"command": [1, 2]}}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": None, "output": {"x": 1}}},
        {"type": "turn_context", "payload": "nope"}, [1, 2], "str", 5]),
    "claude-odd.jsonl": "\n".join(json.dumps(x) for x in [
        {"type": "assistant", "sessionId": "s", "message": {"id": "m", "content": [{"type": "tool_use", "input": [1]}]}},
        {"type": "user", "sessionId": "s", "message": {"content": [{"type": "tool_result", "tool_use_id": ["x"]}]}},
        {"type": "assistant", "sessionId": "s", "message": "not an object"},
        {"type": "assistant", "sessionId": "s", "message": {"id": "m", "content": "text only", "usage": 5}}]),
    "openhands-odd.json": json.dumps([{"id": 1, "source": "agent", "action": "run", "args": "x"},
                                      {"id": 2, "source": "agent", "observation": "run", "cause": [1]},
                                      {"kind": "ActionEvent", "action": 3, "tool_call_id": {"a": 1}}, 7]),
}


def _variants(tmp_path: Path) -> list[Path]:
    """Each client fixture cut at a third and two thirds, plus the hostile files."""
    out = []
    for i, src in enumerate(SOURCES):
        data = src.read_bytes()
        for cut in (len(data) // 3, 2 * len(data) // 3):
            path = tmp_path / f"{i}-{cut}-{src.name}"
            path.write_bytes(data[:cut])
            out.append(path)
    for name, text in HOSTILE.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        out.append(path)
    return out


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    _variants(folder)
    return folder


@pytest.mark.parametrize("fmt", [*FORMATS, "auto"])
def test_every_reader_reads_or_refuses_every_broken_file(hostile_dir, fmt):
    for path in sorted(hostile_dir.iterdir()):
        try:
            sessions = list(read_sessions(fmt, path, on_skip=lambda *a: None))
        except ConfigError:
            continue
        except Exception as exc:  # the point of the test
            pytest.fail(f"{fmt} on {path.name}: {type(exc).__name__}: {exc}")
        for s in sessions:
            assert isinstance(s.id, str) and isinstance(s.model, str)
            assert all(isinstance(c.arguments, str) for c in s.calls)


def test_import_auto_of_a_folder_of_broken_files_reports_and_never_crashes(hostile_dir, tmp_path):
    result = CliRunner().invoke(main, ["import", "auto", str(hostile_dir), "--allowlist", RALF,
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code in (0, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "garbage.json: format not recognised; file skipped" in result.stderr
