"""``agent-eval report`` and ``agent-eval show`` through click: exit codes and output."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from report_fixtures import PIPED, SCRIPT_TAG

from agent_eval.cli import main


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def test_report_writes_the_latest_run_and_prints_the_index_path(hostile_store, tmp_path):
    result = invoke("report", "--db", hostile_store.db, "--out", str(tmp_path), "--quiet")
    assert result.exit_code == 0, result.output
    index = tmp_path / str(hostile_store.run_id) / "index.html"
    assert result.output.strip() == str(index)
    assert index.is_file()
    assert {p.name for p in index.parent.iterdir()} == {
        "index.html", "sessions", "rules", "summary.md", "summary.json", "junit.xml"}


def test_report_prints_the_tables_before_the_path(hostile_store, tmp_path):
    result = invoke("report", "label:fixture", "--db", hostile_store.db, "--out",
                    str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "Errors per 100 tool calls by failure class" in result.output
    assert result.output.rstrip().endswith("index.html")


@pytest.mark.parametrize("ref", ["99", "label:nope"], ids=["unknown-id", "unknown-label"])
def test_report_of_an_unknown_run_is_a_one_line_error_exit_2(hostile_store, tmp_path, ref):
    result = invoke("report", ref, "--db", hostile_store.db, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.startswith("Error: ") and "Traceback" not in result.output


def test_show_prints_header_verdicts_span_output_and_next_action(hostile_store):
    sid = hostile_store.ids["careful/xss/0"]
    result = invoke("show", str(sid), "--db", hostile_store.db)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"session {sid}" in out and "target careful" in out and "scenario xss" in out
    assert "status completed" in out
    assert "deny  bash  AE301 pipe-to-filter" in out
    assert PIPED in out
    assert "→ next: pivot" in out
    assert f"child sessions {hostile_store.ids['careful/xss/0/child']}" in out


def test_show_prints_model_text_literally_not_as_console_markup(hostile_store):
    result = invoke("show", str(hostile_store.ids["careful/xss/0"]), "--db", hostile_store.db)
    assert f"content {SCRIPT_TAG}" in result.output


def test_show_child_names_its_parent(hostile_store):
    result = invoke("show", str(hostile_store.ids["careful/xss/0/child"]), "--db",
                    hostile_store.db)
    assert f"parent session {hostile_store.ids['careful/xss/0']}" in result.output


@pytest.mark.parametrize("arg", ["9999", "abc"], ids=["unknown-id", "not-a-number"])
def test_show_of_an_unknown_session_exits_2(hostile_store, arg):
    result = invoke("show", arg, "--db", hostile_store.db)
    assert result.exit_code == 2
    assert "Error" in result.output and "Traceback" not in result.output
