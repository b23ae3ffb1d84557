"""``agent-eval report`` and ``agent-eval show`` through click: exit codes and output."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.factories import add_run
from support.report_fixtures import PIPED, SCRIPT_TAG

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
        "index.html", "sessions", "rules", "lists", "summary.md", "summary.json", "junit.xml"}


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


def test_report_of_two_runs_prints_a_column_per_run_as_the_html_does(tmp_path):
    """Run 1: qwen 1 of 2 calls denied; run 2: qwen 0 of 3.  Pooled would read 1/5 = 20.00;
    the terminal must print each run's own row, the numbers of summary.json."""
    import json
    import re

    from support.report_fixtures import ALLOWED, judged_call, session

    from agent_eval.store import open_store

    db = str(tmp_path / "two.db")
    runs = {1: [PIPED, ALLOWED], 2: [ALLOWED, ALLOWED, ALLOWED]}
    with open_store(db) as store:
        for run, commands in runs.items():
            calls = [judged_call(i, i, c, "out") for i, c in enumerate(commands)]
            add_run(store, [session("qwen/s/0", "qwen", "s", calls, n_turns=len(calls))],
                    label=f"r{run}")
    result = invoke("report", "1", "2", "--db", db, "--out", str(tmp_path / "reports"))
    assert result.exit_code == 0, result.output
    rows = {cells[0]: cells[1:] for line in result.output.splitlines()
            if (cells := [c.strip() for c in re.split(r"[│┃]", line)[1:-1]])
            and cells[0].startswith("qwen")}
    # one session per run: no clustered interval (Wilson's on calls, detail, is the first
    # column to give way at 120 columns)
    assert rows["qwen · run 1"][2:5] == ["2", "1", "50.00 [1 session]"]
    assert rows["qwen · run 2"][2:5] == ["3", "0", "0.00 [1 session]"]
    assert "qwen" not in rows  # never pooled
    data = json.loads((tmp_path / "reports" / "1-2" / "summary.json").read_text())
    assert [(c, t["tool_calls"], t["errors"]) for c, t in data["targets"].items()] == [
        ("qwen · run 1", 2, 1), ("qwen · run 2", 3, 0)]
