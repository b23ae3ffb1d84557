"""The gate's regression rule on session units: paired when the runs share scenarios.

``current − baseline`` in errors/100, with the interval the decision rests on:

1. the **paired** interval over the shared scenarios (``agent_eval.metrics.paired``) when
   the mixes overlap enough: the spread between scenarios cancels, so it is the
   narrowest honest interval;
2. otherwise, when the sessions carry tags shared enough, the interval **post-stratified**
   to the shared tag mix (``agent_eval.metrics.stratified``);
3. otherwise the **independent** interval, sessions as clusters
   (``agent_eval.metrics.clustered.compare_independent``), and the reason paired did not
   apply.

A regression is *supported* when the interval's low end exceeds the allowed rise.  The
result also carries the smallest rise this design detects with 80% power
(``detectable_rise``), so a passing gate says what it could not have seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import Unit, compare_independent, detectable_rise
from agent_eval.metrics.paired import WITHIN_METHOD, PairedComparison, compare_paired
from agent_eval.metrics.stats import ALPHA
from agent_eval.metrics.sufficient import TargetStats, as_stats


@dataclass(frozen=True, slots=True)
class Regression:
    """The regression verdict for one target: numbers, method, and the detail line."""

    diff100: float | None
    lo100: float | None
    hi100: float | None
    regressed: bool
    detectable100: float | None
    method: str
    detail: str
    paired: PairedComparison | None


def regression_from_units(baseline: Sequence[Unit] | TargetStats,
                          current: Sequence[Unit] | TargetStats, limit: float,
                          *, alpha: float = ALPHA) -> Regression:
    """Judge ``current`` against ``baseline`` (one target's units, or their sums, each)."""
    baseline, current = as_stats(baseline), as_stats(current)
    pa, pb = _rate(baseline), _rate(current)
    counts = (f"errors/100 {100 * pa[0] / pa[1]:.2f} ({pa[0]}/{pa[1]}) -> "
              f"{100 * pb[0] / pb[1]:.2f} ({pb[0]}/{pb[1]})")
    paired = compare_paired(baseline, current, alpha=alpha)
    diff: float | None
    lo: float | None
    hi: float | None
    se: float | None
    df: float
    if paired.errors is not None:
        e = paired.errors
        diff, lo, hi, se, df = e.diff100, e.lo100, e.hi100, e.se100, e.df
        se_from = ("sessions within scenarios" if e.method == WITHIN_METHOD
                   else "spread across scenarios")
        method = f"paired over {e.scenarios} shared scenarios (t interval, SE from {se_from}, {df} df)"
        mix = "" if not paired.mix.reweighted else f"; {paired.mix.statement()}"
    elif paired.stratified is not None and paired.stratified.refused is None:
        st = paired.stratified
        diff, lo, hi, se, df = st.diff100, st.lo100, st.hi100, st.se100, st.df
        method = (f"post-stratified over {len(st.cells)} shared tag strata (statsmodels WLS, "
                  f"session-clustered CR1 SE, t interval, {df} df); not paired: "
                  f"{paired.mix.refused}")
        mix = f"; {st.statement()}"
    else:
        ind = compare_independent(baseline, current, alpha=alpha)
        diff, lo, hi, se, df = ind.diff100, ind.lo100, ind.hi100, ind.se100, ind.df
        method = ("independent, sessions as clusters (Welch t interval); not paired: "
                  f"{paired.mix.refused}")
        mix = ""
    if lo is None or diff is None:
        return Regression(diff, None, None, False, None, method,
                          f"{counts}; too few sessions for an interval (need 2 per run): "
                          "not judged", paired)
    mde = detectable_rise(se, df, alpha=alpha)
    regressed = lo > limit
    if regressed:
        verdict = f"even the low end {lo:+.2f} exceeds {limit:g}: a real regression"
    elif diff > limit:
        verdict = (f"above {limit:g} but the interval reaches {lo:+.2f}: not supported by "
                   "the sample (noise)")
    else:
        verdict = f"within {limit:g}"
    power = ("" if mde is None else
             f"; smallest rise detectable at 80% power on this run: +{mde:.2f}")
    detail = (f"{counts}, change {diff:+.2f} [95% CI {lo:+.2f} to {hi:+.2f}, {method}]"
              f"{mix}; {verdict}{power}")
    return Regression(diff, lo, hi, regressed, mde, method, detail, paired)


def _rate(stats: TargetStats) -> tuple[int, int]:
    whole = stats.errors
    return whole.k, whole.n or 1
