"""``agent-eval sessions`` and ``agent-eval calls``: the viewer's lists, in the terminal.

Both share the query layer (``agent_eval/store/queries.py``) with ``agent-eval view``, so
a filter gives the same rows here, in ``--json`` and in the browser.
"""

from __future__ import annotations

import json

import click
from rich.console import Console

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option, run_argument
from agent_eval.cli.terminal import ColumnSpec, model_text
from agent_eval.store import MAX_ID

SESSION_HEAD = ("id", "target", "scenario", "repeat", "status", "calls", "denials",
                "handshake", "tags")  # fmt: skip
CALL_HEAD = ("id", "session", "target", "scenario", "#", "tool", "decision", "class",
             "next", "command")  # fmt: skip
# how each column gives way on a narrow terminal (terminal.fitted_table)
# (the least useful go first: the highest ``drop``; status and target are kept whole)
SESSION_COLUMNS: dict[str, ColumnSpec] = {
    "id": {"justify": "right"}, "target": {"keep": True, "min": 10},
    "scenario": {"flex": True, "min": 12}, "repeat": {"justify": "right", "drop": 3},
    "status": {"keep": True, "min": 12}, "calls": {"justify": "right", "drop": 2},
    "denials": {"justify": "right", "drop": 1},  # the status says "with 2 denials"
    "tags": {"flex": True, "drop": 4},
}
CALL_COLUMNS: dict[str, ColumnSpec] = {
    "id": {"justify": "right"}, "session": {"justify": "right"},
    "target": {"keep": True, "min": 8}, "scenario": {"flex": True, "min": 8, "drop": 1},
    "#": {"justify": "right", "drop": 4}, "tool": {"flex": True, "min": 4, "drop": 3},
    "next": {"flex": True, "min": 6, "drop": 2},
    "command": {"flex": True, "min": 24},
}
COMMAND_CHARS = 80  # the most of a command a row shows (--json gives it whole)
COMMAND_MIN = 24
OTHER_COLUMNS = 76  # about what the other columns and the borders take


def _filters(func):
    options = [
        click.option("--target", help="Only this target."),
        click.option("--scenario", help="Only this scenario."),
        click.option("--tag", help="Only sessions carrying this tag."),
        click.option("--class", "--code", "code", metavar="CODE",
                     help="Only denied calls of this primary class: a code or a rule name "
                          "(AE301, pipe-to-filter); --code is the viewer's name for it "
                          "(its URLs say code=AE301)."),
        click.option("--status", type=click.Choice(["completed", "stalled", "abandoned",
                                                    "error"]), help="Session exit state."),
        click.option("--decision", type=click.Choice(["allow", "deny"]), help="Call verdict."),
        click.option("--failed", is_flag=True, help="Only failed sessions / denied calls."),
        click.option("--disagree", is_flag=True,
                     help="Only where the source harness's verdict differs from ours."),
        click.option("--search", metavar="TEXT", help="Text the command contains."),
        click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True,
                     help="Rows per page."),
        click.option("--offset", type=click.IntRange(0, MAX_ID), default=0,
                     help="Skip this many rows."),
        json_option("the rows as JSON"),
        db_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@main.command()
@run_argument()
@_filters
@click.option("--sort", type=click.Choice(["failed", "id", "-id", "denials", "scenario",
                                           "handshake"]), default="failed", show_default=True,
              help="Order: failed first, by id, most denials, scenario, open handshake first.")
def sessions(run_ref, sort, limit, offset, as_json, db, **filters) -> None:
    """List a run's sessions, failed first: status, denials, handshake.

    Example:

    \b
        agent-eval sessions latest --failed --class AE301 --target piper --json

    A session is failed when it did not complete, left its handshake open, or holds a
    denied call.  --class keeps sessions holding a denied call of that class.  The
    status says `completed with N denials` when it did.  Open one with `agent-eval show
    ID`.  Exit codes: 0 listed, 2 bad run or option.
    """
    from agent_eval.store import SessionFilter, filter_from, open_store

    with open_store(db, create=False) as store:
        run = store.resolve_run(run_ref)
        _check_filters(store, run.id, filters)
        f = filter_from(SessionFilter, {**filters, "run_id": run.id})
        page = store.list_sessions(f, sort=sort, limit=limit, offset=offset)
    if as_json:
        click.echo(json.dumps([r.as_json() for r in page.rows], indent=2))
        return
    from agent_eval.cli.terminal import fitted_table

    rows = [[str(r.id), model_text(r.target), model_text(r.scenario), str(r.repeat),
             model_text(r.status_text, "red" if r.failed else "green"), str(r.calls),
             str(r.denials), handshake_cell(r), model_text(", ".join(r.tags))]
            for r in page.rows]
    console = _console()
    console.print(fitted_table(_title("Sessions", run.id, page),
                               [(col, SESSION_COLUMNS.get(col, {})) for col in SESSION_HEAD],
                               rows, console.width))


