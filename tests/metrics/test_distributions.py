"""The hand-written distribution functions (agent_eval.metrics.distributions) held to
scipy over grids that include extreme arguments.  scipy is a test dependency for this.

Tolerances (relative unless said):
* normal cdf/sf/ppf: 1e-12.
* incomplete beta and gamma, chi-square, binomial: 1e-12 with shapes ≤ 100; 5e-9 with
  shapes up to 1e6, where the two disagree by more than either's rounding: at (0.1, 1e6)
  scipy's ``betaln`` is 1.2e-9 off the Tricomi–Erdélyi series for ``Γ(b + a)/Γ(b)``,
  which ours matches to 1e-15.
* the inverses (beta, t, chi-square): 1e-10 wherever scipy's own answer round-trips;
  where scipy's does not (its ``betaincinv`` and ``stdtrit`` give 0 or inf in the far
  tails), and at p = 1e-300 (where scipy's ``betainc`` is itself off), ours is held to
  the forward function instead.
* Student's t: 1e-9 against scipy for |t| ≥ 1e-6 (5e-9 at df ≥ 1e6, where the continued
  fraction runs ~√df terms); below that scipy's ``stdtr`` loses
  digits (0.4999999953 for t = 1e-8, df = 1, where 1/2 − atan(t)/π = 0.4999999968), so
  df 1 and 2 are held to their closed forms over the whole grid at 1e-13.
* Fisher and the binomial test: 1e-9, ties included (the table of equal likelihood on the
  far side of the mode must be counted, as scipy counts it).
* the paired permutation test: equal to scipy's (1e-12) when exact (2^S ≤ resamples);
  within 4 Monte Carlo standard errors otherwise.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, special
from scipy import stats as sps

from agent_eval.metrics import distributions as D


def close(ours: float, ref: float, rel: float) -> bool:
    if ours == ref:
        return True
    if math.isnan(ref):
        return math.isnan(ours)
    return abs(ours - ref) <= rel * abs(ref) + 1e-300


SHAPES = [0.1, 0.5, 1, 1.5, 2, 5, 10, 37.5, 100, 1e3, 1e4, 1e5, 1e6]
XS = [1e-12, 1e-6, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999999]
PS = [1e-300, 1e-100, 1e-12, 1e-6, 0.025, 0.2, 0.5, 0.8, 0.975, 1 - 1e-6, 1 - 1e-12]


def test_normal_against_scipy():
    for x in [-38, -20, -10, -3, -1.96, -0.5, 0, 1e-9, 1, 5, 9, 20, 37]:
        assert close(D.norm_cdf(x), float(sps.norm.cdf(x)), 1e-12), x
        assert close(D.norm_sf(x), float(sps.norm.sf(x)), 1e-12), x
    for p in PS + [0.3, 0.5 + 1e-12]:
        assert close(D.norm_ppf(p), float(sps.norm.ppf(p)), 1e-12), p
    assert D.norm_ppf(0) == -math.inf and D.norm_ppf(1) == math.inf
    assert math.isnan(D.norm_ppf(1.5))


@pytest.mark.parametrize("a", SHAPES)
def test_incomplete_beta_against_scipy(a):
    for b, x in itertools.product(SHAPES, XS):
        tol = 1e-12 if max(a, b) <= 100 else 5e-9
        assert close(D.beta_cdf(x, a, b), float(special.betainc(a, b, x)), tol), (a, b, x)
        assert close(D.beta_sf(x, a, b), float(special.betaincc(a, b, x)), tol), (a, b, x)
    assert D.beta_cdf(0, a, 2) == 0 and D.beta_cdf(1, a, 2) == 1


@pytest.mark.parametrize("a", SHAPES)
def test_inverse_incomplete_beta_against_scipy(a):
    for b, p in itertools.product(SHAPES, PS):
        ours = D.beta_ppf(p, a, b)
        if p < 1e-290:  # scipy's betainc itself is off by up to 0.4% there (at (1000, 10)
            # our root gives 1e-300 by ours, 9.96e-301 by scipy's): ours must round-trip
            if ours <= 5e-324:  # the root is below the least double
                assert D.beta_cdf(5e-324, a, b) >= p, (a, b, p)
            else:
                assert close(D.beta_cdf(ours, a, b), p, 1e-9), (a, b, p, ours)
            continue
        ref = float(special.betaincinv(a, b, p))
        if close(ours, ref, 1e-10 if max(a, b) <= 100 else 5e-9) or abs(ours - ref) <= 4 * D.EPS:
            continue  # equal, or a few doubles apart next to 1 (where x has no more digits)
        # else scipy's own answer must be off (0 in the far tails): ours round-trips
        assert not close(float(special.betainc(a, b, ref)), p, 1e-9), (a, b, p, ours, ref)
        assert 0 < ours < 1, (a, b, p)
        assert close(D.beta_cdf(ours, a, b), p, 1e-9), (a, b, p, ours, ref)


DFS = [1, 1.5, 2, 3, 4.7, 10, 29, 100, 1e3, 1e5, 1e8, math.inf]
TS = [-1e6, -40, -5, -1.96, -0.1, -1e-8, 0, 1e-8, 0.3, 2, 7, 50, 1e10]


def test_t_against_scipy_and_closed_forms():
    for df, t in itertools.product(DFS, TS):
        tol = 1e-9 if df < 1e6 else 5e-9
        if abs(t) >= 1e-6 or t == 0:
            assert close(D.t_sf(t, df), float(sps.t.sf(t, df)), tol), (t, df)
            assert close(D.t_cdf(t, df), float(sps.t.cdf(t, df)), tol), (t, df)
    for t in TS:
        cauchy = math.atan(1 / t) / math.pi if t > 0 else 0.5 - math.atan(t) / math.pi  # df 1
        assert close(D.t_sf(t, 1), cauchy, 1e-13), t
        two = 0.5 - t / (2 * math.sqrt(2 + t * t))  # df = 2
        if t < 1e6:
            assert close(D.t_sf(t, 2), two, 1e-12), t


def test_t_quantile_against_scipy():
    for df, p in itertools.product(DFS, PS + [0.4999, 0.5, 0.5001, 0.999]):
        ours, ref = D.t_ppf(p, df), float(sps.t.ppf(p, df))
        if math.isfinite(ref) and close(float(sps.t.cdf(ref, df)), p, 1e-9):
            assert close(ours, ref, 1e-10 if df < 1e6 else 5e-9), (p, df, ours, ref)
        else:  # scipy's is off at p = 1e-300 with few df (inf, or its cdf gives 0): ours
            # round-trips
            assert math.isfinite(ours) and close(D.t_cdf(ours, df), p, 1e-9), (p, df, ours)
    # the quantiles the intervals use, to the last digits
    assert D.t_ppf(0.975, 1) == pytest.approx(12.706204736174698, rel=1e-13)
    assert D.t_ppf(0.975, math.inf) == pytest.approx(1.959963984540054, rel=1e-15)


def test_gamma_and_chi_square_against_scipy():
    for df, x in itertools.product([0.5, 1, 2, 3, 7, 28, 100, 1e3, 1e5],
                                   [1e-8, 0.01, 0.5, 1, 3, 10, 50, 200, 1e3, 1e5, 2e5]):
        tol = 1e-12 if df <= 100 else 5e-9
        assert close(D.chi2_cdf(x, df), float(sps.chi2.cdf(x, df)), tol), (x, df)
        assert close(D.chi2_sf(x, df), float(sps.chi2.sf(x, df)), tol), (x, df)
        assert close(D.gamma_p(df, x), float(special.gammainc(df, x)), tol), (x, df)
        assert close(D.gamma_q(df, x), float(special.gammaincc(df, x)), tol), (x, df)
    for df, p in itertools.product([1, 2, 3, 7, 28, 100, 1e3], [1e-12, 0.1, 0.5, 0.9, 1 - 1e-10]):
        assert close(D.chi2_ppf(p, df), float(sps.chi2.ppf(p, df)), 1e-10), (p, df)


def test_binomial_and_binomial_test_against_scipy():
    for n, p in itertools.product([1, 2, 5, 20, 100, 1000, 10**5], [1e-6, 0.01, 0.3, 0.5, 0.9]):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            tol = 1e-12 if n <= 1000 else 5e-9
            assert close(D.binom_pmf(k, n, p), float(sps.binom.pmf(k, n, p)), tol), (k, n, p)
            assert close(D.binom_cdf(k, n, p), float(sps.binom.cdf(k, n, p)), tol), (k, n, p)
            assert close(D.binom_sf(k, n, p), float(sps.binom.sf(k, n, p)), tol), (k, n, p)
            assert close(D.binomtest_p(k, n, p), float(sps.binomtest(k, n, p).pvalue), 1e-9)
    for k, n in itertools.product(range(13), range(1, 13)):  # McNemar's small tables
        if k <= n:
            assert close(D.binomtest_p(k, n), float(sps.binomtest(k, n).pvalue), 1e-12)


def test_hypergeometric_and_fisher_against_scipy():
    for tab in itertools.product([0, 1, 3, 10, 57], [0, 2, 9, 40], [0, 1, 5, 33], [0, 4, 18, 250]):
        table = [[tab[0], tab[1]], [tab[2], tab[3]]]
        assert close(D.fisher_exact_p(table), float(sps.fisher_exact(table).pvalue), 1e-9), table
    for table in ([[3, 10**5], [30, 10**5]], [[500, 20000], [600, 19000]],
                  [[0, 10**6], [7, 10**6]], [[57, 40], [1, 18]], [[2, 2], [2, 2]]):
        assert close(D.fisher_exact_p(table), float(sps.fisher_exact(table).pvalue), 1e-9), table
    for total, good, draws in [(20, 7, 12), (116, 97, 58), (5000, 300, 2500)]:
        for k in range(0, min(good, draws) + 1, max(1, min(good, draws) // 9)):
            ref = sps.hypergeom(total, good, draws)
            assert close(D.hypergeom_pmf(k, total, good, draws), float(ref.pmf(k)), 1e-9)
            assert close(D.hypergeom_cdf(k, total, good, draws), float(ref.cdf(k)), 1e-9), k
            assert close(D.hypergeom_sf(k, total, good, draws), float(ref.sf(k)), 1e-9), k


def test_brent_against_scipy():
    cases = [(lambda x: x**3 - 2 * x - 5, 2, 3), (lambda x: math.cos(x) - x, 0, 1),
             (lambda x: math.exp(x) - 1e6, 0, 50), (lambda x: x - 1e-200, 0, 1),
             (lambda x: math.tanh(50 * (x - 0.3)), -1, 1)]
    for f, a, b in cases:
        ref = optimize.brentq(f, a, b, xtol=1e-300 if a == 0 and b == 1 else 1e-12)
        ours = D.brentq(f, a, b, xtol=1e-300 if a == 0 and b == 1 else 1e-12)
        assert abs(ours - ref) <= 2e-12 + 1e-15 * abs(ref), (ours, ref)
    with pytest.raises(ValueError, match="different signs"):
        D.brentq(lambda x: x * x + 1, -1, 1)


def _scipy_paired(a, b, w, n):
    a, b, w = (np.asarray(v, float) for v in (a, b, w))
    res = sps.permutation_test((a, b), lambda x, y, axis=-1: np.sum(w * (y - x), axis=axis),
                               permutation_type="samples", vectorized=True, n_resamples=n,
                               alternative="two-sided", random_state=0)
    return min(1.0, float(res.pvalue))


def test_paired_permutation_exact_equals_scipy():
    rng = np.random.default_rng(7)
    for s in [2, 3, 5, 8, 11, 13]:  # scipy needs two pairs
        for _ in range(4):
            a = rng.integers(0, 5, s) / 4
            b = rng.integers(0, 5, s) / 4
            w = rng.integers(1, 4, s).astype(float)
            ours = D.paired_permutation_p(a, b, w / w.sum(), n_resamples=9999)
            assert close(ours, _scipy_paired(a, b, w / w.sum(), 9999), 1e-12), (a, b, w)


def test_paired_permutation_monte_carlo_within_its_error():
    rng = np.random.default_rng(11)
    for s in [14, 20, 29]:
        a = rng.random(s) * 0.3
        b = a + rng.normal(0.03, 0.05, s)
        w = np.full(s, 1 / s)
        ours = D.paired_permutation_p(a, b, w, seed=3)
        ref = _scipy_paired(a, b, w, 9999)
        se = math.sqrt(max(ref, 1e-4) * (1 - min(ref, 0.9999)) / 9999) * 2
        assert abs(ours - ref) <= 4 * se + 2e-4, (s, ours, ref)
        assert ours == D.paired_permutation_p(a, b, w, seed=3)  # seeded: repeatable
