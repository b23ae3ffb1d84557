"""Live-run throughput: agent-eval's ``play_run`` beside a plain openai-client loop.

Run:  python benchmarks/bench_runs.py [--concurrency 1,16,64,256] [--memory-sessions 10000]

The simulator (``agent-eval sim-server``, no added latency) runs in its own process; this
process is the client.  For each concurrency C:

  record    one untimed pass of the bundled ralf suite through ``play_run`` that logs
            every chat request the harness sends (messages, tools, seed header)
  agent-eval   the same plan through ``play_run`` into a new SQLite file, C sessions in
            flight: judging, simulated tools, child sessions, one transaction per session
  plain     the logged requests replayed with ``openai.AsyncOpenAI`` by C workers against
            the same server (the simulator is deterministic, so it answers the same),
            nothing else done with the answers

Each side runs ``--rounds`` times, alternating, and keeps its best pass (the machine may be
shared).  turns/s = chat completions answered / wall seconds.  "added ms/turn" is the extra wall
time agent-eval spends per turn: (t_agent_eval - t_plain) / turns * 1000.

Memory: a separate child process plays ``--memory-sessions`` sessions of the shortest
scenario (lights-evening-off, disciplined profile, concurrency 64) through ``play_run``
into SQLite and reports its peak resident memory (``VmHWM``).

Goals: at C=64 agent-eval >= 0.8 x the plain loop's turns/s and < 2 ms added per turn;
a 10,000-session run under 300 MB resident.  Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.live.client import ModelClient, Target  # noqa: E402
from agent_eval.live.run import RunTally, play_run, start_run  # noqa: E402
from agent_eval.scenario import Suite, load_suite  # noqa: E402
from agent_eval.store import open_store  # noqa: E402

SUITE = REPO / "scenarios" / "ralf"
SHORT = "lights-evening-off"


def start_sim() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(SUITE)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    return proc, proc.stdout.readline().strip()


class RecordingClient(ModelClient):
    """A ModelClient that logs every request it sends (for the plain loop to replay)."""

    log: list[tuple[list, list | None, str | None]] = []

    async def complete(self, messages, tools=None, *, seed_key=None):
        RecordingClient.log.append((list(messages), tools, seed_key))
        return await super().complete(messages, tools, seed_key=seed_key)


def play(suite: Suite, target: Target, repeats: int, db: Path,
         client_factory=ModelClient) -> tuple[float, int, int]:
    """(wall seconds, turns, sessions) of one ``play_run`` into a new SQLite file (every
    session stored before the clock stops)."""
    store = open_store(str(db))
    try:
        run_id = start_run(store, suite, [target], repeats, label="bench", server_models={})
        turns = sessions = 0

        def count(_tally, records) -> None:
            nonlocal turns, sessions
            turns += sum(len(r.turns) for r in records)
            sessions += len(records)

        start = time.perf_counter()
        play_run(store, run_id, suite, [target], repeats, tally=RunTally(), on_session=count,
                 client_factory=client_factory)
        return time.perf_counter() - start, turns, sessions
    finally:
        store.close()


async def replay(base_url: str, model: str, requests: list, concurrency: int) -> float:
    """Wall seconds for a plain AsyncOpenAI loop (``chat.completions.create``, C workers)
    to send ``requests``: bench_harness_cpu.py's loop, timed."""
    from bench_harness_cpu import loop_openai

    start = time.perf_counter()
    await loop_openai(base_url, requests, concurrency, model=model)
    return time.perf_counter() - start


def measure(base_url: str, concurrency: int, repeats: int, tmp: Path, rounds: int) -> dict:
    suite = load_suite(SUITE)
    target = Target(name="disciplined", base_url=base_url, model="sim-disciplined",
                    concurrency=concurrency, timeout_s=120)
    RecordingClient.log = []
    play(suite, target, repeats, tmp / f"record-{concurrency}.db", RecordingClient)
    requests = RecordingClient.log
    t_ae = t_plain = float("inf")
    for n in range(rounds):  # alternate, keep the best of each: a shared machine is noisy
        db = tmp / f"ae-{concurrency}-{n}.db"
        wall, turns, sessions = play(suite, target, repeats, db)
        t_ae = min(t_ae, wall)
        t_plain = min(t_plain, asyncio.run(replay(base_url, target.model, requests, concurrency)))
    return {
        "concurrency": concurrency, "sessions": sessions, "turns": turns,
        "requests": len(requests), "ae_s": t_ae, "plain_s": t_plain,
        "ae_tps": turns / t_ae, "plain_tps": len(requests) / t_plain,
    }


def memory_child(base_url: str, sessions: int, db: Path) -> None:
    """Play ``sessions`` short sessions through play_run; print peak RSS as JSON."""
    full = load_suite(SUITE)
    suite = Suite(name=full.name, path=full.path, scenarios={SHORT: full.scenarios[SHORT]})
    target = Target(name="disciplined", base_url=base_url, model="sim-disciplined",
                    concurrency=64, timeout_s=120)
    wall, turns, stored = play(suite, target, sessions, db)
    status = Path("/proc/self/status").read_text()
    hwm_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
    print(json.dumps({"sessions": stored, "turns": turns, "wall_s": wall, "vmhwm_mb": hwm_kb / 1024}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,16,64,256")
    parser.add_argument("--turns", type=int, default=3000,
                        help="Roughly how many turns each measurement plays (repeats of the suite).")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Alternating passes per side; the best of each is kept.")
    parser.add_argument("--memory-sessions", type=int, default=10_000, help="0 skips the check.")
    parser.add_argument("--memory-child", nargs=2, metavar=("BASE_URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child[0], args.memory_sessions, Path(args.memory_child[1]))
        return 0

    sim, base_url = start_sim()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for c in (int(x) for x in args.concurrency.split(",")):
                repeats = max(1, args.turns // 120, -(-c // 29))  # ~120 turns per suite pass
                rows.append(measure(base_url, c, repeats, Path(tmp), args.rounds))
                print(f"  C={c}: {rows[-1]['ae_tps']:.0f} vs {rows[-1]['plain_tps']:.0f} turns/s",
                      file=sys.stderr, flush=True)
            memory = None
            if args.memory_sessions:
                child = subprocess.run(
                    [sys.executable, __file__, "--memory-sessions", str(args.memory_sessions),
                     "--memory-child", base_url, str(Path(tmp) / "memory.db")],
                    capture_output=True, text=True, check=True)
                memory = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        sim.terminate()
        sim.wait(timeout=10)

    print("| concurrency | sessions | turns | agent-eval turns/s | plain loop turns/s | ratio "
          "| added ms/turn |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        added = (r["ae_s"] - r["plain_s"]) / r["turns"] * 1000
        print(f"| {r['concurrency']} | {r['sessions']:,} | {r['turns']:,} | {r['ae_tps']:,.0f} "
              f"| {r['plain_tps']:,.0f} | {r['ae_tps'] / r['plain_tps']:.2f} | {added:.2f} |")
    if memory:
        print(f"\nMemory: {memory['sessions']:,} sessions ({memory['turns']:,} turns) of {SHORT} "
              f"in {memory['wall_s']:.0f} s; peak resident {memory['vmhwm_mb']:.0f} MB "
              f"(goal < 300 MB).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
