"""Paired comparisons of two runs over the scenarios they share, and mix matching.

Two runs of the same suite share scenarios, and scenarios differ far more from each other
than runs do; comparing scenario by scenario removes that spread (docs/statistics.md).

* **Mix**: the shared scenarios (both runs ran them, with calls on both sides).  When the
  runs hold different mixes the comparison is restricted to the shared mix and every
  scenario weighted by its pooled calls (post-stratification to the shared mix); when the
  shared mix holds fewer than :data:`MIN_SHARED_SCENARIOS` scenarios, or less than
  :data:`MIN_SHARED_SHARE` of either run's calls, no difference is called (``refused``).
* **errors/100**: ``D = Σ w_s (r_b,s − r_a,s)``, its interval a Student-t interval.  When
  every shared scenario has two or more sessions on each side, the standard error comes
  from the sessions inside each scenario (sessions as clusters, scenarios as strata: the
  suite is fixed, the sessions are the sample) on Welch–Satterthwaite degrees of
  freedom; with single repeats, from the spread of the differences across scenarios
  (scenarios as clusters) on ``S − 1``.  Either way never below the binomial SE.  Its
  p-value a paired permutation test (``scipy.stats.permutation_test``'s, by hand in
  :func:`agent_eval.metrics.distributions.paired_permutation_p`: swapping the two runs
  within each scenario; exact for up to 13 scenarios).
* **tag mix**: when the scenario mix is refused and the sessions carry tags, the runs are
  compared post-stratified to their shared tag mix (``agent_eval.metrics.stratified``).
* **pass rate**: the same on each scenario's share of passing repeats, plus the exact
  McNemar test on scenario pairs (the scenario is the matched unit; its outcome: every one
  of its first ``min(R_a, R_b)`` repeats passed, the same count on both sides, so a run
  with more repeats is not less likely to pass) by the exact binomial test on the
  discordant scenarios (:func:`agent_eval.metrics.distributions.binomtest_p`, scipy's
  ``binomtest``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_eval.metrics.clustered import Unit, t_quantile
from agent_eval.metrics.distributions import binomtest_p, paired_permutation_p, t_cdf
from agent_eval.metrics.stats import ALPHA
from agent_eval.metrics.stratified import StratifiedDiff, compare_poststratified, stratified_lines
from agent_eval.metrics.sufficient import (
    Passes,
    Sums,
    TargetStats,
    as_stats,
    pooled_variance,
)

MIN_SHARED_SCENARIOS = 3
MIN_SHARED_SHARE = 0.5
PERMUTATIONS = 9999
PAIRED_METHOD = ("paired over shared scenarios: Student-t interval (scenario-clustered SE, "
                 "S−1 df); p from a paired permutation test")
WITHIN_METHOD = ("paired over shared scenarios: Student-t interval, SE from the sessions "
                 "inside each scenario (sessions as clusters, scenarios as strata); p from a "
                 "paired permutation test over scenarios")
POOLED_METHOD = ("paired over shared scenarios: Student-t interval, SE from the sessions "
                 "inside each scenario with the two runs' session variances pooled (unequal "
                 "repeats: Welch's form over-trusts the run with fewer); p from the same t "
                 "(a permutation within scenarios would swap unequal means)")
PAIRED_T_METHOD = ("paired over shared scenarios: Student-t interval (scenario-clustered SE, "
                   "S−1 df); p from the same t (unequal repeats: a permutation would swap "
                   "a scenario's means over different numbers of sessions)")
MCNEMAR_METHOD = ("exact McNemar test on scenario pairs, outcome every one of the first "
                  "min(repeats of a, repeats of b) repeats passed on each side "
                  "(exact binomial test on the discordant scenarios)")


@dataclass(frozen=True, slots=True)
class ScenarioCell:
    """One scenario on one side: calls, errors and repeat outcomes (``None``: not read)."""

    calls: int
    errors: int
    passes: Passes | None  # in (repeat, passed) order
    sessions: Sums = Sums()  # of (errors, calls) over the sessions with calls

    @property
    def rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    @property
    def pass_share(self) -> float:
        p = self.passes
        return p.passed / p.n if p is not None and p.n else 0.0


@dataclass(frozen=True, slots=True)
class PairedDiff:
    """``b − a`` (per 100) over the shared scenarios, with its interval and paired p.

    The permutation p is drawn the first time it is read (``permuted`` holds the
    scenarios' ``(a, b, w)`` until then): the gate decides on the interval alone and
    never pays for the resamples."""

    diff100: float
    lo100: float
    hi100: float
    se100: float
    df: int
    permuted: tuple | float = field(compare=False)  # the p, or the (a, b, w, seed) behind it
    scenarios: int
    alpha: float = ALPHA
    method: str = PAIRED_METHOD

    @property
    def p_value(self) -> float:
        if isinstance(self.permuted, tuple):
            object.__setattr__(self, "permuted", permutation_p(*self.permuted[:3],
                                                              seed=self.permuted[3]))
        assert isinstance(self.permuted, float)
        return self.permuted

    @property
    def significant(self) -> bool:
        return self.p_value < self.alpha


@dataclass(frozen=True, slots=True)
class McNemar:
    """Matched pairs where exactly one side passed: ``a_only`` (a passed, b failed) and
    ``b_only``; ``p_value`` is the exact two-sided McNemar p.  In ``compare`` a pair is a
    shared scenario and its outcome every one of its first ``min(R_a, R_b)`` repeats
    passed (the matched unit is the scenario: pairing repeat ``i`` with repeat ``i`` is
    arbitrary, and reordering the same sessions moved p from 0.040 to 0.082); with equal
    repeats the discordant pairs are the flips."""

    pairs: int
    a_only: int
    b_only: int
    p_value: float
    method: str = MCNEMAR_METHOD


@dataclass(frozen=True, slots=True)
class MixMatch:
    """Which scenarios the comparison used and how much of each run they cover."""

    shared: tuple[str, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    share_a: float  # shared calls / all calls of a
    share_b: float
    reweighted: bool  # the mixes differ: restricted to the shared mix, weights = pooled calls
    refused: str | None  # why no difference is called, or None

    def statement(self) -> str:
        """One line naming the mix the comparison was made on."""
        if self.refused:
            return f"no paired difference called: {self.refused}"
        head = f"compared on {len(self.shared)} shared scenarios"
        if not self.reweighted:
            return head + " (the same mix in both runs), weighted by pooled calls"
        return (f"{head} covering {100 * self.share_a:.0f}% of a's calls and "
                f"{100 * self.share_b:.0f}% of b's (post-stratified to the shared mix; left "
                f"out: {len(self.only_a)} scenarios only in a, {len(self.only_b)} only in b)")


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Run b against run a, scenario by scenario.  ``errors`` and ``passes`` are ``None``
    when the mix was refused; then ``stratified`` holds the comparison post-stratified to
    the shared tag mix (``agent_eval.metrics.stratified``), itself perhaps refused."""

    mix: MixMatch
    errors: PairedDiff | None
    passes: PairedDiff | None
    mcnemar: McNemar | None
    stratified: StratifiedDiff | None = None


def scenario_cells(units: Iterable[Unit] | TargetStats) -> dict[str, ScenarioCell]:
    """Pool units (sessions) per scenario."""
    return {name: ScenarioCell(s.errors.n, s.errors.k, s.passes, s.errors)
            for name, s in as_stats(units).scenarios.items()}


def match_mix(a: dict[str, ScenarioCell], b: dict[str, ScenarioCell], *,
              min_scenarios: int = MIN_SHARED_SCENARIOS,
              min_share: float = MIN_SHARED_SHARE) -> MixMatch:
    """The shared mix of two runs and whether it is enough to call a difference."""
    shared = tuple(s for s in a if s in b and a[s].calls and b[s].calls)
    only_a = tuple(s for s in a if s not in shared)
    only_b = tuple(s for s in b if s not in shared)
    total_a = sum(c.calls for c in a.values())
    total_b = sum(c.calls for c in b.values())
    share_a = sum(a[s].calls for s in shared) / total_a if total_a else 0.0
    share_b = sum(b[s].calls for s in shared) / total_b if total_b else 0.0
    refused = None
    if len(shared) < min_scenarios:
        refused = (f"only {len(shared)} shared scenarios with calls on both sides "
                   f"(need {min_scenarios})")
    elif min(share_a, share_b) < min_share:
        refused = (f"the shared mix covers {100 * share_a:.0f}% of a's calls and "
                   f"{100 * share_b:.0f}% of b's (need {100 * min_share:.0f}% of each)")
    return MixMatch(shared, only_a, only_b, share_a, share_b,
                    bool(only_a or only_b), refused)


def paired_difference(xa: Sequence[float], xb: Sequence[float], weights: Sequence[float], *,
                      alpha: float = ALPHA, seed: int = 0,
                      floor: Sequence[float] | None = None,
                      within: tuple | None = None, t_p: bool = False) -> PairedDiff:
    """Weighted paired difference ``Σ w (xb − xa)`` (weights normalised), per 100.

    ``floor`` (one binomial variance of ``xb − xa`` per scenario) bounds the variance
    from below by ``Σ w² floor``: the paired SE is never smaller than independent calls
    would give, so identical shifts in every scenario do not make a zero-width interval.
    ``within`` = (variance of each ``xb − xa`` from the sessions inside the scenario, degrees
    of freedom[, method]) replaces the spread of the differences across scenarios: the suite's
    scenarios are then fixed, not a sample (:data:`WITHIN_METHOD`).  ``t_p`` takes the p
    from the interval's t instead of the permutation test (unequal repeats, where the two
    runs' values of a scenario are not exchangeable); so does the pooled method.

    Hand example: xa = (0.1, 0.2, 0.3), xb = (0.2, 0.2, 0.5), equal weights: d = (0.1, 0,
    0.2), D = 0.1, SE² = 3/2 · Σ (1/3)² (d − D)² = 0.01/3, t(2) = 4.303.
    """
    a, b = tuple(map(float, xa)), tuple(map(float, xb))
    total_w = math.fsum(weights)
    w = tuple(float(x) / total_w for x in weights)
    d = [y - x for x, y in zip(a, b, strict=True)]
    s = len(d)
    diff = math.fsum(wi * di for wi, di in zip(w, d, strict=True))
    var = (s / (s - 1) * math.fsum(wi * wi * (di - diff) ** 2 for wi, di in zip(w, d, strict=True))
           if s > 1 else math.nan)
    df, method = max(0, s - 1), PAIRED_METHOD
    if within is not None and s > 1:
        var = math.fsum(wi * wi * float(v) for wi, v in zip(w, within[0], strict=True))
        df = within[1]
        method = within[2] if len(within) > 2 else WITHIN_METHOD
    if floor is not None and s > 1:
        var = max(var, math.fsum(wi * wi * float(v) for wi, v in zip(w, floor, strict=True)))
    se = math.sqrt(var) if s > 1 else math.nan
    half = t_quantile(df, alpha) * se if s > 1 else math.inf
    p: tuple | float = (a, b, w, seed) if s > 1 else 1.0
    if t_p and within is None:
        method = PAIRED_T_METHOD
    if (t_p or method == POOLED_METHOD) and s > 1 and se > 0:
        # unequal repeats: swapping the runs within a scenario swaps a mean of 1 session
        # with a mean of 10, which are not exchangeable (the permutation p called 20% of
        # unchanged 1-vs-10 pairs at design effect 4): the t of the interval decides
        p = min(1.0, 2 * t_cdf(-abs(diff) / se, df))  # scipy.special.stdtr(df, x)
    return PairedDiff(100 * diff, 100 * (diff - half), 100 * (diff + half), 100 * se,
                      df, p, s, alpha, method)


def permutation_p(a: Sequence[float], b: Sequence[float], w: Sequence[float], *,
                  seed: int = 0) -> float:
    """Two-sided p of the paired permutation test of ``Σ w (b − a)``
    (:func:`agent_eval.metrics.distributions.paired_permutation_p`, held to
    ``scipy.stats.permutation_test``).  The scenarios are put in one canonical order (by
    their values) first, so the seeded resamples, and the p, are a function of the data,
    not of the order the scenarios were stored in."""
    if all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-8) for x, y in zip(a, b, strict=True)):
        return 1.0  # numpy.allclose's tolerances: no difference to test
    rows = sorted(zip(a, b, w, strict=True))
    return paired_permutation_p([r[0] for r in rows], [r[1] for r in rows],
                                [r[2] for r in rows], n_resamples=PERMUTATIONS, seed=seed)


