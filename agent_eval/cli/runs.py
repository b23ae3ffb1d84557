"""``agent-eval runs``: list the stored runs, delete one, prune old ones."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import click
from rich.console import Console

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option, run_argument
from agent_eval.cli.terminal import ColumnSpec, escape_terminal, model_text
from agent_eval.store import MAX_ID

# how each column gives way on a narrow terminal (terminal.fitted_table)
# (the least useful go first: the highest ``drop``; status and targets are kept whole)
RUN_COLUMNS: dict[str, ColumnSpec] = {
    "id": {"justify": "right"}, "sessions": {"justify": "right"},
    "calls": {"justify": "right", "drop": 3}, "label": {"flex": True, "min": 5},
    "kind": {"drop": 5}, "status": {"keep": True, "min": 8},
    "targets": {"keep": True, "min": 10}, "stack": {"drop": 1}, "started": {"drop": 2},
    "duration": {"drop": 4}, "errors/100 [95% CI]": {"justify": "right"},
}


@main.group(invoke_without_command=True)
@click.option("--label", help="Only runs with this label.")
@click.option("--kind", type=click.Choice(["live", "import", "rescore", "replay", "proxy"]),
              help="Only this kind.")
@click.option("--status", type=click.Choice(["running", "finished", "interrupted", "failed"]),
              help="Only runs in this state.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True,
              help="Runs per page.")
@click.option("--offset", type=click.IntRange(0, MAX_ID), default=0, help="Skip this many runs.")
@json_option("the rows as JSON")
@db_option
@click.pass_context
def runs(ctx, label, kind, status, limit, offset, as_json, db) -> None:
    """List the stored runs, newest first; `runs delete` and `runs prune` remove runs.

    Example:

        agent-eval runs --label nightly --json

    Columns: id, label, kind, status, targets, sessions, calls, errors per 100 tool calls
    with its clustered 95% interval (sessions as clusters: the one gate and compare
    decide on; error sessions left out), start time (UTC) and duration.  A live run left running by a runner that was killed reads `stopped`,
    its sessions `N of M planned`, with the `run --resume` command under the table.  A
    run of several targets has one line more per target, with its own calls and errors
    per 100 and interval (never one figure pooled across models).  A run `collect` stored from
    telemetry shows its calls as `J (+K not judged)`: the calls whose arguments telemetry
    cut or left out (--json: `telemetry`, events seen, calls judged, not judgeable).  On
    a narrow terminal the least useful columns go first; status and targets stay whole.
    --json prints the same rows as a JSON list, with each run's stack faults (AE5xx,
    never in the errors) and each target's serving stack as one line; `errors_ci95` is
    the clustered interval [lo, hi] per 100 calls, `errors_ci95_wilson` the Wilson
    interval on calls (calls as independent: detail).  Exit codes: 0 listed, 2 bad
    option or --db.
    """
    if ctx.invoked_subcommand is not None:
        return
    from agent_eval.report.runs import (
        RUN_HEAD,
        run_cells,
        running_progress,
        stopped_runs,
        target_cells,
    )
    from agent_eval.store import open_store

    with open_store(db, create=False) as store:
        page = store.list_run_rows(label=label, kind=kind, status=status, limit=limit,
                                   offset=offset)
        stopped = stopped_runs(store, page.rows)
        progress = running_progress(store, page.rows)
    if as_json:
        click.echo(json.dumps([r.as_json() for r in page.rows], indent=2))
        return
    from agent_eval.cli.terminal import fitted_table

    console = _console()
    columns = [(col, RUN_COLUMNS.get(col, {})) for col in RUN_HEAD]
    # labels, targets (model names) are outside text: never markup
    rows = []
    for r in page.rows:
        cells = list(run_cells(r))
        if r.id in stopped:  # "running" with no process: it will never finish by itself
            cells[RUN_HEAD.index("status")] = "stopped"
        if r.id in progress:
            cells[RUN_HEAD.index("sessions")] = progress[r.id]
        per_target = target_cells(r)
        if per_target:  # the targets and their figures are on the lines below
            cells[RUN_HEAD.index("targets")] = f"{len(per_target)} targets:"
            cells[RUN_HEAD.index("stack")] = ""
            cells[RUN_HEAD.index("errors/100 [95% CI]")] = "by target:"
        rows.append([model_text(cell) for cell in cells])
        rows.extend([model_text(cell) for cell in target] for target in per_target)
    console.print(fitted_table(
        f"Runs {page.offset + 1}–{page.offset + len(page.rows)} of {page.total}",
        columns, rows, console.width))
    import textwrap

    for gone in stopped.values():  # wrapped to the terminal, as the table is
        click.echo(textwrap.fill(gone.hint, width=max(40, console.width)))


@runs.command("delete")
@run_argument()
@click.option("--yes", is_flag=True, help="Delete without asking.")
@db_option
def delete_cmd(run_ref: str, yes: bool, db: str | None) -> None:
    """Delete one run and every session, call and finding stored under it.

    Example:

        agent-eval runs delete 12 --yes

    RUN is an id, `latest` or `label:NAME`.  Asks first unless --yes.  Exit codes:
    0 deleted (or not confirmed), 2 no such run.
    """
    from agent_eval.store import open_store

    with open_store(db, create=False) as store:
        run = store.resolve_run(run_ref)
        label = escape_terminal(run.label or "no label", one_line=True)
        if not yes and not click.confirm(f"Delete run {run.id} ({label})?"):
            click.echo("nothing deleted")
            return
        n = store.delete_run(run.id)
    click.echo(f"deleted run {run.id} ({n} sessions)")


@runs.command("prune")
@click.option("--older-than", "days", type=click.IntRange(0), required=True, metavar="DAYS",
              help="Delete runs started more than DAYS days ago.")
@click.option("--yes", is_flag=True, help="Delete; without it only list what would go.")
@db_option
def prune_cmd(days: int, yes: bool, db: str | None) -> None:
    """Delete the runs started more than DAYS days ago (running ones are kept).

    Example:

        agent-eval runs prune --older-than 30 --yes

    Without --yes it only prints the runs it would delete.  Exit codes: 0 done, 2 bad
    option or --db.
    """
    from agent_eval.store import open_store

    before = datetime.now(UTC) - timedelta(days=days)
    with open_store(db, create=False) as store:
        ids = store.prune_runs(before, dry_run=not yes)
    listed = ", ".join(map(str, ids)) or "none"
    click.echo(f"deleted runs: {listed}" if yes else
               f"would delete runs: {listed} (add --yes to delete)")


def _console() -> Console:
    from agent_eval.cli.terminal import table_console

    return table_console(160)
