"""Replay throughput and prefix-cache share: ``execute_replay`` against the simulator.

Run:  python benchmarks/bench_replay.py [--repeats 6] [--concurrency 16,64] [--rounds 2]
                                        [--cache-prompts 8,64]

The simulator (``agent-eval sim-server``, no added latency) runs in its own process; this
process is the client.  Setup (untimed): the bundled ralf suite is played ``--repeats``
times against the simulator's piper profile into a SQLite file, each turn keeping its
request.  Then, for each concurrency C, that run is replayed whole (every turn that ended
in a tool call) through ``execute_replay`` with a ``ModelClient`` against the simulator's
disciplined profile, into a new replay run of the same store: loading each session's
requests, sending, judging, storing.  Best of ``--rounds`` passes (the machine may be
shared).  contexts/s = replies stored / wall seconds.

Prefix cache: every body the replay sends is logged in the order sent.  Each request is
a sequence of prefix elements (the tool list, then each message), ~4 characters a token.
A prefix-caching server (vLLM's automatic prefix caching, llama.cpp's slot cache) serves a
request's longest prefix it still holds; the script models one holding the KV of
``--cache-prompts`` average prompts (the users' 30-60k-token prompts fill a GPU's cache
with a handful), evicting least recently used leaves first, and reports the share of prompt tokens
served from it for the order replay sent, for the same requests in a random order (a
replay that ignored sessions), and with an unlimited cache (the ceiling).  Message-level
granularity: a real server caches in blocks of 16 tokens, so it also reuses part of the
first differing message; the shares are a lower bound on that account.

Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.live.client import ModelClient, Target  # noqa: E402
from agent_eval.live.replay import (  # noqa: E402
    allowlist_source,
    execute_replay,
    plan_replay,
    start_replay,
)
from agent_eval.live.run import play_run, start_run  # noqa: E402
from agent_eval.runs import RunRecorder  # noqa: E402
from agent_eval.scenario import load_suite  # noqa: E402
from agent_eval.store import open_store  # noqa: E402

SUITE = REPO / "scenarios" / "ralf"


def start_sim() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(SUITE)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    return proc, proc.stdout.readline().strip()


class LoggingClient(ModelClient):
    """A ModelClient that logs every body it resends, in the order sent."""

    log: list[dict] = []

    async def resend(self, body, *, seed_key=None):
        LoggingClient.log.append(body)
        return await super().resend(body, seed_key=seed_key)


def record_original(store, base_url: str, repeats: int) -> int:
    suite = load_suite(SUITE)
    target = Target(name="piper", base_url=base_url, model="sim-piper", concurrency=64)
    run_id = start_run(store, suite, [target], repeats, label="original", server_models={})
    play_run(store, run_id, suite, [target], repeats)
    return run_id


async def replay_once(store, run_id: int, base_url: str, concurrency: int) -> tuple[float, int]:
    """(wall seconds, replies stored) of one whole replay of ``run_id``."""
    info = store.get_run(run_id)
    plan = plan_replay(store.session_rows([run_id]), store.call_rows([run_id]),
                       store.request_refs(run_id))
    target = Target(name="cand", base_url=base_url, model="sim-disciplined",
                    concurrency=concurrency)
    replay_id = start_replay(store, info, target, plan, label="bench", server_models={},
                             sample=None, seed=0, repeats=1, allowlist=None, allowlist_path=None)
    allowlist_for = allowlist_source(info)
    start = time.perf_counter()
    recorder = RunRecorder(store, replay_id)
    recorder.start()
    async with LoggingClient(target) as client:
        tally = await execute_replay(recorder, plan, client, allowlist_for,
                                     target=target.name, concurrency=concurrency)
    recorder.finish("finished")  # the writer's last batch is part of the time
    return time.perf_counter() - start, tally.done


def elements(body: dict) -> list[tuple[str, int]]:
    """(prefix element text, estimated tokens): the tool list, then each message."""
    parts = [json.dumps(body.get("tools"), sort_keys=True)]
    parts += [json.dumps(m, sort_keys=True) for m in body.get("messages") or ()]
    return [(p, max(1, len(p) // 4)) for p in parts]


def cached_share(bodies: list[dict], capacity: float) -> tuple[float, int]:
    """(share of prompt tokens a prefix cache of ``capacity`` tokens serves, total tokens)."""
    cache: OrderedDict[str, int] = OrderedDict()  # prefix hash -> tokens of its last element
    held = served = total = 0
    for body in bodies:
        chain, digest, hit = [], "", True
        for text, tokens in elements(body):
            digest = hashlib.sha256((digest + text).encode()).hexdigest()
            chain.append((digest, tokens))
            total += tokens
            if hit and digest in cache:
                served += tokens
            else:
                hit = False
        for digest, tokens in reversed(chain):  # leaves older than their parents
            if digest not in cache:
                cache[digest] = tokens
                held += tokens
            cache.move_to_end(digest)
        while held > capacity and cache:
            _, tokens = cache.popitem(last=False)
            held -= tokens
    return (served / total if total else 0.0), total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=6, help="Repeats of the original run.")
    ap.add_argument("--concurrency", default="16,64")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache-prompts", default="8,64",
                    help="Cache sizes, in average prompts.")
    args = ap.parse_args()
    proc, base_url = start_sim()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp, open_store(str(Path(tmp) / "r.db")) as store:
            run_id = record_original(store, base_url, args.repeats)
            for c in (int(x) for x in args.concurrency.split(",")):
                best, done, log = float("inf"), 0, []
                for _ in range(args.rounds):
                    LoggingClient.log = []
                    wall, done = asyncio.run(replay_once(store, run_id, base_url, c))
                    if wall < best:
                        best, log = wall, LoggingClient.log
                total = cached_share(log, float("inf"))[1]
                shuffled = random.Random(0).sample(log, len(log))
                ceiling = cached_share(log, float("inf"))[0]
                for size in (float(x) for x in args.cache_prompts.split(",")):
                    capacity = size * total / max(1, len(log))
                    rows.append((c, done, best, total, size, capacity,
                                 cached_share(log, capacity)[0],
                                 cached_share(shuffled, capacity)[0], ceiling))
    finally:
        proc.terminate()
        proc.wait(10)
    print("| concurrency | contexts | wall s | contexts/s | prompt tokens (est.) | cache, "
          "prompts (tokens) | cached, order sent | cached, random order (same cache) | "
          "cached, unlimited cache |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c, done, wall, total, size, capacity, sent, shuffled, ceiling in rows:
        print(f"| {c} | {done} | {wall:.2f} | {done / wall:.0f} | {total:,} | {size:g} "
              f"({capacity:,.0f}) | {sent:.1%} | {shuffled:.1%} | {ceiling:.1%} |")

if __name__ == "__main__":
    main()