def mcnemar_exact(pairs: Iterable[tuple[bool, bool]]) -> McNemar:
    """Exact McNemar p on ``(a_passed, b_passed)`` pairs: a binomial test of the
    discordant pairs against 1/2 (scipy's ``binomtest``, by
    :func:`agent_eval.metrics.distributions.binomtest_p`)."""
    n = a_only = b_only = 0
    for pa, pb in pairs:
        n += 1
        a_only += pa and not pb
        b_only += pb and not pa
    return mcnemar_counts(n, a_only, b_only)


def mcnemar_counts(n: int, a_only: int, b_only: int) -> McNemar:
    """:func:`mcnemar_exact` from the counts of ``n`` pairs: only the discordant ones
    (``a_only`` + ``b_only``) enter the test."""
    discordant = a_only + b_only
    p = 1.0 if discordant == 0 else binomtest_p(b_only, discordant, 0.5)
    return McNemar(n, a_only, b_only, p)


def compare_paired(units_a: Iterable[Unit] | TargetStats, units_b: Iterable[Unit] | TargetStats,
                   *, alpha: float = ALPHA, min_scenarios: int = MIN_SHARED_SCENARIOS,
                   min_share: float = MIN_SHARED_SHARE) -> PairedComparison:
    """Paired comparison of run b against run a (each a target's units, or their sums).

    Sums read without outcomes (``ScenarioStats.passes`` None, the gate's) give no pass
    rate and no McNemar test; a refused mix reads the sessions for the tag strata."""
    stats_a, stats_b = as_stats(units_a), as_stats(units_b)
    a, b = scenario_cells(stats_a), scenario_cells(stats_b)
    mix = match_mix(a, b, min_scenarios=min_scenarios, min_share=min_share)
    if mix.refused:
        stratified = None
        units_a, units_b = stats_a.load_units(), stats_b.load_units()
        if any(u.tags for u in (*units_a, *units_b)):  # untagged runs: one stratum, no mix
            stratified = compare_poststratified(units_a, units_b, alpha=alpha,
                                                min_share=min_share)
        return PairedComparison(mix, None, None, None, stratified)
    shared = mix.shared
    weights = [a[s].calls + b[s].calls for s in shared]
    errors = paired_difference([a[s].rate for s in shared], [b[s].rate for s in shared],
                               weights, alpha=alpha, within=_within(a, b, shared),
                               floor=[_binomial(a[s].errors + b[s].errors, a[s].calls,
                                                b[s].calls) for s in shared])
    with_repeats: list[tuple[str, Passes, Passes]] = []  # (scenario, a's passes, b's)
    if stats_a.has_passes and stats_b.has_passes:
        for s in shared:
            x, y = a[s].passes, b[s].passes
            if x is not None and y is not None and x.n and y.n:
                with_repeats.append((s, x, y))
    passes = mcnemar = None
    if len(with_repeats) >= 2:
        passes = paired_difference([a[s].pass_share for s, _, _ in with_repeats],
                                   [b[s].pass_share for s, _, _ in with_repeats],
                                   [1.0] * len(with_repeats), alpha=alpha,
                                   floor=[_binomial(x.passed + y.passed, x.n, y.n)
                                          for _, x, y in with_repeats],
                                   t_p=any(x.n != y.n for _, x, y in with_repeats))
        # matched counts: "all of 10 passed" is rarer than "all of 3" for the same model,
        # so unequal repeats compared whole made 57% of unchanged 3-vs-10 pairs discordant
        # enough to reject
        outcomes = [(x.first_passed(m), y.first_passed(m)) for _, x, y in with_repeats
                    for m in (min(x.n, y.n),)]
        mcnemar = mcnemar_exact(outcomes)
    return PairedComparison(mix, errors, passes, mcnemar)


