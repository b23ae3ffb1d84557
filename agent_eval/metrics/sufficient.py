"""Sufficient statistics of session clusters: every clustered and paired figure of a run
from a few sums per scenario, so a million-call run is judged without a Python object per
session.

A cluster is a top-level session with ``k`` denied calls (of all classes, or of one) out
of ``n`` calls.  The ratio estimator ``p = Σk / Σn`` and its linearised CR1 variance
(``agent_eval.metrics.clustered``) need, per stratum, only the number of clusters with
calls ``G`` and the integer sums ``Σk, Σn, Σk², Σkn, Σn²``: with ``z_i = (k_i − p n_i)/N``,

    Σ_i (z_i − z̄)² = (Σk² − 2pΣkn + p²Σn² − (Σk − pΣn)² / G) / N².

The sums are exact integers (SQL ``SUM``s, ``agent_eval.store.cluster_stats``, or Python
ints, :func:`stats_from_units`) and each stratum's term is evaluated in exact integer
arithmetic and rounded once (the terms are non-negative, so their sum cancels nothing), so
the one-pass form loses nothing to cancellation; tests check it against the per-cluster
definition and statsmodels.

Pass rates and the exact McNemar test (scenario against scenario) read each scenario's
outcomes; a scenario's outcomes are kept as one integer of bits (:class:`Passes`), so even
3,000 repeats of a scenario are one number, not 3,000 objects.

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_eval.metrics.clustered import Unit


@dataclass(frozen=True, slots=True)
class Sums:
    """``G`` clusters and their ``Σk, Σn, Σk², Σkn, Σn²``; sums add stratum to stratum."""

    g: int = 0
    k: int = 0
    n: int = 0
    kk: int = 0
    kn: int = 0
    nn: int = 0

    def __add__(self, other: Sums) -> Sums:
        return Sums(self.g + other.g, self.k + other.k, self.n + other.n, self.kk + other.kk,
                    self.kn + other.kn, self.nn + other.nn)

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> Sums:
        """The sums of clusters ``(k, n)``, every pair counted (callers drop ``n = 0``)."""
        g = k = n = kk = kn = nn = 0
        for a, b in pairs:
            g += 1
            k += a
            n += b
            kk += a * a
            kn += a * b
            nn += b * b
        return cls(g, k, n, kk, kn, nn)


def total(parts: Iterable[Sums]) -> Sums:
    return sum(parts, Sums())


def pooled_variance(strata: Iterable[Sums]) -> tuple[float, int, int]:
    """``clustered.ratio_variance`` from each stratum's sums: residuals centred within each
    stratum with its own ``G_h/(G_h−1)``; strata of a single cluster pooled into one, and a
    lone one left over collapsed into the stratum nearest it in rate (the collapsed-strata
    estimator, Wolter 2007 §2.5), rather than dropping every stratum: one scenario left
    with a single session no longer widens the interval by the spread between scenarios.
    ``(variance, clusters, strata used)``; a variance of 0 with fewer than two clusters
    means "not estimable"."""
    kept = [s for s in strata if s.g]
    whole = total(kept)
    if whole.g < 2 or whole.n <= 0:
        return (0.0, whole.g, 1)
    groups = [s for s in kept if s.g >= 2]
    lone = [s for s in kept if s.g == 1]
    if len(lone) >= 2:
        groups.append(total(lone))
    elif lone and groups:
        [one] = lone  # cannot be centred alone: collapse it into the nearest stratum
        rate = one.k / one.n if one.n else 0.0
        near = min(range(len(groups)),
                   key=lambda i: abs(groups[i].k / groups[i].n - rate) if groups[i].n else 1.0)
        groups[near] = groups[near] + one
    elif lone:
        groups = [whole]
    # with p = K/N, each stratum's G/(G−1)·dev/N² is I / ((G − 1)·N⁴) for the integer
    # I = G(Σk²N² − 2KNΣkn + K²Σn²) − (ΣkN − KΣn)² ≥ 0: exact, then one rounding per
    # stratum and a sum of non-negative terms (a tenth of the time of Fractions)
    k, n = whole.k, whole.n
    var = 0.0
    for s in groups:
        exact = s.g * (s.kk * n * n - 2 * k * n * s.kn + k * k * s.nn) - (s.k * n - k * s.n) ** 2
        var += exact / (s.g - 1)
    return (var / float(n) ** 4, whole.g, len(groups))


@dataclass(frozen=True, slots=True)
class Passes:
    """The outcomes of a scenario's ``n`` sessions (passed: completed and no call denied,
    ``metrics.repeats``) in ``(repeat, passed)`` order: bit ``i`` of ``bits`` is set when
    the ``i``-th passed.  The exact McNemar test matches two runs' scenarios on the same
    number of repeats, the first ``min(n_a, n_b)`` of each (:meth:`first_passed`)."""

    n: int
    bits: int

    @property
    def passed(self) -> int:
        return self.bits.bit_count()

    @property
    def all_passed(self) -> bool:
        return self.n > 0 and self.bits == (1 << self.n) - 1

    @classmethod
    def of(cls, outcomes: Iterable[tuple[int, bool]]) -> Passes:
        """From ``(repeat, passed)`` pairs in any order."""
        bits = n = 0
        for n, (_, passed) in enumerate(sorted(outcomes), 1):
            bits |= bool(passed) << (n - 1)
        return cls(n, bits)

    def first_passed(self, m: int) -> bool:
        """Whether the first ``m`` sessions (in repeat order) all passed: the outcome of a
        scenario matched to another run's ``m`` repeats, so it does not depend on how many
        repeats either run played."""
        mask = (1 << m) - 1
        return 0 < m <= self.n and self.bits & mask == mask

    def outcomes(self) -> tuple[bool, ...]:
        """Each session's outcome, in order."""
        return tuple(bool(self.bits >> i & 1) for i in range(self.n))


