"""Import benchmark: parse, judge and store the 15,610-call real corpus into SQLite.

End to end, as ``agent-eval import call-records`` does it: read the JSONL, build the
sessions, judge every call with the policy engine (``ralf`` allow-list), write batches of
sessions into a fresh SQLite store.  The target is at least 5,000 calls per second.

    $ .venv/bin/python benchmarks/bench_import.py [--repeat 3] [--markdown]

Prints one row per repeat and the best (each run starts with the engine's verdict cache empty); ``--markdown`` prints the table for
BENCHMARKS.md.  Calls are counted as records read (15,610), including the 229
harness-injected actions the importer leaves out of the sessions.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_eval.importers.recording import record_import  # noqa: E402
from agent_eval.policy import clear_cache, load_allowlist  # noqa: E402
from agent_eval.store import open_store  # noqa: E402

CORPUS = ROOT / ".." / "shared" / "corpora" / "real-tool-calls.jsonl"
TARGET = 5_000


def run_once(allowlist) -> tuple[float, int, int]:
    """Seconds, records read and calls stored for one import into a new SQLite file."""
    records = sum(1 for line in CORPUS.open(encoding="utf-8") if line.strip())
    clear_cache()  # every run starts cold: no verdict remembered from the previous one
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with open_store(str(Path(tmp) / "bench.db")) as store:
            summary = record_import(store, "call-records", CORPUS, allowlist, label="bench")
        return time.perf_counter() - start, records, summary.calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if not CORPUS.is_file():
        print(f"corpus not found at {CORPUS}; see ../shared/corpora/README.md", file=sys.stderr)
        return 2
    allowlist = load_allowlist(ROOT / "allowlists" / "ralf.yaml")
    rows = []
    for i in range(args.repeat):
        seconds, records, stored = run_once(allowlist)
        rows.append((seconds, records, stored))
        print(f"run {i + 1}: {records} records ({stored} model calls) in {seconds:.2f} s "
              f"= {records / seconds:,.0f} calls/s", file=sys.stderr)
    best = min(rows)
    rate = best[1] / best[0]
    median = sorted(rows)[len(rows) // 2]
    if args.markdown:
        print(f"Machine: {platform.processor() or platform.machine()}, {_cpus()} CPUs, "
              f"Python {platform.python_version()}, SQLite file store, load average "
              f"{os.getloadavg()[0]:.1f} while measuring.  Date: {datetime.now(UTC):%Y-%m-%d}.")
        print("Command: `.venv/bin/python benchmarks/bench_import.py --repeat 3 --markdown`\n")
        print("| input | records | model calls stored | runs | best s | best calls/s | median calls/s | target |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| real-tool-calls.jsonl (763 sessions) | {best[1]:,} | {best[2]:,} | {len(rows)} "
              f"| {best[0]:.2f} | {rate:,.0f} | {median[1] / median[0]:,.0f} | ≥ {TARGET:,} |")
    print(f"best: {rate:,.0f} calls/s ({'meets' if rate >= TARGET else 'MISSES'} the {TARGET:,}/s target)")
    return 0 if rate >= TARGET else 1


def _cpus() -> int:
    return os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
