"""The index's "By scenario" and "By tag" tables: errors per 100 tool calls for each
scenario (or tag) under each column, so a target's total can be traced to the tasks that
produced it.

Counted as ``metrics.summarize(by="scenario" | "tag")`` counts, from the per-session call
and denial counts the index already took in its one pass over calls (no second pass):
sessions that ended in a server or harness fault are left out; a session counts once in
each of its tags, so tag rows may add up to more than the total; an untagged session is
in no tag row.  Each cell reads ``errors/100 [95% CI] · completed/sessions``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from agent_eval.metrics import Rate
from agent_eval.transcript import SessionRow

BreakdownBy = Literal["scenario", "tag"]
EMPTY_CELL = "–"


@dataclass(frozen=True, slots=True)
class BreakdownCell:
    """One (group, column) pair: non-error sessions, how many completed, the error rate."""

    sessions: int
    completed: int
    errors: Rate

    @property
    def text(self) -> str:
        rate = self.errors
        if rate.per100 is None:
            figure = "– (no calls)"
        else:
            figure = f"{rate.per100:.2f} [{rate.lo100:.1f}–{rate.hi100:.1f}]"
        return f"{figure} · {self.completed}/{self.sessions} completed"


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    name: str  # the scenario or the tag
    cells: tuple[BreakdownCell | None, ...]  # one per column; None: no session there

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(EMPTY_CELL if c is None else c.text for c in self.cells)


def breakdown_rows(
    sessions: Iterable[SessionRow],
    calls: Mapping[int, int],
    denials: Mapping[int, int],
    columns: tuple[str, ...],
    *,
    by: BreakdownBy,
) -> tuple[BreakdownRow, ...]:
    """Rows for ``by="scenario"`` or ``by="tag"``; groups in the order they first appear.

    ``sessions`` are named by column (``SessionRow.target``); ``calls`` / ``denials`` map
    a session id to its call and denied-call counts.
    """
    keys = _keys(by)
    tally: dict[tuple[str, str], Counter] = {}
    order: dict[str, None] = {}
    for s in sessions:
        if s.status == "error":
            continue
        for key in keys(s):
            order.setdefault(key, None)
            counts = tally.setdefault((key, s.target), Counter())
            counts["sessions"] += 1
            counts["completed"] += s.status == "completed"
            counts["calls"] += calls.get(s.id, 0)
            counts["denied"] += denials.get(s.id, 0)
    rows = []
    for key in order:
        cells = []
        for column in columns:
            counts = tally.get((key, column))
            cells.append(None if counts is None else BreakdownCell(
                counts["sessions"], counts["completed"],
                Rate.of(counts["denied"], counts["calls"])))
        rows.append(BreakdownRow(key, tuple(cells)))
    return tuple(rows)


def _keys(by: BreakdownBy) -> Callable[[SessionRow], tuple[str, ...]]:
    if by == "scenario":
        return lambda s: (s.scenario,)
    if by == "tag":
        return lambda s: tuple(dict.fromkeys(s.tags))
    raise ValueError(f"unknown breakdown {by!r}; expected scenario or tag")
