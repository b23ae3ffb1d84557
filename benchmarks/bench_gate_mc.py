"""Monte Carlo check of the gate's and compare's statistics, with sessions that err together.

Each replication draws runs of a 29-scenario suite: per scenario a base error rate (2–10
per 100) and a rare failure class (0.5–1 per 100); each session of 10 calls draws its own
rates from a beta distribution with that mean and the intra-session correlation that gives
the setting's design effect (``deff = 1 + (m − 1)·ρ``), then its counts binomially.  The
draws are numpy arrays turned straight into the sums the store's GROUP BYs give
(``metrics.sufficient.TargetStats``), and the library's own functions judge them, as the
CLI does, without a database:

* **coverage** of the total's clustered interval (``units_rate``) at the suite's rates and
  at 0.5–1 per 100, and of a class's (``units_rate(code=...)``), also for a class burstier
  than the rest of the errors (its sessions at twice the total's design effect);
* **rule**: the gate's non-inferiority reading (``regression_from_units`` then
  ``analysis.gate.decide``): PASS / INCONCLUSIVE / FAIL for an unchanged model and for a
  true rise of exactly the margin, at repeats 1/3/10 and unequal (3 vs 10, 1 vs 10);
* **family**: 14 targets of an unchanged model, each judged, then the gate's Holm step
  (``analysis.gate.adjust_regressions``): FAIL per check and family-wise;
* **compare A/A**: the errors/100 row's one verdict (``UnitAnalysis.called``), the
  McNemar and pass-rate tests at 3 vs 10, and 14 classes drawn clustered, each called on
  its Rao–Scott p after Holm (``analysis.comparison.with_units``' rule), family-wise;
* **power**: ``plan_power`` on a baseline plans the repeats for the margin; two fresh
  runs of the unchanged model at those repeats are judged by the gate's rule (the plan's
  promise: PASS 80%), and whether the plan's 80% range held the repeats the true
  variance needs (``repeats_for_margin`` on the true rates and design effects).

Every rate is printed with its Monte Carlo 95% interval (Clopper–Pearson, scipy).  Run it
under ``nice -n 10``; ``--reps 20`` checks that it works.

    $ python benchmarks/bench_gate_mc.py [--reps 2000] [--seed 1] [--only coverage rule
        family compare power] [--repeats 3x10 ...] [--markdown]
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
from agent_eval.metrics.clustered import Unit, rao_scott_test, units_rate  # noqa: E402
from agent_eval.metrics.power import (  # noqa: E402
    ScenarioComponent,
    paired_se100,
    plan_power,
    repeats_for_margin,
)
from agent_eval.metrics.regression import regression_from_units  # noqa: E402
from agent_eval.metrics.sufficient import (  # noqa: E402
    Passes,
    ScenarioStats,
    Sums,
    TargetStats,
)

SCENARIOS = 29
CALLS = 10  # per session
CLASS = "AE304"
DEFFS = (1.0, 2.5, 4.0)
REPEATS = ((1, 1), (3, 3), (10, 10), (3, 10), (1, 10))  # (baseline, run)
MAX_PLAN = 400  # plans above it are counted, not played
MARGIN = 2.0  # --max-regression, errors per 100 calls
TARGETS = 14
COMPARE_SETTINGS = ((1.0, (3, 10)), (2.5, (3, 10)), (4.0, (3, 10)), (4.0, (3, 3)),
                    (4.0, (1, 10)))


class Suite:
    """One model on the suite: per-scenario base and class rates, drawn once."""

    def __init__(self, rng: np.random.Generator, base=(0.02, 0.10), rare=(0.005, 0.01)) -> None:
        self.base = rng.uniform(*base, SCENARIOS)
        self.rare = rng.uniform(*rare, SCENARIOS)

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


def draw_counts(rng, suite: Suite, repeats: int, deff: float, *, rise: float = 0.0,
                class_deff: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Denied calls per session, all and of the class: two ``(repeats, SCENARIOS)`` arrays."""
    shape = (repeats, SCENARIOS)
    base = np.broadcast_to(np.minimum(suite.base + rise, 0.99), shape)
    rare = np.broadcast_to(suite.rare, shape)
    main = (rng.binomial(CALLS, _session_rate(rng, base, deff)) if base.max() > 0
            else np.zeros(shape, dtype=np.int64))
    klass = rng.binomial(CALLS, _session_rate(rng, rare, class_deff or deff))
    return np.minimum(CALLS, main + klass), klass


