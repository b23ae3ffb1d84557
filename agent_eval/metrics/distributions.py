"""The distribution functions the core's statistics use, by hand, so that the core install
needs neither scipy nor numpy (together about 190 MB and most of ``pip install .``'s time).

Every function here is held to the scipy function named in its docstring by
``tests/metrics/test_distributions.py`` over a grid that includes extreme arguments, with the
tolerance stated there; scipy stays a test dependency for exactly that.  What each one buys:

* :func:`norm_cdf`, :func:`norm_sf`, :func:`norm_ppf`: the normal tails and quantile (the
  large-sample interval, McNemar's and the z-test's p).  The quantile is the standard
  library's :class:`statistics.NormalDist` (Wichura's AS241, 1988, about 1e-16 relative).
* :func:`t_cdf`, :func:`t_sf`, :func:`t_ppf`: Student's t, which every clustered interval
  and the gate's and compare's p rest on; through the regularized incomplete beta function.
* :func:`beta_cdf`, :func:`beta_sf`, :func:`beta_ppf`: the regularized incomplete beta
  function and its inverse (Clopper–Pearson's exact interval, the t and binomial tails).
  The function is Lentz's continued fraction as in Numerical Recipes (Press et al., 3rd ed.,
  §6.4, ``betacf``); the inverse starts from the same book's initial guess (``invbetai``,
  after Abramowitz & Stegun 26.5.22) and takes Halley steps kept inside a bracket.
* :func:`gamma_p`, :func:`gamma_q`, :func:`chi2_cdf`, :func:`chi2_sf`, :func:`chi2_ppf`:
  the regularized incomplete gamma function (series and continued fraction, Numerical
  Recipes §6.2) and the chi-square distribution (how uncertain a power plan is).
* :func:`binom_pmf`, :func:`binom_cdf`, :func:`binom_sf`, :func:`binomtest_p`: the binomial
  distribution and scipy's two-sided exact binomial test (exact McNemar).
* :func:`hypergeom_pmf`, :func:`hypergeom_cdf`, :func:`hypergeom_sf`,
  :func:`fisher_exact_p`: the hypergeometric distribution and scipy's two-sided Fisher
  exact test (the "minimum likelihood" rule, as in R).
* :func:`brentq`: Brent's root finder (Brent 1973, "Algorithms for Minimization without
  Derivatives", ch. 4, in the form of scipy's ``brentq.c``): the detectable rises and
  every inverse here whose derivative is awkward.
* :func:`paired_permutation_p`: the paired permutation test of a weighted sum of
  differences (``scipy.stats.permutation_test(..., permutation_type="samples")``): exact
  over all ``2^S`` sign flips when there are at most as many as the resamples asked for,
  else seeded Monte Carlo with scipy's ``+1`` correction.

Pure functions of floats and ints; nothing here imports beyond the standard library.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from statistics import NormalDist

EPS = 2.220446049250313e-16
"""The double's machine epsilon."""
_TINY = 1e-300
_MAXIT = 100_000
"""Continued fractions converge in O(√max(a, b)) terms; a million calls is ~1,000."""

__all__ = [
    "beta_cdf", "beta_ppf", "beta_sf", "binom_cdf", "binom_pmf", "binom_sf", "binomtest_p",
    "brentq", "chi2_cdf", "chi2_ppf", "chi2_sf", "fisher_exact_p", "gamma_p", "gamma_q",
    "hypergeom_cdf", "hypergeom_pmf", "hypergeom_sf", "norm_cdf", "norm_ppf", "norm_sf",
    "paired_permutation_p", "t_cdf", "t_ppf", "t_sf",
]


# --- normal -----------------------------------------------------------------------------

def norm_cdf(x: float) -> float:
    """``scipy.stats.norm.cdf``: ``erfc(−x/√2)/2``, accurate in the lower tail too."""
    return 0.5 * math.erfc(-x / math.sqrt(2))


def norm_sf(x: float) -> float:
    """``scipy.stats.norm.sf``: ``erfc(x/√2)/2``."""
    return 0.5 * math.erfc(x / math.sqrt(2))


