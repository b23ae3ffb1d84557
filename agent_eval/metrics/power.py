"""Run planning: how many repeats a decision needs, from a baseline's variance components.

The gate reads the allowed rise ``X`` as a non-inferiority margin: a regression check
passes only when the upper end of the paired 95% interval of ``current − baseline`` is at
or below ``X``.  An unchanged model passes with probability ``power`` when
``X ≥ (t_{1−α/2} + t_{power}) · SE₀``, ``SE₀`` the standard error under no change (t on
``S − 1`` degrees of freedom, ``S`` shared scenarios); a true rise of ``X`` then passes
with probability at most ``α/2`` whatever the size.  :func:`repeats_for_margin` is that
rule, the one both ``agent-eval power`` and the gate's "N repeats would decide it" use.
The same rule with the standard error at ``p + δ`` names the smallest rise a design
catches (fails) with ``power`` (:func:`detectable_under_alternative`).
With ``R`` repeats per scenario and scenario weights ``w_s`` (calls share), the paired
standard error under no change is ``SE²(R) = SE₁² / R`` with::

    SE₁² = Σ_s w_s² · 2 · u_s

``u_s`` the variance of scenario ``s``'s error rate over one session: from the spread of
its own sessions where it has two or more (unbiased, not floored per scenario), from its
single session's deviation from the pooled rate of the single-session scenarios where it
has one (:func:`plan_spread`); the sum floored at the binomial (calls as independent), as
the gate's standard error is.  How uncertain ``SE₁²`` is comes from a bootstrap-t over
the scenarios; the plan is the fewest repeats whose power, averaged over that
uncertainty, reaches the target (:func:`repeats_for_margin` with ``spread``), and its
80% range is the closed-form need at the uncertainty's ends (:func:`need_range`), printed
from baselines of :data:`RANGE_MIN_REPEATS` repeats or more.  The smallest rise a design
detects uses the baseline's variance components (each scenario's rate and design effect of
sessions, each binomial term estimated without the plug-in's bias: ``_binomial_terms``)::

    SE²(R) = Σ_s w_s² · deff_s / (R · m_s) · [p_s(1 − p_s) + p'_s(1 − p'_s)]

``p'_s = p_s + δ``.  The spread *between* scenarios cancels in the paired design and is
what the independent plan pays for (docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import Unit, detectable_rise, ratio_variance, t_quantile
from agent_eval.metrics.stats import ALPHA

POWER = 0.8
MAX_REPEATS = 10_000


@dataclass(frozen=True, slots=True)
class ScenarioComponent:
    """One scenario of the baseline: rate per call, calls per session, design effect."""

    scenario: str
    sessions: int
    calls_per_session: float
    rate: float
    deff: float


@dataclass(frozen=True, slots=True)
class PowerPlan:
    """How many repeats per scenario let an unchanged model pass a margin of ``detect``
    errors/100 with probability ``power`` (and a rise of ``detect`` pass at most α/2).

    ``repeats`` is ``None`` when no repeat count up to :data:`MAX_REPEATS` suffices, there
    are fewer than two scenarios, or the baseline has no errors to estimate a variance
    from (``cannot`` says which; ``zero_error_calls`` then gives the calls a run with no
    error needs for its own upper end to be within the margin); ``detectable_now`` is the
    smallest rise the baseline's own design (``baseline_repeats``) catches with ``power``.
    """

    detect: float
    alpha: float
    power: float
    scenarios: int
    baseline_repeats: int
    calls_per_repeat: float  # calls of one pass over every scenario
    repeats: int | None
    total_calls: int | None  # per run, at ``repeats``
    detectable_now: float | None
    run_deff: float
    components: tuple[ScenarioComponent, ...]
    repeats_range: tuple[int, int] | None = None  # 80% range from the variance's uncertainty
    variance_df: int = 0  # degrees of freedom the plan's variance is estimated on
    cannot: str = ""  # why no plan, when ``repeats`` is None
    zero_error_calls: int | None = None  # a 0-error baseline: calls for a 0-error run to pass


def variance_components(units: Sequence[Unit]) -> tuple[list[ScenarioComponent], float]:
    """Per-scenario components and the run-wide session design effect (floored at 1)."""
    pairs = [(u.errors, u.calls) for u in units if u.calls > 0]
    n = sum(m for _, m in pairs)
    p = sum(k for k, _ in pairs) / n if n else 0.0
    var, g, _ = ratio_variance(pairs, [u.scenario for u in units if u.calls > 0])
    binomial = p * (1 - p) / n if n else 0.0
    run_deff = max(1.0, var / binomial) if binomial > 0 and g >= 2 else 1.0
    by: dict[str, list[tuple[int, int]]] = {}
    for u in units:
        if u.calls > 0:
            by.setdefault(u.scenario, []).append((u.errors, u.calls))
    components = []
    for scenario, cells in by.items():
        ns = sum(m for _, m in cells)
        ps = sum(k for k, _ in cells) / ns
        vs, gs, _ = ratio_variance(cells)
        bs = ps * (1 - ps) / ns
        deff = max(1.0, vs / bs) if gs >= 2 and bs > 0 and vs > 0 else run_deff
        components.append(ScenarioComponent(scenario, len(cells), ns / len(cells), ps, deff))
    return components, run_deff


def paired_se100(components: Sequence[ScenarioComponent], repeats: float,
                 detect: float) -> float:
    """The paired SE (per 100) at ``repeats`` per scenario, for a rise of ``detect``."""
    weights = [c.calls_per_session for c in components]
    total = sum(weights)
    var = 0.0
    for c, w in zip(components, weights, strict=True):
        base, alternative = _binomial_terms(c, detect)
        var += (w / total) ** 2 * c.deff / (repeats * c.calls_per_session) * (
            base + alternative)
    return 100 * math.sqrt(var)


def _binomial_terms(c: ScenarioComponent, detect: float) -> tuple[float, float]:
    """``p(1 − p)`` and ``p'(1 − p')`` for one scenario, estimated without the plug-in's
    bias: the baseline's rate ``p̂`` comes from ``n`` calls that err together, so
    ``E[p̂(1 − p̂)] = p(1 − p)(1 − deff/n)`` and ``E[p̂'(1 − p̂')] = p'(1 − p') − Var(p̂)``.
    From one 10-call session at a design effect of 4 the plug-in is 40% low, and the plan
    with it (a 1-repeat baseline planning 26 repeats where 3 repeats planned 40)."""
    n = c.sessions * c.calls_per_session
    shrink = max(0.5, 1 - c.deff / n) if n > 0 else 1.0
    base = c.rate * (1 - c.rate) / shrink
    p2 = min(1.0, c.rate + detect / 100)
    return base, p2 * (1 - p2) + base * c.deff / n if n > 0 else p2 * (1 - p2)


def plan_power(units: Sequence[Unit], detect: float, *, alpha: float = ALPHA,
               power: float = POWER) -> PowerPlan:
    """Repeats per scenario and calls per run at which an unchanged model passes a margin
    of ``detect`` errors/100 by the gate's paired interval rule at ``alpha``, with
    probability ``power`` averaged over what the baseline leaves uncertain of its
    variance (:func:`plan_spread`)."""
    if detect <= 0:
        raise ValueError(f"the rise to detect must be > 0 errors per 100 calls, got {detect}")
    components, run_deff = variance_components(units)
    s = len(components)
    per_scenario: dict[str, int] = {}
    for u in units:
        per_scenario[u.scenario] = per_scenario.get(u.scenario, 0) + 1
    base_repeats = min(per_scenario.values()) if per_scenario else 0
    calls_per_repeat = sum(c.calls_per_session for c in components)
    if s < 2:
        return PowerPlan(detect, alpha, power, s, base_repeats, calls_per_repeat, None, None,
                         None, run_deff, tuple(components))
    unit_se = paired_se100(components, 1, 0.0)  # SE at 1 repeat under no change
    now = detectable_under_alternative(components, max(1, base_repeats), s - 1,
                                       alpha=alpha, power=power)
    if not unit_se > 0:
        calls = zero_error_calls(detect, alpha=alpha)
        return PowerPlan(detect, alpha, power, s, base_repeats, calls_per_repeat, None, None,
                         None, run_deff, tuple(components), cannot=(
                             "the baseline has no errors, so it holds no variance to plan "
                             "from"), zero_error_calls=calls)
    spread = plan_spread(units, components, run_deff)
    floor = _binomial_floor(components)
    variance = max(spread.variance, floor)
    spreads = [max(v, floor) / variance for v in spread.quantiles] or None
    needed = repeats_for_margin(100 * math.sqrt(variance), detect, s - 1, alpha=alpha,
                                power=power, spread=spreads)
    repeats = None if needed is None else max(2, needed)  # 2: within-scenario SE
    total = None if repeats is None else round(repeats * calls_per_repeat)
    sessions = sum(per_scenario.values())
    df = sessions - s if base_repeats >= 2 else s - 1
    shown = (None if needed is None or base_repeats < RANGE_MIN_REPEATS
             else need_range(spread, detect, s - 1, alpha=alpha, power=power))
    if shown is not None and repeats is not None:
        shown = (min(shown[0], repeats), max(shown[1], repeats))
    return PowerPlan(detect, alpha, power, s, base_repeats, calls_per_repeat, repeats, total,
                     now, run_deff, tuple(components), shown, df,
                     "" if repeats else f"more than {MAX_REPEATS} repeats per scenario "
                     "would be needed")


def repeats_for_margin(unit_se100: float, margin100: float, df: float, *,
                       alpha: float = ALPHA, power: float = POWER,
                       spread: Sequence[float] | None = None) -> int | None:
    """The fewest repeats per scenario ``R`` at which an unchanged model's upper end is
    within the margin with probability ``power``: ``(t_{1−α/2} + t_power) · SE₁ / √R ≤
    margin``, ``SE₁`` the standard error at one repeat.  With ``spread`` (multipliers of
    ``SE₁²``, equally likely: what the variance may be, given how it was estimated) the
    probability is the average over them, ``mean_i F_t(margin·√R / (SE₁·√v_i) − t_{1−α/2})``
    (the expected power of a plan from an estimated variance: O'Hagan, Stevens & Campbell
    2005; Julious & Owen 2006); without, the closed form, which it equals when every
    ``v_i`` is 1.  ``None`` past :data:`MAX_REPEATS` or when it cannot be said (no margin,
    no variance)."""
    if not margin100 > 0 or not unit_se100 > 0 or not df > 0:
        return None
    if spread:
        return _expected_power_repeats(unit_se100, margin100, df, alpha, power, spread)
    factor = t_quantile(df, alpha) + _t_power(df, power)
    needed = math.ceil((factor * unit_se100 / margin100) ** 2)
    return needed if needed <= MAX_REPEATS else None


def _expected_power_repeats(unit_se100: float, margin100: float, df: float, alpha: float,
                            power: float, spread: Sequence[float]) -> int | None:
    """The smallest ``R`` whose power averaged over ``spread`` reaches ``power`` (power
    rises with ``R``: bisection)."""
    from agent_eval.metrics.distributions import t_cdf

    crit = t_quantile(df, alpha)
    scaled = [margin100 / (unit_se100 * math.sqrt(v)) for v in spread if v > 0]

    def reached(r: int) -> bool:
        root = math.sqrt(r)
        return math.fsum(t_cdf(x * root - crit, df) for x in scaled) / len(scaled) >= power

    if not scaled or not reached(MAX_REPEATS):
        return None
    # the averaged power lies between those at the smallest and the largest variance
    factor = crit + _t_power(df, power)
    low = max(0, math.ceil((factor / max(scaled)) ** 2) - 1)
    high = min(MAX_REPEATS, math.ceil((factor / min(scaled)) ** 2))
    if reached(low) or not reached(high):
        low, high = 0, MAX_REPEATS  # reached(high), not reached(low)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reached(mid) else (mid, high)
    return high


def zero_error_calls(margin100: float, *, alpha: float = ALPHA) -> int:
    """Calls a run with no error needs for its Wilson upper end, ``z² / (n + z²)``, to be
    within ``margin`` per 100: the least a 0-error pair of runs can pass on."""
    z = t_quantile(math.inf, alpha)
    p = min(1.0, margin100 / 100)
    return math.ceil(z * z * (1 / p - 1))


def detectable_under_alternative(components: Sequence[ScenarioComponent], repeats: float,
                                 df: float, *, alpha: float = ALPHA,
                                 power: float = POWER) -> float | None:
    """The smallest rise ``δ`` caught with probability ``power``, with the standard error
    taken where the rise is (rates ``p_s + δ``), not under no change: the fixed point of
    ``δ = (t_{1−α/2} + t_power) · SE(δ)``.  Under no change the SE is smaller, so the rise
    it names is caught with only 67–75% power.  The root is found by Brent's method
    (:func:`agent_eval.metrics.distributions.brentq`; the plain iteration oscillates); None
    when no rise up to 100% is detected."""
    from agent_eval.metrics.distributions import brentq

    factor = detectable_rise(1.0, df, alpha=alpha, power=power)
    if factor is None or not components:
        return None

    def gap(delta: float) -> float:
        return delta - factor * paired_se100(components, repeats, delta)

    top = 100 * (1 - max(c.rate for c in components))  # a rise past it is past 100%
    if top <= 0 or gap(top) < 0:
        return None  # no rise within reach is detected with that power
    return brentq(gap, 0.0, top, xtol=1e-10)


SPREAD_DRAWS = 400  # bootstrap resamples of the scenarios
SPREAD_POINTS = 100  # quantiles of the variance the plan averages its power over
RANGE_LEVEL = 0.8
RANGE_MIN_REPEATS = 3  # baselines with fewer repeats per scenario print no range
# (the range is measured from 3: BENCHMARKS.md)
RANGE_METHOD = "bootstrap-t over the baseline's scenarios"


@dataclass(frozen=True, slots=True)
class PlanSpread:
    """The variance a plan rests on and how uncertain it is.  ``variance`` is ``SE₁²``
    (per call, no change, one repeat per scenario) from the baseline, the sum of one
    term per scenario; ``quantiles`` are :data:`SPREAD_POINTS` equally likely values of
    the true one, from a bootstrap-t over the scenarios (:func:`plan_spread`), or none
    when the terms cannot be resampled."""

    variance: float
    quantiles: tuple[float, ...]
    terms: tuple[float, ...]


def plan_spread(units: Sequence[Unit], components: Sequence[ScenarioComponent],
                run_deff: float, *, draws: int = SPREAD_DRAWS, seed: int = 0) -> PlanSpread:
    """``SE₁²`` of the paired difference under no change, as the sum over scenarios of
    ``w_s² · 2 · u_s`` (``w_s`` the scenario's share of a pass's calls, ``u_s`` the
    variance of its error rate over one session), and its uncertainty.

    ``u_s`` is the scenario's own session variance where it has two sessions or more
    (the CR1 ratio variance times its sessions: unbiased, not floored, so a scenario
    whose sessions agree by chance pulls the sum down as much as one that disagrees
    pushes it up).  A scenario with a single session (a 1-repeat baseline) has no
    spread of its own: its term is its session's squared deviation from the rate of the
    single-session scenarios, ``(r_s − r̄)² · L/(L − 1)``, which holds the session spread
    and, upward, the spread of the scenarios' rates.

    The uncertainty is a **bootstrap-t** over the scenarios (Efron & Tibshirani 1993,
    ch. 12): the terms are resampled :data:`SPREAD_DRAWS` times, seeded; each resample's
    ``t* = (V* − V) / sd*`` (``sd`` the standard error of the sum, from the spread of its
    terms) gives a value ``V − t* · sd`` of the truth.  Studentizing is what the
    parametric bootstrap it replaces lacked: a sum of a few heavy-tailed terms is low
    exactly when its spread is low, and that bootstrap's 80% range held the true need in
    44–57% of 1-repeat baselines.  Only the resampling touches random numbers
    (:func:`_resample_sums`)."""
    weights = {c.scenario: c.calls_per_session for c in components}
    total_w = sum(weights.values())
    by: dict[str, list[tuple[int, int]]] = {}
    for u in units:
        if u.calls > 0:
            by.setdefault(u.scenario, []).append((u.errors, u.calls))
    terms: list[float] = []
    lone = {s: cells[0] for s, cells in by.items() if len(cells) == 1}
    for scenario, cells in by.items():
        w = weights[scenario] / total_w
        if len(cells) >= 2:
            var, _, _ = ratio_variance(cells)
            terms.append(w * w * 2 * var * len(cells))
    if len(lone) >= 2:
        mean = sum(k for k, _ in lone.values()) / sum(n for _, n in lone.values())
        scale = len(lone) / (len(lone) - 1)
        for scenario, (k, n) in lone.items():
            w = weights[scenario] / total_w
            terms.append(w * w * 2 * scale * (k / n - mean) ** 2)
    elif lone:
        [(scenario, (k, n))] = lone.items()
        w, p = weights[scenario] / total_w, k / n
        terms.append(w * w * 2 * run_deff * p * (1 - p) / n)
    variance = math.fsum(terms)
    return PlanSpread(variance, _studentized_quantiles(terms, draws, seed), tuple(terms))


def _studentized_quantiles(terms: Sequence[float], draws: int, seed: int) -> tuple[float, ...]:
    """:data:`SPREAD_POINTS` quantiles of ``V − t* · sd`` over the bootstrap-t
    resamples, each floored at a thousandth of ``V`` (a variance is positive); none when
    the terms cannot be resampled (fewer than 3, no spread among them, or most resamples
    without any): the plan is then the closed form, and no range is given."""
    g = len(terms)
    total = math.fsum(terms)
    if g < 3 or not total > 0:
        return ()
    sd = _sum_sd(terms)
    tiny = 1e-9 * total  # equal terms whose float spread is not 0: no spread
    if not sd > tiny:
        return ()
    values = []
    for resample in _resample_sums(terms, draws, seed):
        star = _sum_sd(resample)
        if star > tiny:
            values.append(max(total * 1e-3, total - (math.fsum(resample) - total) / star * sd))
    if len(values) < draws // 2:
        return ()
    values.sort()
    return tuple(_quantile(values, (i + 0.5) / SPREAD_POINTS) for i in range(SPREAD_POINTS))


def _resample_sums(terms: Sequence[float], draws: int, seed: int) -> list[list[float]]:
    """``draws`` resamples of ``terms`` with replacement, seeded (the standard library's
    Mersenne Twister: the same baseline always gives the same plan)."""
    import random

    rng = random.Random(seed)
    return [rng.choices(terms, k=len(terms)) for _ in range(draws)]


def _sum_sd(terms: Sequence[float]) -> float:
    """The standard error of a sum of ``G`` terms from their spread: ``√(G · s²)``."""
    g = len(terms)
    mean = math.fsum(terms) / g
    return math.sqrt(g / (g - 1) * math.fsum((t - mean) ** 2 for t in terms))


def _quantile(ordered: Sequence[float], q: float) -> float:
    """numpy's default (linear) quantile of sorted values."""
    pos = q * (len(ordered) - 1)
    i = min(int(pos), len(ordered) - 2) if len(ordered) > 1 else 0
    if len(ordered) == 1:
        return ordered[0]
    return ordered[i] + (pos - i) * (ordered[i + 1] - ordered[i])


