"""The harness-CPU benchmark's table does its arithmetic right, and the script starts.

Nothing is timed here: the benchmark itself is run by hand (BENCHMARKS.md says how).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_harness_cpu.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_harness_cpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_gives_cpu_per_turn_less_start_up_and_ratios():
    bench = load()
    row = {"concurrency": 16,
           "turns": {"agent-eval": 100, "post": 100, "create": 100, "httpx": 100},
           "cpu": {"agent-eval": 1.5, "post": 1.0, "create": 1.2, "httpx": 0.5},
           "start": {"agent-eval": 1.2, "post": 0.8, "create": 0.8, "httpx": 0.4}}
    lines = bench.table([row]).splitlines()
    assert len(lines) == 6
    assert lines[2] == ("| 16 | 100 / 100 | agent-eval | 1.50 (1.20) | 15.00 | 3.00 "
                        "| 1.50 (1.50) | 1.25 (0.75) | 3.00 (3.00) |")
    assert lines[3] == ("| 16 | 100 / 100 | post | 1.00 (0.80) | 10.00 | 2.00 "
                        "| 1.00 (1.00) | 0.83 (0.50) | 2.00 (2.00) |")
    assert lines[5] == ("| 16 | 100 / 100 | httpx | 0.50 (0.40) | 5.00 | 1.00 "
                        "| 0.50 (0.50) | 0.42 (0.25) | 1.00 (1.00) |")


def test_script_starts_and_names_its_options():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    for option in ("--concurrency", "--turns", "--rounds", "--markdown"):
        assert option in out
