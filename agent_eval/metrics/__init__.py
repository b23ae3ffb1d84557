"""Metrics: pure functions over stored rows (``SessionRow``, ``CallRow``, ``TurnRow``).

No I/O and no store import: the store yields rows, these functions count them, and
reports, the gate and ``compare`` format the results.  Quantiles and tests from
``agent_eval.metrics.distributions`` (by hand, held to ``scipy.stats`` by the tests: the
core install carries neither scipy nor numpy).

Public surface::

    summarize(sessions, calls, turns=(), *, by="target") -> dict[str, GroupSummary]
    class_table(summaries) -> list[tuple[code, dict[group, Rate]]]   # ends with "total"
    compare_groups(a, b) -> GroupComparison
    compare_rates(k1, n1, k2, n2) -> RateComparison                  # b − a, z-test, Fisher
    repeat_stats(sessions, calls) -> dict[(target, scenario), RepeatStats]
    summarize_repeats(stats, *, k=None) -> dict[target, RepeatSummary]
    flipped_scenarios(sessions_a, calls_a, sessions_b, calls_b) -> list[ScenarioFlip]
    wilson_interval(k, n) -> (lo, hi);  Rate.of(k, n);  percentile(values, q)

    session_units(sessions, calls) -> list[Unit]                     # one per session
    units_rate(units, code=None, by="session") -> ClusteredRate      # clustered interval
    summarize_clustered(units, codes) -> ClusteredSummary
    compare_paired(units_a, units_b) -> PairedComparison             # shared scenarios
    compare_independent(units_a, units_b) -> ClusteredDiff
    regression_from_units(base, current, limit) -> Regression        # the gate's rule
      (in these five, ``units`` may be their sums per scenario: ``sufficient.TargetStats``)
    plan_power(units, detect) -> PowerPlan                           # agent-eval power

Modules split along the data: ``stats`` (numbers), ``classes`` (failure-class order),
``summary`` (per-group aggregation), ``repeats`` (pass^k, flips), ``compare`` (a vs b),
``clustered`` (sessions as clusters), ``sufficient`` (the per-scenario sums those
statistics are computed from), ``paired`` (scenario by scenario, mix matching),
``regression`` (the gate's baseline rule), ``power`` (run planning); docs/statistics.md.
"""

from typing import TYPE_CHECKING

from agent_eval import lazy_attributes

if TYPE_CHECKING:  # the names below load with their module on first use (``__getattr__``)
    from agent_eval.metrics.classes import (
        PRECEDENCE,
        TOTAL,
        UNCLASSIFIED,
        class_table,
        order_classes,
    )
    from agent_eval.metrics.clustered import (
        ClusteredDiff,
        ClusteredRate,
        ClusteredSummary,
        Unit,
        compare_independent,
        session_units,
        summarize_clustered,
        units_by_target,
        units_rate,
    )
    from agent_eval.metrics.compare import GroupComparison, compare_groups
    from agent_eval.metrics.paired import PairedComparison, PairedDiff, compare_paired
    from agent_eval.metrics.power import PowerPlan, plan_power
    from agent_eval.metrics.regression import Regression, regression_from_units
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

_HOME = {
    **dict.fromkeys(("PRECEDENCE", "TOTAL", "UNCLASSIFIED", "class_table", "order_classes"),
                    "classes"),
    **dict.fromkeys(("ClusteredDiff", "ClusteredRate", "ClusteredSummary", "Unit",
                     "compare_independent", "session_units", "summarize_clustered",
                     "units_by_target", "units_rate"), "clustered"),
    **dict.fromkeys(("GroupComparison", "compare_groups"), "compare"),
    **dict.fromkeys(("PairedComparison", "PairedDiff", "compare_paired"), "paired"),
    **dict.fromkeys(("PowerPlan", "plan_power"), "power"),
    **dict.fromkeys(("Regression", "regression_from_units"), "regression"),
    **dict.fromkeys(("FlipDirection", "RepeatStats", "RepeatSummary", "ScenarioFlip",
                     "flipped_scenarios", "repeat_stats", "summarize_repeats"), "repeats"),
    **dict.fromkeys(("FISHER_TEST", "Rate", "RateComparison", "Z95", "Z_TEST", "compare_rates",
                     "fisher_exact_p", "percentile", "wilson_interval"), "stats"),
    **dict.fromkeys(("GROUP_BYS", "GroupBy", "GroupSummary", "HandshakeStats", "RecoveryStats",
                     "SpeedStats", "group_keys", "summarize"), "summary"),
}


# ``from agent_eval.metrics import summarize`` loads ``metrics.summary`` then, and only it:
# a run reads a few figures at its end and never plans power or compares.
__getattr__ = lazy_attributes(__name__, _HOME, globals())


__all__ = [
    "ClusteredDiff",
    "ClusteredRate",
    "ClusteredSummary",
    "PairedComparison",
    "PairedDiff",
    "PowerPlan",
    "Regression",
    "Unit",
    "compare_independent",
    "compare_paired",
    "plan_power",
    "regression_from_units",
    "session_units",
    "summarize_clustered",
    "units_by_target",
    "units_rate",
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
