"""CPU per model turn: ``agent-eval run`` beside a plain openai loop and a bare httpx loop.

Run:  python benchmarks/bench_harness_cpu.py [--concurrency 1,16] [--turns 1200] [--rounds 3] [--markdown]

The simulator (``agent-eval sim-server``, no added latency) runs in its own process.  One
untimed ``play_run`` pass logs every chat request the harness sends (messages, tools, seed
header).  Then, interleaved, ``--rounds`` times for each concurrency C, each side runs as its
own child process and its CPU (user + system, from ``os.wait4``) is read when it exits:

  agent-eval   the real runner: ``python -m agent_eval run`` on the same suite, repeats and C,
               into a new SQLite file; its turns are the model replies its ``--json`` reports
  post         the logged requests replayed by C workers with ``openai.AsyncOpenAI``'s
               ``client.post`` (the body as built, parsed into a ``ChatCompletion``: what the
               harness itself sends), nothing done with the answers
  create       the same with ``client.chat.completions.create`` (the SDK's per-call transform)
  httpx        the same requests posted as JSON by C workers with a bare ``httpx.AsyncClient``

Every child pays its own interpreter start and imports.  That fixed cost is measured too,
by running each child with nothing to play (agent-eval: ``run --plan-only --limit 1 --repeats 1``,
which loads the suite, checks the target and plans one session but plays nothing; the loops: the requests read, none sent), and the table gives
CPU per turn both whole and less that start-up.  Best (lowest) of the rounds is kept: the
machine may be shared, so record ``uptime`` with the figures.

The package's bytecode is compiled first, as ``pip install`` (a wheel) does: with
``PYTHONDONTWRITEBYTECODE`` set (it is on some machines, this one included) an editable
checkout would otherwise compile its ~90 modules from source in every child, ~0.08 CPU-s
that no installed copy pays and the loops (whose openai SDK is compiled) never pay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

SUITE = REPO / "scenarios" / "ralf"
MODEL = "sim-disciplined"
KINDS = ("post", "create", "httpx")  # the loops
SEED_HEADER = "X-Agent-Eval-Seed"  # agent_eval.live.client.SEED_HEADER (the loops import no agent_eval)


def _httpx():
    """The httpx module the openai client is installed with (``httpx2`` where present)."""
    try:
        import httpx2 as httpx
    except ImportError:  # pragma: no cover
        import httpx  # type: ignore[no-redef]
    return httpx


def child_cpu(cmd: list[str]) -> tuple[float, str]:
    """(user + system CPU seconds, stdout) of one child process run to its end."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0:
        raise SystemExit(f"bench_harness_cpu: {' '.join(cmd[:4])} ... exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, text


def record(base_url: str, concurrency: int, repeats: int, db: Path) -> list:
    """The chat requests ``play_run`` sends for this plan (messages, tools, seed key)."""
    from bench_runs import RecordingClient, play

    from agent_eval.live.client import Target
    from agent_eval.scenario import load_suite

    target = Target(name=MODEL, base_url=base_url, model=MODEL, concurrency=concurrency,
                    timeout_s=120)
    RecordingClient.log = []
    play(load_suite(SUITE), target, repeats, db, RecordingClient)
    return RecordingClient.log


async def _drain(requests: list, concurrency: int, send) -> None:
    """``concurrency`` workers taking the logged requests off one queue, each sent with
    ``send(messages, tools, seed_key)``: the shape of every loop here."""
    queue: asyncio.Queue = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)

    async def worker() -> None:
        while not queue.empty():
            await send(*queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def loop_openai(base_url: str, requests: list, concurrency: int, post: bool = False,
                      model: str = MODEL) -> None:
    import openai
    from openai.types.chat import ChatCompletion

    httpx = _httpx()

    http = openai.DefaultAsyncHttpxClient(
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))
    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0,
                                timeout=httpx.Timeout(120, pool=None), http_client=http)

    async def send(messages, tools, seed_key) -> None:
        kwargs = {"tools": tools, "tool_choice": "auto"} if tools else {}
        if post:  # the body as built, no per-call transform (as the harness sends it)
            headers = {SEED_HEADER: seed_key} if seed_key else {}
            await client.post("/chat/completions", cast_to=ChatCompletion,
                              body={"model": model, "messages": messages, **kwargs},
                              options={"headers": headers} if headers else {})
        else:
            await client.chat.completions.create(
                model=model, messages=messages, extra_headers={SEED_HEADER: seed_key},
                **kwargs)

    await _drain(requests, concurrency, send)
    await client.close()


async def loop_httpx(base_url: str, requests: list, concurrency: int) -> None:
    httpx = _httpx()
    client = httpx.AsyncClient(
        base_url=base_url, timeout=httpx.Timeout(120, pool=None),
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))

    async def send(messages, tools, seed_key) -> None:
        body = {"model": MODEL, "messages": messages}
        if tools:
            body.update(tools=tools, tool_choice="auto")
        resp = await client.post("/chat/completions", json=body,
                                 headers={SEED_HEADER: seed_key} if seed_key else None)
        resp.raise_for_status()
        resp.json()

    await _drain(requests, concurrency, send)
    await client.aclose()


