"""The index's "By scenario" and "By tag" tables: errors per 100 tool calls for each
scenario (or tag) under each column, so a target's total can be traced to the tasks that
produced it.

Counted by the store's aggregator (``Store.summarize`` by (scenario or tag, column)):
sessions that ended in a server or harness fault are left out; a session counts once in
each of its tags, so tag rows may add up to more than the total; an untagged session is
in no tag row.  Each cell reads ``errors/100 [95% CI] · completed/sessions``: in the
"By scenario" table the interval is the clustered one (the scenario's sessions as
clusters, from the same sums as the per-target table: ``Store.cluster_stats``), the kind
gate and compare decide on; a tag spans scenarios and has no such sums, so the "By tag"
table keeps the Wilson interval on calls (calls as independent), and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agent_eval.metrics import GroupSummary, Rate
from agent_eval.metrics.clustered import ClusteredRate, clustered_text, units_rate
from agent_eval.metrics.sufficient import TargetStats

EMPTY_CELL = "–"


@dataclass(frozen=True, slots=True)
class BreakdownCell:
    """One (group, column) pair: non-error sessions, how many completed, the error rate."""

    sessions: int
    completed: int
    errors: Rate
    clustered: ClusteredRate | None = None  # sessions as clusters, when its sums were read

    @property
    def text(self) -> str:
        rate = self.errors
        if rate.per100 is None:
            figure = "– (no calls)"
        elif self.clustered is not None and self.clustered.per100 is not None:
            figure = clustered_text(self.clustered)
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


def breakdown_rows(figures: Mapping[tuple[str, str], GroupSummary],
                   columns: tuple[str, ...], order: Iterable[str],
                   clustered: Mapping[str, TargetStats] | None = None
                   ) -> tuple[BreakdownRow, ...]:
    """Rows from the aggregator's figures per (scenario or tag, column)
    (``Store.summarize(by=(key, "target"), columns=True)``), in ``order`` (the scenarios or
    tags as the non-error sessions first name them); a group or a cell with only faulted
    sessions shows none.  ``clustered`` (per column, its sums per scenario: by scenario
    only) gives each cell its clustered interval."""
    cells: dict[str, dict[str, BreakdownCell]] = {}
    for (name, column), s in figures.items():
        if s.sessions:
            sums = (clustered or {}).get(column)
            one = None
            if sums is not None and name in sums.scenarios:
                one = units_rate(TargetStats({name: sums.scenarios[name]}))
            cells.setdefault(name, {})[column] = BreakdownCell(
                s.sessions, s.exit_states["completed"], s.errors, one)
    return tuple(BreakdownRow(name, tuple(cells[name].get(column) for column in columns))
                 for name in dict.fromkeys(order) if name in cells)
