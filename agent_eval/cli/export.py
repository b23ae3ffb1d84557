"""``agent-eval export``: one row per tool call of a run, as JSON lines or CSV."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.db import db_option

COLUMNS = (
    "run", "session", "session_key", "target", "scenario", "repeat", "session_status",
    "turn", "call", "tool", "verdict", "class", "class_name", "next_action", "script",
    "command", "source_verdict",
)
"""The export's columns, in order (documented in README, ``agent-eval export``)."""


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
            "source_verdict": c.source_decision,
        }


@main.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl",
              show_default=True, help="JSON lines (one object a call) or CSV with a header.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Write to FILE [default: stdout].")
@db_option
def export(run_ref: str, fmt: str, output: Path | None, db: str | None) -> None:
    """Export every tool call of a run, one row each, for pandas, duckdb or a spreadsheet.

    Example:

    \b
        agent-eval export latest --format csv -o calls.csv
        agent-eval export 12 | duckdb -c "select class, count(*) from read_json_auto('/dev/stdin') group by 1"

    Columns: run, session, session_key, target, scenario, repeat, session_status, turn,
    call, tool, verdict (allow/deny), class (the primary AE code of a denied call),
    class_name, next_action (after a denial: pivot, retry-denied, repeat, abandon),
    script, command (as the model wrote it, unescaped), source_verdict (imports: what the
    source harness decided).  Exit codes: 0 written, 2 unknown run or bad --db.
    """
    from agent_eval.store import open_store

    with open_store(db) as store:
        run = store.resolve_run(run_ref)
        stream = output.open("w", encoding="utf-8", newline="") if output else sys.stdout
        try:
            _write(stream, fmt, export_rows(store, run.id))
        finally:
            if output:
                stream.close()
    if output:
        click.echo(f"wrote {output}", err=True)


def _write(stream, fmt: str, rows) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(stream, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    else:
        for row in rows:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")
