"""Post-stratification: two runs with different scenario mixes, compared on a common tag mix.

When two runs share too few scenarios to pair them (a suite that changed, an import, proxy
traffic), they may still share *kinds* of task: the tags their sessions carry.  Comparing
the pooled rates would mix a real change with a change of mix (one run holding more of the
hard kind).  Post-stratification removes the mix: each stratum's rate is taken per run, and
both runs are re-weighted to one common mix (docs/statistics.md, "Mix").

* **Strata**: a session's tag set (``"handshake+tickets"``; ``"(untagged)"`` without tags).
  A stratum is *shared* when each run holds at least :data:`MIN_STRATUM_SESSIONS` sessions
  with calls in it (fewer leave no within-stratum spread to estimate); the rest is left
  out and named.
* **Common mix**: the shared strata weighted by their pooled calls, ``W_h = n_h / Σ n``.
* **Estimate**: ``D = Σ_h W_h (r_b,h − r_a,h)``, ``r`` the ratio errors/calls of a cell.
* **Fit**: the saturated cell-means model by weighted least squares (one indicator per
  stratum × run, session error shares weighted by calls, so each fitted cell mean is that
  cell's ratio), with the cluster-robust covariance, sessions as clusters and the CR1
  small-sample factor ``G/(G−1)·(N−1)/(N−K)``; the contrast ``Σ W_h (β_b,h − β_a,h)``
  gives the estimate, its standard error, the t interval and p on ``G − 1`` degrees of
  freedom (Cameron & Miller 2015).  The model is saturated, so the fit has a closed form
  (:func:`_fit`); the tests hold it to statsmodels' ``WLS`` with ``cov_type="cluster"``.
  As everywhere else the standard error is never below the binomial one at each
  stratum's pooled rate (calls as independent), so strata whose sessions agree exactly
  do not make a zero-width interval; when that floor applies, the interval and p are the
  same t ones at the floored SE (``agent_eval.metrics.distributions.t_sf``).
* **Refused** when fewer than :data:`MIN_STRATA` strata are shared or the shared strata
  hold less than :data:`~agent_eval.metrics.paired.MIN_SHARED_SHARE` of either run's calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agent_eval.metrics.clustered import Unit, t_quantile
from agent_eval.metrics.distributions import t_sf
from agent_eval.metrics.stats import ALPHA

MIN_STRATA = 2
MIN_STRATUM_SESSIONS = 2
MIN_SHARE = 0.5
UNTAGGED = "(untagged)"
POSTSTRATIFIED_METHOD = (
    "post-stratified to the shared tag mix (weights: pooled calls per stratum): "
    "WLS cell means, session-clustered CR1 SE (never below the binomial one), "
    "t on sessions − 1 df")


def tag_stratum(unit: Unit) -> str:
    """A session's stratum: its tag set, sorted and joined (``"(untagged)"`` for none)."""
    return "+".join(sorted(set(unit.tags))) or UNTAGGED


@dataclass(frozen=True, slots=True)
class StratumCell:
    """One shared stratum: sessions and calls per run, each run's rate, its weight."""

    stratum: str
    sessions_a: int
    sessions_b: int
    calls_a: int
    calls_b: int
    rate_a: float
    rate_b: float
    weight: float


@dataclass(frozen=True, slots=True)
class StratifiedDiff:
    """``b − a`` in errors/100 re-weighted to the common mix, or why it was refused.

    The numbers are ``None`` when ``refused`` says why no difference is called.
    """

    cells: tuple[StratumCell, ...]
    left_out_a: tuple[str, ...]
    left_out_b: tuple[str, ...]
    share_a: float
    share_b: float
    refused: str | None
    diff100: float | None = None
    lo100: float | None = None
    hi100: float | None = None
    se100: float | None = None
    df: int = 0
    p_value: float = 1.0
    alpha: float = ALPHA
    method: str = POSTSTRATIFIED_METHOD

    @property
    def significant(self) -> bool:
        return self.refused is None and self.p_value < self.alpha

    def statement(self) -> str:
        """One line naming the mix the comparison was made on (or why it was not)."""
        if self.refused:
            return f"no post-stratified difference called: {self.refused}"
        mix = ", ".join(f"{c.stratum} {100 * c.weight:.0f}%" for c in self.cells)
        left = len(set(self.left_out_a) | set(self.left_out_b))
        return (f"re-weighted to the shared tag mix ({mix}) covering {100 * self.share_a:.0f}% "
                f"of a's calls and {100 * self.share_b:.0f}% of b's; {left} strata left out")


