"""Sequential runs: the gate's intervals made valid under repeated looks.

``run --until-decided`` plays repeats in batches and, after each batch (a *look*), judges
the gate's checks; it stops as soon as the verdict is decided.  Looking after every batch
and stopping on the first decisive interval would, with the gate's fixed 95% intervals,
PASS a true rise of the margin far more often than 2.5%.  So every look reads the gate's
own interval (the clustered Korn–Graubard interval of a rate, the paired t interval of a
rise) at a *smaller* nominal alpha, fixed by a group-sequential **alpha-spending
function** (Lan & DeMets 1983, "Discrete sequential boundaries for clinical trials",
Biometrika 70(3):659–663): of the two-sided ``α`` (5%), a share ``α(t)`` may have been
spent by information time ``t`` (repeats played / the cap), and look ``k`` gets the
critical value ``c_k`` with

    P(|Z_1| < c_1, …, |Z_{k−1}| < c_{k−1}, |Z_k| ≥ c_k) = α(t_k) − α(t_{k−1})

under no change, ``Z_k`` the standardised estimate on everything played up to look ``k``
(Brownian motion in information time, so ``corr(Z_i, Z_j) = √(t_i / t_j)``).  The
intervals ``estimate ± c_k · SE_k`` are then *repeated confidence intervals*
(Jennison & Turnbull 1989, JRSS B 51(3):305–361): they cover the true value at every look
at once with probability ``1 − α``, so a PASS or a FAIL read off any of them (the
non-inferiority reading of ``analysis.gate.decide``) errs at most ``α/2`` each way, however
many looks were taken and whenever the run stopped.

The spending function is the O'Brien–Fleming type on each side, ``α(t)/2 = 2 −
2Φ(z_{1−α/4} / √t)`` for a one-sided ``α/2``: it spends almost nothing early (a look at a
fifth of the cap needs ``|Z| ≥ 4.88``), so the
last look's interval is hardly wider than the fixed plan's (the cap costs few repeats over
``agent-eval power``'s plan) while a clearly unchanged or clearly regressed model stops
early.  Why spending and not an anytime-valid confidence sequence (Howard, Ramdas,
McAuliffe & Sekhon 2021): a confidence sequence needs no cap but is about 1.7× wider than
the fixed interval at the size it is tuned for (wider elsewhere), so an unchanged model
would pay about 2.8× the fixed plan's repeats to PASS; the run has a cap anyway (a budget), the looks fall on whole batches,
and the spending boundary reuses the gate's intervals unchanged (only their alpha moves),
so the gate run afterwards reads the run with the same correction (docs/statistics.md).

The boundary rests on a normal approximation; each look turns ``c_k`` into a nominal
two-sided alpha ``2(1 − Φ(c_k))`` and the gate's t and Korn–Graubard intervals use it on
their own degrees of freedom (the usual practice, Jennison & Turnbull 2000, §3.8).
The crossing probabilities are found by the recursive numerical integration of Armitage,
McPherson & Rowe (1969) on a grid (:func:`boundaries`), as the ``ldbounds`` R package
does; tests check it against published values and scipy's multivariate normal.
Pure Python: the normal distribution and Brent's root finder come from
``metrics.distributions`` (held to scipy in the tests), so the core install needs neither
numpy nor scipy.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from agent_eval.metrics.distributions import brentq, norm_cdf, norm_ppf, norm_sf
from agent_eval.metrics.stats import ALPHA

SPENDING = "O'Brien–Fleming-type alpha spending (Lan & DeMets 1983)"
MAX_CRITICAL = 8.0
"""No look needs a larger critical value: below ``2(1 − Φ(8))`` (1e-15) nothing is spent."""
_GRID = 32  # grid points per standard deviation of the next increment of the score
_Held = tuple[list[float], list[float], list[float]]


def spent(t: float, alpha: float = ALPHA) -> float:
    """The two-sided alpha spent by information time ``t`` (0..1): each side spends the
    O'Brien–Fleming-type function of its one-sided ``α/2``, ``2 − 2Φ(z_{1−α/4} / √t)``
    (Lan & DeMets 1983; ``gsDesign``'s ``sfLDOF``, ``ldbounds``), so both together
    ``4 − 4Φ(z_{1−α/4} / √t)``: ``alpha`` at ``t = 1``."""
    if t <= 0:
        return 0.0
    t = min(1.0, t)
    z = -norm_ppf(alpha / 4)
    return 4 * norm_sf(z / math.sqrt(t))


@dataclass(frozen=True, slots=True)
class Boundary:
    """One look's critical value and what it costs: ``critical`` for ``|Z|``, the nominal
    two-sided alpha the look's intervals use (``2(1 − Φ(critical))``) and the alpha spent
    up to and including this look."""

    fraction: float
    critical: float
    nominal_alpha: float
    spent: float

    @property
    def level(self) -> float:
        """The nominal confidence of the look's intervals, e.g. 0.9948."""
        return 1 - self.nominal_alpha


def boundaries(fractions: Sequence[float], alpha: float = ALPHA) -> list[Boundary]:
    """The critical values of looks at information times ``fractions`` (increasing, in
    (0, 1]) under O'Brien–Fleming-type spending of a two-sided ``alpha``: each look spends
    ``spent(t_k) − spent(t_{k−1})`` of probability that ``|Z|`` first crosses there.

    The continuation density of the score ``S = Z√t`` is carried from look to look on a
    grid (trapezoid rule; the increments are independent normal with variance
    ``t_k − t_{k−1}``) and each ``c_k`` solved by Brent's method
    (``distributions.brentq``).  A look that may spend almost nothing gets
    :data:`MAX_CRITICAL`; what it leaves is spent later (Lan–DeMets: the cumulative target
    is kept, not each increment)."""
    out: list[Boundary] = []
    held: _Held | None = None  # grid, weights and density of S where the run went on
    previous_t = 0.0
    total_spent = 0.0
    for t in fractions:
        if not previous_t < t <= 1 + 1e-12:
            raise ValueError(f"look fractions must increase within (0, 1], got {list(fractions)}")
        t = min(1.0, t)
        target = spent(t, alpha) - total_spent
        sd = math.sqrt(t - previous_t)
        if held is not None and held[0][1] - held[0][0] > sd / _GRID:  # too coarse now
            grid, weights = _trapezoid(held[0][0], held[0][-1], sd)
            held = grid, weights, _interp(grid, held[0], held[2])

        def exit_prob(c: float, t: float = t, sd: float = sd,
                      held: _Held | None = held) -> float:
            if held is None:
                return 2 * norm_sf(c)
            grid, weights, density = held
            edge = c * math.sqrt(t)
            return math.fsum(w * d * (norm_sf((edge - g) / sd) + norm_cdf((-edge - g) / sd))
                             for g, w, d in zip(grid, weights, density, strict=True))

        if target <= exit_prob(MAX_CRITICAL):
            c = MAX_CRITICAL
        else:
            def excess(x: float, goal: float = target) -> float:
                return exit_prob(x) - goal

            c = brentq(excess, 0.0, MAX_CRITICAL, xtol=1e-10)
        total_spent += exit_prob(c)
        out.append(Boundary(t, c, 2 * norm_sf(c), total_spent))
        # the density of S at this look where the run goes on: |S| < c√t
        edge = c * math.sqrt(t)
        grid, weights = _trapezoid(-edge, edge, sd)
        if held is None:
            density = [_pdf(g / sd) / sd for g in grid]
        else:
            mass = [w * d for w, d in zip(held[1], held[2], strict=True)]
            density = [sum(_pdf((g - h) / sd) * m for h, m in zip(held[0], mass, strict=True))
                       / sd for g in grid]
        held = grid, weights, density
        previous_t = t
    return out


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / _SQRT_2PI


_SQRT_2PI = math.sqrt(2 * math.pi)


def _trapezoid(lo: float, hi: float, sd: float) -> tuple[list[float], list[float]]:
    """Grid points from ``lo`` to ``hi``, :data:`_GRID` per ``sd``, and trapezoid weights."""
    n = max(201, int((hi - lo) / sd * _GRID) + 1)
    step = (hi - lo) / (n - 1)
    grid = [lo + i * step for i in range(n)]
    weights = [step] * n
    weights[0] = weights[-1] = step / 2
    return grid, weights


def _interp(x: list[float], xp: list[float], fp: list[float]) -> list[float]:
    """Linear interpolation of ``fp`` (at increasing ``xp``) at ``x``, as ``numpy.interp``:
    the end values outside ``xp``."""
    out = []
    for v in x:
        k = bisect.bisect_right(xp, v)
        if k == 0:
            out.append(fp[0])
        elif k == len(xp):
            out.append(fp[-1])
        else:
            x0, x1 = xp[k - 1], xp[k]
            out.append(fp[k - 1] + (fp[k] - fp[k - 1]) * (v - x0) / (x1 - x0))
    return out


@dataclass(frozen=True, slots=True)
class Look:
    """One look of a sequential run: the repeats per scenario played by then, the
    boundary it was read at, and the checks it left undecided."""

    repeats: int
    nominal_alpha: float
    spent: float
    undecided: int

    def stored(self) -> dict[str, float | int]:
        return {"repeats": self.repeats, "nominal_alpha": self.nominal_alpha,
                "spent": self.spent, "undecided": self.undecided}


@dataclass(frozen=True, slots=True)
class SequentialPlan:
    """What a sequential run stores on itself (``config["sequential"]``) so that a
    resumed run, a worker and the gate continue and read the same sequence: the cap, the
    batch, the checks (as ``gate`` options), the looks taken, and how it stopped."""

    max_repeats: int
    look_every: int
    checks: dict
    looks: tuple[Look, ...] = ()
    stopped: str | None = None  # "decided" or "cap" once it stopped
    alpha: float = ALPHA

    @classmethod
    def from_config(cls, config: dict | None) -> SequentialPlan | None:
        seq = (config or {}).get("sequential")
        if not isinstance(seq, dict):
            return None
        looks = tuple(Look(int(x["repeats"]), float(x["nominal_alpha"]), float(x["spent"]),
                           int(x.get("undecided", 0))) for x in seq.get("looks", ()))
        return cls(int(seq["max_repeats"]), int(seq["look_every"]), dict(seq.get("checks") or {}),
                   looks, seq.get("stopped"), float(seq.get("alpha", ALPHA)))

    def stored(self) -> dict:
        return {"max_repeats": self.max_repeats, "look_every": self.look_every,
                "checks": self.checks, "looks": [look.stored() for look in self.looks],
                "stopped": self.stopped, "alpha": self.alpha, "spending": SPENDING}

    def next_repeats(self) -> int:
        """Repeats per scenario the next look is taken at."""
        done = self.looks[-1].repeats if self.looks else 0
        return min(self.max_repeats, done + self.look_every)

    def boundary_at(self, repeats: int) -> Boundary:
        """The boundary of a look at ``repeats`` after the looks taken (or of the last
        look taken, when it was at ``repeats``)."""
        taken = [look.repeats for look in self.looks if look.repeats < repeats]
        fractions = [r / self.max_repeats for r in [*taken, repeats]]
        return boundaries(fractions, self.alpha)[-1]

    def describe(self) -> str:
        """One line for the gate's title: that the run was sequential, its looks, and the
        nominal level its intervals were read at."""
        n = len(self.looks)
        last = self.looks[-1] if self.looks else None
        how = {"decided": "stopped when decided", "cap": "stopped at the cap"}.get(
            self.stopped or "", "not stopped yet")
        head = (f"sequential run: {n} look{'s' if n != 1 else ''} (every {self.look_every} "
                f"repeat{'s' if self.look_every != 1 else ''}, at most {self.max_repeats}), "
                f"{how}")
        if last is None:
            return head
        return (f"{head} after {last.repeats} repeat{'s' if last.repeats != 1 else ''}; "
                f"intervals read at a nominal {level_text(1 - last.nominal_alpha)} "
                f"(repeated confidence intervals, {SPENDING}, {100 * self.alpha:g}% over the "
                "sequence)")


def level_text(level: float) -> str:
    """``99.48%``: a nominal confidence with enough digits to tell it from 95%."""
    digits = 2 if level < 0.9999 else 4
    return f"{100 * level:.{digits}f}%"
