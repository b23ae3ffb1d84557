"""``agent-eval perf``: server speed by concurrency, and useful work beside it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option
from agent_eval.errors import ConfigError
from agent_eval.serverlogs.stored import (
    naive_utc,
    requests_from_rows,
    run_window,
    samples_from_rows,
)


@main.command()
@click.option("--since", metavar="TIME", help="Start of the window, e.g. '2025-08-01 12:00' (UTC).")
@click.option("--until", metavar="TIME", help="End of the window (exclusive, UTC).")
@click.option(
    "--run", "run_ref", metavar="RUN", help="Use a run's window: an id, latest, label:NAME."
)
@click.option(
    "--source", metavar="NAME", help="Only this server log (its import label or file name)."
)
@click.option(
    "--window", "window_s", type=click.FloatRange(min=1), default=10.0, show_default=True,
    help="Seconds one throughput sample covers at most (vLLM logs every 10 s).",
)  # fmt: skip
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Directory for perf.md and perf.json.",
)
@json_option("perf.json's content on stdout instead of the tables")
@db_option
def perf(
    since: str | None,
    until: str | None,
    run_ref: str | None,
    source: str | None,
    window_s: float,
    out_dir: str | None,
    as_json: bool,
    db: str | None,
) -> None:
    """Server speed by concurrency from imported vLLM / llama.cpp logs.

    Prints and writes (reports/perf-<stamp>/perf.md and perf.json, or --out) three
    tables, each bucketed by the running-request count of its 10-second window:
    generation tokens/s (samples, average, median, peak, per request), prefill tokens/s
    (sustained and active-only) and completions per minute.  With --run, the window is
    the run's own and useful work is shown beside speed: allowed tool calls per minute
    and completed handshakes per hour next to generation tokens/s.

    Example: agent-eval import vllm-log vllm.log && agent-eval perf --run latest --json
    """
    from agent_eval.serverlogs import perf_tables, useful_work
    from agent_eval.serverlogs.render import perf_document, render_markdown
    from agent_eval.store import open_store

    if run_ref is not None and (since or until):
        raise click.UsageError("--run sets the window itself: give either --run or --since/--until")
    start, end = _when(since, "--since"), _when(until, "--until")
    if start and end and end <= start:
        raise ConfigError(f"--until {until} is not after --since {since}", field="--until")
    work = None
    with open_store(db, create=False) as store:
        if run_ref is not None:
            run = store.resolve_run(run_ref)
            sessions = list(store.session_rows([run.id]))
            start, end = _run_window(run, sessions)
            span = timedelta(seconds=window_s)
            samples = samples_from_rows(store.server_samples(start, end + span, source))
            requests = requests_from_rows(store.server_requests(start, end + span, source))
            calls = list(store.call_rows([run.id]))
            work = useful_work(calls, sessions, samples, requests, start=start, end=end,
                               reach=end + span)
            scope = f"Run {run.id}" + (f" ({run.label})" if run.label else "")
            scope += f": {start:%Y-%m-%d %H:%M:%S} to {end:%Y-%m-%d %H:%M:%S} UTC"
        else:
            samples = samples_from_rows(store.server_samples(start, end, source))
            requests = requests_from_rows(store.server_requests(start, end, source))
            scope = f"Window: {start or 'start of store'} to {end or 'end of store'}"
    if source:
        scope += f"; source {source}"
    tables = perf_tables(samples, requests, window_s=window_s)
    doc = perf_document(tables, work, scope=scope)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        _print(tables, work, scope)
    folder = (
        Path(out_dir) if out_dir else Path("reports") / f"perf-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "perf.md").write_text(render_markdown(tables, work, scope=scope), encoding="utf-8")
    (folder / "perf.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    click.echo(f"wrote {folder / 'perf.md'} and {folder / 'perf.json'}", err=as_json)


def _when(text: str | None, option: str) -> datetime | None:
    """A --since/--until value as naive UTC (the store's convention)."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{text!r} is not a time: use e.g. '2025-08-01 12:00' or '2025-08-01T12:00:00+02:00'",
            field=option,
        ) from None
    return naive_utc(value)


def _run_window(run, sessions) -> tuple[datetime, datetime]:
    window = run_window(run.kind, run.created_at, run.finished_at, sessions)
    if window is None:
        raise ConfigError(
            f"run {run.id} has no finish time and no finished session: use --since/--until",
            field="--run",
        )
    return window


def _print(tables, work, scope: str) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from agent_eval.cli.terminal import model_text
    from agent_eval.serverlogs import render

    console = Console()  # scope and source names come from logs and labels: never markup
    console.print(Text.assemble(("Server performance", "bold"), "  ", model_text(scope)),
                  highlight=False)
    if tables.samples == 0:
        console.print(
            "no server samples in this window: import a log with "
            "`agent-eval import vllm-log FILE` (or llamacpp-log)",
            highlight=False,
        )
    if len(tables.sources) > 1:
        console.print(
            model_text(f"pooled sources: {', '.join(tables.sources)} (pick one with --source)"),
            highlight=False,
        )
    sections = [
        ("Generation tokens/s by concurrency", render.GENERATION_HEADER, render.generation_rows(tables)),
        ("Prefill tokens/s by concurrency", render.PREFILL_HEADER, render.prefill_rows(tables)),
        ("Completions per minute by concurrency", render.COMPLETIONS_HEADER, render.completion_rows(tables)),
    ]  # fmt: skip
    if work is not None:
        sections.insert(0, ("Useful work beside speed", render.WORK_HEADER, render.work_rows(work)))
    for title, header, rows in sections:
        if not rows:
            continue
        table = Table(title=title, title_justify="left")
        for i, name in enumerate(header):
            table.add_column(
                name,
                justify="left"
                if i == 0 and work is not None and title.startswith("Useful")
                else "right",
            )
        for row in rows:
            table.add_row(*(model_text(cell) for cell in row))
        console.print(table)
    if tables.requests == 0 and tables.throughput:
        console.print(render.NO_ACCESS_LINES, markup=False, highlight=False)
