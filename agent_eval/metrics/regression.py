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

The allowed rise is read as a non-inferiority margin: a regression is *supported* (fail)
when the interval's low end exceeds it, *ruled out* (pass) only when the interval's upper
end is at or below it, and **inconclusive** otherwise, whichever side of the margin the
point estimate falls on.  An interval of zero width (no error on either side) rules out
nothing: its upper end is then the current run's own Wilson upper end (the baseline's
rate cannot be below 0).  Two sessions a run are the least an interval needs; with fewer
the check is inconclusive, never a pass.  An inconclusive result carries the repeats per
scenario that would decide it (:func:`repeats_to_decide`: ``agent-eval power``'s plan for
the margin, ``metrics.power.repeats_for_margin``, with ``SE ∝ 1/√repeats``), and always
the smallest rise this design detects with 80% power (``detectable_rise``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import Unit, compare_independent, detectable_rise
from agent_eval.metrics.paired import (
    POOLED_METHOD,
    WITHIN_METHOD,
    PairedComparison,
    compare_paired,
)
from agent_eval.metrics.stats import ALPHA, Rate
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
    inconclusive: bool = False  # the interval straddles the limit (or there is none)
    repeats_needed: int | None = None  # per scenario, to decide an inconclusive rise
    p_value: float | None = None  # one-sided: the rise exceeds the limit (t, same df)
    family: str = ""  # the method in general terms, the same for every target judged so
    # (the detail names only this target's scenarios and degrees of freedom)


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
                   else "sessions within scenarios, variances pooled (unequal repeats)"
                   if e.method == POOLED_METHOD
                   else "spread across scenarios")
        method = f"paired over {e.scenarios} shared scenarios (t interval, SE from {se_from}, {df} df)"
        family = f"paired over the shared scenarios (t interval, SE from {se_from})"
        specifics = f"{e.scenarios} scenarios paired, {df} df"
        mix = "" if not paired.mix.reweighted else f"; {paired.mix.statement()}"
    elif paired.stratified is not None and paired.stratified.refused is None:
        st = paired.stratified
        diff, lo, hi, se, df = st.diff100, st.lo100, st.hi100, st.se100, st.df
        method = (f"post-stratified over {len(st.cells)} shared tag strata (WLS cell means, "
                  f"session-clustered CR1 SE, t interval, {df} df); not paired: "
                  f"{paired.mix.refused}")
        family = ("post-stratified over the shared tag strata (WLS cell means, "
                  "session-clustered CR1 SE, t interval), where the scenario mix differs")
        specifics = f"{len(st.cells)} tag strata, {df} df; not paired: {paired.mix.refused}"
        mix = f"; {st.statement()}"
    else:
        ind = compare_independent(baseline, current, alpha=alpha)
        diff, lo, hi, se, df = ind.diff100, ind.lo100, ind.hi100, ind.se100, ind.df
        method = ("independent, sessions as clusters (Welch t interval); not paired: "
                  f"{paired.mix.refused}")
        family = ("independent, sessions as clusters (Welch t interval), where the runs "
                  "cannot be paired")
        specifics = f"independent, {df:.0f} df; not paired: {paired.mix.refused}"
        mix = ""
    if lo is None or diff is None or se is None or hi is None:
        return Regression(diff, None, None, False, None, method,
                          f"{counts}; too few sessions for an interval (need 2 per run): "
                          "INCONCLUSIVE, never a pass", paired, inconclusive=True,
                          family=family)
    if not se > 0:  # no spread at all: the interval has no width and rules nothing out
        hi = max(hi, Rate.of(*pb).hi100 or 0.0)
    mde = rise_under_alternative(se, df, pa[0] / pa[1], pb[0] / pb[1], alpha=alpha)
    regressed = lo > limit
    inconclusive = not regressed and not hi <= limit
    needed = (repeats_to_decide(limit, se, df, _repeats(current), alpha=alpha)
              if inconclusive and se > 0 else None)
    if regressed:
        verdict = f"even the low end {lo:+.2f} exceeds {limit:g}: a real regression"
    elif inconclusive:
        decide = ("" if needed is None else
                  f"; about {needed} repeats per scenario would decide it (an unchanged "
                  "model then passes with 80% probability: `agent-eval power`'s plan)")
        verdict = (f"INCONCLUSIVE: the interval {lo:+.2f} to {hi:+.2f} straddles {limit:g}, "
                   f"so the sample can neither confirm nor rule out a rise above it{decide}")
    else:
        verdict = f"upper end {hi:+.2f} <= {limit:g}: a rise above {limit:g} ruled out"
    power = ("" if mde is None else
             f"; smallest rise detectable at 80% power on this run: +{mde:.2f}")
    detail = (f"{counts}, change {diff:+.2f} [{ci_name(alpha)} {lo:+.2f} to {hi:+.2f}; "
              f"{specifics}]"
              f"{mix}; {verdict}{power}")
    return Regression(diff, lo, hi, regressed, mde, method, detail, paired, inconclusive,
                      needed, exceed_p(diff, limit, se, df), family)


