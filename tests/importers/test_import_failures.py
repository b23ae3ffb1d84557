"""A failed import leaves no empty run behind, and `latest` stays on the last real run;
a break after whole sessions keeps them in a run marked failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.importers.recording import record_import
from agent_eval.policy import load_allowlist

RALF = Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml"


def _session(sid: str, command: str) -> dict:
    return {"id": sid, "model": "qwen-27b", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]}


@pytest.fixture
def good_file(tmp_path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps([_session("a", "uv run scripts/lights.py status")]))
    return path


@pytest.fixture
def earlier_run(store, good_file) -> int:
    return record_import(store, "openai", good_file, load_allowlist(RALF)).run_id


@pytest.mark.parametrize(
    "name, content",
    [
        pytest.param("missing.json", None, id="missing-file"),
        pytest.param("empty.json", "\n", id="empty-file"),
        pytest.param("cut.json", '[{"id": "a", "messages": [', id="truncated-json"),
        pytest.param("claude.jsonl", '{"type": "user", "sessionId": "s"}\n{"type": "user", "sessionId": "s"}\n',
                     id="wrong-format"),
    ],
)
def test_a_failed_import_leaves_the_runs_unchanged(store, earlier_run, tmp_path, name, content):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    before = store.list_runs()

    with pytest.raises(ConfigError, match=re.escape(name)):
        record_import(store, "openai", path, load_allowlist(RALF))

    assert store.list_runs() == before
    assert store.resolve_run("latest").id == earlier_run


def test_a_break_after_whole_sessions_keeps_them_in_a_failed_run(store, tmp_path):
    path = tmp_path / "three.json"
    path.write_text(json.dumps([_session("a", "uv run scripts/lights.py status"), _session("b", "ls"),
                                {"id": "c", "transcript": "not messages"}]))

    with pytest.raises(ConfigError, match=r"before the error \(status failed\)") as caught:
        record_import(store, "openai", path, load_allowlist(RALF))

    [run] = store.list_runs()
    assert str(caught.value) == (
        f"{path}: item 2: expected a list of chat messages or an object with `messages`; "
        f"run {run.id} keeps the 2 whole sessions read before the error (status failed)"
    )
    assert run.status == "failed"
    assert sorted(row.key for row in store.session_rows([run.id])) == ["a", "b"]


def test_gate_latest_after_a_failed_import_reports_the_earlier_run(tmp_path, good_file):
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(main, ["import", "openai", str(good_file), "--allowlist", str(RALF),
                                "--db", db, "--label", "good"]).exit_code == 0

    failed = runner.invoke(main, ["import", "openai", str(tmp_path / "nonexistent.json"),
                                  "--allowlist", str(RALF), "--db", db])
    gate = runner.invoke(main, ["gate", "--run", "latest", "--max-error-rate", "100", "--db", db])

    assert failed.exit_code == 2
    assert gate.output.splitlines()[0] == "Run 1 (good)"
    assert gate.exit_code == 4  # judged: one imported session never certifies a rate