def compare_poststratified(units_a: Iterable[Unit], units_b: Iterable[Unit], *,
                           stratum: Callable[[Unit], str] = tag_stratum, alpha: float = ALPHA,
                           min_strata: int = MIN_STRATA,
                           min_sessions: int = MIN_STRATUM_SESSIONS,
                           min_share: float = MIN_SHARE) -> StratifiedDiff:
    """Errors/100 of run b against run a, post-stratified to their shared mix of strata."""
    a = [u for u in units_a if u.calls > 0]
    b = [u for u in units_b if u.calls > 0]
    by_a, by_b = _group(a, stratum), _group(b, stratum)
    shared = [h for h in by_a if h in by_b and len(by_a[h]) >= min_sessions
              and len(by_b[h]) >= min_sessions]
    calls_a = sum(u.calls for u in a)
    calls_b = sum(u.calls for u in b)
    share_a = sum(u.calls for h in shared for u in by_a[h]) / calls_a if calls_a else 0.0
    share_b = sum(u.calls for h in shared for u in by_b[h]) / calls_b if calls_b else 0.0
    left_a = tuple(h for h in by_a if h not in shared)
    left_b = tuple(h for h in by_b if h not in shared)
    pooled = {h: sum(u.calls for u in by_a[h]) + sum(u.calls for u in by_b[h]) for h in shared}
    total = sum(pooled.values())
    cells = tuple(StratumCell(h, len(by_a[h]), len(by_b[h]), _calls(by_a[h]), _calls(by_b[h]),
                              _ratio(by_a[h]), _ratio(by_b[h]), pooled[h] / total)
                  for h in shared)
    refused = None
    if len(shared) < min_strata:
        refused = (f"only {len(shared)} tag strata with {min_sessions}+ sessions on each side "
                   f"(need {min_strata})")
    elif min(share_a, share_b) < min_share:
        refused = (f"the shared tag strata cover {100 * share_a:.0f}% of a's calls and "
                   f"{100 * share_b:.0f}% of b's (need {100 * min_share:.0f}% of each)")
    base = StratifiedDiff(cells, left_a, left_b, share_a, share_b, refused, alpha=alpha)
    if refused:
        return base
    diff, se, lo, hi, df, p = _fit([by_a[h] for h in shared], [by_b[h] for h in shared],
                                   [c.weight for c in cells], alpha)
    floor = math.sqrt(sum(c.weight ** 2 * _binomial(c) for c in cells))
    if se < floor:
        se = floor
        half = t_quantile(df, alpha) * se
        lo, hi = diff - half, diff + half
        p = 2 * t_sf(abs(diff) / se, df)
    return StratifiedDiff(cells, left_a, left_b, share_a, share_b, None, 100 * diff,
                          100 * lo, 100 * hi, 100 * se, df, p, alpha)


def _fit(cells_a: Sequence[Sequence[Unit]], cells_b: Sequence[Sequence[Unit]],
         weights: Sequence[float], alpha: float) -> tuple[float, float, float, float, int, float]:
    """The estimate of ``Σ W_h (r_b,h − r_a,h)``: ``(D, SE, lo, hi, df, p)``.

    The saturated cell-means model fitted by weighted least squares (one indicator per
    stratum × run, session error shares weighted by calls) has a closed form: each fitted
    cell mean is the cell's ratio, and its cluster-robust variance (sessions as clusters)
    is ``Σ_i n_i² e_i² / (Σ_i n_i)²`` over the cell's sessions, cells independent.  The
    CR1 factor ``G/(G−1)·(N−1)/(N−K)`` and ``G − 1`` t degrees of freedom are those of
    statsmodels' ``WLS(...).fit(cov_type="cluster", use_t=True)``, which
    ``tests/metrics/test_stratified.py`` checks this against (statsmodels is a test dependency
    only: it brought pandas and patsy into every install for this one fit)."""
    diff, var, n_obs = 0.0, 0.0, 0
    for weight, cells in zip(weights, zip(cells_a, cells_b, strict=True), strict=True):
        for sign, units in zip((-1.0, 1.0), cells, strict=True):
            calls = sum(u.calls for u in units)
            mean = sum(u.errors for u in units) / calls
            diff += sign * weight * mean
            var += weight ** 2 * sum((u.errors - u.calls * mean) ** 2 for u in units) / calls ** 2
            n_obs += len(units)
    k = 2 * len(weights)
    groups = n_obs  # every session is its own cluster
    var *= groups / (groups - 1) * (n_obs - 1) / (n_obs - k)
    se = math.sqrt(var)
    df = groups - 1
    half = t_quantile(df, alpha) * se
    p = 2 * t_sf(abs(diff) / se, df) if se > 0 else (1.0 if diff == 0 else 0.0)
    return diff, se, diff - half, diff + half, df, p


def _binomial(c: StratumCell) -> float:
    """Variance of ``r_b − r_a`` in one stratum with calls as independent, pooled rate."""
    p = (c.rate_a * c.calls_a + c.rate_b * c.calls_b) / (c.calls_a + c.calls_b)
    return p * (1 - p) * (1 / c.calls_a + 1 / c.calls_b)


def _group(units: Sequence[Unit], stratum: Callable[[Unit], str]) -> dict[str, list[Unit]]:
    out: dict[str, list[Unit]] = {}
    for u in units:
        out.setdefault(stratum(u), []).append(u)
    return out


def _calls(units: Sequence[Unit]) -> int:
    return sum(u.calls for u in units)


def _ratio(units: Sequence[Unit]) -> float:
    return sum(u.errors for u in units) / _calls(units)


def stratified_lines(diff: StratifiedDiff) -> list[str]:
    """Plain lines for ``compare`` and the gate: the mix, then the re-weighted change."""
    lines = [diff.statement()]
    if diff.refused is None:
        lines.append(f"errors/100 post-stratified change {diff.diff100:+.2f} [95% CI "
                     f"{diff.lo100:+.2f} to {diff.hi100:+.2f}], t p {_p(diff.p_value)} "
                     f"({diff.method})")
    return lines


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"
