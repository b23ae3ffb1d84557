"""What the proxy costs a client, measured from outside: direct vs through the proxy.

The simulator (``agent-eval sim-server`` with a fixed latency and time to first token)
and the proxy (``agent-eval proxy`` recording into a temporary SQLite store) each run in
their own process; this script is the client.  For concurrency 1 and 64, streamed and
not, the same requests go to the simulator directly and through the proxy; the table
shows the median latency and time to first byte of each, what the proxy adds, and the
throughput ratio (proxy / direct).  Each client worker first makes one untimed request
(its kept-alive connection), then the workers start with phases spread over one request's
time, as independent agents' requests arrive (against a fixed-latency server, workers all
started at once would stay in lockstep and every request would arrive in bursts of 64).
``--rounds N`` alternates direct and proxy N times per row and pools them.  Then many requests through the proxy, and the
proxy's resident memory after them; then client aborts mid-stream and the proxy's open
file descriptors after them (a leak would grow them); then how long an abort takes to
close the upstream's request (the goal is under 1 s).

``--protocols chat,responses,messages,gemini`` measures each wire protocol the proxy
records (the same requests written in OpenAI Responses, Anthropic Messages or Gemini by
``agent_eval.wire``, which the simulator answers in kind): one group of rows each.
``--rss-requests 0 --aborts 0 --close-aborts 0`` skips the memory and abort phases.

    python benchmarks/bench_proxy.py                       # the recorded configuration
    python benchmarks/bench_proxy.py --requests 64 --rss-requests 500 --aborts 50   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval import wire  # noqa: E402
from agent_eval.scenario import load_suite  # noqa: E402

PROTOCOL = "chat"  # set by --protocols, one group of rows at a time


def start(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "agent_eval", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"could not start: agent-eval {' '.join(args)}")
    return proc, url


def bodies(stream: bool) -> list[dict]:
    """First requests of every bundled scenario (the simulator answers them with calls)."""
    suite = load_suite(REPO / "scenarios" / "ralf")
    out = []
    for sc in suite.scenarios.values():
        body = {"model": "sim-piper", "tools": sc.tool_schemas(),
                "messages": [{"role": "system", "content": sc.system_prompt()},
                             {"role": "user", "content": sc.spec.task}]}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        out.append(body)
    return out


async def one(session: aiohttp.ClientSession, url: str, body: dict) -> tuple[float, float]:
    path, native = wire.write_request(PROTOCOL, body)
    root = url.removesuffix("/v1") + "/v1beta" if PROTOCOL == "gemini" else url
    start = time.perf_counter()
    first = None
    async with session.post(root + path, json=native) as resp:
        async for _ in resp.content.iter_any():
            if first is None:
                first = time.perf_counter() - start
    return time.perf_counter() - start, first or 0.0


async def load(url: str, stream: bool, n: int, concurrency: int) -> dict:
    reqs = bodies(stream)
    latencies: list[float] = []
    ttfts: list[float] = []
    queue: asyncio.Queue[dict] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(reqs[i % len(reqs)])
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def worker(phase: float) -> None:
            await asyncio.sleep(phase)
            while not queue.empty():
                body = queue.get_nowait()
                latency, ttft = await one(session, url, body)
                latencies.append(latency)
                ttfts.append(ttft)

        # one untimed request per worker first: the connections a long-running client
        # keeps alive are open before timing starts, on both sides alike
        warm = await asyncio.gather(*(one(session, url, reqs[i % len(reqs)])
                                      for i in range(concurrency)))
        # the workers' phases spread evenly over one request's time, as independent
        # agents' requests are; all starting at once against a fixed-latency server would
        # keep them in lockstep, every request arriving in one burst of `concurrency`
        period = statistics.median(latency for latency, _ in warm)
        began = time.perf_counter()
        await asyncio.gather(*(worker(i * period / concurrency) for i in range(concurrency)))
        wall = time.perf_counter() - began
    return {"latency": statistics.median(latencies), "ttft": statistics.median(ttfts),
            "throughput": n / wall, "latencies": latencies, "ttfts": ttfts, "wall": wall}


def rounds(direct_url: str, proxy_url: str, stream: bool, n: int, concurrency: int,
           times: int) -> tuple[dict, dict]:
    """``times`` rounds of direct then proxy, pooled: drift in the machine's load (other
    processes, CPU frequency) falls on both sides alike instead of on one run each."""
    pooled = {"direct": {"latencies": [], "ttfts": [], "wall": 0.0, "n": 0},
              "proxy": {"latencies": [], "ttfts": [], "wall": 0.0, "n": 0}}
    for _ in range(times):
        for side, url in (("direct", direct_url), ("proxy", proxy_url)):
            got = asyncio.run(load(url, stream, n, concurrency))
            acc = pooled[side]
            acc["latencies"] += got["latencies"]
            acc["ttfts"] += got["ttfts"]
            acc["wall"] += got["wall"]
            acc["n"] += n
    return tuple({"latency": statistics.median(a["latencies"]),
                  "ttft": statistics.median(a["ttfts"]),
                  "throughput": a["n"] / a["wall"]}
                 for a in (pooled["direct"], pooled["proxy"]))


async def aborts(url: str, n: int) -> None:
    body = bodies(True)[0]
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            async with session.post(url + "/chat/completions", json=body) as resp:
                await resp.content.readany()
                resp.close()  # the client goes away mid-stream


async def close_delays(n: int, tmp: Path) -> list[float]:
    """Seconds from a client going away mid-stream to the upstream seeing its request
    closed, ``n`` times: an endless upstream in this process (a chunk every 10 ms, so it
    notices within 10 ms of the close reaching it), a proxy process in front of it."""
    from aiohttp import web

    closed: asyncio.Queue[float] = asyncio.Queue()

    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            while True:
                await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n')
                await asyncio.sleep(0.01)
        except (ConnectionResetError, asyncio.CancelledError):
            closed.put_nowait(time.perf_counter())
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", endless)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    proxy, through = await asyncio.to_thread(
        start, "proxy", "--upstream", f"http://127.0.0.1:{port}/v1", "--port", "0",
        "--allowlist", str(REPO / "allowlists" / "ralf.yaml"), "--db", str(tmp / "close.db"),
        "--journal", str(tmp / "close.journal"), "--idle-timeout", "5")
    delays = []
    try:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        async with aiohttp.ClientSession() as session:
            for _ in range(n):
                async with session.post(through + "/chat/completions", json=body) as resp:
                    await resp.content.readany()
                    gone = time.perf_counter()
                    resp.close()
                delays.append(await asyncio.wait_for(closed.get(), 30) - gone)
    finally:
        proxy.terminate()
        await asyncio.to_thread(proxy.wait, 120)
        await runner.cleanup()
    return delays


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used (load-independent, unlike times)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The proxy's child processes (its recorder, multiprocessing's resource tracker)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=640, help="per configuration")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--ttft", type=float, default=0.02)
    parser.add_argument("--rss-requests", type=int, default=10_000)
    parser.add_argument("--aborts", type=int, default=1_000)
    parser.add_argument("--close-aborts", type=int, default=200,
                        help="aborts timed until the upstream sees its request closed")
    parser.add_argument("--concurrency", default="1,64",
                        help="comma-separated concurrencies, one pair of rows each")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate direct and proxy this many times per row, pooled")
    parser.add_argument("--protocols", default="chat",
                        help="comma-separated wire protocols, one group of rows each "
                             "(chat, responses, messages, gemini)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    sim, upstream = start("sim-server", "--port", "0", "--latency", str(args.latency),
                          "--ttft", str(args.ttft), "--profile", "piper")
    proxy, through = start("proxy", "--upstream", upstream, "--port", "0",
                           "--allowlist", str(REPO / "allowlists" / "ralf.yaml"),
                           "--db", str(tmp / "proxy.db"), "--journal", str(tmp / "journal"),
                           "--idle-timeout", "5")
    try:
        asyncio.run(load(through, False, 32, 8))  # warm-up: connections, imports
        print(f"sim latency {args.latency * 1000:.0f} ms, ttft {args.ttft * 1000:.0f} ms, "
              f"{args.requests} requests per row in {args.rounds} alternating round(s); times are medians in ms; load average "
              f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
        print("| protocol | concurrency | stream | direct latency | proxy latency | added "
              "| direct TTFB | proxy TTFB | added | throughput ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        global PROTOCOL
        for protocol, concurrency, stream in (
                (p, c, st) for p in args.protocols.split(",")
                for c in map(int, args.concurrency.split(",")) for st in (False, True)):
            PROTOCOL = protocol
            n = args.requests if concurrency > 1 else max(64, args.requests // 4)
            d, p = rounds(upstream, through, stream, max(1, n // args.rounds),
                          concurrency, args.rounds)
            print(f"| {protocol} | {concurrency} | {'yes' if stream else 'no'} "
                  f"| {d['latency'] * 1e3:.2f} | {p['latency'] * 1e3:.2f} "
                  f"| {(p['latency'] - d['latency']) * 1e3:+.2f} "
                  f"| {d['ttft'] * 1e3:.2f} | {p['ttft'] * 1e3:.2f} "
                  f"| {(p['ttft'] - d['ttft']) * 1e3:+.2f} "
                  f"| {p['throughput'] / d['throughput']:.3f} |")
        PROTOCOL = "chat"
        if not args.rss_requests:
            return
        kids = children(proxy.pid)
        before, cpu = rss_kb(proxy.pid), cpu_s(proxy.pid)
        kids_before, kids_cpu = sum(map(rss_kb, kids)), sum(map(cpu_s, kids))
        sim_cpu, client_cpu = cpu_s(sim.pid), time.process_time()
        began = time.perf_counter()
        steps = 10 if args.rss_requests >= 10_000 else 1
        for step in range(1, steps + 1):  # RSS as requests go by: flat, or growing with them?
            asyncio.run(load(through, True, args.rss_requests // steps, 64))
            if steps > 1:
                print(f"  {step * args.rss_requests // steps:>7} requests: relay RSS "
                      f"{rss_kb(proxy.pid) / 1024:.1f} MiB, recorder RSS "
                      f"{sum(map(rss_kb, kids)) / 1024:.1f} MiB", flush=True)
        took = time.perf_counter() - began
        per = (cpu_s(proxy.pid) - cpu) / args.rss_requests * 1e3
        kids_per = (sum(map(cpu_s, kids)) - kids_cpu) / args.rss_requests * 1e3
        sim_per = (cpu_s(sim.pid) - sim_cpu) / args.rss_requests * 1e3
        client_per = (time.process_time() - client_cpu) / args.rss_requests * 1e3
        print(f"\nafter {args.rss_requests} more streamed requests at concurrency 64 "
              f"({took:.1f} s, load average {Path('/proc/loadavg').read_text().split()[0]}):")
        print(f"relay process: RSS {before / 1024:.1f} -> {rss_kb(proxy.pid) / 1024:.1f} MiB, "
              f"CPU {per:.2f} ms per request")
        print(f"recorder process(es): RSS {kids_before / 1024:.1f} -> "
              f"{sum(map(rss_kb, kids)) / 1024:.1f} MiB, CPU {kids_per:.2f} ms per request "
              "(judging + storing, off the request path)")
        print(f"for scale: simulator CPU {sim_per:.2f} ms, this client's CPU {client_per:.2f} ms "
              "per request")
        fds = open_fds(proxy.pid)
        if not args.aborts:
            return
        asyncio.run(aborts(through, args.aborts))
        time.sleep(1.0)
        print(f"open file descriptors of the proxy: {fds} before, {open_fds(proxy.pid)} after "
              f"{args.aborts} client aborts mid-stream")
        if args.close_aborts:
            delays = sorted(asyncio.run(close_delays(args.close_aborts, tmp)))
            print(f"client abort -> upstream request closed, {len(delays)} aborts: median "
                  f"{statistics.median(delays) * 1e3:.1f} ms, p95 "
                  f"{delays[int(0.95 * (len(delays) - 1))] * 1e3:.1f} ms, max "
                  f"{delays[-1] * 1e3:.1f} ms; within 1 s: "
                  f"{sum(d < 1.0 for d in delays)}/{len(delays)}")
    finally:
        proxy.terminate()
        proxy.wait(120)
        sim.terminate()
        sim.wait(10)


if __name__ == "__main__":
    main()
