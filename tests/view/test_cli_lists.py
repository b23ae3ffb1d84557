"""`agent-eval runs`, `sessions` and `calls`: the printed table and --json hold the same
rows, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.factories import add_run
from support.view_fixtures import ESC

from agent_eval.cli import main


def run_cli(store, *args: str, input: str | None = None):
    url = store.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(main, [*args, "--db", url], input=input)
    assert result.exit_code == 0, result.output
    return result.output


def table_ids(output: str) -> list[int]:
    """The first column of the rich table's body rows."""
    ids = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if line.startswith("│") and cells[0].isdigit():
            ids.append(int(cells[0]))
    return ids


def test_runs_prints_and_json_the_same_rows(filled):
    store, f = filled
    rows = json.loads(run_cli(store, "runs", "--json"))
    assert [r["id"] for r in rows] == [f.run_id, f.old_run_id]
    assert rows[0]["targets"] == ["careful", "sloppy"]
    assert (rows[0]["sessions"], rows[0]["calls"], rows[0]["errors"]) == (5, 6, 3)
    text = run_cli(store, "runs")
    assert table_ids(text) == [f.run_id, f.old_run_id]
    assert "2 targets:" in text and "· careful" in text and "· sloppy" in text


def test_runs_never_pool_errors_per_100_across_targets(filled):
    """Two targets are two models: one figure each (careful 1/4, sloppy 2/2), never the
    pooled 3/6 = 50.00 that describes neither."""
    store, f = filled
    rows = json.loads(run_cli(store, "runs", "--json"))
    assert rows[0]["errors_per100"] is None
    assert [(t["target"], t["calls"], t["errors"], t["errors_per100"])
            for t in rows[0]["by_target"]] == [("careful", 4, 1, 25.0), ("sloppy", 2, 2, 100.0)]
    assert rows[1]["errors_per100"] == 0.0  # one target: its own figure
    text = run_cli(store, "runs")
    [careful] = [line for line in text.splitlines() if "· careful" in line]
    [sloppy] = [line for line in text.splitlines() if "· sloppy" in line]
    assert "25.00 [" in careful and "100.00 [" in sloppy
    assert "50.00" not in text


def test_runs_never_print_a_stored_key(filled):
    store, _ = filled
    assert "sk-secret" not in run_cli(store, "runs", "--json") + run_cli(store, "runs")


def test_sessions_failed_of_a_class_prints_and_json_the_same_rows(filled):
    store, f = filled
    args = ("sessions", str(f.run_id), "--failed", "--class", "AE301")
    rows = json.loads(run_cli(store, *args, "--json"))
    expected = [f.ids["careful/pipe/0"], f.ids["sloppy/pipe/0"]]
    assert [r["id"] for r in rows] == expected
    assert rows[0]["status_text"] == "completed with 1 denial"
    text = run_cli(store, *args)
    assert table_ids(text) == expected
    assert "abandoned with 2 denials" in text


def test_calls_of_a_target_and_class(filled):
    store, f = filled
    args = ("calls", "latest", "--target", "sloppy", "--decision", "deny")
    rows = json.loads(run_cli(store, *args, "--json"))
    assert [(r["primary_code"], r["next_action"]) for r in rows] == [
        ("AE301", "retry-denied"), ("AE304", "abandon")]
    assert table_ids(run_cli(store, *args)) == [r["id"] for r in rows]


def test_calls_print_control_characters_escaped(tmp_path):
    from support.view_fixtures import judged, record

    from agent_eval.store import open_store

    db = str(tmp_path / "esc.db")
    with open_store(db) as store:
        add_run(store, [record("t/esc/0", [judged(0, 0, f"ls {ESC}")])], label=None,
                targets={"t": "m"}, base_url="u")
    out = CliRunner().invoke(main, ["calls", "latest", "--db", db]).output
    assert "\x1b" not in out and "\\x1b[31mRED" in out


def test_runs_delete_asks_and_prune_lists_without_yes(filled):
    store, f = filled
    assert "nothing deleted" in run_cli(store, "runs", "delete", str(f.old_run_id), input="n\n")
    assert f"would delete runs: {f.old_run_id}, {f.run_id}" in run_cli(
        store, "runs", "prune", "--older-than", "0")
    assert f"deleted run {f.old_run_id} (1 sessions)" in run_cli(
        store, "runs", "delete", str(f.old_run_id), "--yes")
    assert [r["id"] for r in json.loads(run_cli(store, "runs", "--json"))] == [f.run_id]
    assert f"deleted runs: {f.run_id}" in run_cli(store, "runs", "prune", "--older-than", "0",
                                                  "--yes")


