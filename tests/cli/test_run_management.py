"""``export``, ``show latest`` / ``show RUN SESSION`` and ``--json`` on the commands that
print tables, over one small demo run stored in SQLite."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.cli.export import COLUMNS
from agent_eval.store import open_store


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("mgmt") / "runs.db")
    result = _cli("demo", "--profiles", "piper", "--repeats", "1", "--scenario", "lights-*",
                  "--no-report", "--db", path)
    assert result.exit_code == 0, result.output
    return path


def _calls(db: str):
    with open_store(db) as store:
        sessions = {s.id: s for s in store.session_rows([1])}
        return sessions, sorted(store.call_rows([1]), key=lambda c: (c.session_id, c.index))


def test_export_jsonl_has_one_row_per_tool_call_with_the_documented_columns(db):
    result = _cli("export", "latest", "--db", db)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    sessions, calls = _calls(db)
    assert len(rows) == len(calls) > 0
    assert all(tuple(r) == COLUMNS for r in rows)
    for row, call in zip(rows, calls, strict=True):
        session = sessions[call.session_id]
        assert (row["session"], row["call"], row["verdict"], row["class"], row["command"]) == (
            call.session_id, call.index, call.decision, call.primary, call.command)
        assert (row["session_key"], row["target"], row["scenario"]) == (
            session.key, "piper", session.scenario)


def test_export_csv_round_trips_through_a_csv_reader(db, tmp_path):
    out = tmp_path / "calls.csv"
    result = _cli("export", "1", "--format", "csv", "-o", str(out), "--db", db)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    _, calls = _calls(db)
    assert [r["command"] for r in rows] == [c.command or "" for c in calls]
    denied = [r for r in rows if r["verdict"] == "deny"]
    assert all(r["class"].startswith("AE") and r["class_name"] for r in denied)


def test_export_of_an_unknown_run_is_exit_2(db):
    result = _cli("export", "99", "--db", db)
    assert result.exit_code == 2
    assert "Error: run: no run with id 99" in result.output


def test_show_latest_is_the_newest_session_of_the_newest_run(db):
    sessions, _ = _calls(db)
    result = _cli("show", "latest", "--json", "--db", db)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["id"] == max(sessions)


def test_show_run_session_by_key_by_scenario_and_by_id(db):
    sessions, _ = _calls(db)
    first = min(sessions.values(), key=lambda s: s.id)
    for ref in (first.key, first.scenario, str(first.id)):
        result = _cli("show", "latest", ref, "--json", "--db", db)
        assert result.exit_code == 0, result.output
        page = json.loads(result.stdout)
        assert (page["id"], page["key"]) == (first.id, first.key)


def test_show_an_unknown_session_names_what_exists(db):
    result = _cli("show", "1", "nope", "--db", db)
    assert result.exit_code == 2
    assert "Error: show: run 1 has no session 'nope'; give a session id, a key such as piper/" \
        in result.output


def test_gate_json_keeps_the_exit_code(db):
    result = _cli("gate", "--run", "1", "--max-error-rate", "0", "--min-handshake", "0",
                  "--json", "--db", db)
    data = json.loads(result.stdout)
    assert result.exit_code == {"pass": 0, "fail": 1, "inconclusive": 4}[data["outcome"]]
    assert data["run"] == 1
    assert [c["kind"] for c in data["checks"]][:2] == ["coverage", "error-rate"]


def test_compare_and_report_json(db, tmp_path):
    compared = _cli("compare", "1", "1", "--json", "--db", db)
    assert compared.exit_code == 0, compared.output
    data = json.loads(compared.stdout)
    assert data["label_a"] == "run 1 (demo)" and "piper" in data["groups"]
    reported = _cli("report", "1", "--json", "--out", str(tmp_path), "--db", db)
    assert reported.exit_code == 0, reported.output
    data = json.loads(reported.stdout)
    assert data["runs"] == [1] and data["report"].endswith("index.html")
    _, calls = _calls(db)
    assert data["targets"]["piper"]["tool_calls"] == len(calls)


def test_perf_json_is_what_perf_json_file_holds(db, tmp_path):
    result = _cli("perf", "--json", "--out", str(tmp_path), "--db", db)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads((tmp_path / "perf.json").read_text(encoding="utf-8"))
    assert printed["samples"] == 0 and printed["generation"] == []


HUGE = "9" * 24


@pytest.mark.parametrize("args", [
    ["runs", "--offset", HUGE], ["sessions", "1", "--offset", HUGE], ["calls", "1", "--session", HUGE],
    ["show", HUGE], ["show", "9" * 5000], ["export", HUGE], ["runs", "delete", HUGE, "--yes"],
    ["gate", "--run", HUGE, "--max-error-rate", "1"],
], ids=["runs-offset", "sessions-offset", "calls-session", "show", "show-5000-digits", "export",
        "runs-delete", "gate"])
def test_a_number_past_the_stores_ids_is_an_error_line_not_a_traceback(db, args):
    """Ids are SQL INTEGER: a bigger number overflowed SQLite's binding (a traceback)."""
    result = _cli(*args, "--db", db)
    assert result.exit_code == 2, result.output
    assert result.output.count("Error:") == 1 and "Traceback" not in result.output
    assert not isinstance(result.exception, OverflowError | ValueError)