def stats_of(k: np.ndarray, klass: np.ndarray, codes: dict[str, np.ndarray] | None = None,
             *, passes: bool = True) -> TargetStats:
    """The per-scenario sums (``store.cluster_stats``'s) of sessions of ``CALLS`` calls;
    without ``passes`` no outcomes, as the gate reads them."""
    repeats = k.shape[0]
    n, nn = repeats * CALLS, repeats * CALLS * CALLS
    codes = {CLASS: klass} if codes is None else codes
    ks, kks = k.sum(0).tolist(), (k * k).sum(0).tolist()
    per_code = {c: (a.sum(0).tolist(), (a * a).sum(0).tolist()) for c, a in codes.items()}
    passed = (k == 0)
    weights = (1 << np.arange(repeats, dtype=object))
    bits = [int(np.sum(weights[passed[:, s]])) for s in range(SCENARIOS)]
    out = {}
    for s in range(SCENARIOS):
        errors = Sums(repeats, ks[s], n, kks[s], ks[s] * CALLS, nn)
        classes = {c: Sums(repeats, a[s], n, aa[s], a[s] * CALLS, nn)
                   for c, (a, aa) in per_code.items() if a[s]}
        out[f"s{s}"] = ScenarioStats(repeats, errors, classes,
                                     Passes(repeats, bits[s]) if passes else None)
    return TargetStats(out)


def draw(rng, suite: Suite, repeats: int, deff: float, **kw) -> TargetStats:
    """A run as the gate reads it (sums, no outcomes)."""
    return stats_of(*draw_counts(rng, suite, repeats, deff, **kw), passes=False)


def units_of(k: np.ndarray, klass: np.ndarray) -> list[Unit]:
    return [Unit("t", f"s{s}", r, CALLS, int(k[r, s]),
                 {CLASS: int(klass[r, s])} if klass[r, s] else {}, passed=k[r, s] == 0)
            for r in range(k.shape[0]) for s in range(SCENARIOS)]


def draw_run(rng, suite: Suite, repeats: int, deff: float, *, rise: float = 0.0) -> list[Unit]:
    """A run as sessions (``Unit`` objects, one per session), for ``plan_power`` and
    ``bench_sequential.py``, which slices a run by repeat."""
    return units_of(*draw_counts(rng, suite, repeats, deff, rise=rise))


def rate_ci(hits: int, n: int) -> str:
    if n == 0:
        return "–"
    ci = binomtest(hits, n).proportion_ci(method="exact")
    return f"{100 * hits / n:.1f}% [{100 * ci.low:.1f}–{100 * ci.high:.1f}] (n={n})"


def covered(rate, truth: float) -> bool:
    return rate.lo100 is not None and rate.lo100 <= 100 * truth <= rate.hi100


