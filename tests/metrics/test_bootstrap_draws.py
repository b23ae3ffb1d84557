"""power's bootstrap range without numpy: the baselines are drawn with the standard
library's ``random`` (``draw_session_errors``) in the same law as numpy's beta and binomial
draws, and the plans computed from them are the ones numpy's arithmetic gives.

numpy and scipy are test dependencies: the references here."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as sps

from agent_eval.metrics import power
from agent_eval.metrics.power import (
    ScenarioComponent,
    _beta,
    _binomial,
    bootstrap_range,
    draw_session_errors,
)


def _chi2_p(observed, expected_probs, total):
    """Pearson's goodness of fit, cells with fewer than 5 expected pooled into their
    neighbour so the chi-square approximation holds."""
    obs, exp = [], []
    o_acc = e_acc = 0.0
    for o, p in zip(observed, expected_probs, strict=True):
        o_acc += o
        e_acc += p * total
        if e_acc >= 5:
            obs.append(o_acc)
            exp.append(e_acc)
            o_acc = e_acc = 0.0
    obs[-1] += o_acc
    exp[-1] += e_acc
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp, strict=True))
    return sps.chi2.sf(stat, len(obs) - 1)


def _counts(values, n):
    return np.bincount(np.asarray(values), minlength=n + 1)


@pytest.mark.parametrize(
    ("m", "rate", "deff"),
    [(10, 0.05, 2.0), (4, 0.3, 1.6), (25, 0.02, 5.0), (8, 0.7, 3.0), (2, 0.1, 9.0)],
)
def test_a_clustered_scenario_s_sessions_are_beta_binomial(m, rate, deff):
    """Each session's errors: beta-binomial(m, rate·shape, (1 − rate)·shape), shape
    ``(1 − rho)/rho``, rho ``(deff − 1)/(m − 1)``, as numpy's ``binomial(m, beta(a, b))``."""
    draws = 4000
    drawn = draw_session_errors([ScenarioComponent("s", 5, m, rate, deff)], draws, seed=3)
    assert len(drawn) == draws and all(len(d) == 1 and len(d[0]) == 5 for d in drawn)
    values = [k for d in drawn for k in d[0]]
    rho = min((deff - 1) / (m - 1), 0.999)
    shape = (1 - rho) / rho
    a, b = rate * shape, (1 - rate) * shape
    pmf = sps.betabinom.pmf(np.arange(m + 1), m, a, b)
    assert _chi2_p(_counts(values, m), pmf, len(values)) > 1e-3
    # and beside numpy's own draw of the same law (the code this replaces)
    rng = np.random.default_rng(3)
    reference = rng.binomial(m, rng.beta(a, b, len(values)))
    table = np.array([_counts(values, m), _counts(reference, m)])
    table = table[:, table.sum(0) >= 10]
    assert sps.chi2_contingency(table)[1] > 1e-3
    # the calls of one session share the correlation deff says (rho clipped at 0.999):
    # var = m p q (1 + (m − 1) rho), m p q deff below the clip
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    assert mean == pytest.approx(m * rate, rel=0.08)
    assert var == pytest.approx(m * rate * (1 - rate) * (1 + (m - 1) * rho), rel=0.12)


@pytest.mark.parametrize(("m", "rate", "deff"), [(10, 0.05, 1.0), (12, 0.0, 2.0),
                                                 (6, 1.0, 2.0), (1, 0.2, 3.0)])
def test_a_scenario_without_clustering_is_binomial_at_its_rate(m, rate, deff):
    """deff 1, a rate of 0 or 1: no beta, binomial(m, rate); one call per session (rho
    clipped at 0.999, a beta of shapes near 0.0002 and 0.0008) is Bernoulli(rate) all the
    same, which ``random.betavariate`` missed (its gammas underflow to 0)."""
    drawn = draw_session_errors([ScenarioComponent("s", 3, m, rate, deff)], 3000, seed=5)
    values = [k for d in drawn for k in d[0]]
    if rate in (0.0, 1.0):
        assert set(values) == {round(m * rate)}
        return
    pmf = sps.binom.pmf(np.arange(m + 1), m, rate)
    assert _chi2_p(_counts(values, m), pmf, len(values)) > 1e-3


@pytest.mark.parametrize(("n", "p"), [(1, 0.5), (7, 0.93), (40, 0.5), (300, 0.01),
                                      (2000, 0.3), (1500, 0.97)])
def test_the_binomial_draw_has_the_binomial_law(n, p):
    """Inversion for n ≤ 1,000 (the rarer outcome counted), Bernoulli sums beyond."""
    rng = random.Random(11)
    size = 3000 if n <= 1000 else 400
    values = [_binomial(rng, n, p) for _ in range(size)]
    assert all(0 <= v <= n for v in values)
    pmf = sps.binom.pmf(np.arange(n + 1), n, p)
    assert _chi2_p(_counts(values, n), pmf, size) > 1e-3


@pytest.mark.parametrize(("a", "b"), [(0.0002, 0.0008), (0.05, 0.95), (0.5, 3.0),
                                      (2.0, 30.0), (7.0, 0.3)])
