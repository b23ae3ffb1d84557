"""The proxy's memory per request: the peak resident memory of the relay and of the
recorder process around one large request and one large streamed event.

``agent-eval proxy`` runs as a subprocess in front of a loopback upstream (in this
process) that reads every request body piece by piece and answers with a completion, or,
for a streamed request, with a stream holding one content event of ``--event-mb``
megabytes and a tool call.  The script sends, in turn: a small request (the baseline), a
``--request-mb`` MB request, and a streamed request; after each it waits until the
recorder has taken the exchange (its status page) and reads both processes' peak
resident memory (``VmHWM`` in ``/proc/PID/status``, Linux only).  It also checks that the
upstream got every byte of the large request and the client every byte of the stream.

    python benchmarks/bench_proxy_memory.py --request-mb 150 --event-mb 40
    python benchmarks/bench_proxy_memory.py --request-mb 20 --event-mb 10   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2 as httpx
from aiohttp import web

REPO = Path(__file__).resolve().parents[1]
GOOD = "uv run scripts/db_query.py --sql 'select 1'"
CALL = {"id": "call-1", "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": GOOD})}}
REQUEST = {"model": "qwen", "messages": [{"role": "system", "content": "You are a subagent."},
                                         {"role": "user", "content": "Open attempts."}]}


def upstream_app(seen: list, event_bytes: int) -> web.Application:
    async def answer(request: web.Request) -> web.StreamResponse:
        digest, size = hashlib.sha256(), 0
        while piece := await request.content.readany():
            digest.update(piece)
            size += len(piece)
        seen.append((size, digest.hexdigest()))
        if request.headers.get("X-Bench-Stream") != "1":
            return web.json_response({"model": "qwen", "choices": [{
                "index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": "", "tool_calls": [CALL]}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for delta, finish in (({"role": "assistant", "content": "y" * event_bytes}, None),
                              ({"tool_calls": [dict(CALL, index=0)]}, None), ({}, "tool_calls")):
            chunk = {"model": "qwen", "choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}]}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application(client_max_size=4 * 1024 ** 3)
    app.router.add_post("/v1/chat/completions", answer)
    return app


def serve(app: web.Application) -> str:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(app, handle_signals=False)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port.append(runner.addresses[0][1])
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait(30)
    return f"http://127.0.0.1:{port[0]}/v1"


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def recorder_pid(pid: int) -> int:
    for child in map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split()):
        if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
            return child
    raise SystemExit("no recorder process found")


def taken(base: str, n: int) -> None:
    """Wait until the recorder has read ``n`` exchanges (recorded or not)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        s = httpx.get(base.removesuffix("/v1") + "/_agent_eval/status", timeout=30).json()
        if s.get("recorded_chat", 0) + s.get("not_recorded_chat", 0) >= n:
            return
        time.sleep(0.1)
    raise SystemExit("the recorder never took the exchange")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request-mb", type=float, default=150.0)
    parser.add_argument("--event-mb", type=float, default=40.0)
    args = parser.parse_args()
    seen: list = []
    upstream = serve(upstream_app(seen, int(args.event_mb * 1e6)))
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_eval", "proxy", "--upstream", upstream,
             "--allowlist", str(REPO / "allowlists" / "ralf.yaml"), "--port", "0",
             "--db", os.path.join(tmp, "p.db"), "--journal", os.path.join(tmp, "j")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        base = proc.stdout.readline().strip()
        child = recorder_pid(proc.pid)
        rows = []
        try:
            httpx.post(base + "/chat/completions", json=REQUEST, timeout=60)
            taken(base, 1)
            rows.append(("baseline (one small request)", peak_mib(proc.pid), peak_mib(child)))
            pad = {"role": "user", "content": "x" * int(args.request_mb * 1e6)}
            big = json.dumps(dict(REQUEST, messages=[*REQUEST["messages"], pad])).encode()
            resp = httpx.post(base + "/chat/completions", content=big, timeout=600,
                              headers={"Content-Type": "application/json"})
            assert resp.status_code == 200
            assert seen[-1] == (len(big), hashlib.sha256(big).hexdigest()), "body changed"
            del big
            taken(base, 2)
            rows.append((f"a {args.request_mb:g} MB request", peak_mib(proc.pid), peak_mib(child)))
            with httpx.stream("POST", base + "/chat/completions", timeout=600,
                              json=dict(REQUEST, stream=True),
                              headers={"X-Bench-Stream": "1"}) as resp:
                got = sum(len(p) for p in resp.iter_raw())
            assert got > args.event_mb * 1e6, "stream cut"
            taken(base, 3)
            rows.append((f"a stream with one {args.event_mb:g} MB event", peak_mib(proc.pid),
                         peak_mib(child)))
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=600)
    print("| after | relay peak RSS (MiB) | recorder peak RSS (MiB) |")
    print("|---|---|---|")
    for what, relay, recorder in rows:
        print(f"| {what} | {relay:.1f} | {recorder:.1f} |")
    print(err.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