def _within(a: dict[str, ScenarioCell], b: dict[str, ScenarioCell],
            shared: Sequence[str]) -> tuple | None:
    """Per-scenario variance of ``r_b − r_a`` from the sessions inside each scenario (CR1,
    sessions as clusters), and its Welch–Satterthwaite degrees of freedom (rounded down);
    ``None`` unless every shared scenario has at least two sessions with calls on one
    side.  When the runs' repeats differ in some scenario (a baseline of 3, or of 1,
    against a run of 10), the two sides' variances are pooled (:func:`pooled_within`):
    Welch's form then leans on the few sessions of the smaller run and over-rejects, and
    the spread across scenarios that a 1-repeat side fell back on moves with the
    baseline's own errors (a baseline low by chance gives a high difference and a small
    SE at once: 6–8% of unchanged 1-vs-10 pairs failed at a nominal 2.5%)."""
    if any(max(a[s].sessions.g, b[s].sessions.g) < 2 for s in shared):
        return None
    if any(a[s].sessions.g != b[s].sessions.g for s in shared):
        pooled = [(pooled_within(a[s].sessions, b[s].sessions)[0],
                   unequal_df(a[s].sessions.g, b[s].sessions.g)) for s in shared]
        weights = [a[s].calls + b[s].calls for s in shared]
        total = sum(w * w * v for (v, _), w in zip(pooled, weights, strict=True))
        spread = sum((w * w * v) ** 2 / g for (v, g), w in zip(pooled, weights, strict=True))
        df = (sum(g for _, g in pooled) if spread == 0
              else max(1, int(total * total / spread)))
        return [v for v, _ in pooled], df, POOLED_METHOD
    parts = [(pooled_variance([cell.sessions])[0], cell.sessions.g - 1, a[s].calls + b[s].calls)
             for s in shared for cell in (a[s], b[s])]
    variances = [parts[i][0] + parts[i + 1][0] for i in range(0, len(parts), 2)]
    # Welch–Satterthwaite: a few noisy scenarios dominating the sum leave few df
    total = sum(w * w * v for v, _, w in parts)
    spread = sum((w * w * v) ** 2 / g for v, g, w in parts)
    df = sum(g for _, g, _ in parts) if spread == 0 else max(1, int(total * total / spread))
    return variances, df


