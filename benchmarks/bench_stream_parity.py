"""What stream parity costs: requests and CPU per turn of ``run --stream-parity`` beside a
plain (whole) run and a streamed one, on the simulator.

Run:  nice -n 10 python benchmarks/bench_stream_parity.py [--repeats 4] [--concurrency 4] [--rounds 3]

The simulator (``agent-eval sim-server``, no added latency) runs in its own process, behind
a counting relay on a thread of this process (every POST to ``/chat/completions`` is
counted, then forwarded as is).  Each mode runs ``python -m agent_eval run`` as a child on
the bundled suite into a new SQLite file; its CPU (user + system, ``os.wait4``) is read
when it exits, and its turns are the model replies it stored.  The modes are
interleaved, ``--rounds`` times; the lowest CPU of each is kept (the machine is shared:
note ``uptime`` with the figures).  Start-up is included in each child's CPU, the same
for every mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SUITE = REPO / "scenarios" / "ralf"
MODES = {"whole": "stream: false", "streamed": "stream: true",
         "parity": "stream_parity: true"}


class CountingRelay:
    """A loopback relay in front of ``upstream`` that counts chat requests."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.count = 0
        self.base_url = ""
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait(30)

    def _serve(self, ready: threading.Event) -> None:
        from aiohttp import ClientSession, web

        async def relay(request: web.Request) -> web.StreamResponse:
            if request.path.endswith("/chat/completions"):
                self.count += 1
            tail = request.path_qs.removeprefix("/v1")
            async with session.request(request.method, self.upstream + tail,
                                       data=await request.read(),
                                       headers={k: v for k, v in request.headers.items()
                                                if k.lower() not in ("host",
                                                                     "content-length")}) as up:
                out = web.StreamResponse(status=up.status, headers={
                    "Content-Type": up.headers.get("Content-Type", "application/json")})
                await out.prepare(request)
                async for piece in up.content.iter_any():
                    await out.write(piece)
                await out.write_eof()
                return out

        async def main() -> None:
            nonlocal session
            session = ClientSession()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", relay)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
            ready.set()
            await asyncio.Event().wait()

        session = None
        asyncio.run(main())


def child(cmd: list[str]) -> tuple[float, str]:
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        text = out.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_stream_parity: {' '.join(cmd[:5])} ... failed")
    return usage.ru_utime + usage.ru_stime, text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from bench_runs import start_sim

    sim, sim_url = start_sim()
    relay = CountingRelay(sim_url)
    best: dict[str, tuple[float, int, int]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(args.rounds):
                for mode, setting in MODES.items():
                    config = Path(tmp) / f"{mode}.yaml"
                    config.write_text(
                        "targets:\n"
                        f"  - {{name: sim, base_url: '{relay.base_url}', "
                        f"model: sim-disciplined, {setting}, "
                        "sampling: {temperature: 0, seed: 7}, "
                        f"concurrency: {args.concurrency}, timeout_s: 60}}\n")
                    before = relay.count
                    cpu, out = child([sys.executable, "-m", "agent_eval", "run", "--config",
                                      str(config), "--suite", str(SUITE), "--repeats",
                                      str(args.repeats), "--db", str(Path(tmp) / f"{mode}{n}.db"),
                                      "--json"])
                    json.loads(out)  # the run's tables: it finished
                    with sqlite3.connect(Path(tmp) / f"{mode}{n}.db") as db:
                        [(turns,)] = db.execute("SELECT count(*) FROM turns").fetchall()
                    requests = relay.count - before
                    if mode not in best or cpu < best[mode][0]:
                        best[mode] = (cpu, int(turns), requests)
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    base_cpu, base_turns, _ = best["whole"]
    print("| mode | turns | chat requests | requests/turn | CPU s | CPU ms/turn | ÷ whole |")
    print("|---|---|---|---|---|---|---|")
    for mode, (cpu, turns, requests) in best.items():
        per = cpu / turns * 1000
        print(f"| {mode} | {turns:,} | {requests:,} | {requests / turns:.2f} | {cpu:.2f} | "
              f"{per:.2f} | {per / (base_cpu / base_turns * 1000):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
