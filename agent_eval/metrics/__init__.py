"""Metrics: pure functions over stored rows (``SessionRow``, ``CallRow``, ``TurnRow``).

No I/O and no store import: the store yields rows, these functions count them, and
reports, the gate and ``compare`` format the results.  Stdlib ``math`` only.

Public surface::

    summarize(sessions, calls, turns=(), *, by="target") -> dict[str, GroupSummary]
    class_table(summaries) -> list[tuple[code, dict[group, Rate]]]   # ends with "total"
    compare_groups(a, b) -> GroupComparison
    compare_rates(k1, n1, k2, n2) -> RateComparison                  # b − a, z-test, Fisher
    repeat_stats(sessions, calls) -> dict[(target, scenario), RepeatStats]
    summarize_repeats(stats, *, k=None) -> dict[target, RepeatSummary]
    flipped_scenarios(sessions_a, calls_a, sessions_b, calls_b) -> list[ScenarioFlip]
    wilson_interval(k, n) -> (lo, hi);  Rate.of(k, n);  percentile(values, q)

Modules split along the data: ``stats`` (numbers), ``classes`` (failure-class order),
``summary`` (per-group aggregation), ``repeats`` (pass^k, flips), ``compare`` (a vs b).
"""

from agent_eval.metrics.classes import PRECEDENCE, TOTAL, UNCLASSIFIED, class_table, order_classes
from agent_eval.metrics.compare import GroupComparison, compare_groups
from agent_eval.metrics.repeats import (
    FlipDirection,
    RepeatStats,
    RepeatSummary,
    ScenarioFlip,
    flipped_scenarios,
    repeat_stats,
    summarize_repeats,
)
from agent_eval.metrics.stats import (
    FISHER_TEST,
    Z95,
    Z_TEST,
    Rate,
    RateComparison,
    compare_rates,
    fisher_exact_p,
    percentile,
    wilson_interval,
)
from agent_eval.metrics.summary import (
    GROUP_BYS,
    GroupBy,
    GroupSummary,
    HandshakeStats,
    RecoveryStats,
    SpeedStats,
    group_keys,
    summarize,
)

__all__ = [
    "FISHER_TEST",
    "GROUP_BYS",
    "PRECEDENCE",
    "TOTAL",
    "UNCLASSIFIED",
    "Z95",
    "Z_TEST",
    "FlipDirection",
    "GroupBy",
    "GroupComparison",
    "GroupSummary",
    "HandshakeStats",
    "Rate",
    "RateComparison",
    "RecoveryStats",
    "RepeatStats",
    "RepeatSummary",
    "ScenarioFlip",
    "SpeedStats",
    "class_table",
    "compare_groups",
    "compare_rates",
    "fisher_exact_p",
    "flipped_scenarios",
    "group_keys",
    "order_classes",
    "percentile",
    "repeat_stats",
    "summarize",
    "summarize_repeats",
    "wilson_interval",
]