def repeat_pairs(a: Passes, b: Passes) -> tuple[int, int, int]:
    """``(pairs, a passed where b failed, b passed where a failed)`` of position-paired
    sessions (``zip(a, b)``: the extra sessions of the longer side are left out)."""
    m = min(a.n, b.n)
    mask = (1 << m) - 1
    return m, (a.bits & ~b.bits & mask).bit_count(), (b.bits & ~a.bits & mask).bit_count()


@dataclass(frozen=True, slots=True)
class ScenarioStats:
    """One scenario's top-level, non-error sessions of a target (or of a pooled run).

    ``errors``: the sums of (denied calls, calls) over its sessions with calls; ``classes``
    the same with ``k`` the calls denied in one primary class (``G``, ``Σn``, ``Σn²`` as
    in ``errors``; a class absent here counts 0); ``passes``: every session's outcome, or
    ``None`` when not read (the gate needs no pass rates)."""

    sessions: int
    errors: Sums
    classes: dict[str, Sums] = field(default_factory=dict)
    passes: Passes | None = None

    def sums(self, code: str | None = None) -> Sums:
        """The sums of errors, or of class ``code``."""
        if code is None:
            return self.errors
        e = self.errors
        return self.classes.get(code) or Sums(e.g, 0, e.n, 0, 0, e.nn)


@dataclass(frozen=True, slots=True)
class TargetStats:
    """One target's (or pooled run's) scenarios, in first-seen order.

    ``load_units`` gives the per-session units, read only by the one method that needs
    every session: the post-stratified comparison on tags (WLS cell means), when the
    scenario mixes of two runs are too different to pair."""

    scenarios: dict[str, ScenarioStats]
    load_units: Callable[[], Sequence[Unit]] = tuple

    @property
    def errors(self) -> Sums:
        return total(s.errors for s in self.scenarios.values())

    @property
    def has_passes(self) -> bool:
        return all(s.passes is not None for s in self.scenarios.values())


def stats_from_units(units: Iterable[Unit]) -> TargetStats:
    """The sums of ``units`` per scenario (what ``store.cluster_stats`` reads in SQL)."""
    units = list(units)
    acc: dict[str, tuple[list, dict[str, list[int]], list]] = {}
    for u in units:
        pairs, classes, outcomes = acc.setdefault(u.scenario, ([], {}, []))
        if u.passed is not None:
            outcomes.append((u.repeat, u.passed))
        pairs.append((u.errors, u.calls))
        if u.calls <= 0:
            continue
        for code, k in u.classes.items():
            c = classes.setdefault(code, [0, 0, 0])
            c[0] += k
            c[1] += k * k
            c[2] += k * u.calls
    out = {}
    for scenario, (pairs, classes, outcomes) in acc.items():
        e = Sums.of((k, n) for k, n in pairs if n > 0)
        out[scenario] = ScenarioStats(
            len(pairs), e, {code: Sums(e.g, k, e.n, kk, kn, e.nn)
                            for code, (k, kk, kn) in classes.items()},
            Passes.of(outcomes))
    return TargetStats(out, lambda: units)


def as_stats(units: Iterable[Unit] | TargetStats) -> TargetStats:
    """``units`` as sums (unchanged when already :class:`TargetStats`)."""
    return units if isinstance(units, TargetStats) else stats_from_units(units)


def merge_stats(a: ScenarioStats, b: ScenarioStats) -> ScenarioStats:
    """One scenario's sessions of two targets pooled (``compare --by all``), without their
    passes: pooled, the sessions sort by repeat across targets, which the bits of each
    target do not tell (``store.cluster_stats`` reads the pooled order itself)."""
    classes = {code: a.sums(code) + b.sums(code) for code in sorted({*a.classes, *b.classes})}
    return ScenarioStats(a.sessions + b.sessions, a.errors + b.errors, classes)