def test_bad_run_is_one_error_line(tmp_path):
    from agent_eval.store import open_store

    open_store(str(tmp_path / "x.db")).close()
    result = CliRunner().invoke(main, ["sessions", "99", "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert result.output == "Error: run: no run with id 99 in this store: check --db and the run id\n"


def run_refused(store, *args: str) -> str:
    url = store.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(main, [*args, "--db", url])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    return line


def test_a_rule_name_filters_as_its_code(filled):
    store, f = filled
    by_code = json.loads(run_cli(store, "calls", "latest", "--class", "AE301", "--json"))
    by_name = json.loads(run_cli(store, "calls", "latest", "--class", "pipe-to-filter",
                                 "--json"))
    assert by_name == by_code and [r["primary_code"] for r in by_name] == ["AE301", "AE301"]


def test_a_code_that_names_no_rule_is_refused_not_an_empty_table(filled):
    store, _ = filled
    assert run_refused(store, "calls", "latest", "--class", "AE999") == (
        "Error: --class: no such code or rule name 'AE999': `agent-eval rules` lists them")
    assert run_refused(store, "sessions", "latest", "--class", "pipe-to-fliter") == (
        "Error: --class: no such code or rule name 'pipe-to-fliter': did you mean "
        "AE301 (pipe-to-filter)? `agent-eval rules` lists them")


def test_a_typod_target_is_refused_with_the_nearest_name(filled):
    store, _ = filled
    assert run_refused(store, "calls", "latest", "--target", "sloppyy") == (
        "Error: --target: no such target 'sloppyy': did you mean 'sloppy'? this run has: "
        "careful, sloppy")


def test_a_typod_scenario_is_refused_with_the_nearest_name(filled):
    store, _ = filled
    assert run_refused(store, "sessions", "latest", "--scenario", "pipes") == (
        "Error: --scenario: no such scenario 'pipes': did you mean 'pipe'? this run has: "
        "clean, evaluator-step, fault, pipe")
    assert run_refused(store, "calls", "latest", "--scenario", "nothing-near") == (
        "Error: --scenario: no such scenario 'nothing-near': this run has: clean, "
        "evaluator-step, fault, pipe")
    assert [r["scenario"] for r in json.loads(run_cli(
        store, "sessions", "latest", "--scenario", "pipe", "--json"))] == ["pipe", "pipe"]


PIPED = ("uv run scripts/web_search.py --query 'quarterly supplier prices for the offsite "
         "catering, all regions' | head -n 5")


def narrow_store(tmp_path) -> str:
    from support.view_fixtures import judged, record

    from agent_eval.store import open_store

    db = str(tmp_path / "narrow.db")
    with open_store(db) as store:
        add_run(store, [record("Qwen3.5-27B-Instruct/research-market-scan/0", [
            judged(0, 0, "ls scripts/"), judged(1, 0, PIPED)], tags=["ralf", "research"])],
            label="nightly-long-label", targets={"Qwen3.5-27B-Instruct": "m"}, base_url="u")
    return db


def at_columns(monkeypatch, columns: int, *args: str) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def body_rows(lines: list[str]) -> list[str]:
    """The table's body lines (between the header rule and the bottom border)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return lines[start + 1:end]


@pytest.mark.parametrize("columns", [80, 100, 200])
@pytest.mark.parametrize("command", ["runs", "sessions", "calls"])
def test_every_row_keeps_to_one_line_at_the_terminal_width(tmp_path, monkeypatch, columns,
                                                           command):
    db = narrow_store(tmp_path)
    args = [command] if command == "runs" else [command, "latest"]
    lines = at_columns(monkeypatch, columns, *args, "--db", db)
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    rows = body_rows(lines)
    assert len(rows) == (2 if command == "calls" else 1), "\n".join(lines)
    assert all(row.split("│")[1].strip().isdigit() for row in rows)  # the id shows


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_calls_show_the_denied_span_of_a_long_command(tmp_path, monkeypatch, columns):
    db = narrow_store(tmp_path)
    lines = at_columns(monkeypatch, columns, "calls", "latest", "--db", db)
    (piped,) = [row for row in body_rows(lines) if "AE301" in row]
    assert "| head" in piped, "\n".join(lines)


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_the_per_target_table_keeps_a_row_per_target_at_the_terminal_width(
        tmp_path, monkeypatch, columns):
    db = narrow_store(tmp_path)
    lines = at_columns(monkeypatch, columns, "report", "latest", "--out", str(tmp_path / "r"),
                       "--db", db)
    table = lines[:next(i for i, line in enumerate(lines) if line.startswith("└")) + 1]
    assert all(len(line) <= columns for line in table), "\n".join(table)
    (row,) = body_rows(table)
    assert row.split("│")[1].strip().startswith("Qwen3.5-27B")  # cut with … when narrow
    assert "errors/100 [95% CI]" in "\n".join(table)


def test_the_cli_takes_code_as_the_viewer_names_the_class_filter(filled):
    """The viewer's filter (and its URLs) say `code`, the CLI `--class`: both names work
    in the CLI, and the viewer's label says it is the class."""
    store, f = filled
    by_class = run_cli(store, "calls", str(f.run_id), "--class", "AE301", "--json")
    assert json.loads(run_cli(store, "calls", str(f.run_id), "--code", "AE301", "--json")) \
        == json.loads(by_class) != []
