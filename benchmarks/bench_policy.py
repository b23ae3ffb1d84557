"""Policy engine throughput and latency on one core, beside plain ``bashlex.parse``.

Run:  python benchmarks/bench_policy.py [--repeat-rounds 20] [--corpora DIR] [--batch]

Workloads (all judged under allowlists/ralf.yaml):
  real corpus   every line of ../shared/corpora/shell-corpus.txt and
                agent-multiline-commands.jsonl, uncached (skipped when absent)
  agent mix     a seeded mix of what an agent under ralf emits: ~85% allowed-form
                `uv run scripts/...` calls with quoted values, the rest docs/design.md's
                denials; every text unique, uncached
  agent mix, repeated   the agent mix again and again through the verdict cache

Throughput sums the best of 3 timings of each chunk of 250 commands (bashlex: 1 on the
corpus); p50/p99 come from a separate pass timing every call.

With ``--batch``, a second table: ``agent-eval check --batch`` as a child process (the
commands as JSON lines on stdin) beside ``bashlex.parse`` in this process on the same commands,
both in CPU seconds (best of 3); the child's start-up, measured on empty input, is given apart.
The package's bytecode is compiled first, as a wheel install has it (with
``PYTHONDONTWRITEBYTECODE`` set, a checkout's child would compile every module each time).

Goals: >= 4,000 checks/s on the real corpus, >= 25,000/s on the agent mix, >= 200,000/s
repeated, and the engine >= 8x plain bashlex.parse on the agent mix in the same run (the
last column; a ratio is robust on a shared machine where absolute rates are not).  Prints a Markdown table (paste it into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bashlex

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.policy import check_command, clear_cache, judge_command, load_allowlist  # noqa: E402

CORPORA = REPO / ".." / "shared" / "corpora"


def pin_to_one_core() -> str:
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return "pinned to one core"
    except (AttributeError, OSError):
        return "not pinned (sched_setaffinity unavailable)"


def load_corpus(corpora: Path = CORPORA) -> list[str] | None:
    shell, multi = corpora / "shell-corpus.txt", corpora / "agent-multiline-commands.jsonl"
    if not shell.exists() or not multi.exists():
        return None
    lines = shell.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines += [json.loads(line) for line in multi.read_text(encoding="utf-8").splitlines()]
    return lines


def agent_mix(n: int, seed: int = 7) -> list[str]:
    """Unique commands shaped like an agent's under ralf: mostly allowed script calls."""
    rng = random.Random(seed)
    words = ["invoices", "roadmap", "kitchen", "quarterly report", "Q3 budget", "alice",
             "travel plans", "stage-2", "bob notes", "research"]
    allowed = [
        lambda i: f"uv run scripts/fetch_context.py --no-attach --agent researcher{i}",
        lambda i: f'uv run scripts/db_query.py --sql "SELECT * FROM tasks WHERE id = {i}" '
                  f"--limit {rng.randint(1, 500)}",
        lambda i: f"uv run scripts/embedding_search.py --query '{rng.choice(words)} {i}' "
                  f"--top-k {rng.randint(1, 20)} --collection notes",
        lambda i: f"uv run scripts/context_cache.py get --key stage/{i}",
        lambda i: f"uv run scripts/update_stage_status.py --stage s{i} --status awaiting_eval",
        lambda i: f"uv run scripts/update_attempt_outcome.py --attempt a{i} --outcome success "
                  f'--summary "{rng.choice(words)} done ({i})"',
        lambda i: f"uv run scripts/ralf_spawn.py step_evaluator --stage s{i}",
        lambda i: f"uv run scripts/lights.py set --room {rng.choice(words[:3])}{i} --state on",
        lambda i: f"uv run scripts/email_search.py --query \"from:{rng.choice(words)}\" "
                  f"--limit {i % 50 + 1}",
    ]
    denied = [
        lambda i: f"uv run scripts/fetch_context.py --agent a{i} | jq '.attempt.session_id'",
        lambda i: f"ls scripts/ | grep -E \"search|web{i}\"",
        lambda i: f"timeout 60 uv run scripts/embedding_search.py --query q{i}",
        lambda i: f"cd /work/{i} && uv run scripts/lights.py status",
        lambda i: f"uv run scripts/fetch_context.py --no-agent r{i}",
        lambda i: f"uv run scripts/food_management.py --list {i}",
        lambda i: f"uv run scripts/db_query.py --sql 'SELECT {i}' 2>&1",
    ]
    out = []
    for i in range(n):
        make = rng.choice(allowed) if rng.random() < 0.85 else rng.choice(denied)
        out.append(make(i))
    return out


def measure(label: str, items: list[str], fn, passes: int = 3, chunk: int = 250) -> dict:
    """Throughput from the best of ``passes`` timings of each chunk of ``chunk`` items
    (no per-call timer), summed: a machine shared with other work preempts whole passes,
    rarely the same chunk every time."""
    total = 0.0
    for at in range(0, len(items), chunk):
        part = items[at:at + chunk]
        best = float("inf")
        for _ in range(passes):
            start = time.perf_counter()
            for item in part:
                fn(item)
            best = min(best, time.perf_counter() - start)
        total += best
    return {"label": label, "n": len(items), "rate": len(items) / total}


def latencies(items: list[str], fn) -> tuple[float, float]:
    clock = time.perf_counter_ns
    samples = []
    for item in items:
        t0 = clock()
        fn(item)
        samples.append(clock() - t0)
    q = statistics.quantiles(samples, n=100)
    return q[49] / 1000, q[98] / 1000


