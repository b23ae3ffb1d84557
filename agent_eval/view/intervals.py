"""The viewer's clustered intervals and session-level comparison (docs/statistics.md).

Calls of one session err together, so the run page shows, beside Wilson's interval, the
clustered one (sessions as clusters, Korn–Graubard) with its design effect, per target and
per failure class; the compare page shows, per common target, the same session-level
analysis `agent-eval compare` prints (paired over shared scenarios, post-stratified to the
shared tag mix, or independent), each with its method named.  The numbers come from the
library functions the CLI calls (``summarize_clustered``; the compare page's from
``analysis.compare_stored.compare_stored``, the CLI's own call) over the same session
units (``session_units``), summed per scenario in SQL (``store.cluster_stats``) as the CLI
sums them, so a page and the CLI never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import (
    CLUSTERED_METHOD,
    ClusteredRate,
    Unit,
    summarize_clustered,
)
from agent_eval.metrics.stats import wilson_interval
from agent_eval.metrics.sufficient import TargetStats, as_stats
from agent_eval.policy import RULES, get_rule
from agent_eval.report.lists import ListCell as Cell
from agent_eval.store import Store

CLUSTERED_HEAD = ("target", "errors/100", "clustered 95% CI (sessions)", "Wilson 95% CI (calls)",
                  "design effect", "sessions", "across tasks 95% CI (scenarios)")


@dataclass(frozen=True, slots=True)
class ClusteredView:
    """The run page's clustered tables: errors/100 per target, then each class's rate."""

    head: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    class_head: tuple[str, ...]
    class_rows: tuple[tuple[Cell, ...], ...]
    method: str = CLUSTERED_METHOD


def run_units(store: Store, run_id: int, *, classes: bool = False,
              outcomes: bool = False) -> dict[str, TargetStats]:
    """Per-target sums of one run's session clusters: what ``session_units`` gives the CLI
    (children folded into their root, faulted sessions left out), summed per scenario in
    SQL (``store.cluster_stats``), so a page never builds an object per session.
    ``classes``: also per failure class (the run page); ``outcomes``: each session's pass
    (the compare page's pass rates and McNemar test, as ``agent-eval compare``)."""
    return store.cluster_stats([run_id], classes=classes, passes=outcomes)


def clustered_view(units: Mapping[str, Sequence[Unit] | TargetStats],
                   targets: Sequence[str]) -> ClusteredView:
    """Rows for every target (in page order) from ``summarize_clustered``."""
    by_target = {name: as_stats(us) for name, us in units.items()}
    found = {code for stats in by_target.values() for s in stats.scenarios.values()
             for code in s.classes}
    codes = [c for c in RULES if c in found] + sorted(found - set(RULES))
    summaries = {name: summarize_clustered(by_target.get(name, ()), codes) for name in targets}
    rows = []
    for name, s in summaries.items():
        e, across = s.errors, s.across_tasks
        wilson = "–" if not e.n else _ci(*(100 * x for x in wilson_interval(e.k, e.n)))
        rows.append(tuple(Cell(t) for t in (
            name, "–" if e.per100 is None else f"{e.per100:.2f}", _clustered(e), wilson,
            "–" if e.deff is None else f"{e.deff:.2f}", str(e.clusters), _clustered(across))))
    class_rows = []
    for code in codes:
        rule = get_rule(code)
        class_rows.append((Cell(f"{code} {rule.name}" if rule else code),
                           *(Cell(_clustered(summaries[name].classes[code])) for name in targets)))
    return ClusteredView(CLUSTERED_HEAD, tuple(rows), ("failure class", *targets),
                         tuple(class_rows))


def _clustered(rate: ClusteredRate) -> str:
    if rate.per100 is None:
        return "–"
    if rate.lo100 is None or rate.hi100 is None:  # both or neither
        return f"no interval ({rate.clusters} {'session' if rate.by == 'session' else 'scenario'})"
    return _ci(rate.lo100, rate.hi100) + (" few clusters" if rate.few_clusters else "")


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:.2f}–{hi:.2f}]"


@dataclass(frozen=True, slots=True)
class TargetAnalysis:
    """One common target of the compare page: the lines `agent-eval compare` prints."""

    target: str
    lines: tuple[str, ...]