def need_range(spread: PlanSpread, margin: float, df: float, *, alpha: float = ALPHA,
               power: float = POWER, level: float = RANGE_LEVEL) -> tuple[int, int] | None:
    """The ``level`` range of the repeats the true variance needs (the closed-form plan,
    :func:`repeats_for_margin` without ``spread``, at the ends of the bootstrap-t range
    of ``SE₁²``).  The need is a whole number of repeats, ``⌈x⌉`` of a continuous ``x``:
    the ends are rounded to the nearest (the low one as ``round(x_lo) + 1``, since
    ``⌈x⌉ ≥ L`` whenever ``x > L − 1``), not outward, which at the 10 or so repeats of a
    design effect of 1 widened an 80% range to hold 87–89% in trials."""
    if not spread.variance > 0 or not spread.quantiles:
        return None
    factor = t_quantile(df, alpha) + _t_power(df, power)
    ordered = sorted(spread.quantiles)
    low_v = _quantile(ordered, (1 - level) / 2)
    high_v = _quantile(ordered, (1 + level) / 2)

    def need(v: float) -> float:
        return (factor * 100 * math.sqrt(v) / margin) ** 2

    low = max(2, round(need(low_v)) + 1)
    high = max(2, round(need(high_v)))
    return min(low, high), high