def safe_bashlex(text: str) -> None:
    try:
        bashlex.parse(text)
    except Exception:  # RecursionError included: bashlex refuses many real lines
        pass


def child_cpu(cmd: list[str], stdin_path: Path) -> float:
    """User + system CPU seconds of one child process run to its end (output discarded)."""
    with open(stdin_path, "rb") as src, open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(cmd, stdin=src, stdout=sink, stderr=sink, cwd=REPO)
        _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_policy: {' '.join(cmd)} exited {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def batch_row(label: str, items: list[str], passes: int = 3) -> dict:
    """``agent-eval check --batch`` (a child process, the commands as JSON lines on stdin)
    beside plain ``bashlex.parse`` in this process on the same commands, both in CPU
    seconds, best of ``passes``.  The child's start-up (interpreter, imports, allow-list)
    is measured by the same command on empty input and given apart."""
    cmd = [sys.executable, "-m", "agent_eval", "check", "--allowlist",
           str(REPO / "allowlists" / "ralf.yaml"), "--batch", "-", "--format", "jsonl"]
    with tempfile.TemporaryDirectory() as tmp:
        full, empty = Path(tmp) / "cmds.jsonl", Path(tmp) / "empty.jsonl"
        full.write_text("".join(json.dumps(t) + "\n" for t in items), encoding="utf-8")
        empty.write_text("", encoding="utf-8")
        whole = min(child_cpu(cmd, full) for _ in range(passes))
        start = min(child_cpu(cmd, empty) for _ in range(passes))
    bl = float("inf")
    for _ in range(passes):
        t0 = time.process_time()
        for text in items:
            safe_bashlex(text)
        bl = min(bl, time.process_time() - t0)
    return {"label": label, "n": len(items), "whole": whole, "start": start, "bashlex": bl}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat-rounds", type=int, default=20)
    parser.add_argument("--mix-size", type=int, default=5000)
    parser.add_argument("--batch", action="store_true",
                        help="also time `agent-eval check --batch` (a child process) against "
                             "bashlex.parse on the agent mix and the real corpus, in CPU seconds")
    parser.add_argument("--corpora", type=Path, default=CORPORA,
                        help="folder holding shell-corpus.txt and agent-multiline-commands.jsonl")
    args = parser.parse_args()
    pinned = pin_to_one_core()
    ralf = load_allowlist(REPO / "allowlists" / "ralf.yaml")
    uncached = lambda text: judge_command(text, ralf)  # noqa: E731
    cached = lambda text: check_command(text, ralf)  # noqa: E731

    rows = []
    corpus = load_corpus(args.corpora)
    if corpus is None:
        print("real corpus: ../shared/corpora absent, skipped", file=sys.stderr)
    else:
        row = measure("real corpus (uncached)", corpus, uncached)
        row["p50"], row["p99"] = latencies(corpus, uncached)
        row["bashlex"] = measure("bashlex", corpus, safe_bashlex, passes=1)["rate"]
        rows.append(row)

    mix = agent_mix(args.mix_size)
    row = measure("agent mix (uncached)", mix, uncached, passes=5)
    row["p50"], row["p99"] = latencies(mix, uncached)
    row["bashlex"] = measure("bashlex", mix, safe_bashlex, passes=5)["rate"]
    allowed = sum(judge_command(t, ralf).allowed for t in mix)
    rows.append(row)

    clear_cache()
    for text in mix:
        cached(text)
    repeated = mix * args.repeat_rounds
    row = measure(f"agent mix x{args.repeat_rounds} (cached)", repeated, cached)
    row["p50"], row["p99"] = latencies(repeated, cached)
    row["bashlex"] = None
    rows.append(row)

    print(f"# policy engine benchmark ({pinned}; agent mix {len(mix)} commands, "
          f"{allowed} allowed)")
    print()
    print("| workload | checks | checks/s | p50 µs | p99 µs | bashlex.parse/s (same input) "
          "| engine ÷ bashlex |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        bl = f"{r['bashlex']:,.0f}" if r.get("bashlex") else "-"
        ratio = f"{r['rate'] / r['bashlex']:.1f}×" if r.get("bashlex") else "-"
        print(f"| {r['label']} | {r['n']:,} | {r['rate']:,.0f} | {r['p50']:.1f} | "
              f"{r['p99']:.1f} | {bl} | {ratio} |")
    if not args.batch:
        return
    import compileall

    compileall.compile_dir(REPO / "agent_eval", quiet=1)  # as an installed wheel has it
    batch = [batch_row("agent mix", mix)]
    if corpus is not None:
        batch.append(batch_row("real corpus", corpus))
    print()
    print("| `check --batch` input | commands | child CPU s (start-up s) | checks/CPU-s whole "
          "| checks/CPU-s less start-up | bashlex.parse/CPU-s | ratio whole (less start-up) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for b in batch:
        whole, net, bl = b["n"] / b["whole"], b["n"] / (b["whole"] - b["start"]), b["n"] / b["bashlex"]
        print(f"| {b['label']} | {b['n']:,} | {b['whole']:.2f} ({b['start']:.2f}) | {whole:,.0f} "
              f"| {net:,.0f} | {bl:,.0f} | {whole / bl:.2f}× ({net / bl:.2f}×) |")


if __name__ == "__main__":
    main()