def unequal_df(g_a: int, g_b: int) -> int:
    """Degrees of freedom of one scenario's pooled variance at unequal repeats: those of
    the smaller side, ``min(G_a, G_b) − 1`` (the conservative two-sample t: Moore, McCabe
    & Craig, *Introduction to the Practice of Statistics*), not the pooled ``G_a + G_b −
    2``.  The difference rests mostly on the smaller side's mean, and a mean of 3 sessions
    of rare, clustered errors is skewed: when it is high by chance the t on the pooled df
    called 4.6–5.0% of unchanged 3-against-10 pairs over 8,000 (nominal 5%), 2.7–3.8% in
    that tail alone.  A side with one session keeps the pooled df (its variance is all the
    other run's)."""
    small = min(g_a, g_b)
    return small - 1 if small >= 2 else g_a + g_b - 2


def pooled_within(x: Sums, y: Sums) -> tuple[float, int]:
    """The variance of ``r_y − r_x`` for one scenario's sessions of two runs, the
    per-session variance pooled over both (the two-sample pooled t: Student 1908), and its
    ``G_x + G_y − 2`` degrees of freedom.  Each side's CR1 ratio variance
    ``V = G/(G−1) · Σe²/N²`` gives its per-session residual variance ``s² = V·N²/G``;
    ``s²_p = Σ(G−1)s² / (G_x + G_y − 2)`` and the variance is
    ``s²_p · (G_x/N_x² + G_y/N_y²)``.  With sessions of equal size it is the pooled
    two-sample t of the sessions' error shares (``scipy.stats.ttest_ind``, tested)."""
    vx, vy = pooled_variance([x])[0], pooled_variance([y])[0]
    df = x.g + y.g - 2
    s2 = (vx * x.n * x.n * (x.g - 1) / x.g + vy * y.n * y.n * (y.g - 1) / y.g) / df
    return s2 * (x.g / (x.n * x.n) + y.g / (y.n * y.n)), df