def _binomial_floor(components: Sequence[ScenarioComponent]) -> float:
    """``SE₁²`` were calls independent (design effect 1): the gate's interval is never
    narrower, so neither is the plan's variance."""
    unit = [ScenarioComponent(c.scenario, c.sessions, c.calls_per_session, c.rate, 1.0)
            for c in components]
    return (paired_se100(unit, 1, 0.0) / 100) ** 2


def _t_power(df: float, power: float) -> float:
    from agent_eval.metrics.distributions import t_ppf

    return t_ppf(power, df)


def plan_lines(plan: PowerPlan) -> list[str]:
    """The plan as plain lines for ``agent-eval power``."""
    lines = [
        f"baseline: {plan.scenarios} scenarios, {plan.baseline_repeats} repeat(s) each, "
        f"{plan.calls_per_repeat:.0f} calls per pass over the suite, session design effect "
        f"{plan.run_deff:.2f}",
    ]
    if plan.repeats is None:
        why = ("fewer than two scenarios: a paired plan needs at least two" if plan.scenarios < 2
               else plan.cannot or f"more than {MAX_REPEATS} repeats per scenario would be "
               "needed")
        lines.append(f"cannot plan a margin of {plan.detect:g} errors/100: {why}")
        if plan.zero_error_calls is not None and plan.calls_per_repeat > 0:
            calls = plan.zero_error_calls
            lines.append(
                f"a run with no error passes a margin of {plan.detect:g} from {calls} tool calls "
                f"(its Wilson upper end), about "
                f"{max(2, math.ceil(calls / plan.calls_per_repeat))} repeat(s); one error "
                "needs more")
    else:
        lines.append(
            f"for a margin of {plan.detect:g} errors/100 (the gate's --max-regression): "
            f"{plan.repeats} repeat(s) per scenario, about {plan.total_calls} tool calls per "
            f"run; an unchanged model then passes with {100 * plan.power:.0f}% probability, "
            f"a rise of {plan.detect:g} at most {100 * plan.alpha / 2:g}% (paired, two-sided "
            "95% interval)")
        if plan.repeats_range is not None:
            lo, hi = plan.repeats_range
            lines.append(f"the plan is an estimate: plausibly {lo}–{hi} repeat(s) (80% range "
                         f"of the repeats needed, by a {RANGE_METHOD}); the plan averages "
                         "its power over that uncertainty")
        elif plan.baseline_repeats < 2:
            lines.append("no range for the plan: with one repeat per scenario the session "
                         "spread is read from single sessions, and no range from it holds the "
                         "repeats needed at its stated rate; the plan averages its power over "
                         "that spread, so it is larger than the variance alone asks. A "
                         f"baseline of at least {RANGE_MIN_REPEATS} repeats gives a range")
        elif plan.baseline_repeats < RANGE_MIN_REPEATS:
            lines.append(f"no range for the plan: its range is measured to hold from "
                         f"{RANGE_MIN_REPEATS} repeats per scenario, and this baseline has "
                         f"{plan.baseline_repeats}")
    if plan.detectable_now is not None:
        lines.append(f"with the baseline's {plan.baseline_repeats} repeat(s) the smallest rise "
                     f"detectable at {100 * plan.power:.0f}% power is "
                     f"{plan.detectable_now:.2f} errors/100 (standard error at that rise)")
    return lines