def ci_name(alpha: float) -> str:
    """``95% CI``, or the nominal level of a sequential run's look (``99.48% CI``)."""
    if math.isclose(alpha, ALPHA):
        return f"{100 * (1 - ALPHA):g}% CI"
    from agent_eval.metrics.sequential import level_text

    return f"{level_text(1 - alpha)} CI"


def exceed_p(diff100: float, limit: float, se100: float | None, df: float) -> float | None:
    """One-sided p of "the rise exceeds ``limit``": ``P(T_df ≥ (diff − limit) / SE)``
    (``scipy.stats.t.sf``, by :mod:`agent_eval.metrics.distributions`).  It is below
    ``α/2`` exactly when the two-sided ``1 − α``
    interval's low end is above the limit, so one check alone decides as before; the
    gate adjusts these across its regression checks (Holm)."""
    if se100 is None or not se100 > 0 or not df > 0:
        return None
    from agent_eval.metrics.distributions import norm_sf, t_sf

    t = (diff100 - limit) / se100
    return norm_sf(t) if math.isinf(df) else t_sf(t, df)


def rise_under_alternative(se100: float | None, df: float, pa: float, pb: float, *,
                           alpha: float = ALPHA, power: float = 0.8) -> float | None:
    """The smallest rise caught with ``power``, with the standard error taken where the rise
    is: the observed SE rescaled by the binomial variances, ``SE(δ) = SE · √((v(p_a) +
    v(p_a + δ)) / (v(p_a) + v(p_b)))``, ``v(p) = p(1 − p)``, and ``δ = (t_{1−α/2} +
    t_power) · SE(δ)`` solved by Brent's method (``distributions.brentq``).  The SE under no change
    named a rise caught with only 67–75% power."""
    plain = detectable_rise(se100, df, alpha=alpha, power=power)
    base = pa * (1 - pa) + pb * (1 - pb)
    if plain is None or se100 is None or base <= 0 or pa >= 1:
        return plain
    from agent_eval.metrics.distributions import brentq

    factor = plain / se100

    def gap(delta: float) -> float:
        q = min(1.0, pa + delta / 100)
        return delta - factor * se100 * math.sqrt((pa * (1 - pa) + q * (1 - q)) / base)

    low, top = 1e-9, 100 * (1 - pa)  # δ = 0 is a root when the baseline has no errors
    if gap(top) < 0 or gap(low) >= 0:
        return None
    return brentq(gap, low, top, xtol=1e-10)


def repeats_to_decide(margin100: float, se100: float, df: float, repeats: int, *,
                      alpha: float = ALPHA, power: float = 0.8) -> int | None:
    """Repeats per scenario (in both runs) at which an unchanged model passes a margin
    of ``margin100`` with probability ``power``: ``agent-eval power``'s rule
    (``metrics.power.repeats_for_margin``), the standard error shrinking as
    ``1/√repeats`` from ``se100`` at ``repeats``.  At least one more than ``repeats``;
    ``None`` when it cannot be said."""
    from agent_eval.metrics.power import repeats_for_margin

    if repeats < 1:
        return None
    needed = repeats_for_margin(se100 * math.sqrt(repeats), margin100, df, alpha=alpha,
                                power=power)
    return None if needed is None else max(repeats + 1, needed)


def _repeats(stats: TargetStats) -> int:
    """Sessions per scenario of a run: the fewest over its scenarios (at least 1)."""
    return max(1, min((s.sessions for s in stats.scenarios.values()), default=1))


def _rate(stats: TargetStats) -> tuple[int, int]:
    whole = stats.errors
    return whole.k, whole.n or 1