def coverage(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    settings = [(f"deff {d:g}, {r} repeat(s)", d, r, {}, None) for d in DEFFS for r in (1, 3, 10)]
    settings += [(f"total at 0.5–1/100, deff {d:g}, {r} repeat(s)", d, r,
                  {"base": (0.0, 0.0), "rare": (0.005, 0.01)}, None)
                 for d in DEFFS for r in (1, 3, 10)]
    settings += [(f"burstier class (deff {2 * d:g}, total {d:g}), {r} repeat(s)", d, r, {},
                  2 * d) for d in (2.0, 4.0) for r in (1, 3, 10)]
    for label, deff, repeats, rates, class_deff in settings:
        total = klass = 0
        for _ in range(reps):
            suite = Suite(rng, **rates)
            stats = draw(rng, suite, repeats, deff, class_deff=class_deff)
            total += covered(units_rate(stats), suite.true_total)
            klass += covered(units_rate(stats, code=CLASS), suite.true_class)
        rows.append((label, rate_ci(total, reps), rate_ci(klass, reps)))
    return rows


def rule(rng, reps: int, repeats: list[str] | None = None) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r, run_r in REPEATS:
            if repeats and f"{base_r}x{run_r}" not in repeats:
                continue
            for rise in (0.0, MARGIN):
                counts = {"pass": 0, "inconclusive": 0, "fail": 0}
                for _ in range(reps):
                    suite = Suite(rng)
                    a = draw(rng, suite, base_r, deff)
                    b = draw(rng, suite, run_r, deff, rise=rise / 100)
                    reg = regression_from_units(a, b, MARGIN)
                    counts[decide(reg.lo100, reg.hi100, MARGIN)] += 1
                rows.append((f"deff {deff:g}, repeats {base_r} vs {run_r}, true rise {rise:g}",
                             rate_ci(counts["pass"], reps), rate_ci(counts["inconclusive"], reps),
                             rate_ci(counts["fail"], reps)))
    return rows


def family(rng, reps: int, repeats: list[str] | None = None) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r, run_r in REPEATS:
            if repeats and f"{base_r}x{run_r}" not in repeats:
                continue
            per_check = checks = fails = 0
            for _ in range(reps):
                judged = []
                for i in range(TARGETS):
                    suite = Suite(rng)
                    reg = regression_from_units(draw(rng, suite, base_r, deff),
                                                draw(rng, suite, run_r, deff), MARGIN)
                    judged.append(GateCheck("regression", f"t{i}", "regression", MARGIN,
                                            reg.diff100, decide(reg.lo100, reg.hi100, MARGIN),
                                            reg.detail, reg.method, reg.p_value))
                per_check += sum(c.status == "fail" for c in judged)
                checks += len(judged)
                fails += any(c.status == "fail" for c in adjust_regressions(judged))
            rows.append((f"deff {deff:g}, repeats {base_r} vs {run_r}",
                         rate_ci(per_check, checks), rate_ci(fails, reps)))
    return rows


def compare_aa(rng, reps: int, repeats: list[str] | None = None) -> list[tuple[str, ...]]:
    rows = []
    classes = [f"C{i}" for i in range(14)]
    for deff, (base_r, run_r) in COMPARE_SETTINGS:
        if repeats and f"{base_r}x{run_r}" not in repeats:
            continue
        if True:
            verdicts = called = mcnemar = passes = family = 0
            for _ in range(reps):
                suite = Suite(rng)
                sides = []
                for r in (base_r, run_r):
                    k, klass = draw_counts(rng, suite, r, deff)
                    # 14 classes at 0.5–1 per 100 each, clustered like the rest
                    codes = {c: rng.binomial(CALLS, _session_rate(
                        rng, np.broadcast_to(suite.rare, k.shape), deff)) for c in classes}
                    sides.append(stats_of(k, klass, codes))
                a, b = sides
                analysis = analyse_units({"t": a}, {"t": b}, ["t"])["t"]
                if analysis.called is not None:
                    verdicts += 1
                    called += analysis.called[1]
                paired = analysis.paired
                mcnemar += paired.mcnemar is not None and paired.mcnemar.p_value < 0.05
                passes += paired.passes is not None and paired.passes.p_value < 0.05
                p = {c: rao_scott_test(a, b, c).p_value for c in classes}
                family += min(holm(p).values()) < 0.05
            rows.append((f"deff {deff:g}, repeats {base_r} vs {run_r}",
                         rate_ci(called, verdicts), rate_ci(passes, reps),
                         rate_ci(mcnemar, reps), rate_ci(family, reps)))
    return rows


def true_repeats(suite: Suite, deff: float) -> int | None:
    """The repeats the plan needs with the true rates and design effects: each scenario's
    session variance is the sum of its two beta-binomial parts (the cap at 10 aside)."""
    rho = (deff - 1) / (CALLS - 1)
    comps = []
    for s in range(SCENARIOS):
        p1, p2 = suite.base[s], suite.rare[s]
        var = CALLS * (p1 * (1 - p1) + p2 * (1 - p2)) * (1 + (CALLS - 1) * rho)
        p = p1 + p2
        comps.append(ScenarioComponent(f"s{s}", 10**9, CALLS, p,
                                       var / (CALLS * p * (1 - p))))
    needed = repeats_for_margin(paired_se100(comps, 1, 0.0), MARGIN, SCENARIOS - 1)
    return None if needed is None else max(2, needed)


def power(rng, reps: int) -> list[tuple[str, ...]]:
    rows = []
    for deff in DEFFS:
        for base_r in (1, 3):
            passed = planned = skipped = held = ranged = 0
            plans = []
            for _ in range(reps):
                suite = Suite(rng)
                plan = plan_power(units_of(*draw_counts(rng, suite, base_r, deff)), MARGIN)
                if plan.repeats is None or plan.repeats > MAX_PLAN:
                    skipped += 1
                    continue
                plans.append(plan.repeats)
                a = draw(rng, suite, plan.repeats, deff)
                b = draw(rng, suite, plan.repeats, deff)
                planned += 1
                reg = regression_from_units(a, b, MARGIN)
                passed += decide(reg.lo100, reg.hi100, MARGIN) == "pass"
                truth = true_repeats(suite, deff)
                if plan.repeats_range is not None and truth is not None:
                    ranged += 1
                    held += plan.repeats_range[0] <= truth <= plan.repeats_range[1]
            spread = (f"{min(plans)}–{max(plans)}, median {int(np.median(plans))}"
                      if plans else "–")
            rows.append((f"deff {deff:g}, baseline {base_r} repeat(s)", spread,
                         rate_ci(passed, planned), rate_ci(held, ranged), str(skipped)))
    return rows


def table(title: str, head: tuple[str, ...], rows, markdown: bool) -> str:
    if markdown:
        lines = [f"*{title}*", "", "| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        lines = [f"== {title} ==", "  ".join(head), *("  ".join(row) for row in rows)]
    return "\n".join(lines) + "\n"


SECTIONS = ("coverage", "rule", "family", "compare", "power")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=list(SECTIONS), choices=SECTIONS)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--repeats", nargs="*", metavar="AxB",
                        help="rule, family and compare: only these repeats, baseline x run "
                             "(e.g. 3x10) [default: all]")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    out = [f"Replications per setting: {args.reps}; seed {args.seed}; {SCENARIOS} scenarios "
           f"of {CALLS}-call sessions.\n"]

    def timed(name, text):
        out.append(text)
        out.append(f"({name}: {time.perf_counter() - started:.0f} s since the start)\n")
        print(out[-2], out[-1], sep="\n", file=sys.stderr, flush=True)

    if "coverage" in args.only:
        timed("coverage", table("Coverage of the 95% intervals (goal >= 93%)",
                                ("setting", "total (clustered)", f"class {CLASS}"),
                                coverage(rng, args.reps), args.markdown))
    if "rule" in args.only:
        timed("rule", table(f"The non-inferiority rule at --max-regression {MARGIN:g}: a true "
                            "rise of the margin PASSes <= 2.5%, an unchanged model FAILs <= 2.5%",
                            ("setting", "PASS", "INCONCLUSIVE", "FAIL"), rule(rng, args.reps, args.repeats),
                            args.markdown))
    if "family" in args.only:
        timed("family", table(f"{TARGETS} targets of an unchanged model at --max-regression "
                              f"{MARGIN:g}: FAIL per check <= 2.5%, any FAIL after Holm <= 5%",
                              ("setting", "FAIL per check (before Holm)",
                               "any FAIL after Holm"), family(rng, args.reps, args.repeats),
                              args.markdown))
    if "compare" in args.only:
        timed("compare", table("compare A/A (nominal 5% each)",
                               ("setting", "errors/100 row 'yes'", "pass rate p < 0.05",
                                "McNemar p < 0.05", "any of 14 classes 'yes' (Rao–Scott, Holm)"),
                               compare_aa(rng, args.reps, args.repeats), args.markdown))
    if "power" in args.only:
        timed("power", table(f"An unchanged model at `power`'s planned size (margin {MARGIN:g}; "
                             "goals: PASS >= 78%, the 80% range holds the true need 75–85% "
                             "where printed)",
                             ("setting", "planned repeats", "PASS",
                              "80% range held the true need (– none printed)", f"plans over {MAX_PLAN} "
                              "(not played)"), power(rng, args.reps), args.markdown))
    out.append(f"Took {time.perf_counter() - started:.0f} s.\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
