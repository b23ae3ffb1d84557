"""Monte Carlo of ``run --until-decided`` against the fixed plan, sessions that err together.

Each replication draws a model on the 29-scenario suite of ``bench_gate_mc.py`` (its
``Suite`` and ``draw_run``: per-scenario rates, sessions of 10 calls drawn from a beta
with the setting's design effect) and plans as a user would: ``plan_power`` on a 3-repeat
pilot run gives ``R`` repeats for the margin (``agent-eval power``).  Then, on the same
draws:

* **fixed plan**: a baseline of ``R`` repeats and a run of ``R`` repeats, judged once by the
  gate's regression check (``regression_from_units``, 95%) read as the gate reads it
  (``analysis.gate.decide``);
* **sequential**: the same baseline, and the run played in batches up to a cap of
  ``ceil(1.1 R)`` (``--max-repeats``), ``--looks`` looks equally spaced
  (``--look-every ceil(cap / looks)``), each judged by the same check at the nominal alpha
  of the O'Brien–Fleming spending boundary (``metrics.sequential``, what the run and the
  gate use), stopping at the first PASS or FAIL, or at the cap.

The model is unchanged (rise 0) or worse by a true rise (in errors/100 on every
scenario).  Printed per setting, with Monte Carlo 95% intervals (Clopper–Pearson): the
share that PASS, FAIL and stay INCONCLUSIVE under each design, and the repeats the run
spent (the fixed plan spends ``R``; the sequential run its stopping repeats), their mean
and the ratio of means.  A true rise of the margin must PASS at most 2.5% under both.

    $ python benchmarks/bench_sequential.py [--reps 2000] [--seed 1] [--deffs 1 2.5 4]
        [--rises 0 1 2] [--looks 5] [--markdown]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_gate_mc import MARGIN, MAX_PLAN, Suite, draw_run, rate_ci  # noqa: E402

from agent_eval.analysis.gate import decide  # noqa: E402
from agent_eval.metrics.power import plan_power  # noqa: E402
from agent_eval.metrics.regression import regression_from_units  # noqa: E402
from agent_eval.metrics.sequential import boundaries  # noqa: E402
from agent_eval.metrics.sufficient import as_stats  # noqa: E402

PILOT = 3  # repeats of the run `power` plans from
CAP = 1.1  # the cap over the fixed plan


@cache
def schedule(cap: int, looks: int) -> tuple[tuple[int, float], ...]:
    """(repeats, nominal alpha) of each look for a cap and a number of looks."""
    every = max(1, math.ceil(cap / looks))
    at = sorted({*range(every, cap, every), cap})
    return tuple((r, b.nominal_alpha) for r, b in zip(at, boundaries([r / cap for r in at]),
                                                     strict=True))


def judge(base, run, repeats: int, alpha: float) -> str:
    """The gate's regression check on the run's first ``repeats``, as the CLI judges it:
    on per-scenario sums (``TargetStats``, what ``store.cluster_stats`` gives)."""
    upto = as_stats([u for u in run if u.repeat < repeats])
    reg = regression_from_units(base, upto, MARGIN, alpha=alpha)
    return decide(reg.lo100, reg.hi100, MARGIN)


def cell(rng, reps: int, deff: float, rise: float, looks: int) -> tuple[str, ...]:
    fixed = {"pass": 0, "fail": 0, "inconclusive": 0}
    seq = dict(fixed)
    spent_fixed = spent_seq = played = skipped = 0
    for _ in range(reps):
        suite = Suite(rng)
        plan = plan_power(draw_run(rng, suite, PILOT, deff), MARGIN)
        if plan.repeats is None or plan.repeats > MAX_PLAN:
            skipped += 1
            continue
        r = plan.repeats
        cap = math.ceil(CAP * r)
        base = as_stats(draw_run(rng, suite, r, deff))
        run = draw_run(rng, suite, cap, deff, rise=rise / 100)
        played += 1
        fixed[judge(base, run, r, 0.05)] += 1
        spent_fixed += r
        for repeats, alpha in schedule(cap, looks):
            verdict = judge(base, run, repeats, alpha)
            if verdict != "inconclusive" or repeats == cap:
                break
        seq[verdict] += 1
        spent_seq += repeats
    mean_fixed = spent_fixed / played if played else math.nan
    mean_seq = spent_seq / played if played else math.nan
    return (f"deff {deff:g}, true rise {rise:g}",
            rate_ci(fixed["pass"], played), rate_ci(fixed["fail"], played),
            rate_ci(seq["pass"], played), rate_ci(seq["fail"], played),
            rate_ci(seq["inconclusive"], played),
            f"{mean_fixed:.1f}", f"{mean_seq:.1f}", f"{mean_seq / mean_fixed:.2f}",
            str(skipped))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--deffs", type=float, nargs="*", default=[1.0, 2.5, 4.0])
    parser.add_argument("--rises", type=float, nargs="*", default=[0.0, 1.0, MARGIN])
    parser.add_argument("--looks", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    head = ("setting", "fixed PASS", "fixed FAIL", "sequential PASS", "sequential FAIL",
            "sequential INCONCLUSIVE", "fixed repeats (mean)", "sequential repeats (mean)",
            "ratio", f"plans over {MAX_PLAN} (not played)")
    rows = []
    for deff in args.deffs:
        for rise in args.rises:
            started = time.perf_counter()
            rows.append(cell(rng, args.reps, deff, rise, args.looks))
            print(f"  {time.perf_counter() - started:.0f} s: " + " | ".join(rows[-1]),
                  file=sys.stderr, flush=True)
    title = (f"Sequential (cap {CAP:g} x the plan, {args.looks} looks, O'Brien-Fleming "
             f"spending) against the fixed plan, margin {MARGIN:g}; {args.reps} "
             f"replications per setting, seed {args.seed}")
    if args.markdown:
        lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        lines = [f"== {title} ==", "  ".join(head), *("  ".join(row) for row in rows)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
