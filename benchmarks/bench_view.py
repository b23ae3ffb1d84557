"""Viewer benchmark: every `agent-eval view` page over a generated million-call store.

Builds the store of ``bench_reports.py`` (a run of 1,000,000 tool calls, 125,000 sessions
over 4 targets, bulk-inserted), plus a second run to compare, serves it with the viewer
on a free loopback port and requests each page ``--repeat`` times over HTTP, as a browser
would.  Goal: every page's median under 300 ms and p95 under 1 s, on SQLite and (with
``--pg``) PostgreSQL.

Every generated call carries a real shell command, so the command search measures
something: drawn from ``../shared/corpora/shell-corpus.txt`` (49,499 one-line commands)
and ``agent-multiline-commands.jsonl`` (1,632 heredocs and scripts), each stored with a
real tool output from ``real-tool-calls.jsonl`` (first 300 characters) and its JSON
arguments, as a shell call is stored.  Without the corpora (they are not part of the
repository) a generator makes commands of the same shape, and says so.  The searched
texts are ``head`` (in ~4.5% of the commands: a page of matches is near) and
``git log`` (~0.1%: the whole run is searched for a page).

    $ .venv/bin/python benchmarks/bench_view.py [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--calls 1000000] [--repeat 20] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reports import (
    ROOT,
    _cpu_model,
    load_big_run,
    postgres_url,
    sqlite_url,
)

from agent_eval.store import SessionFilter, open_store
from agent_eval.view.app import run_view_in_thread

MEDIAN_GOAL_S, P95_GOAL_S = 0.3, 1.0
CORPORA = next((p for p in (ROOT / ".." / "shared" / "corpora",
                            ROOT / ".." / ".." / "shared" / "corpora") if p.is_dir()),
               ROOT / ".." / "shared" / "corpora")
COMMON_TEXT, RARE_TEXT = "head", "git log"


def call_texts() -> list[tuple[str, str]]:
    """(command, output) pairs for the generated calls: the real corpora's, or made up."""
    shell, multiline = CORPORA / "shell-corpus.txt", CORPORA / "agent-multiline-commands.jsonl"
    records = CORPORA / "real-tool-calls.jsonl"
    if not (shell.is_file() and multiline.is_file() and records.is_file()):
        print(f"no corpora at {CORPORA}: generated commands instead", file=sys.stderr)
        return generated_texts()
    commands = [line for line in shell.read_text(encoding="utf-8").splitlines() if line]
    commands += [json.loads(line) for line in multiline.open(encoding="utf-8") if line.strip()]
    outputs = [str(json.loads(line).get("result_excerpt") or "")
               for line in records.open(encoding="utf-8") if line.strip()]
    rng = random.Random(11)
    return [(command, rng.choice(outputs)) for command in commands]


def generated_texts(n: int = 50_000) -> list[tuple[str, str]]:
    """Commands shaped like the corpus's (a program, flags, paths, pipes, now and then a
    heredoc), with ``head`` in ~4% and ``git log`` in ~0.1% of them, and short outputs."""
    rng = random.Random(11)
    programs = ["ls -la", "cat", "grep -rn", "find . -name", "sed -i 's/a/b/'", "python",
                "pytest -q", "cd /testbed &&", "tail -n 20", "wc -l", "awk '{print $1}'",
                "sort -u", "chmod 644", "cp -r", "rm -f", "tar -czf out.tgz", "docker ps",
                "curl -s", "pip install", "make"]
    words = ["src", "tests", "main.py", "setup.cfg", "README.md", "config", "utils",
             "models", "views.py", "/var/log/syslog", "*.txt", "data.csv", "build", "lib"]
    out = []
    for _ in range(n):
        x = rng.random()
        if x < 0.001:
            command = f"git log --oneline -n {rng.randint(1, 50)} -- {rng.choice(words)}"
        elif x < 0.045:
            command = f"{rng.choice(programs)} {rng.choice(words)} | head -n {rng.randint(1, 99)}"
        elif x < 0.08:
            body = "\n".join(f"{rng.choice(words)} = {rng.randint(0, 999)}" for _ in range(12))
            command = f"cd /testbed && cat > {rng.choice(words)} << 'EOF'\n{body}\nEOF"
        else:
            command = " ".join([rng.choice(programs)]
                               + rng.sample(words, rng.randint(1, 3)))
            if rng.random() < 0.05:
                command += f" | {rng.choice(programs)}"
        output = " ".join(rng.choices(words, k=rng.randint(0, 30)))
        out.append((command, output))
    return out


