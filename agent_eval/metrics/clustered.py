"""Clustered intervals: rates whose calls are not independent.

Calls of one session share a context, so they err together: on real transcripts the design
effect of sessions as clusters is 2.4–3.5, and a Wilson interval that treats every call as
independent is 1.6–1.9× too narrow.  This module gives every rate a second interval that
holds with clustering (docs/statistics.md explains the choice and cites its sources):

* the **ratio estimator** ``p = Σk / Σn`` over clusters, its variance by Taylor
  linearisation (the cluster-robust "sandwich" variance, CR1 small-sample factor
  ``G/(G−1)``), stratified by scenario when clusters are sessions of a fixed suite;
* the **design effect** ``deff = V_clustered / (p(1−p)/n)``, floored at 1, and the
  effective sample size ``n / deff``;
* a **Korn–Graubard interval**: the Wilson score interval at the effective sample size,
  with the normal quantile replaced by Student's t on ``clusters − strata`` degrees of
  freedom, so it stays inside [0, 1], is honest at 0 errors, and widens when clusters are
  few.

Pure functions over :class:`Unit` records (one per cluster); no I/O.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_eval.metrics.distributions import beta_ppf, norm_ppf, t_cdf, t_ppf
from agent_eval.metrics.repeats import SessionFields, _root_of, split_sessions
from agent_eval.metrics.stats import ALPHA
from agent_eval.metrics.sufficient import Sums, TargetStats, as_stats, pooled_variance, total
from agent_eval.transcript import CallRow

ClusterBy = Literal["session", "scenario"]
FEW_CLUSTERS = 30
"""Below this many clusters the interval says so: the t quantile (not 1.96) does the work."""
CLUSTERED_METHOD = (
    "Korn–Graubard: Wilson score interval at the effective sample size n/deff, with a "
    "Student-t quantile on (clusters − strata) degrees of freedom; deff from the "
    "cluster-robust (CR1, Taylor-linearised) variance of the ratio errors/calls"
)

CLASS_METHOD = (
    "Korn–Graubard: Clopper–Pearson interval at the effective sample size n/deff, "
    "n_eff scaled by (z/t)² for Student-t on (clusters − strata) df; deff the larger of "
    "the class's own and the total's (borrowed: a rare class cannot estimate its own), so "
    "the interval holds at low rates and at 0 errors"
)


@dataclass(frozen=True, slots=True)
class Unit:
    """One cluster's counts: a top-level session (its child sessions folded in).

    ``classes`` counts denied calls by primary class; ``passed`` is the repeat's outcome
    (``agent_eval.metrics.repeats``: completed and no call denied), ``None`` for a child
    folded into nothing (never happens for top-level units); ``tags`` are the session's
    (``agent_eval.metrics.stratified`` post-stratifies on them).
    """

    target: str
    scenario: str
    repeat: int
    calls: int
    errors: int
    classes: dict[str, int] = field(default_factory=dict)
    passed: bool | None = None
    tags: tuple[str, ...] = ()  # the session's tags: the strata of a tag-mix comparison


@dataclass(frozen=True, slots=True)
class ClusteredRate:
    """``k`` of ``n`` per 100 with its clustered 95% interval and what it rests on.

    ``deff`` is the design effect (``None`` when it cannot be estimated: no errors, or one
    cluster); ``lo100``/``hi100`` are ``None`` when no interval can be given (no calls, or
    a single cluster).  ``few_clusters`` flags fewer than :data:`FEW_CLUSTERS` clusters.
    """

    k: int
    n: int
    clusters: int
    strata: int
    by: ClusterBy
    per100: float | None
    lo100: float | None
    hi100: float | None
    deff: float | None
    df: int
    method: str = CLUSTERED_METHOD

    @property
    def few_clusters(self) -> bool:
        return self.clusters < FEW_CLUSTERS

    @property
    def n_eff(self) -> float | None:
        """Effective number of independent calls, ``n / deff``."""
        return None if self.deff is None else self.n / self.deff


def wilson_float(k: float, n: float, z: float) -> tuple[float, float]:
    """Wilson score interval for a possibly fractional count (effective sample sizes).

    Equal to ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")`` for integer
    counts (tests check it); kept by hand because scipy takes integers only.
    """
    if n <= 0:
        return (0.0, 1.0)
    p = min(1.0, max(0.0, k / n))
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    lo = 0.0 if k <= 0 else max(0.0, centre - half)
    hi = 1.0 if k >= n else min(1.0, centre + half)
    return (lo, hi)


def t_quantile(df: float, alpha: float = ALPHA) -> float:
    """Two-sided ``1 − alpha`` quantile of Student's t (the normal one for df = inf):
    ``scipy.stats.t.ppf`` / ``norm.ppf``, by :mod:`agent_eval.metrics.distributions`
    (tested against them)."""
    if math.isinf(df):
        return norm_ppf(1 - alpha / 2)
    return t_ppf(1 - alpha / 2, df)


def ratio_variance(pairs: Sequence[tuple[int, int]], strata: Sequence[str] | None = None
                   ) -> tuple[float, int, int]:
    """Linearised variance of ``Σk / Σn`` over clusters ``(k, n)``, CR1-corrected.

    With ``strata`` (one label per cluster) the residuals are centred within each stratum
    and each stratum gets its own ``G_h/(G_h−1)``; strata holding a single cluster are
    pooled into one, and a lone one left over is collapsed into the stratum nearest it in
    rate.
    Returns ``(variance, clusters, strata_used)``; a variance of 0 with fewer than two
    clusters means "not estimable".  Computed from each stratum's sums
    (``agent_eval.metrics.sufficient.pooled_variance``).
    """
    return pooled_variance(_strata_sums(pairs, strata))


def _strata_sums(pairs: Sequence[tuple[int, int]], strata: Sequence[str] | None) -> list[Sums]:
    if strata is None:
        return [Sums.of(pairs)]
    by: dict[str, list[tuple[int, int]]] = {}
    for pair, label in zip(pairs, strata, strict=True):
        by.setdefault(label, []).append(pair)
    return [Sums.of(members) for members in by.values()]


def clustered_rate(pairs: Sequence[tuple[int, int]], *, strata: Sequence[str] | None = None,
                   by: ClusterBy = "session", alpha: float = ALPHA) -> ClusteredRate:
    """The clustered interval of ``Σk / Σn`` over clusters ``pairs = [(k, n), ...]``.

    Hand-computable example: clusters (0, 10) and (2, 10) give p = 0.1, linearised
    variance 2·(0.05² + 0.05²) = 0.01 against the binomial 0.09/20 = 0.0045, so
    deff ≈ 2.22, n_eff = 9; 0.9 effective errors are fewer than :data:`FEW_EFFECTIVE`, so
    the interval is Korn–Graubard's Clopper–Pearson at ``9 · (1.96/12.71)²`` (t on 1 df);
    with many effective errors it is Wilson's at ``n_eff`` with the t quantile."""
    kept = [i for i, (_, m) in enumerate(pairs) if m > 0]
    return sums_rate(_strata_sums([pairs[i] for i in kept],
                                  None if strata is None else [strata[i] for i in kept]),
                     by=by, alpha=alpha)


