"""``agent-eval report``: write the HTML report and summary files of one or more runs."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option
from agent_eval.cli.terminal import table_console


@main.command()
@click.argument("runs", nargs=-1, metavar="[RUN ...]")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("reports"), show_default=True,
              help="Folder the report folder is written under.")
@click.option("--quiet", is_flag=True, help="Print only the path of index.html.")
@json_option("the tables and the report path as one JSON object")
@db_option
def report(runs: tuple[str, ...], out: Path, quiet: bool, as_json: bool, db: str | None) -> None:
    """Write the report of RUN (default: latest) under OUT/<run>/.

    RUN is a run id, `latest` or `label:NAME`; several runs give side-by-side columns in
    one report (OUT/<id1>-<id2>/), one per run and target (`qwen · run 2`), in the
    printed tables as in the HTML.  Writes index.html (tables, charts, a page per session
    and per rule), summary.md, summary.json and junit.xml; prints the tables and the path
    of index.html.  Opens from disk, works offline.

    Example:

    \b
        agent-eval report latest label:baseline --out reports
        agent-eval report latest --json
    """
    from agent_eval.analysis.run_tables import run_tables
    from agent_eval.cli.tables import print_tables
    from agent_eval.report import write_report
    from agent_eval.store import open_store

    with open_store(db, create=False) as store:
        run_ids = [store.resolve_run(ref).id for ref in (runs or ("latest",))]
        index = write_report(store, run_ids, out)
        if as_json:
            import json

            from agent_eval.cli.tables import tables_json

            tables = run_tables(store, run_ids)
            click.echo(json.dumps({"runs": run_ids, "report": str(index),
                                   "targets": tables_json(tables.summaries, tables.clustered,
                                                          tables.classes)},
                                  indent=2))
            return
        if not quiet:
            print_tables(run_tables(store, run_ids), table_console(120))
    click.echo(f"HTML report: {index}" if not quiet else str(index))
