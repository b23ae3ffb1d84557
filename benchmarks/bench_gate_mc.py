"""Monte Carlo check of the gate's and compare's statistics, with sessions that err together.

Each replication draws runs of a 29-scenario suite: per scenario a base error rate (2–10
per 100) and a rare failure class (0.5–1 per 100); each session of 10 calls draws its own
rates from a beta distribution with that mean and the intra-session correlation that gives
the setting's design effect (``deff = 1 + (m − 1)·ρ``), then its counts binomially.  The
library's own functions judge them, as the CLI does:

* **coverage** of the total's clustered interval (``units_rate``) and of a class's
  (``units_rate(code=...)``: Korn–Graubard Clopper–Pearson, design effect borrowed from
  the total), including runs where the class never occurs;
* **gate A/A**: two runs of the same model judged by the regression check
  (``regression_from_units``, ``--max-regression 2``), per check, and family-wise over
  14 targets after the gate's Holm step (``analysis.gate.adjust_regressions``); an
  inconclusive check is not a fail;
* **rule**: the non-inferiority reading (``analysis.gate.decide``: PASS when the interval's
  upper end is within the margin, FAIL when its lower end is beyond it): the share of
  PASS, INCONCLUSIVE and FAIL for an unchanged model and for a true rise of exactly the
  margin (+2 per 100), at fixed repeats;
* **compare A/A**: the errors/100 row's one verdict (``UnitAnalysis.called``) and the
  class rows' Holm-adjusted calls over 14 classes, family-wise;
* **power**: ``plan_power`` on a baseline plans the repeats for a margin of 2 per 100;
  two fresh runs of the unchanged model at those repeats are judged by the gate's rule:
  the share that PASS (the plan's promise: 80%), and whether the plan's 80% range held the
  repeats the plan would have needed with the true variance (the plan from a 10-repeat
  baseline stands for it).

Every rate is printed with its Monte Carlo 95% interval (Clopper–Pearson, scipy).  The
default, 2,000 replications per setting, takes hours on a 2-core machine; ``--reps 20``
checks that it works.

    $ python benchmarks/bench_gate_mc.py [--reps 2000] [--seed 1] [--only coverage gate
        compare power] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scipy.stats import binomtest  # noqa: E402

from agent_eval.analysis.comparison import analyse_units, holm  # noqa: E402
from agent_eval.analysis.gate import GateCheck, adjust_regressions, decide  # noqa: E402
from agent_eval.metrics.clustered import Unit, units_rate  # noqa: E402
from agent_eval.metrics.power import plan_power  # noqa: E402
from agent_eval.metrics.regression import regression_from_units  # noqa: E402
from agent_eval.metrics.stats import compare_rates  # noqa: E402

SCENARIOS = 29
CALLS = 10  # per session
CLASS = "AE304"
DEFFS = (1.0, 2.5, 4.0)
REPEATS = ((1, 1), (3, 3), (10, 10), (3, 10))  # (baseline, run); the last is unequal
MAX_PLAN = 200  # plans above it are counted, not played (the run would be too long here)
MARGIN = 2.0  # --max-regression, errors per 100 calls


class Suite:
    """One model on the suite: per-scenario base and class rates, drawn once."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.base = rng.uniform(0.02, 0.10, SCENARIOS)
        self.rare = rng.uniform(0.005, 0.01, SCENARIOS)

    @property
    def true_total(self) -> float:
        return float(np.mean(self.base + self.rare))

    @property
    def true_class(self) -> float:
        return float(np.mean(self.rare))


def _session_rate(rng, mean: np.ndarray, deff: float) -> np.ndarray:
    rho = (deff - 1) / (CALLS - 1)
    if rho <= 0:
        return mean
    shape = (1 - rho) / rho
    return rng.beta(mean * shape, (1 - mean) * shape)