def sums_rate(strata: Sequence[Sums], *, by: ClusterBy = "session",
              alpha: float = ALPHA) -> ClusteredRate:
    """The clustered interval of ``Σk / Σn`` from each stratum's sums over its clusters
    with calls (one stratum: unstratified)."""
    whole = total(strata)
    k, n = whole.k, whole.n
    if n == 0:
        return ClusteredRate(k, n, whole.g, 0, by, None, None, None, None, 0)
    var, g, h = pooled_variance(strata)
    p = k / n
    if g < 2:
        return ClusteredRate(k, n, g, h, by, 100 * p, None, None, None, 0)
    df = max(1, g - h)
    binomial = p * (1 - p) / n
    deff = max(1.0, var / binomial) if binomial > 0 else None
    if deff is not None and min(k, n - k) / deff < FEW_EFFECTIVE:
        lo, hi = korn_graubard(k, n, deff, effective_df(k, n, deff, df), alpha)
        return ClusteredRate(k, n, g, h, by, 100 * p, 100 * lo, 100 * hi, deff, df,
                             LOW_RATE_METHOD)
    lo, hi = wilson_float(k / (deff or 1.0), n / (deff or 1.0), t_quantile(df, alpha))
    return ClusteredRate(k, n, g, h, by, 100 * p, 100 * lo, 100 * hi, deff, df)