def run_loop(kind: str, base_url: str, requests_file: str, concurrency: int, dry: bool) -> None:
    """Child side of a loop: replay the requests in ``requests_file`` (read but none sent
    when ``dry``: the start-up measurement)."""
    requests = json.loads(Path(requests_file).read_text())
    if dry:
        requests = []
    if kind == "httpx":
        asyncio.run(loop_httpx(base_url, requests, concurrency))
    else:
        asyncio.run(loop_openai(base_url, requests, concurrency, post=kind == "post"))


def agent_eval_cmd(base_url: str, concurrency: int, repeats: int, db: Path,
                   plan_only: bool = False) -> list[str]:
    if plan_only:  # the fixed cost only: one session planned, none played
        repeats, extra = 1, ["--limit", "1", "--plan-only"]
    else:
        extra = []
    return [sys.executable, "-m", "agent_eval", "run", "--suite", str(SUITE), "--base-url",
            base_url, "--model", MODEL, "--repeats", str(repeats), "--concurrency",
            str(concurrency), "--db", str(db), "--json", *extra]


def loop_cmd(kind: str, base_url: str, requests_file: str, concurrency: int,
             dry: bool = False) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--loop", kind, "--base-url", base_url,
            "--requests-file", requests_file, "--concurrency", str(concurrency)] + (
                ["--dry"] if dry else [])


def measure(base_url: str, concurrency: int, repeats: int, tmp: Path, rounds: int) -> dict:
    requests = record(base_url, concurrency, repeats, tmp / f"record-{concurrency}.db")
    req_file = tmp / f"requests-{concurrency}.json"
    req_file.write_text(json.dumps(requests))
    best = {k: float("inf") for k in ("agent-eval", *KINDS)}
    start = dict(best)
    ae_turns = 0
    for n in range(rounds):  # interleaved: each round runs every side once
        cpu, out = child_cpu(agent_eval_cmd(base_url, concurrency, repeats, tmp / f"ae-{concurrency}-{n}.db"))
        best["agent-eval"] = min(best["agent-eval"], cpu)
        ae_turns = json.loads(out)["targets"][MODEL]["messages"]
        for kind in KINDS:
            cpu, _ = child_cpu(loop_cmd(kind, base_url, str(req_file), concurrency))
            best[kind] = min(best[kind], cpu)
        cpu, _ = child_cpu(agent_eval_cmd(base_url, concurrency, repeats,
                                          tmp / f"plan-{concurrency}-{n}.db", plan_only=True))
        start["agent-eval"] = min(start["agent-eval"], cpu)
        for kind in KINDS:
            cpu, _ = child_cpu(loop_cmd(kind, base_url, str(req_file), concurrency, dry=True))
            start[kind] = min(start[kind], cpu)
        print(f"  C={concurrency} round {n + 1}: " + ", ".join(
            f"{k} {best[k]:.2f} s (start-up {start[k]:.2f} s)" for k in best),
            file=sys.stderr, flush=True)
    turns = {"agent-eval": ae_turns, **{k: len(requests) for k in KINDS}}
    return {"concurrency": concurrency, "turns": turns, "cpu": best, "start": start}


def table(rows: list[dict]) -> str:
    """One line per side; each ratio is whole CPU per turn (and, in brackets, less start-up)."""
    lines = [
        "| concurrency | turns (agent-eval / loops) | side | CPU s (start-up s) | CPU ms/turn "
        "| less start-up ms/turn | ÷ openai post loop | ÷ openai create loop | ÷ httpx loop |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = {k: r["cpu"][k] / r["turns"][k] * 1000 for k in r["cpu"]}
        net = {k: (r["cpu"][k] - r["start"][k]) / r["turns"][k] * 1000 for k in r["cpu"]}
        for k in ("agent-eval", *KINDS):
            ratios = " | ".join(f"{per[k] / per[b]:.2f} ({net[k] / net[b]:.2f})" for b in KINDS)
            lines.append(
                f"| {r['concurrency']} | {r['turns']['agent-eval']:,} / {r['turns']['post']:,} "
                f"| {k} | {r['cpu'][k]:.2f} ({r['start'][k]:.2f}) | {per[k]:.2f} | {net[k]:.2f} "
                f"| {ratios} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--turns", type=int, default=1200,
                        help="Roughly how many model turns each run plays (repeats of the suite).")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Interleaved rounds; the lowest CPU of each side is kept.")
    parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown.")
    parser.add_argument("--loop", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--requests-file", help=argparse.SUPPRESS)
    parser.add_argument("--dry", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop:
        run_loop(args.loop, args.base_url, args.requests_file, int(args.concurrency), args.dry)
        return 0

    import compileall

    from bench_runs import start_sim

    from agent_eval.live.client import SEED_HEADER as real_header
    compileall.compile_dir(REPO / "agent_eval", quiet=1)  # as an installed wheel has it
    if real_header != SEED_HEADER:
        raise SystemExit(f"bench_harness_cpu: set SEED_HEADER to {real_header!r}")
    sim, base_url = start_sim()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for c in (int(x) for x in args.concurrency.split(",")):
                repeats = max(1, args.turns // 120, -(-c // 29))  # ~120 turns per suite pass
                rows.append(measure(base_url, c, repeats, Path(tmp), args.rounds))
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    text = table(rows)
    if not args.markdown:
        text = "\n".join(line for line in text.splitlines() if not line.startswith("|---"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