def draw_run(rng, suite: Suite, repeats: int, deff: float, *, rise: float = 0.0,
             target: str = "t") -> list[Unit]:
    units = []
    for r in range(repeats):
        main = rng.binomial(CALLS, _session_rate(rng, np.minimum(suite.base + rise, 0.99), deff))
        rare = rng.binomial(CALLS, _session_rate(rng, suite.rare, deff))
        for s in range(SCENARIOS):
            k = int(min(CALLS, main[s] + rare[s]))
            units.append(Unit(target, f"s{s}", r, CALLS, k,
                              {CLASS: int(rare[s])} if rare[s] else {}, passed=k == 0))
    return units


def rate_ci(hits: int, n: int) -> str:
    if n == 0:
        return "–"
    ci = binomtest(hits, n).proportion_ci(method="exact")
    return f"{100 * hits / n:.1f}% [{100 * ci.low:.1f}–{100 * ci.high:.1f}] (n={n})"


def coverage(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for repeats in (1, 3, 10):
            total = klass = zero = zero_covered = 0
            for _ in range(reps):
                suite = Suite(rng)
                units = draw_run(rng, suite, repeats, deff)
                t = units_rate(units)
                c = units_rate(units, code=CLASS)
                total += t.lo100 is not None and t.lo100 <= 100 * suite.true_total <= t.hi100
                hit = c.lo100 is not None and c.lo100 <= 100 * suite.true_class <= c.hi100
                klass += hit
                if c.k == 0:
                    zero += 1
                    zero_covered += hit
            rows.append((f"deff {deff:g}, {repeats} repeat(s)", rate_ci(total, reps),
                         rate_ci(klass, reps), rate_ci(zero_covered, zero)))
    return rows


def gate_aa(rng, reps: int, targets: int) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r, run_r in REPEATS:
            per_check = checks = family = 0
            for _ in range(reps):
                judged = []
                for i in range(targets):
                    suite = Suite(rng)
                    a = draw_run(rng, suite, base_r, deff, target=f"t{i}")
                    b = draw_run(rng, suite, run_r, deff, target=f"t{i}")
                    reg = regression_from_units(a, b, MARGIN)
                    status = decide(reg.lo100, reg.hi100, MARGIN)
                    judged.append(GateCheck("regression", f"t{i}", "regression", MARGIN,
                                            reg.diff100, status, reg.detail, reg.method,
                                            reg.p_value))
                adjusted = adjust_regressions(judged)
                fails = sum(c.status == "fail" for c in adjusted)
                per_check += sum(c.status == "fail" for c in judged)
                checks += len(judged)
                family += fails > 0
            rows.append((f"{targets} target(s), deff {deff:g}, repeats {base_r} vs {run_r}",
                         rate_ci(per_check, checks), rate_ci(family, reps)))
    return rows


def compare_aa(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    classes = [f"C{i}" for i in range(14)]
    for deff in DEFFS:
        verdicts = called = family = raw_family = 0
        for _ in range(reps):
            suite = Suite(rng)
            a, b = draw_run(rng, suite, 3, deff), draw_run(rng, suite, 3, deff)
            analysis = analyse_units({"t": a}, {"t": b}, ["t"])["t"]
            if analysis.called is not None:
                verdicts += 1
                called += analysis.called[1]
            # 14 classes at 1 per 100 each, the per-call z-test as compare's table runs it
            n = SCENARIOS * 3 * CALLS
            p = {c: compare_rates(int(rng.binomial(n, 0.01)), n,
                                  int(rng.binomial(n, 0.01)), n, exact=False).p_value
                 for c in classes}
            family += min(holm(p).values()) < 0.05
            raw_family += min(p.values()) < 0.05
        rows.append((f"deff {deff:g}, 3 repeats", rate_ci(called, verdicts),
                     rate_ci(raw_family, reps), rate_ci(family, reps)))
    return rows


def rule(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r, run_r in REPEATS:
            for rise in (0.0, MARGIN):
                counts = {"pass": 0, "inconclusive": 0, "fail": 0}
                for _ in range(reps):
                    suite = Suite(rng)
                    a = draw_run(rng, suite, base_r, deff)
                    b = draw_run(rng, suite, run_r, deff, rise=rise / 100)
                    reg = regression_from_units(a, b, MARGIN)
                    counts[decide(reg.lo100, reg.hi100, MARGIN)] += 1
                rows.append((f"deff {deff:g}, repeats {base_r} vs {run_r}, true rise {rise:g}",
                             rate_ci(counts["pass"], reps), rate_ci(counts["inconclusive"], reps),
                             rate_ci(counts["fail"], reps)))
    return rows


def power(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r in (1, 3):
            passed = planned = skipped = held = ranged = 0
            plans = []
            for _ in range(reps):
                suite = Suite(rng)
                base = draw_run(rng, suite, base_r, deff)
                plan = plan_power(base, MARGIN)
                if plan.repeats is None or plan.repeats > MAX_PLAN:
                    skipped += 1
                    continue
                plans.append(plan.repeats)
                a = draw_run(rng, suite, plan.repeats, deff)
                b = draw_run(rng, suite, plan.repeats, deff)
                planned += 1
                reg = regression_from_units(a, b, MARGIN)
                passed += decide(reg.lo100, reg.hi100, MARGIN) == "pass"
                if plan.repeats_range is not None:
                    truth = plan_power(draw_run(rng, suite, 10, deff), MARGIN).repeats
                    if truth is not None:
                        ranged += 1
                        held += plan.repeats_range[0] <= truth <= plan.repeats_range[1]
            spread = (f"{min(plans)}–{max(plans)}, median {int(np.median(plans))}"
                      if plans else "–")
            rows.append((f"deff {deff:g}, baseline {base_r} repeat(s)", spread,
                         rate_ci(passed, planned), rate_ci(held, ranged), str(skipped)))
    return rows


def table(title: str, head: tuple[str, ...], rows, markdown: bool) -> str:
    if markdown:
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        lines = [f"== {title} ==", "  ".join(head), *("  ".join(row) for row in rows)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*",
                        default=["coverage", "gate", "rule", "compare", "power"])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    out = [f"Replications per setting: {args.reps}; seed {args.seed}; {SCENARIOS} scenarios "
           f"of {CALLS}-call sessions.\n"]
    if "coverage" in args.only:
        out.append(table("Coverage of the 95% intervals (goal 93–97%)",
                         ("setting", "total (clustered)", f"class {CLASS}",
                          "class, runs with 0 of it"), coverage(rng, args.reps), args.markdown))
    if "gate" in args.only:
        rows = gate_aa(rng, args.reps, 1) + gate_aa(rng, args.reps, 14)
        out.append(table(f"Gate A/A false fails at --max-regression {MARGIN:g} (nominal 2.5% "
                         "per check)",
                         ("setting", "per check (unadjusted)", "family-wise after Holm"),
                         rows, args.markdown))
    if "rule" in args.only:
        out.append(table(f"The non-inferiority rule at --max-regression {MARGIN:g}: a true "
                         "rise of the margin PASSes <= 2.5%",
                         ("setting", "PASS", "INCONCLUSIVE", "FAIL"), rule(rng, args.reps),
                         args.markdown))
    if "compare" in args.only:
        out.append(table("compare A/A",
                         ("setting", "errors/100 row 'yes'", "any of 14 classes, raw p",
                          "any of 14 classes, Holm"), compare_aa(rng, args.reps),
                         args.markdown))
    if "power" in args.only:
        out.append(table(f"An unchanged model at `power`'s planned size (margin {MARGIN:g}, "
                         "goal: PASS >= 78%)",
                         ("setting", "planned repeats", "PASS",
                          "80% range held the 10-repeat plan", f"plans over {MAX_PLAN} "
                          "(not played)"), power(rng, args.reps), args.markdown))
    out.append(f"Took {time.perf_counter() - started:.0f} s.\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