def _binomial(k: int, na: int, nb: int) -> float:
    """Variance of a difference of two shares at the pooled rate ``k / (na + nb)``."""
    p = k / (na + nb)
    return p * (1 - p) * (1 / na + 1 / nb)


def paired_lines(cmp: PairedComparison) -> list[str]:
    """Plain lines for ``compare`` and the gate: the mix, then each paired result."""
    lines = [cmp.mix.statement()]
    if cmp.stratified is not None:
        lines += stratified_lines(cmp.stratified)
    if cmp.errors is not None:
        e = cmp.errors
        lines.append(f"errors/100 paired change {e.diff100:+.2f} [95% CI {e.lo100:+.2f} to "
                     f"{e.hi100:+.2f}], permutation p {_p(e.p_value)}"
                     f"{' (significant)' if e.significant else ''}")
    if cmp.passes is not None:
        p = cmp.passes
        lines.append(f"pass rate paired change {p.diff100:+.1f} points [95% CI "
                     f"{p.lo100:+.1f} to {p.hi100:+.1f}], permutation p {_p(p.p_value)}")
    if cmp.mcnemar is not None:
        m = cmp.mcnemar
        lines.append(f"scenario pairs (every repeat passed): {m.pairs}; passed in a only "
                     f"{m.a_only}, in b only {m.b_only}; exact McNemar p {_p(m.p_value)}")
    return lines


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"
