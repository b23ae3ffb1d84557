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
With ``R`` repeats per scenario and scenario weights
``w_s`` (calls share), the paired standard error is::

    SE²(R) = Σ_s w_s² · deff_s / (R · m_s) · [p_s(1 − p_s) + p'_s(1 − p'_s)]

``p_s`` the baseline's per-call error rate on scenario ``s``, ``p'_s = p_s + δ`` (``δ = 0``
for the margin plan), ``m_s`` calls per session, ``deff_s`` the scenario's design effect of sessions
(from the spread of its repeats; the run-wide one where a scenario has a single repeat or
no errors); each binomial term estimated without the plug-in's bias (``_binomial_terms``).
These are the baseline's variance components: within-scenario session spread
(deff_s) and the per-scenario rates; the spread *between* scenarios cancels in the paired
design and is what the independent plan pays for (docs/statistics.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import Unit, detectable_rise, ratio_variance, t_quantile
from agent_eval.metrics.stats import ALPHA, percentile

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
    """Repeats per scenario and calls per run to detect a rise of ``detect`` errors/100
    with probability ``power`` by the gate's paired interval rule at ``alpha``."""
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
    needed = repeats_for_margin(unit_se, detect, s - 1, alpha=alpha, power=power)
    repeats = None if needed is None else max(2, needed)  # 2: within-scenario SE
    total = None if repeats is None else round(repeats * calls_per_repeat)
    sessions = sum(per_scenario.values())
    df = sessions - s if base_repeats >= 2 else s - 1
    spread = None if needed is None else bootstrap_range(components, run_deff, detect,
                                                         alpha=alpha, power=power)
    return PowerPlan(detect, alpha, power, s, base_repeats, calls_per_repeat, repeats, total,
                     now, run_deff, tuple(components), spread, df,
                     "" if repeats else f"more than {MAX_REPEATS} repeats per scenario "
                     "would be needed")


def repeats_for_margin(unit_se100: float, margin100: float, df: float, *,
                       alpha: float = ALPHA, power: float = POWER) -> int | None:
    """The fewest repeats per scenario ``R`` with ``(t_{1−α/2} + t_power) · SE₁ / √R ≤
    margin``, ``SE₁`` the standard error at one repeat: at ``R`` an unchanged model's
    upper end is within the margin with probability ``power``.  ``None`` past
    :data:`MAX_REPEATS` or when it cannot be said (no margin, no variance)."""
    if not margin100 > 0 or not unit_se100 > 0 or not df > 0:
        return None
    factor = t_quantile(df, alpha) + _t_power(df, power)
    needed = math.ceil((factor * unit_se100 / margin100) ** 2)
    return needed if needed <= MAX_REPEATS else None


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


def repeats_range(needed: float, df: int, *, level: float = 0.8) -> tuple[int, int] | None:
    """How uncertain a plan is: the repeats at the ends of the ``level`` chi-square interval
    of the variance the plan rests on (estimated on ``df`` degrees of freedom), since
    repeats scale with that variance: ``R · df / χ²_{(1±level)/2, df}``."""
    if df < 1 or not math.isfinite(needed):
        return None
    from agent_eval.metrics.distributions import chi2_ppf

    upper = (1 + level) / 2
    low = needed * df / chi2_ppf(upper, df)
    high = needed * df / chi2_ppf(1 - upper, df)
    return max(2, math.ceil(low)), max(2, math.ceil(high))


BOOTSTRAP_DRAWS = 400
RANGE_METHOD = "parametric bootstrap of the baseline"


def bootstrap_range(components: Sequence[ScenarioComponent], run_deff: float, margin: float,
                    *, alpha: float = ALPHA, power: float = POWER, level: float = 0.8,
                    draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> tuple[int, int] | None:
    """How uncertain a plan is: the ``level`` range of the repeats the true variance
    needs, by a parametric bootstrap of the baseline (Efron & Tibshirani 1993, ch. 6).

    Baselines like this one are drawn from the plan's own fit (each scenario's sessions
    beta-binomial at its rate and design effect, as many sessions and calls), each is
    planned the same way, and the spread of those plans around this one is turned back
    onto the truth on the log scale (the basic bootstrap: ``R̂²/q_hi`` to ``R̂²/q_lo``):
    a plan low by chance has a range that reaches up.  The chi-square range on sessions −
    scenarios df it replaces held the true need in 36–85% of baselines, not 80%: the
    variance of a low, clustered rate is far noisier than its df say.  Seeded, so the
    same baseline prints the same range.  ``None`` when the plan cannot be drawn."""
    factor = t_quantile(len(components) - 1, alpha) + _t_power(len(components) - 1, power)
    needed = _needed(paired_se100(components, 1, 0.0), factor, margin)
    if needed is None or len(components) < 2:
        return None
    m = [max(1, round(c.calls_per_session)) for c in components]
    reps = [c.sessions for c in components]
    calls = [float(mi * ri) for mi, ri in zip(m, reps, strict=True)]
    weights = [mi / sum(m) for mi in m]
    lone = any(r < 2 for r in reps)
    planned = []
    for k in draw_session_errors(components, draws, seed):
        p = [sum(ks) / n for ks, n in zip(k, calls, strict=True)]
        # where a scenario has one session: each drawn baseline's own run-wide design effect
        fallback = _bootstrap_run_deff(k, m, reps) if lone else run_deff
        var = 0.0
        for ks, ms, r, n, ps, w in zip(k, m, reps, calls, p, weights, strict=True):
            binomial = ps * (1 - ps) / n
            within = (r / (r - 1) * sum((x - ps * ms) ** 2 for x in ks) / n**2
                      if r >= 2 else 0.0)
            d = max(1.0, within / binomial) if binomial > 0 and within > 0 else fallback
            shrink = max(0.5, 1 - d / n)
            var += w * w * d / ms * 2 * ps * (1 - ps) / shrink  # at one repeat, δ = 0
        plan = math.ceil((factor * 100 * math.sqrt(var) / margin) ** 2)
        if plan > 0:
            planned.append(plan)
    if len(planned) < draws // 2:
        return None
    q_lo = percentile(planned, 100 * (1 - level) / 2)
    q_hi = percentile(planned, 100 * (1 + level) / 2)
    assert q_lo is not None and q_hi is not None  # planned is not empty
    low, high = needed * needed / q_hi, needed * needed / q_lo
    return max(2, math.floor(low)), max(2, math.ceil(high))


def draw_session_errors(components: Sequence[ScenarioComponent], draws: int,
                        seed: int) -> list[list[list[int]]]:
    """``draws`` baselines like this one: per draw, per scenario, each session's errors.

    A scenario's sessions are beta-binomial at its rate and design effect: each session's
    own rate from a beta with mean ``rate`` and intra-session correlation
    ``rho = (deff − 1)/(m − 1)`` (shape ``(1 − rho)/rho``), then its ``m`` calls binomial at
    that rate; a scenario without clustering (``rho = 0``, a rate of 0 or 1) is binomial
    at ``rate``.  Drawn with the standard library's Mersenne Twister, seeded."""
    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        baseline = []
        for c in components:
            m = max(1, round(c.calls_per_session))
            rho = min(max((c.deff - 1) / max(m - 1, 1), 0.0), 0.999)
            clustered = rho > 0 and 0 < c.rate < 1
            shape = (1 - rho) / rho if clustered else 1.0
            baseline.append([
                _binomial(rng, m, _beta(rng, c.rate * shape, (1 - c.rate) * shape)
                          if clustered else c.rate)
                for _ in range(c.sessions)])
        out.append(baseline)
    return out


def _beta(rng: random.Random, a: float, b: float) -> float:
    """One beta(a, b) draw as ``X/(X + Y)``, ``X ~ gamma(a)``, ``Y ~ gamma(b)``, the gammas
    taken on the log scale: at the shapes a clustered low rate gives (``a`` near 0.0001
    where ``rho`` reaches 0.999) ``gammavariate`` underflows to 0 most of the time and
    ``random.betavariate`` would return 0 where the beta's mass is near 1."""
    d = _log_gamma(rng, b) - _log_gamma(rng, a)
    return 0.0 if d > 700 else 1 / (1 + math.exp(d))


def _log_gamma(rng: random.Random, shape: float) -> float:
    """``log X``, ``X ~ gamma(shape)``; below shape 1 as ``gamma(shape + 1) · U^(1/shape)``
    (Marsaglia & Tsang 2000, sec. 6), the power taken as a logarithm."""
    if shape >= 1:
        return math.log(rng.gammavariate(shape, 1.0))
    return math.log(rng.gammavariate(shape + 1, 1.0)) + math.log(1.0 - rng.random()) / shape


def _binomial(rng: random.Random, n: int, p: float) -> int:
    """One binomial(n, p) draw: by inversion of the cdf (one uniform), the rarer outcome
    counted so the first term ``q^n`` cannot underflow; a sum of Bernoulli trials past
    1,000 calls."""
    if p <= 0:
        return 0
    if p >= 1:
        return n
    if p > 0.5:
        return n - _binomial(rng, n, 1 - p)
    if n > 1000:
        return sum(rng.random() < p for _ in range(n))
    u = rng.random()
    ratio = p / (1 - p)
    pmf = (1 - p) ** n
    k = 0
    while u > pmf and k < n:
        u -= pmf
        pmf *= ratio * (n - k) / (k + 1)
        k += 1
    return k


def _bootstrap_run_deff(k: list[list[int]], m: list[int], reps: list[int]) -> float:
    """One drawn baseline's run-wide design effect (``variance_components``'): lone
    sessions pooled into one stratum, the rest centred within their scenario."""
    calls_total = float(sum(mi * ri for mi, ri in zip(m, reps, strict=True)))
    p = sum(sum(ks) for ks in k) / calls_total
    var = 0.0
    lone = []
    for ks, ms, r in zip(k, m, reps, strict=True):
        z = [x - p * ms for x in ks]
        if r >= 2:
            mean = sum(z) / r
            var += r / (r - 1) * sum((zi - mean) ** 2 for zi in z)
        else:
            lone.append(z[0])
    g = len(lone)
    if g >= 2:
        mean = sum(lone) / g
        var += g / (g - 1) * sum((zi - mean) ** 2 for zi in lone)
    binomial = p * (1 - p) / calls_total
    var = var / calls_total**2
    return max(1.0, var / binomial) if binomial > 0 else 1.0


def _needed(unit_se100: float, factor: float, margin: float) -> float | None:
    if not unit_se100 > 0 or not margin > 0:
        return None
    return max(2.0, math.ceil((factor * unit_se100 / margin) ** 2))


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
                         f"of the repeats needed, by a {RANGE_METHOD})")
            if plan.baseline_repeats < 2 and plan.run_deff > 1.0:
                lines.append("with one repeat per scenario the design effect is itself read "
                             "from single sessions, so plan and range may both be low: plan "
                             "from a baseline of at least 3 repeats to rely on them")
    if plan.detectable_now is not None:
        lines.append(f"with the baseline's {plan.baseline_repeats} repeat(s) the smallest rise "
                     f"detectable at {100 * plan.power:.0f}% power is "
                     f"{plan.detectable_now:.2f} errors/100 (standard error at that rise)")
    return lines
