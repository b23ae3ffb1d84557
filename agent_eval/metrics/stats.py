"""Small-sample statistics for error rates: Wilson intervals, two-proportion tests, percentiles.

About 150 calls per model is a small sample (docs/design.md "Noise"), so every rate carries an
interval and every difference a test.  Wilson and the z-test are a few lines of ``math``
kept by hand (tests check them against ``scipy.stats``); Fisher's test is scipy's
algorithm by hand (``agent_eval.metrics.distributions``, tested against it).  Calls
of one session are not independent: ``agent_eval.metrics.clustered`` gives the intervals
that allow for it (docs/statistics.md).  All functions are pure and never divide by zero: an empty denominator gives
``None`` rates and a p-value of 1.0 (no evidence of a difference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # two-sided 95% normal quantile
ALPHA = 0.05
Z_TEST = "two-proportion z-test (pooled, no continuity correction)"
FISHER_TEST = "Fisher's exact test (two-sided)"


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes in ``n`` trials, as proportions.

    Chosen over the Wald interval because it stays inside [0, 1] and is honest at the
    small counts and near-zero rates this tool reports (0 of 160 is not "exactly 0").
    ``n == 0`` gives the uninformative ``(0.0, 1.0)``.
    """
    _check_counts(k, n)
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends: no 5e-17 above zero
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


@dataclass(frozen=True, slots=True)
class Rate:
    """``k`` of ``n`` as a rate per 100 with its Wilson 95% interval (also per 100).

    For errors this is "errors per 100 tool calls"; for shares (handshake completion,
    pivots) it reads as a percentage.  The ``*100`` fields are ``None`` when ``n == 0``.
    """

    k: int
    n: int
    per100: float | None
    lo100: float | None
    hi100: float | None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        _check_counts(k, n)
        if n == 0:
            return cls(k, n, None, None, None)
        lo, hi = wilson_interval(k, n)
        return cls(k, n, 100 * k / n, 100 * lo, 100 * hi)

    @property
    def share(self) -> float | None:
        """``k / n`` as a proportion, ``None`` when ``n == 0``."""
        return self.k / self.n if self.n else None


@dataclass(frozen=True, slots=True)
class RateComparison:
    """Rate ``b`` against rate ``a``: the difference ``b − a`` per 100 with a 95% Wald
    (unpooled) interval, and whether it is significant.

    ``significant`` is decided by the test named in ``test`` (the pooled two-proportion
    z-test, two-sided, no continuity correction) at ``alpha``.  ``fisher_p`` is the exact
    two-sided Fisher p-value, shown next to it because counts here are small (NaN when
    the caller did not ask for it: ``compare_rates(..., exact=False)``).
    """

    a: Rate
    b: Rate
    diff100: float | None
    lo100: float | None
    hi100: float | None
    z: float | None
    p_value: float
    fisher_p: float
    significant: bool
    alpha: float = ALPHA
    test: str = Z_TEST


def compare_rates(k1: int, n1: int, k2: int, n2: int, *, alpha: float = ALPHA,
                  exact: bool = True) -> RateComparison:
    """Compare ``k1/n1`` (a, the baseline) with ``k2/n2`` (b).

    docs/design.md's numbers: 9/161 against 19/158 gives z ≈ 2.03, p ≈ 0.042 (significant);
    9/161 against 13/128 gives p ≈ 0.15 (not).  With an empty side there is nothing to
    compare: the difference is ``None`` and both p-values are 1.0.  ``exact=False``
    leaves Fisher's p out (NaN): a sum over the tables' tails, which a page that does
    not show it (the viewer's compare table) should not pay.
    """
    a, b = Rate.of(k1, n1), Rate.of(k2, n2)
    if n1 == 0 or n2 == 0:
        return RateComparison(a, b, None, None, None, None, 1.0, 1.0, False, alpha)
    p1, p2 = k1 / n1, k2 / n2
    diff = p2 - p1
    se_wald = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    pooled = (k1 + k2) / (n1 + n2)
    se_pooled = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se_pooled == 0:
        z, p_value = None, 1.0
    else:
        z = diff / se_pooled
        p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2)))
    return RateComparison(
        a=a,
        b=b,
        diff100=100 * diff,
        lo100=100 * (diff - Z95 * se_wald),
        hi100=100 * (diff + Z95 * se_wald),
        z=z,
        p_value=p_value,
        fisher_p=fisher_exact_p(k1, n1, k2, n2) if exact else math.nan,
        significant=p_value < alpha,
        alpha=alpha,
    )


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p for the 2×2 table ``[[k1, n1−k1], [k2, n2−k2]]``, by
    :func:`agent_eval.metrics.distributions.fisher_exact_p`, scipy's ``fisher_exact`` by
    hand (the "minimum likelihood" two-sided rule, as in R).
    An empty side gives 1.0."""
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    from agent_eval.metrics import distributions

    return distributions.fisher_exact_p([[k1, n1 - k1], [k2, n2 - k2]])


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) by linear interpolation between closest ranks.

    The same rule as numpy's default ("type 7"): p50 of ``[1, 2, 3, 4]`` is 2.5.
    ``values`` need not be sorted; an empty sequence gives ``None``.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lower = math.floor(pos)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (pos - lower)


def _check_counts(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"counts must satisfy 0 <= k <= n, got k={k}, n={n}")