def test_the_beta_draw_has_the_beta_law(a, b):
    """Kolmogorov-Smirnov against scipy's beta, at the tiny shapes too (mass at 0 and 1)."""
    rng = random.Random(13)
    values = [_beta(rng, a, b) for _ in range(4000)]
    assert all(0.0 <= v <= 1.0 for v in values)
    if a < 0.01:  # the mass sits at the ends: the share near 1 is a/(a + b)
        high = sum(v > 0.5 for v in values) / len(values)
        assert sps.binomtest(round(high * len(values)), len(values), a / (a + b)).pvalue > 1e-3
        return
    assert sps.kstest(values, sps.beta(a, b).cdf).pvalue > 1e-3


def test_the_draw_is_seeded():
    comps = [ScenarioComponent("a", 3, 9.0, 0.1, 2.0), ScenarioComponent("b", 1, 4.0, 0.3, 1.0)]
    assert draw_session_errors(comps, 50, seed=1) == draw_session_errors(comps, 50, seed=1)
    assert draw_session_errors(comps, 50, seed=1) != draw_session_errors(comps, 50, seed=2)


def _numpy_range(components, run_deff, margin, k, *, level=0.8):
    """The numpy arithmetic bootstrap_range had (before the draw left numpy), on given
    draws ``k`` (draws × scenarios × sessions, sessions past a scenario's own count 0)."""
    factor = power.t_quantile(len(components) - 1, power.ALPHA) + power._t_power(
        len(components) - 1, power.POWER)
    needed = power._needed(power.paired_se100(components, 1, 0.0), factor, margin)
    draws = k.shape[0]
    m = np.array([max(1, round(c.calls_per_session)) for c in components])
    reps = np.array([c.sessions for c in components])
    top = int(reps.max())
    mask = np.arange(top)[None, None, :] < reps[None, :, None]
    calls = (m * reps).astype(float)
    p = k.sum(2) / calls
    resid = (k - p[:, :, None] * m[None, :, None]) * mask
    within = np.where(reps >= 2, reps / np.maximum(reps - 1, 1), 0.0) * (resid**2).sum(2) / calls**2
    binomial = p * (1 - p) / calls
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where((reps >= 2) & (binomial > 0) & (within > 0),
                       within / np.where(binomial > 0, binomial, 1), np.nan)
    if (reps < 2).any():
        calls_total = float((m * reps).sum())
        pr = k.sum((1, 2)) / calls_total
        z = (k - pr[:, None, None] * m[None, :, None]) * mask
        many = reps >= 2
        var = np.zeros(draws)
        if many.any():
            zs = z[:, many, :]
            mean = zs.sum(2) / reps[many]
            dev = ((zs - mean[:, :, None]) ** 2 * mask[:, many, :]).sum(2)
            var += (reps[many] / (reps[many] - 1) * dev).sum(1)
        lone = ~many
        if lone.sum() >= 2:
            zl = z[:, lone, 0]
            g = lone.sum()
            var += g / (g - 1) * ((zl - zl.mean(1, keepdims=True)) ** 2).sum(1)
        b = pr * (1 - pr) / calls_total
        var = var / calls_total**2
        fallback = np.where(b > 0, np.maximum(1.0, var / np.where(b > 0, b, 1)), 1.0)[:, None]
    else:
        fallback = np.full((draws, 1), run_deff)
    d = np.where(np.isnan(own), fallback, np.maximum(1.0, np.nan_to_num(own)))
    shrink = np.maximum(0.5, 1 - d / calls)
    weights = m / m.sum()
    var = (weights**2 * d / m * 2 * p * (1 - p) / shrink).sum(1)
    planned = np.ceil((factor * 100 * np.sqrt(var) / margin) ** 2)
    planned = planned[planned > 0]
    if planned.size < draws // 2:
        return None
    q_lo, q_hi = np.quantile(planned, [(1 - level) / 2, (1 + level) / 2])
    low, high = needed * needed / q_hi, needed * needed / q_lo
    return max(2, math.floor(low)), max(2, math.ceil(high))


@pytest.mark.parametrize("lone", [False, True])
def test_the_plans_from_the_draws_are_numpy_s(monkeypatch, lone):
    """The same drawn baselines give the same range as the numpy arithmetic did, with and
    without scenarios of one session (the drawn run-wide design effect)."""
    rng = random.Random(7)
    comps = [ScenarioComponent(f"s{i}", 1 if lone and i % 3 == 0 else rng.randint(2, 5),
                               rng.uniform(3, 15), rng.uniform(0.01, 0.2), rng.uniform(1, 3))
             for i in range(12)]
    drawn = draw_session_errors(comps, 400, seed=0)
    top = max(c.sessions for c in comps)
    k = np.array([[ks + [0] * (top - len(ks)) for ks in d] for d in drawn], dtype=float)
    monkeypatch.setattr(power, "draw_session_errors", lambda *_: drawn)
    for margin in (1.0, 2.0, 5.0):
        got = bootstrap_range(comps, 1.7, margin)
        assert got is not None
        assert got == _numpy_range(comps, 1.7, margin, k)