def norm_ppf(p: float) -> float:
    """``scipy.stats.norm.ppf`` (``scipy.special.ndtri``): the standard library's
    ``NormalDist().inv_cdf``, which is Wichura's AS241 (PPND16); ±inf at 0 and 1."""
    if math.isnan(p) or p < 0 or p > 1:
        return math.nan
    if p == 0:
        return -math.inf
    if p == 1:
        return math.inf
    return NormalDist().inv_cdf(p)


# --- incomplete beta --------------------------------------------------------------------

def _stirling_rest(x: float) -> float:
    """``lgamma(x) − ((x − ½) log x − x + ½ log 2π)`` for ``x ≥ 10``: the first terms of
    Stirling's series (Abramowitz & Stegun 6.1.41; the next term is below 1e-11)."""
    r = 1.0 / (x * x)
    return (1.0 / 12 - r * (1.0 / 360 - r * (1.0 / 1260 - r / 1680))) / x


def _lbeta(a: float, b: float) -> float:
    """``log B(a, b)``.  For a large shape the ``lgamma`` difference would lose about
    ``ε·a log a`` (1e-9 at a million); Stirling's form keeps the cancelling terms apart:
    ``(a − ½) log(a/s) + (b − ½) log(b/s) − ½ log s + ½ log 2π`` plus the series' rests
    (both large), or ``lgamma(b) − [lgamma(a + b) − lgamma(a)]`` with the bracket as
    ``(a − ½) log1p(b/a) + b log s − b`` plus rests (one large)."""
    small, big = min(a, b), max(a, b)
    if big < 100:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    s = a + b
    rest = _stirling_rest(big) - _stirling_rest(s)
    if small >= 10:
        return (0.5 * math.log(2 * math.pi) - 0.5 * math.log(s)
                + (big - 0.5) * -math.log1p(small / big) + (small - 0.5) * math.log(small / s)
                + rest + _stirling_rest(small))
    return math.lgamma(small) - ((big - 0.5) * math.log1p(small / big) + small * math.log(s)
                                 - small - rest)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` by the modified Lentz method (Numerical
    Recipes §6.4 ``betacf``; Lentz 1976, Thompson & Barnett 1986)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAXIT + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < EPS:
            break
    return h


def _ibeta(a: float, b: float, x: float, y: float) -> tuple[float, float]:
    """``(I_x(a, b), 1 − I_x(a, b))`` with ``y = 1 − x`` given exactly by the caller (the
    t tails pass ``t²/(ν + t²)`` rather than lose it to ``1 − ν/(ν + t²)``).  The
    fraction is evaluated on the side where it converges (``x < (a+1)/(a+b+2)``) and the
    other value is its complement, so the smaller of the two is the accurate one."""
    if x <= 0:
        return 0.0, 1.0
    if y <= 0:
        return 1.0, 0.0
    # log x as log1p(−y) near 1: a large shape times log x's rounding would cost ε·a
    lx = math.log(x) if x < 0.5 else math.log1p(-y)
    ly = math.log(y) if y < 0.5 else math.log1p(-x)
    log_front = a * lx + b * ly - _lbeta(a, b)
    if x < (a + 1.0) / (a + b + 2.0):
        low = math.exp(log_front) * _betacf(a, b, x) / a
        return low, 1.0 - low
    high = math.exp(log_front) * _betacf(b, a, y) / b
    return 1.0 - high, high


def _ibeta_fraction(a: float, b: float, x: float, y: float) -> float:
    """``I_x(a, b)`` by its continued fraction in ``x``, whichever side converges faster."""
    if x <= 0:
        return 0.0
    lx = math.log(x) if x < 0.5 else math.log1p(-y)
    ly = math.log(y) if y < 0.5 else math.log1p(-x)
    return math.exp(a * lx + b * ly - _lbeta(a, b)) * _betacf(a, b, x) / a


def beta_cdf(x: float, a: float, b: float) -> float:
    """``scipy.stats.beta.cdf`` = ``scipy.special.betainc(a, b, x)``: the regularized
    incomplete beta function ``I_x(a, b)``."""
    if math.isnan(x):
        return math.nan
    return _ibeta(a, b, min(max(x, 0.0), 1.0), 1.0 - min(max(x, 0.0), 1.0))[0]


def beta_sf(x: float, a: float, b: float) -> float:
    """``scipy.stats.beta.sf`` = ``scipy.special.betaincc(a, b, x)``: ``1 − I_x(a, b)``,
    accurate where it is small."""
    if math.isnan(x):
        return math.nan
    return _ibeta(a, b, min(max(x, 0.0), 1.0), 1.0 - min(max(x, 0.0), 1.0))[1]


def _beta_guess(a: float, b: float, p: float) -> float:
    """Numerical Recipes' starting point for ``I_x(a, b) = p`` (``invbetai``): a normal
    approximation (Abramowitz & Stegun 26.5.22) when both shapes are at least 1, else the
    two power-law ends of the density."""
    if a >= 1 and b >= 1:
        pp = p if p < 0.5 else 1.0 - p
        t = math.sqrt(-2.0 * math.log(pp))
        x = (2.30753 + t * 0.27061) / (1.0 + t * (0.99229 + t * 0.04481)) - t
        if p < 0.5:
            x = -x
        al = (x * x - 3.0) / 6.0
        h = 2.0 / (1.0 / (2.0 * a - 1.0) + 1.0 / (2.0 * b - 1.0))
        w = (x * math.sqrt(al + h) / h
             - (1.0 / (2.0 * b - 1.0) - 1.0 / (2.0 * a - 1.0)) * (al + 5.0 / 6.0 - 2.0 / (3.0 * h)))
        if 2 * w > 700:
            return _TINY
        return a / (a + b * math.exp(2.0 * w))
    lna, lnb = math.log(a / (a + b)), math.log(b / (a + b))
    t, u = math.exp(a * lna) / a, math.exp(b * lnb) / b
    w = t + u
    if p < t / w:
        return (a * w * p) ** (1.0 / a)
    return 1.0 - (b * w * (1.0 - p)) ** (1.0 / b)


def beta_ppf(p: float, a: float, b: float) -> float:
    """``scipy.stats.beta.ppf`` = ``scipy.special.betaincinv(a, b, p)``: the ``x`` with
    ``I_x(a, b) = p``.  Halley steps on ``I_x − p`` (Numerical Recipes ``invbetai``), each
    kept inside the bracket the signs so far allow (bisection when a step leaves it), so
    it converges for every shape; the bracket also ends it at full precision."""
    if math.isnan(p) or p < 0 or p > 1 or not a > 0 or not b > 0:
        return math.nan
    if p == 0:
        return 0.0
    if p == 1:
        return 1.0
    lo, hi, err_lo, err_hi = 0.0, 1.0, -math.inf, math.inf
    x = min(max(_beta_guess(a, b, p), 5e-324), 1.0 - EPS / 2)
    lb = _lbeta(a, b)
    for _ in range(400):
        low, high = _ibeta(a, b, x, 1.0 - x)
        err = low - p if p <= 0.5 else (1.0 - p) - high  # < 0: x is below the root
        if err < 0:
            lo, err_lo = x, err
        elif err > 0:
            hi, err_hi = x, err
        else:
            return x
        log_dens = (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - lb
        new = math.nan
        if -700 < -log_dens < 700:
            u = err * math.exp(-log_dens)
            halley = u * ((a - 1.0) / x - (b - 1.0) / (1.0 - x))
            new = x - u / (1.0 - 0.5 * min(1.0, halley))
        if not (lo < new < hi):
            new = math.sqrt(lo) * math.sqrt(hi) if lo > 0 and hi < 0.5 else 0.5 * (lo + hi)
            if lo == 0:
                new = hi / 16 if hi > 1e-290 else 0.5 * hi
        if new in (lo, hi):  # the bracket is two neighbouring doubles: the nearer end
            return lo if -err_lo <= err_hi else hi
        if abs(new - x) <= 4 * EPS * abs(new) or new <= 0:
            return new
        x = new
    return x


# --- Student's t ------------------------------------------------------------------------

def t_sf(t: float, df: float) -> float:
    """``scipy.stats.t.sf`` (``scipy.special.stdtr(df, −t)``): ``I_{ν/(ν+t²)}(ν/2, 1/2)/2``
    for ``t > 0``; the normal tail for ``df = inf``."""
    if math.isnan(t) or math.isnan(df) or df <= 0:
        return math.nan
    if math.isinf(df):
        return norm_sf(t)
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    t2 = t * t
    x, y = df / (df + t2), t2 / (df + t2)
    if t2 < 6:  # near the median: I_x(ν/2, ½) = 1 − I_y(½, ν/2), the fraction in y (small),
        # which keeps 1e-14 where the one in x (next to 1) loses ε·ν (1e-11 at ν = 1e6)
        tail = 0.5 - 0.5 * _ibeta_fraction(0.5, df / 2.0, y, x)
    else:
        tail = 0.5 * _ibeta(df / 2.0, 0.5, x, y)[0]
    return tail if t > 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """``scipy.stats.t.cdf`` (``scipy.special.stdtr``)."""
    return t_sf(-t, df)


@lru_cache(maxsize=1024)
def t_ppf(p: float, df: float) -> float:
    """``scipy.stats.t.ppf`` (``scipy.special.stdtrit``); the normal quantile for
    ``df = inf``.  From the inverse incomplete beta on whichever side keeps precision:
    ``x = I⁻¹(ν/2, 1/2; q)`` for a two-tail area ``q < 1/2`` (far tails), else
    ``y = I⁻¹(1/2, ν/2; 1 − q)`` (near the median), ``t = √(ν(1−x)/x) = √(ν y/(1−y))``,
    then two Newton steps on :func:`t_sf` (``1 − x`` near 1 keeps few digits at large ν).
    Cached: the intervals ask for the same few quantiles again and again."""
    if math.isnan(p) or math.isnan(df) or df <= 0 or p < 0 or p > 1:
        return math.nan
    if math.isinf(df):
        return norm_ppf(p)
    if p == 0:
        return -math.inf
    if p == 1:
        return math.inf
    if p == 0.5:
        return 0.0
    q = 2.0 * min(p, 1.0 - p)
    t = _t_from_beta(q, p, df)
    if 0 < t < math.inf:  # Newton on the tail, which t_sf gives without 1 − x's cancellation
        tail, lb = min(p, 1.0 - p), _lbeta(df / 2.0, 0.5) + 0.5 * math.log(df)
        for _ in range(2):
            dens = math.exp(-lb - (df + 1) / 2 * math.log1p(t * t / df))
            if not dens > 0:
                break
            t += (t_sf(t, df) - tail) / dens
    return t if p > 0.5 else -t


def _t_from_beta(q: float, p: float, df: float) -> float:
    if q < 0.5:
        x = beta_ppf(q, df / 2.0, 0.5)
        if x < 1e-100:  # far tail: sf(t) = c ν^((ν−1)/2) t^−ν (1 + O(ν/t²)), c = 1/(√ν B(ν/2, ½))
            log_c = -0.5 * math.log(df) - _lbeta(df / 2.0, 0.5)
            t = math.exp((log_c + 0.5 * (df - 1) * math.log(df) - math.log(q / 2)) / df)
        else:
            t = math.sqrt(df * (1.0 - x) / x)
    else:
        y = beta_ppf(abs(2.0 * p - 1.0), 0.5, df / 2.0)
        t = math.sqrt(df * y / (1.0 - y)) if y < 1 else math.inf
    return t


# --- incomplete gamma and chi-square ----------------------------------------------------

def _gamma_pq(a: float, x: float) -> tuple[float, float]:
    """``(P(a, x), Q(a, x))``: the series for ``x < a + 1``, else Lentz's continued
    fraction for Q (Numerical Recipes §6.2 ``gser``/``gcf``)."""
    if x <= 0:
        return 0.0, 1.0
    if math.isinf(x):
        return 1.0, 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        ap, total, term = a, 1.0 / a, 1.0 / a
        for _ in range(_MAXIT):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * EPS:
                break
        low = total * math.exp(log_front)
        return low, 1.0 - low
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAXIT):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < EPS:
            break
    high = math.exp(log_front) * h
    return 1.0 - high, high


def gamma_p(a: float, x: float) -> float:
    """``scipy.special.gammainc``: the regularized lower incomplete gamma ``P(a, x)``."""
    return _gamma_pq(a, x)[0]


def gamma_q(a: float, x: float) -> float:
    """``scipy.special.gammaincc``: ``Q(a, x) = 1 − P(a, x)``, accurate where small."""
    return _gamma_pq(a, x)[1]


def chi2_cdf(x: float, df: float) -> float:
    """``scipy.stats.chi2.cdf``: ``P(ν/2, x/2)``."""
    return _gamma_pq(df / 2.0, x / 2.0)[0]


def chi2_sf(x: float, df: float) -> float:
    """``scipy.stats.chi2.sf``: ``Q(ν/2, x/2)``."""
    return _gamma_pq(df / 2.0, x / 2.0)[1]


def chi2_ppf(p: float, df: float) -> float:
    """``scipy.stats.chi2.ppf``: the root of ``P(ν/2, x/2) = p`` (or ``Q = 1 − p`` above
    the median, where Q is the accurate tail) by :func:`brentq` on a doubling bracket."""
    if math.isnan(p) or p < 0 or p > 1 or not df > 0:
        return math.nan
    if p == 0:
        return 0.0
    if p == 1:
        return math.inf
    if p <= 0.5:
        def gap(x: float) -> float:
            return chi2_cdf(x, df) - p
    else:
        def gap(x: float) -> float:
            return (1.0 - p) - chi2_sf(x, df)
    top = max(1.0, df)
    while gap(top) < 0:
        top *= 2.0
    return brentq(gap, 0.0, top, xtol=1e-300, rtol=4 * EPS, maxiter=2000)


# --- binomial and hypergeometric --------------------------------------------------------

def binom_pmf(k: int, n: int, p: float) -> float:
    """``scipy.stats.binom.pmf``, through ``log C(n, k)`` (relative error about ``ε·n``)."""
    if k < 0 or k > n:
        return 0.0
    if p == 0:
        return 1.0 if k == 0 else 0.0
    if p == 1:
        return 1.0 if k == n else 0.0
    return math.exp(_lcomb(n, k) + k * math.log(p) + (n - k) * math.log1p(-p))


def _lcomb(n: int, r: int) -> float:
    """``log C(n, r) = −log(n + 1) − log B(n − r + 1, r + 1)``, through :func:`_lbeta` (which
    keeps the large terms apart) rather than three ``lgamma`` of size ``n log n``."""
    return -math.log(n + 1) - _lbeta(n - r + 1, r + 1)


def binom_cdf(k: float, n: int, p: float) -> float:
    """``scipy.stats.binom.cdf``: ``P(X ≤ k) = I_{1−p}(n − k, k + 1)``."""
    k = math.floor(k)
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return _ibeta(n - k, k + 1, 1.0 - p, p)[0]


def binom_sf(k: float, n: int, p: float) -> float:
    """``scipy.stats.binom.sf``: ``P(X > k) = I_p(k + 1, n − k)``."""
    k = math.floor(k)
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return _ibeta(k + 1, n - k, p, 1.0 - p)[0]


def _binary_search(f: Callable[[int], float], d: float, lo: int, hi: int) -> int:
    """scipy's ``_binary_search_for_binom_tst``: the ``i`` in ``[lo, hi]`` with
    ``f(i) ≤ d < f(i + 1)`` for ``f`` ascending over the range."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        value = f(mid)
        if value < d:
            lo = mid + 1
        elif value > d:
            hi = mid - 1
        else:
            return mid
    return lo if f(lo) <= d else lo - 1


def binomtest_p(k: int, n: int, p: float = 0.5) -> float:
    """Two-sided p of ``scipy.stats.binomtest(k, n, p)``: the probability of every count
    no more likely than ``k`` (scipy's rule, with its relative slack of 1e-7)."""
    if n <= 0:
        return 1.0
    d = binom_pmf(k, n, p)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = _binary_search(lambda i: -binom_pmf(i, n, p), -d * rerr, math.ceil(p * n), n)
        y = n - ix + int(d * rerr == binom_pmf(ix, n, p))
        pval = binom_cdf(k, n, p) + binom_sf(n - y, n, p)
    else:
        ix = _binary_search(lambda i: binom_pmf(i, n, p), d * rerr, 0, math.floor(p * n))
        y = ix + 1
        pval = binom_cdf(y - 1, n, p) + binom_sf(k - 1, n, p)
    return min(1.0, pval)


def _hyper_support(total: int, good: int, draws: int) -> tuple[int, int]:
    return max(0, draws - (total - good)), min(good, draws)


EXACT_HYPERGEOM = 3000
"""Up to this many draws in all, the hypergeometric pmf is the exact ratio of integers
(``math.comb``, correctly rounded): Fisher's test decides ties between tables by a
relative 1e-14, finer than ``lgamma`` resolves."""


def hypergeom_pmf(k: int, total: int, good: int, draws: int) -> float:
    """``scipy.stats.hypergeom.pmf(k, M=total, n=good, N=draws)``: ``C(good, k) C(total −
    good, draws − k) / C(total, draws)``: exact integers up to :data:`EXACT_HYPERGEOM`,
    through ``log C`` beyond."""
    lo, hi = _hyper_support(total, good, draws)
    if k < lo or k > hi:
        return 0.0
    if total <= EXACT_HYPERGEOM:
        return math.comb(good, k) * math.comb(total - good, draws - k) / math.comb(total, draws)
    return math.exp(_lcomb(good, k) + _lcomb(total - good, draws - k) - _lcomb(total, draws))


def _hyper_tail(k: int, total: int, good: int, draws: int, step: int) -> float:
    """``Σ pmf(i)`` from ``k`` outward (``step`` −1: down to the support's low end, +1: up
    to its high end), by the pmf's ratio between neighbours; the terms fall monotonically
    on the far side of the mode, so the sum stops once they no longer count."""
    lo, hi = _hyper_support(total, good, draws)
    k = min(max(k, lo), hi)
    term = hypergeom_pmf(k, total, good, draws)
    acc, i = term, k
    bad = total - good
    while term > 0 and (i > lo if step < 0 else i < hi):
        if step < 0:  # pmf(i−1)/pmf(i)
            term *= i * (bad - draws + i) / ((good - i + 1) * (draws - i + 1))
            i -= 1
        else:  # pmf(i+1)/pmf(i)
            term *= (good - i) * (draws - i) / ((i + 1) * (bad - draws + i + 1))
            i += 1
        acc += term
        if term < acc * EPS * 1e-3:
            break
    return acc


def _hyper_mode(total: int, good: int, draws: int) -> int:
    return int((draws + 1) * (good + 1) / (total + 2))


def hypergeom_cdf(k: float, total: int, good: int, draws: int) -> float:
    """``scipy.stats.hypergeom.cdf``: the lower tail summed below the mode, else one minus
    the upper tail."""
    k = math.floor(k)
    lo, hi = _hyper_support(total, good, draws)
    if k < lo:
        return 0.0
    if k >= hi:
        return 1.0
    if k < _hyper_mode(total, good, draws):
        return min(1.0, _hyper_tail(k, total, good, draws, -1))
    return max(0.0, 1.0 - _hyper_tail(k + 1, total, good, draws, +1))


def hypergeom_sf(k: float, total: int, good: int, draws: int) -> float:
    """``scipy.stats.hypergeom.sf``: ``P(X > k)``."""
    k = math.floor(k)
    lo, hi = _hyper_support(total, good, draws)
    if k < lo:
        return 1.0
    if k >= hi:
        return 0.0
    if k + 1 > _hyper_mode(total, good, draws):
        return min(1.0, _hyper_tail(k + 1, total, good, draws, +1))
    return max(0.0, 1.0 - _hyper_tail(k, total, good, draws, -1))


def fisher_exact_p(table: Sequence[Sequence[int]]) -> float:
    """Two-sided p of ``scipy.stats.fisher_exact`` for a 2×2 table of counts: the
    probability of every table with the same margins no more likely than this one
    (scipy's algorithm and its relative slack of 1e-14); 1.0 when a margin is empty."""
    (a, b), (c, d) = table
    if a + b == 0 or c + d == 0 or a + c == 0 or b + d == 0:
        return 1.0
    n1, n2, n = a + b, c + d, a + c
    total = n1 + n2

    def pmf(x: int) -> float:
        return hypergeom_pmf(x, total, n1, n)

    mode = _hyper_mode(total, n1, n)
    pexact, pmode = pmf(a), pmf(mode)
    gamma = 1 + 1e-14
    if abs(pexact - pmode) / max(pexact, pmode) <= 1e-14:
        return 1.0
    if a < mode:
        plower = hypergeom_cdf(a, total, n1, n)
        if pmf(n) > pexact * gamma:
            return min(1.0, plower)
        guess = _binary_search(lambda x: -pmf(x), -pexact * gamma, mode, n)
        return min(1.0, plower + hypergeom_sf(guess, total, n1, n))
    pupper = hypergeom_sf(a - 1, total, n1, n)
    if pmf(0) > pexact * gamma:
        return min(1.0, pupper)
    guess = _binary_search(pmf, pexact * gamma, 0, mode)
    return min(1.0, pupper + hypergeom_cdf(guess, total, n1, n))


# --- Brent's root finder ----------------------------------------------------------------

def brentq(f: Callable[[float], float], a: float, b: float, *, xtol: float = 2e-12,
           rtol: float = 4 * EPS, maxiter: int = 100) -> float:
    """``scipy.optimize.brentq``: a root of ``f`` in ``[a, b]`` (signs must differ), within
    ``xtol + rtol·|x|``.  Brent's method (1973): inverse quadratic interpolation or secant
    steps while they shrink the bracket fast enough, bisection otherwise, so it never does
    worse than bisection.  Transcribed from the structure of scipy's ``brentq.c``."""
    xpre, xcur = float(a), float(b)
    fpre, fcur = f(xpre), f(xcur)
    if fpre * fcur > 0:
        raise ValueError("f(a) and f(b) must have different signs")
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and (fpre < 0) != (fcur < 0):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # secant
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # inverse quadratic interpolation
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = f(xcur)
    return xcur


# --- paired permutation test ------------------------------------------------------------

def paired_permutation_p(a: Sequence[float], b: Sequence[float], w: Sequence[float], *,
                         n_resamples: int = 9999, seed: int = 0) -> float:
    """Two-sided p of the paired permutation test of ``T = Σ w (b − a)``, as
    ``scipy.stats.permutation_test((a, b), T, permutation_type="samples",
    n_resamples=n_resamples, alternative="two-sided")`` computes it: swapping a pair flips
    the sign of its difference; ``p = 2 min(P(T* ≤ T), P(T* ≥ T))`` with scipy's relative
    slack ``100 ε |T|``.  Exact over all ``2^S`` sign patterns when ``2^S ≤
    n_resamples`` (then equal to scipy's); else ``n_resamples`` seeded random patterns
    with the ``(count + 1)/(n + 1)`` correction (a different random stream from numpy's,
    so equal to scipy's within Monte Carlo error).  Sums are looked up 8 pairs at a time."""
    d = [wi * (bi - ai) for ai, bi, wi in zip(a, b, w, strict=True)]
    s = len(d)
    observed = sum(d)
    gamma = abs(100 * EPS * observed)
    chunks = [d[i:i + 8] for i in range(0, s, 8)]
    tables = []
    for chunk in chunks:
        sums = [0.0] * (1 << len(chunk))
        for mask in range(1 << len(chunk)):
            sums[mask] = sum(-x if mask >> j & 1 else x for j, x in enumerate(chunk))
        tables.append(sums)
    exact = (1 << s) <= n_resamples
    rng = random.Random(seed)
    count = 1 << s if exact else n_resamples
    less = greater = 0
    for r in range(count):
        bits = r if exact else rng.getrandbits(s) if s else 0
        total = 0.0
        for i, sums in enumerate(tables):
            total += sums[(bits >> (8 * i)) & 0xFF]
        less += total <= observed + gamma
        greater += total >= observed - gamma
    adjust = 0 if exact else 1
    p_less = (less + adjust) / (count + adjust)
    p_greater = (greater + adjust) / (count + adjust)
    return min(1.0, 2 * min(p_less, p_greater))
