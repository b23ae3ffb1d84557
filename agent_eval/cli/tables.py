"""Terminal tables shared by ``run``, ``demo`` and ``report``: the two docs/design.md tables.

Target names can come from an imported transcript (its model name): they are shown as
escaped ``Text`` (``terminal.model_text``), never as console markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from agent_eval.cli.terminal import ColumnSpec, model_text
from agent_eval.metrics import TOTAL, GroupSummary, Rate, class_table
from agent_eval.metrics.clustered import ClusteredRate, clustered_text

if TYPE_CHECKING:
    from rich.console import Console

    from agent_eval.analysis.run_tables import RunTables


def print_tables(tables: RunTables, console: Console) -> None:
    """The per-target table and the class breakdown of ``tables`` (``run`` and ``report``),
    as docs/design.md draws them."""
    console.print(render_target_table(tables.summaries, console.width, tables.clustered))
    console.print(render_class_table(tables.summaries, tables.classes, tables.class_names))


def fmt_rate(rate: Rate | None, *, interval: bool = True) -> str:
    if rate is None or rate.per100 is None:
        return "–"
    if not interval:
        return f"{rate.per100:.2f}"
    return f"{rate.per100:.2f} [{rate.lo100:.1f}–{rate.hi100:.1f}]"


# how each column of the per-target table gives way on a narrow terminal
TARGET_COLUMNS: tuple[tuple[str, ColumnSpec], ...] = (
    ("target", {"keep": True, "min": 10}), ("sessions", {"justify": "right"}),
    ("messages", {"justify": "right", "drop": 3}), ("tool calls", {"justify": "right"}),
    ("errors", {"justify": "right", "drop": 2}),
    ("errors/100 [95% CI]", {"justify": "right"}),
    ("Wilson CI (calls)", {"justify": "right", "drop": 4}),
    ("handshake done", {"justify": "right"}),
    ("stack faults/100", {"justify": "right", "drop": 1}),
    ("error sessions", {"justify": "right", "drop": 1}),
)


def render_target_table(summaries: dict[str, GroupSummary], width: int = 200,
                        clustered: dict[str, ClusteredRate] | None = None) -> Table:
    """sessions, messages, tool calls, errors, errors/100 with its clustered 95% interval
    (``clustered``, the one gate and compare decide on, from ``analysis.run_tables``),
    Wilson's interval on calls as detail (it treats a session's calls as independent, so
    it is too narrow; the first column to go on a narrow terminal), handshake completion,
    and, when a target had any, stack faults per 100 calls (the serving stack's, never in
    errors/100: ``k (rate)``); one line per target at ``width`` columns (the least needed
    columns go first).  Without ``clustered`` (figures with no store behind them) the
    Wilson interval is the only one and leads."""
    from agent_eval.cli.terminal import fitted_table

    rows = []
    for name, s in summaries.items():
        hs = s.handshake
        hs_text = (f"{hs.completed.k}/{hs.completed.n} ({hs.completed.per100:.0f}%)"
                   if hs.completed.n else "–")
        wilson = fmt_rate(s.errors)
        lead = wilson if clustered is None else clustered_text(clustered.get(name))
        detail = wilson.partition(" ")[2] or "–"
        rows.append([model_text(name), str(s.sessions), str(s.messages), str(s.calls),
                     str(s.errors.k), lead, detail, hs_text, stack_text(s),
                     str(s.error_sessions)])
    columns = list(TARGET_COLUMNS)
    if clustered is None:
        wilson_at = [c[0] for c in columns].index("Wilson CI (calls)")
        columns.pop(wilson_at)
        rows = [row[:wilson_at] + row[wilson_at + 1:] for row in rows]
    title = ("Per target (error sessions are excluded from every rate; 95% CI: sessions as "
             "clusters, as gate and compare decide)" if clustered is not None else
             "Per target (error sessions are excluded from every rate)")
    if not any(s.stack_faults.k for s in summaries.values()):
        stack = [c[0] for c in columns].index("stack faults/100")
        columns.pop(stack)
        rows = [row[:stack] + row[stack + 1:] for row in rows]
    else:
        title = title[:-1] + ("; stack faults are the server's, never the model's "
                              "errors)")
    return fitted_table(title, columns, rows, width)


def stack_text(s: GroupSummary) -> str:
    """Stack faults of a column as the tables print them: ``0``, or ``3 (2.41)``."""
    rate = s.stack_faults
    if not rate.k:
        return "0"
    return f"{rate.k} ({fmt_rate(rate, interval=False)})"


def render_class_table(summaries: dict[str, GroupSummary],
                       classes: list[tuple[str, dict[str, Rate]]] | None = None,
                       names: dict[str, str] | None = None) -> Table:
    """Failure classes as rows, targets as columns, errors per 100 tool calls; ``classes``
    and ``names`` as ``analysis.run_tables`` reads them (without them, from
    ``summaries``)."""
    table = Table(title="Errors per 100 tool calls by failure class")
    table.add_column("failure class")
    for name in summaries:
        table.add_column(model_text(name), justify="right")
    rows = class_table(summaries) if classes is None else classes
    if names is None:
        from agent_eval.analysis.run_tables import class_names

        names = class_names(code for code, _ in rows)
    for code, cells in rows:
        if code == TOTAL:
            label = model_text("total", "bold")
        else:
            named = names.get(code)
            label = model_text(f"{code} {named}" if named is not None else code)
        table.add_row(label, *(fmt_rate(cells.get(n), interval=False) for n in summaries))
    leaked = [f"{name}: " + ", ".join(f"{code} {n}" for code, n in s.leaks.items())
              for name, s in summaries.items() if s.leaks]
    captions = []
    if leaked:  # allowed calls: not in the errors above (docs/policies.md)
        captions.append("Leaks (calls the agent CLI's rules allowed that their strict "
                        "reading refuses): " + "; ".join(leaked))
    stack = [f"{name}: " + ", ".join(f"{code} {n}" for code, n in s.stack_classes.items())
             for name, s in summaries.items() if s.stack_classes]
    if stack:  # the serving stack's: not in the errors above
        captions.append("Stack faults (the server's, not the model's; not in the rates "
                        "above): " + "; ".join(stack))
    if captions:
        table.caption = "\n".join(captions)
    return table


def tables_json(summaries: dict[str, GroupSummary],
                clustered: dict[str, ClusteredRate] | None = None,
                classes: list[tuple[str, dict[str, Rate]]] | None = None) -> dict:
    """The two tables as JSON (``--json`` of run, demo and report): one entry per column.

    ``{column: {sessions, messages, tool_calls, errors, errors_per_100,
    ci95_clustered: [lo, hi], ci95: [lo, hi], handshake: {completed, sessions}, error_sessions, side_requests, classes: {code:
    per_100}, leaks: {code: calls}, stack_faults, stack_faults_per_100, stack_classes:
    {code: faults}}}``; ``ci95_clustered`` is the clustered interval (sessions as
    clusters, from ``clustered``: ``analysis.run_tables``), the one gate and compare
    decide on, null without an interval; ``ci95`` is the Wilson interval on calls (calls
    as independent: detail, kept for readers of older output); rates are null where
    there were no calls; stack faults are the
    serving stack's (rules AE5xx), never in ``errors``; side
    requests (an agent CLI's title or memory requests the proxy saw) are in no other
    figure.
    """
    out = {}
    if classes is None:  # ``analysis.run_tables`` reads them with the summaries
        classes = class_table(summaries)
    for name, s in summaries.items():
        hs = s.handshake.completed
        out[name] = {
            "sessions": s.sessions, "messages": s.messages, "tool_calls": s.calls,
            "errors": s.errors.k, "errors_per_100": _num(s.errors.per100),
            "ci95_clustered": _clustered_pair((clustered or {}).get(name)),
            "ci95": [_num(s.errors.lo100), _num(s.errors.hi100)]
            if s.errors.per100 is not None else None,
            "handshake": {"completed": hs.k, "sessions": hs.n},
            "error_sessions": s.error_sessions, "side_requests": s.side_requests,
            "classes": {code: _num(cells[name].per100) for code, cells in classes
                        if code != TOTAL and name in cells},
            "leaks": dict(s.leaks),
            "stack_faults": s.stack_faults.k,
            "stack_faults_per_100": _num(s.stack_faults.per100),
            "stack_classes": dict(s.stack_classes),
        }
    return out


def _clustered_pair(rate: ClusteredRate | None) -> list[float | None] | None:
    if rate is None or rate.lo100 is None or rate.hi100 is None:
        return None
    return [_num(rate.lo100), _num(rate.hi100)]


def _num(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