FEW_EFFECTIVE = 10
"""Below this many effective errors (``k / deff``, or effective non-errors) the total's
interval is Korn & Graubard's Clopper–Pearson, not Wilson's: at 0.5–1 errors per 100 and
a design effect of 2.5–4 the Wilson interval covered 80–91%."""

LOW_RATE_METHOD = (
    "Korn–Graubard (few effective errors): Clopper–Pearson interval at the effective "
    "sample size n/deff, n_eff scaled by (z/t)² for Student-t on the effective degrees of "
    "freedom (the fewer of clusters − strata and the effective errors − 1)"
)


def effective_df(k: int, n: int, deff: float, df: int) -> int:
    """Degrees of freedom the variance estimate rests on: ``clusters − strata``, but no
    more than the effective count of errors (``k / deff``, or of non-errors) less one.
    Only sessions holding an error carry the variance of a low rate, and there are about
    ``k / deff`` of them: 6 errors in 87 sessions at a design effect of 3 is a variance
    from 2 sessions, not from 58 degrees of freedom (the Satterthwaite view of Korn &
    Graubard's df correction)."""
    few = min(k, n - k)
    if few <= 0:
        return df
    return max(1, min(df, math.ceil(few / deff) - 1))


def korn_graubard(k: int, n: int, deff: float, df: int, alpha: float = ALPHA
                  ) -> tuple[float, float]:
    """Korn & Graubard's (1998) interval: Clopper–Pearson at the effective sample size
    ``n / deff``, scaled by ``(z / t_df)²`` so that few degrees of freedom widen it."""
    n_eff = n / deff * (t_quantile(math.inf, alpha) / t_quantile(df, alpha)) ** 2
    return clopper_pearson_float(k / n * n_eff, n_eff, alpha)


