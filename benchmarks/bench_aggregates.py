"""Time `gate`, `compare` and the run summary on a generated million-call run (each < 1 s).

    .venv/bin/python benchmarks/bench_aggregates.py [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--calls 1000000] [--repeat 3] [--old] [--markdown]

The run is ``bench_reports.load_big_run``'s (125,000 sessions of 8 calls over 4 targets,
1% ended by a server fault), bulk-inserted into a new SQLite file and, with ``--pg``, a
new PostgreSQL database dropped afterwards.  Timed, best and median of ``--repeat``:

* *summary*: ``analysis.run_tables.summarize_runs`` (the per-target table of ``report --format``,
  ``run`` and ``gate``), now ``store.summarize``, GROUP BY in the database;
* *sums*: what the clustered and paired statistics read, summed per (target, scenario)
  in SQL (``store.cluster_stats``; it replaced *units*): what ``gate``
  reads per run;
* *sums and passes*: the same with each scenario's outcomes as bits, for ``compare``'s
  pass rates and McNemar test (``store.cluster_stats(passes=True)``): what ``compare``
  reads per run (it replaced *sums* + *outcomes*, every session's (repeat, passed));
* *outcomes* and *units* (``--old``): every session's (repeat, passed), which ``compare``
  read per run before the bits (``store.session_outcomes``; now read for flipped
  scenarios only), and the per-session units the statistics were computed from before
  (``store.session_units``);
* *gate*: ``agent-eval gate --run R --max-error-rate 8 --baseline R`` in process (two
  summaries, two sets of sums, the paired regression check);
* *compare*: ``agent-eval compare R R`` in process.

``--old`` also times what these replaced: the per-session units, and the Python pass over
every row (``metrics.summarize`` over ``call_rows``, once).  Besides wall times, the CPU
time of this process (the client's: PostgreSQL's own work is not in it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_reports import load_big_run, postgres_url, sqlite_url  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from agent_eval.cli import main as cli  # noqa: E402
from agent_eval.store import open_store  # noqa: E402

GOAL_S = 1.0


def _timed(fn, repeat: int) -> tuple[list[float], list[float]]:
    """Wall times and this process's CPU times (PostgreSQL's own work is not in the latter)."""
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu


def _cli(url: str, *args: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--db", url])
    if result.exit_code not in (0, 1):  # gate exits 1 when a threshold fails
        raise SystemExit(f"agent-eval {' '.join(args)} failed: {result.output}{result.exception}")


def bench_backend(label: str, url: str, args) -> list[dict]:
    from agent_eval.analysis.run_tables import summarize_runs
    from agent_eval.metrics import summarize

    print(f"{label}: generating {args.calls:,} calls ...", file=sys.stderr)
    with open_store(url) as store:
        start = time.perf_counter()
        run_id, _ = load_big_run(store, args.calls)
        print(f"  generated in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        ids = [run_id]
        jobs = {
            "summary": lambda: summarize_runs(store, ids),
            "sums": lambda: store.cluster_stats(ids),
            "sums and passes": lambda: store.cluster_stats(ids, passes=True),
            "gate": lambda: _cli(url, "gate", "--run", str(run_id), "--max-error-rate", "8",
                                 "--baseline", str(run_id)),
            "compare": lambda: _cli(url, "compare", str(run_id), str(run_id)),
        }
        if args.old:
            jobs["outcomes (old)"] = lambda: store.session_outcomes(ids)
            jobs["units (old)"] = lambda: store.session_units(ids)
            jobs["summary, Python pass (old)"] = lambda: summarize(
                store.session_rows(ids), store.call_rows(ids), store.turn_rows(ids))
        rows = []
        for name, job in jobs.items():
            times, cpu = _timed(job, 1 if "Python pass" in name else args.repeat)
            print(f"  {name}: best {min(times):.3f} s", file=sys.stderr)
            rows.append({"backend": label, "what": name, "best": min(times),
                         "median": statistics.median(times), "cpu": min(cpu)})
    return rows


def _load(avg: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in avg)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", metavar="URL", help="also measure PostgreSQL (admin URL)")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="also time the old Python pass")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    load_before = os.getloadavg()
    with sqlite_url() as url:
        rows += bench_backend("SQLite", url, args)
    if args.pg:
        with postgres_url(args.pg) as url:
            rows += bench_backend("PostgreSQL", url, args)
    if args.markdown:
        print(f"| backend | {args.calls:,} calls | best s | median s | client CPU s |\n"
              "|---|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r['backend']} | {r['what']} | {r['best']:.3f} | {r['median']:.3f} | "
                  f"{r['cpu']:.3f} |")
    else:
        for r in rows:
            print(f"{r['backend']:<11} {r['what']:<28} best {r['best']:.3f} s  "
                  f"median {r['median']:.3f} s  client CPU {r['cpu']:.3f} s")
    print(f"\nload average (1, 5, 15 min) before {_load(load_before)}, after "
          f"{_load(os.getloadavg())}; nproc={os.cpu_count()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    met = all(r["best"] < GOAL_S for r in rows if r["what"] in ("summary", "gate", "compare"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