@main.command()
@run_argument()
@_filters
@click.option("--next", "next_action",
              type=click.Choice(["pivot", "retry-denied", "repeat", "abandon"]),
              help="Only denied calls followed by this reaction.")
@click.option("--session", "session_id", type=click.IntRange(0, MAX_ID),
              help="Only this session's calls.")
@click.option("--sort", type=click.Choice(["failed", "id", "-id", "code", "session"]),
              default="failed", show_default=True,
              help="Order: denied first, by id, by class, by session and position.")
def calls(run_ref, sort, limit, offset, as_json, db, **filters) -> None:
    """List a run's tool calls, denied first: verdict, class, what came next, command.

    Example:

    \b
        agent-eval calls latest --class AE301 --target piper --json

    --search finds calls whose command contains TEXT (matched literally).  Commands are
    shown with control characters escaped and cut to fit the terminal (--json gives them
    whole); a denied call's command is cut around the span its finding points at (the
    `| head`), with some context before it.  Through a pipe the width is $COLUMNS, or
    200; on a narrow terminal the least needed columns go first.  Exit codes: 0 listed,
    2 bad run or option.
    """
    from agent_eval.store import CallFilter, filter_from, open_store

    with open_store(db, create=False) as store:
        run = store.resolve_run(run_ref)
        _check_filters(store, run.id, filters)
        f = filter_from(CallFilter, {**filters, "run_id": run.id})
        page = store.list_calls(f, sort=sort, limit=limit, offset=offset)
        spans = store.primary_spans(page.rows)
    if as_json:
        click.echo(json.dumps([r.as_json() for r in page.rows], indent=2))
        return
    from agent_eval.cli.terminal import fitted_table

    console = _console()
    room = max(COMMAND_MIN, min(COMMAND_CHARS, console.width - OTHER_COLUMNS))
    rows = [[str(r.id), str(r.session_id), model_text(r.target), model_text(r.scenario),
             str(r.index), model_text(r.tool),
             model_text(r.decision, "red" if r.decision == "deny" else "green"),
             model_text(r.primary_code), model_text(r.next_action),
             command_cell(r.command if r.command is not None else r.arguments,
                          spans.get(r.id), room)]
            for r in page.rows]
    console.print(fitted_table(_title("Calls", run.id, page),
                               [(col, CALL_COLUMNS.get(col, {})) for col in CALL_HEAD],
                               rows, console.width))


def _check_filters(store, run_id: int, filters: dict) -> None:
    """Filters that name nothing are refused rather than answered with an empty table:
    --class takes a code or a rule name (made the code), --target and --scenario one of the
    run's (a did-you-mean names the nearest)."""
    from agent_eval.cli.options import known_name, rule_code

    if filters.get("code"):
        filters["code"] = rule_code(filters["code"], "--class")
    if filters.get("target"):
        known_name(filters["target"], [t.name for t in store.run_targets(run_id)],
                   "target", "--target")
    if filters.get("scenario"):
        known_name(filters["scenario"], store.run_scenarios(run_id), "scenario", "--scenario")


def command_cell(command: str | None, span: tuple[int, int] | None, room: int):
    """The command cut to ``room`` characters; a denied call's around the span its finding
    points at (``| head``), with some context before it and the span underlined."""
    from agent_eval.cli.terminal import span_window

    if span is None or command is None:
        return model_text(command, limit=room)
    return span_window(command, span[0], span[1], room)


def handshake_cell(r) -> str:
    if not r.handshake_required:
        return "—"
    return f"{r.handshake_done}/{r.handshake_required}" + (" done" if r.handshake_completed
                                                            else " open")


def _title(what: str, run_id: int, page) -> str:
    """The table's title (numbers only; rich parses a title as markup)."""
    if not page.rows:
        return f"{what} of run {run_id}: none match"
    return f"{what} of run {run_id}: {page.offset + 1}–{page.offset + len(page.rows)} of {page.total}"


def _console() -> Console:
    from agent_eval.cli.terminal import table_console

    return table_console(200)