def clopper_pearson_float(k: float, n: float, alpha: float = ALPHA) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval for a possibly fractional count: beta
    quantiles (:func:`agent_eval.metrics.distributions.beta_ppf`, scipy's ``betaincinv``),
    equal to ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")`` for integer
    counts (tested); scipy's takes integers only."""
    if n <= 0:
        return (0.0, 1.0)
    k = min(max(k, 0.0), n)
    lo = 0.0 if k <= 0 else beta_ppf(alpha / 2, k, n - k + 1)
    hi = 1.0 if k >= n else beta_ppf(1 - alpha / 2, k + 1, n - k)
    return (lo, hi)


def class_sums_rate(strata: Sequence[Sums], total_deff: float | None, *,
                    alpha: float = ALPHA) -> ClusteredRate:
    """A failure class's clustered interval (:data:`CLASS_METHOD`): Korn & Graubard's
    (1998) effective-sample-size Clopper–Pearson, with the design effect borrowed from the
    total's when that is larger.  At 0.5–1 errors per 100 a class's own design effect is
    estimated from a handful of sessions and is too small as often as not, and at 0 errors
    it is not estimable at all (0 in 522 calls read as independent gives an upper bound of
    0.76 per 100; with the total's design effect of 4, about 3)."""
    whole = total(strata)
    k, n = whole.k, whole.n
    if n == 0:
        return ClusteredRate(k, n, whole.g, 0, "session", None, None, None, None, 0,
                             CLASS_METHOD)
    var, g, h = pooled_variance(strata)
    p = k / n
    if g < 2:
        return ClusteredRate(k, n, g, h, "session", 100 * p, None, None, None, 0, CLASS_METHOD)
    df = max(1, g - h)
    binomial = p * (1 - p) / n
    own = var / binomial if binomial > 0 else 1.0
    deff = max(1.0, own, total_deff or 1.0)
    lo, hi = korn_graubard(k, n, deff, effective_df(k, n, deff, df), alpha)
    return ClusteredRate(k, n, g, h, "session", 100 * p, 100 * lo, 100 * hi, deff, df,
                         CLASS_METHOD)


def units_rate(units: Iterable[Unit] | TargetStats, *, code: str | None = None,
               by: ClusterBy = "session", alpha: float = ALPHA) -> ClusteredRate:
    """Errors (or class ``code``) per 100 calls over ``units`` (or their sums), clustered
    ``by``.

    ``session``: each unit is a cluster, stratified by scenario (a fixed suite: the claim
    is about these tasks); a class's interval is :func:`class_sums_rate`'s.  ``scenario``: units of a scenario form one cluster (the claim
    is across tasks, so the tasks are the sample).
    """
    stats = as_stats(units)
    per = [s.sums(code) for s in stats.scenarios.values()]
    if code is not None and by == "session":
        whole = sums_rate([s.errors for s in stats.scenarios.values()], alpha=alpha)
        return class_sums_rate(per, whole.deff, alpha=alpha)
    if by == "scenario":
        return sums_rate([Sums.of((s.k, s.n) for s in per if s.n > 0)], by="scenario",
                         alpha=alpha)
    return sums_rate(per, by="session", alpha=alpha)


def session_units(sessions: Iterable[SessionFields], calls: Iterable[CallRow]) -> list[Unit]:
    """One :class:`Unit` per non-error top-level session, child sessions folded into their
    root (a subagent's calls belong to the repeat that spawned it).  Holds sessions only;
    calls are streamed."""
    parent, roots, faulted = split_sessions(sessions)
    tallies: dict[int, list] = {sid: [0, 0, Counter()] for sid in roots}
    for c in calls:
        tally = _tally_of(c.session_id, parent, faulted, tallies)
        if tally is None:
            continue
        tally[0] += 1
        if c.decision == "deny":
            tally[1] += 1
            tally[2][c.primary or "unclassified"] += 1
    return _units(roots, tallies)


def units_from_counts(sessions: Iterable[SessionFields], calls: Mapping[int, int],
                      denied: Iterable[CallRow]) -> list[Unit]:
    """:func:`session_units` from counts already taken: tool calls per session id and the
    denied calls, so the calls are not read twice."""
    by_class: dict[int, Counter] = {}
    for c in denied:
        by_class.setdefault(c.session_id, Counter())[c.primary or "unclassified"] += 1
    return units_from_class_counts(sessions, calls, by_class)


def units_from_class_counts(sessions: Iterable[SessionFields], calls: Mapping[int, int],
                            denied: Mapping[int, Mapping[str, int]]) -> list[Unit]:
    """:func:`session_units` from per-session counts: tool calls per session id, and
    denied calls per session id and primary class (``"unclassified"`` for none): what
    GROUP BYs in the store give (``store.units.units_sql``).  Without child sessions
    each session is its own root, and no parent chain is walked."""
    parent, roots, faulted = split_sessions(sessions)
    nested = any(p is not None for p in parent.values())
    tallies: dict[int, list] = {sid: [0, 0, Counter()] for sid in roots}

    def tally_of(sid: int) -> list | None:
        return _tally_of(sid, parent, faulted, tallies) if nested else tallies.get(sid)

    for sid, n in calls.items():
        tally = tally_of(sid)
        if tally is not None:
            tally[0] += n
    for sid, by_code in denied.items():
        tally = tally_of(sid)
        if tally is not None:
            for code, n in by_code.items():
                tally[1] += n
                tally[2][code] += n
    return _units(roots, tallies)


def _tally_of(sid: int, parent, faulted, tallies) -> list | None:
    if sid not in parent or sid in faulted:
        return None
    return tallies.get(_root_of(sid, parent))


def _units(roots: Mapping[int, SessionFields], tallies: dict[int, list]) -> list[Unit]:
    return [
        Unit(s.target, s.scenario, s.repeat, t[0], t[1], dict(t[2]),
             passed=s.status == "completed" and t[1] == 0, tags=tuple(s.tags))
        for sid, s in roots.items() for t in (tallies[sid],)
    ]


@dataclass(frozen=True, slots=True)
class ClusteredSummary:
    """One group's clustered figures: errors/100 with sessions as clusters (scenarios as
    strata), the same across tasks (scenarios as clusters), and each class's rate."""

    errors: ClusteredRate
    across_tasks: ClusteredRate
    classes: dict[str, ClusteredRate]


def summarize_clustered(units: Sequence[Unit] | TargetStats,
                        codes: Iterable[str] = ()) -> ClusteredSummary:
    """Clustered errors/100, across-task errors/100 and a rate per class in ``codes``."""
    stats = as_stats(units)
    return ClusteredSummary(units_rate(stats), units_rate(stats, by="scenario"),
                            {code: units_rate(stats, code=code) for code in codes})


def units_by_target(units: Iterable[Unit]) -> dict[str, list[Unit]]:
    """Units grouped by target, targets in first-seen order."""
    out: dict[str, list[Unit]] = {}
    for u in units:
        out.setdefault(u.target, []).append(u)
    return out


def clustered_text(rate: ClusteredRate | None) -> str:
    """``7.21 [4.0–12.6]``: the rate and its clustered interval (the one gate and compare
    decide on); ``50.00 [1 session]`` in place of the interval when one session holds all
    the calls (it cannot say how sessions vary; short, as terminal tables keep it)."""
    if rate is None or rate.per100 is None:
        return "–"
    if rate.lo100 is None or rate.hi100 is None:
        unit = "session" if rate.clusters == 1 else "sessions"
        return f"{rate.per100:.2f} [{rate.clusters} {unit}]"
    return f"{rate.per100:.2f} [{rate.lo100:.1f}–{rate.hi100:.1f}]"


def interval_text(rate: ClusteredRate, digits: int = 1) -> str:
    """``"[3.1–9.8] deff 2.4, 40 sessions"``: the clustered interval, for tables and lines."""
    if rate.lo100 is None:
        return f"[no clustered interval: {rate.clusters} {rate.by}]"
    deff = "–" if rate.deff is None else f"{rate.deff:.1f}"
    few = ", few clusters" if rate.few_clusters else ""
    unit = "sessions" if rate.by == "session" else "scenarios"
    return (f"[{rate.lo100:.{digits}f}–{rate.hi100:.{digits}f}] deff {deff}, "
            f"{rate.clusters} {unit}{few}")


INDEPENDENT_METHOD = ("independent runs: difference of ratio estimates, session-clustered "
                      "(unstratified) SEs, Welch–Satterthwaite t interval")


@dataclass(frozen=True, slots=True)
class ClusteredDiff:
    """``b − a`` in errors/100 between two independent runs, sessions as clusters."""

    diff100: float | None
    lo100: float | None
    hi100: float | None
    se100: float | None
    df: float
    p_value: float
    alpha: float = ALPHA
    method: str = INDEPENDENT_METHOD

    @property
    def significant(self) -> bool:
        return self.p_value < self.alpha


def compare_independent(units_a: Iterable[Unit] | TargetStats,
                        units_b: Iterable[Unit] | TargetStats, *,
                        alpha: float = ALPHA) -> ClusteredDiff:
    """Errors/100 of b against a, treating the runs as independent samples of sessions.

    Scenarios are ignored (no strata): with no shared mix the spread between scenarios is
    part of the noise.  Each side's variance is at least the binomial one (at its own and
    at the pooled rate), as the design effect is floored at 1.  Degrees of freedom by Welch–Satterthwaite on each side's
    ``clusters − 1``.
    """
    sides = []
    for units in (units_a, units_b):
        whole = as_stats(units).errors
        var, g, _ = pooled_variance([whole])
        sides.append((whole.k, whole.n, var, g))
    (ka, na, va, ga), (kb, nb, vb, gb) = sides
    pa, pb = (ka / na if na else None), (kb / nb if nb else None)
    if pa is not None and pb is not None:  # never narrower than independent calls (deff >= 1), at the pooled rate
        pooled = (ka + kb) / (na + nb)
        va = max(va, pa * (1 - pa) / na, pooled * (1 - pooled) / na)
        vb = max(vb, pb * (1 - pb) / nb, pooled * (1 - pooled) / nb)
    if pa is None or pb is None or ga < 2 or gb < 2:
        return ClusteredDiff(None if pa is None or pb is None else 100 * (pb - pa),
                             None, None, None, 0, 1.0, alpha)
    se = math.sqrt(va + vb)
    diff = pb - pa
    if se == 0:
        return ClusteredDiff(100 * diff, 100 * diff, 100 * diff, 0.0, math.inf,
                             1.0 if diff == 0 else 0.0, alpha)
    df = (va + vb) ** 2 / ((va**2 / (ga - 1) if va else 0) + (vb**2 / (gb - 1) if vb else 0))
    half = t_quantile(df, alpha) * se
    p = 2 * t_cdf(-abs(diff) / se, df)  # scipy.stats.t.sf
    return ClusteredDiff(100 * diff, 100 * (diff - half), 100 * (diff + half), 100 * se, df,
                         p, alpha)


def detectable_rise(se100: float | None, df: float, *, alpha: float = ALPHA,
                    power: float = 0.8) -> float | None:
    """The smallest true rise (per 100) the interval rule "low end > 0" catches with
    probability ``power``: ``(t_{1−α/2} + t_{power}) · SE`` on ``df`` degrees of freedom."""
    if se100 is None or not math.isfinite(se100) or df <= 0:
        return None
    t_power = norm_ppf(power) if math.isinf(df) else t_ppf(power, df)
    return (t_quantile(df, alpha) + t_power) * se100


RAO_SCOTT_TEST = (
    "Rao–Scott first-order correction: the per-call z statistic squared divided by the "
    "class's design effect of the difference (session-clustered, scenario-stratified "
    "variances of both runs over their binomial ones, floored at 1), referred to F(1, df), "
    "df the clusters − strata or fewer: Satterthwaite on each run's effective errors − 1"
)


@dataclass(frozen=True, slots=True)
class RaoScott:
    """A class's count in run b against run a, the per-call test corrected for clustering.

    ``deff`` is the design effect of the difference (at least 1); ``p_value`` the two-sided
    p of ``z² / deff`` on ``F(1, df)`` (the square of Student's t on ``df``)."""

    z: float | None
    deff: float
    df: int
    p_value: float
    method: str = RAO_SCOTT_TEST


def rao_scott_test(a: TargetStats | Iterable[Unit], b: TargetStats | Iterable[Unit],
                   code: str | None = None) -> RaoScott:
    """Class ``code`` (errors when ``None``) per call, b against a, with Rao & Scott's
    (1981, 1984) first-order correction: the pooled two-proportion statistic ``X² = z²``
    is divided by the estimated design effect of the difference, ``d = (V_a + V_b) /
    (p_a(1 − p_a)/n_a + p_b(1 − p_b)/n_b)``, each ``V`` the run's own session-clustered
    variance of the class's rate (scenarios as strata, CR1, as ``units_rate``), and
    ``X²/d`` is read on ``F(1, df)`` (Thomas & Rao 1987), ``df`` the clusters less the
    strata of both runs, but no more than the Welch–Satterthwaite combination of each
    run's effective errors less one (:func:`effective_df`: a rare class's variance rests
    on the few sessions that hold it).  The per-call z-test treats every call as independent: with
    sessions that err together (design effect 2.5–4) it called 30–64% of unchanged pairs
    "changed" in at least one of 14 classes.  The p is 1.0 when neither run has the class."""
    sides = []
    for units in (a, b):
        stats = as_stats(units)
        per = [s.sums(code) for s in stats.scenarios.values()]
        whole = total(per)
        var, g, h = pooled_variance(per)
        sides.append((whole.k, whole.n, var, g, h))
    (ka, na, va, ga, ha), (kb, nb, vb, gb, hb) = sides
    df = max(1, ga - ha + gb - hb)
    if na == 0 or nb == 0 or ka + kb == 0 or ka + kb == na + nb:
        return RaoScott(None, 1.0, df, 1.0)
    pa, pb = ka / na, kb / nb
    pooled = (ka + kb) / (na + nb)
    z = (pb - pa) / math.sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb))
    binomial = pa * (1 - pa) / na + pb * (1 - pb) / nb
    deff = max(1.0, (va + vb) / binomial) if binomial > 0 else 1.0
    # each side's variance rests on its sessions holding the class, about k/deff of them
    # (effective_df); Welch–Satterthwaite combines the two
    parts = [(v, effective_df(k, n, max(1.0, v / (p * (1 - p) / n)), max(1, g - h)))
             for k, n, v, g, h, p in ((ka, na, va, ga, ha, pa), (kb, nb, vb, gb, hb, pb))
             if k > 0 and v > 0 and 0 < p < 1]
    spread = sum(v * v / d for v, d in parts)
    if spread > 0:
        df = max(1, min(df, int(sum(v for v, _ in parts) ** 2 / spread)))
    p = 2 * t_cdf(-abs(z) / math.sqrt(deff), df)  # scipy.special.stdtr(df, x)
    return RaoScott(z, deff, df, min(1.0, p))
