"""The index's "By scenario" and "By tag" tables: errors per 100 tool calls for each
scenario (or tag) under each column, so a target's total can be traced to the tasks that
produced it.

Counted by the store's aggregator (``Store.summarize`` by (scenario or tag, column)):
sessions that ended in a server or harness fault are left out; a session counts once in
each of its tags, so tag rows may add up to more than the total; an untagged session is
in no tag row.  Each cell reads ``errors/100 [95% CI] · completed/sessions``: in the
interval is the clustered one (sessions as clusters), the kind gate and compare decide
on: by scenario from the same sums as the per-target table (``Store.cluster_stats``), by
tag from the sums of the sessions carrying the tag, stratified by scenario
(``Store.tag_cluster_stats``).  The Wilson interval on calls is shown only where no
clustered sums were read.
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


def scenario_rates(clustered: Mapping[str, TargetStats]
                   ) -> dict[tuple[str, str], ClusteredRate]:
    """(scenario, column) -> the clustered rate of the column's sessions of the scenario,
    from the per-target sums (``Store.cluster_stats``)."""
    return {(scenario, column): units_rate(TargetStats({scenario: stats}))
            for column, sums in clustered.items() for scenario, stats in sums.scenarios.items()}


def tag_rates(clustered: Mapping[tuple[str, str], TargetStats]
              ) -> dict[tuple[str, str], ClusteredRate]:
    """(tag, column) -> the clustered rate of the clusters carrying the tag, stratified by
    scenario (``Store.tag_cluster_stats``)."""
    return {key: units_rate(stats) for key, stats in clustered.items()}


def breakdown_rows(figures: Mapping[tuple[str, str], GroupSummary],
                   columns: tuple[str, ...], order: Iterable[str],
                   clustered: Mapping[tuple[str, str], ClusteredRate] | None = None
                   ) -> tuple[BreakdownRow, ...]:
    """Rows from the aggregator's figures per (scenario or tag, column)
    (``Store.summarize(by=(key, "target"), columns=True)``), in ``order`` (the scenarios or
    tags as the non-error sessions first name them); a group or a cell with only faulted
    sessions shows none.  ``clustered`` (:func:`scenario_rates`, :func:`tag_rates`) gives
    each cell its clustered interval."""
    cells: dict[str, dict[str, BreakdownCell]] = {}
    for (name, column), s in figures.items():
        if s.sessions:
            cells.setdefault(name, {})[column] = BreakdownCell(
                s.sessions, s.exit_states["completed"], s.errors,
                (clustered or {}).get((name, column)))
    return tuple(BreakdownRow(name, tuple(cells[name].get(column) for column in columns))
                 for name in dict.fromkeys(order) if name in cells)