def pages(run_id: int, other: int, session_id: int) -> dict[str, str]:
    r = run_id
    return {
        "runs": "/",
        "run": f"/runs/{r}",
        "calls (failed first)": f"/calls?run_id={r}",
        "calls of a class": f"/calls?run_id={r}&target=qwen3.6-35b-a3b&code=AE301",
        "calls, page 200": f"/calls?run_id={r}&offset=10000",
        "calls, text search": f"/calls?run_id={r}&search={COMMON_TEXT}",
        "calls, rare text search": f"/calls?run_id={r}&search={quote(RARE_TEXT)}",
        "sessions, text search": f"/sessions?run_id={r}&search={COMMON_TEXT}",
        "sessions (failed first)": f"/sessions?run_id={r}",
        "sessions failed of a class": f"/sessions?run_id={r}&failed=1&code=AE301",
        "sessions of a scenario": f"/sessions?run_id={r}&scenario=scenario-7",
        "sessions by handshake": f"/sessions?run_id={r}&handshake=1&sort=handshake",
        "session": f"/sessions/{session_id}.html?run_id={r}&failed=1",
        "session, under a search": f"/sessions/{session_id}.html?run_id={r}&search={COMMON_TEXT}",
        "compare": f"/compare?a={other}&b={r}",
    }


def time_pages(base: str, urls: dict[str, str], repeat: int) -> dict[str, list[float]]:
    out = {}
    for name, path in urls.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            with urllib.request.urlopen(base + path, timeout=120) as resp:
                resp.read()
                assert resp.status == 200, (name, resp.status)
            times.append(time.perf_counter() - start)
        out[name] = times
        print(f"  {name}: median {statistics.median(times) * 1000:.0f} ms", file=sys.stderr)
    return out


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def bench_backend(label: str, url: str, args) -> dict[str, list[float]]:
    with open_store(url) as store:
        print(f"{label}: generating {args.calls:,} calls ...", file=sys.stderr)
        texts = call_texts()
        other, _ = load_big_run(store, args.calls // 10, seed=3, texts=texts)
        run_id, _ = load_big_run(store, args.calls, texts=texts)
        middle = store.list_sessions(SessionFilter(run_id=run_id), sort="id",
                                     limit=1, offset=args.calls // 16).rows[0].id
    with open_store(url) as store, run_view_in_thread(store) as base:
        return time_pages(base, pages(run_id, other, middle), args.repeat)


def print_table(results: dict[str, dict[str, list[float]]], args) -> bool:
    head = ("page", *(f"{b} median / p95 ms" for b in results))
    names = list(next(iter(results.values())))
    rows, ok = [], True
    for name in names:
        cells = []
        for times in (r[name] for r in results.values()):
            med, top = statistics.median(times), p95(times)
            ok &= med < MEDIAN_GOAL_S and top < P95_GOAL_S
            cells.append(f"{med * 1000:.0f} / {top * 1000:.0f}")
        rows.append((name, *cells))
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(x[i]) for x in (head, *rows)) for i in range(len(head))]
        for row in (head, *rows):
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    import os
    import platform
    from datetime import UTC, datetime
    print(f"\n{args.calls:,} calls, {args.repeat} requests per page; goals: median < "
          f"{MEDIAN_GOAL_S * 1000:.0f} ms, p95 < {P95_GOAL_S * 1000:.0f} ms; machine: "
          f"nproc={os.cpu_count()}, {_cpu_model()}, Python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", metavar="URL", help="also on PostgreSQL (a fresh database)")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    results = {}
    with sqlite_url() as url:
        results["SQLite"] = bench_backend("SQLite", url, args)
    if args.pg:
        with postgres_url(args.pg) as url:
            results["PostgreSQL"] = bench_backend("PostgreSQL", url, args)
    return 0 if print_table(results, args) else 1


if __name__ == "__main__":
    sys.exit(main())
