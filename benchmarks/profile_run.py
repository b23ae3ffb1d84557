"""CPU per turn of a live run against the simulator, and the share the session write path takes.

Run:  python benchmarks/profile_run.py [--concurrency 1,16] [--turns 1200] [--rounds 3] [--profile]

The simulator runs in its own process; this process plays the bundled suite through
``play_run`` into a new SQLite file, about ``--turns`` model turns per measurement.
CPU is this process's (every thread: ``time.process_time``), not wall time; the write
path's share is the CPU spent inside ``Store.record_sessions`` (every thread that called
it, ``time.thread_time``).  Best of ``--rounds`` (the machine may be shared);
``--profile`` prints cProfile's top functions of the first round (main thread only).
Prints a Markdown table for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.live.client import Target  # noqa: E402
from agent_eval.live.run import RunTally, play_run, start_run  # noqa: E402
from agent_eval.scenario import load_suite  # noqa: E402
from agent_eval.store import open_store  # noqa: E402

SUITE = REPO / "scenarios" / "ralf"


def start_sim():
    """The simulator in its own process; its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(SUITE)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    return proc, proc.stdout.readline().strip()


def one(base_url, concurrency, repeats, db, profile):
    """(turns, CPU s, wall s, write-path CPU s, profile) of one run."""
    suite = load_suite(SUITE)
    target = Target(name="disciplined", base_url=base_url, model="sim-disciplined",
                    concurrency=concurrency, timeout_s=120)
    store = open_store(str(db))
    write_cpu = [0.0]
    real = store.record_sessions
    lock = threading.Lock()

    def timed(run_id, records):
        t0 = time.thread_time()
        try:
            return real(run_id, records)
        finally:
            with lock:
                write_cpu[0] += time.thread_time() - t0

    store.record_sessions = timed
    turns = [0]

    def count(_t, records):
        turns[0] += sum(len(r.turns) for r in records)

    run_id = start_run(store, suite, [target], repeats, label="p", server_models={})
    prof = cProfile.Profile() if profile else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    play_run(store, run_id, suite, [target], repeats, tally=RunTally(), on_session=count)
    if prof:
        prof.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    store.close()
    return turns[0], cpu, wall, write_cpu[0], prof


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--concurrency", default="1,16")
    p.add_argument("--turns", type=int, default=1200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    sim, url = start_sim()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for c in (int(x) for x in a.concurrency.split(",")):
                reps = max(1, a.turns // 120)
                best = None
                for n in range(a.rounds):
                    r = one(url, c, reps, Path(tmp) / f"{c}-{n}.db", a.profile and n == 0)
                    if r[4] is not None:
                        pstats.Stats(r[4]).sort_stats("tottime").print_stats(25)
                    if best is None or r[1] < best[1]:
                        best = r
                rows.append((c, *best[:4]))
    finally:
        sim.terminate()
        sim.wait(10)
    print("| concurrency | turns | CPU s | wall s | CPU ms/turn | write-path CPU ms/turn | write share |")
    print("|---|---|---|---|---|---|---|")
    for c, turns, cpu, wall, w in rows:
        print(f"| {c} | {turns} | {cpu:.2f} | {wall:.2f} | {1000 * cpu / turns:.3f} | "
              f"{1000 * w / turns:.3f} | {100 * w / cpu:.0f}% |")


if __name__ == "__main__":
    main()
