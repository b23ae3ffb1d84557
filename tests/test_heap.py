"""The command line's collector setting (agent_eval/heap.py): off while the process
starts, back on with the start-up objects frozen once a command settles, and untouched in
any other process (a library user's, this test suite's)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from agent_eval import heap

REPO = Path(__file__).resolve().parents[1]
RALF = REPO / "scenarios" / "ralf"

# Runs the command line as ``python -m agent_eval`` does, and reports on stderr, as JSON:
# at each collection, the freeze count and whether click (imported by the command line,
# not by this preamble) was loaded; the collector's state right after each settle() (on,
# freeze count, young threshold); whether the collector is on at exit and the freeze count
# then.  A collection with click loaded and nothing frozen ran while the command line
# started, before settle().  Whether a collection runs after settle() depends on how many
# objects are alive at once, which depends on scheduling (a loaded machine batches writes
# differently): the tests read the state settle() left, not whether a collection happened.
_WATCH = (
    "import gc, json, runpy, sys, atexit\n"
    "import agent_eval.heap as heap\n"
    "seen, settled = [], []\n"
    "gc.callbacks.append(lambda phase, info: phase == 'start' and "
    "seen.append([gc.get_freeze_count(), 'click' in sys.modules]))\n"
    "_settle = heap.settle\n"
    "def _watched_settle():\n"
    "    _settle()\n"
    "    settled.append([gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()[0]])\n"
    "heap.settle = _watched_settle\n"
    "atexit.register(lambda: print(json.dumps({'seen': seen, 'settled': settled, "
    "'enabled': gc.isenabled(), "
    "'frozen': gc.get_freeze_count(), 'young': gc.get_threshold()[0]}), file=sys.stderr))\n"
    "sys.argv[0] = 'agent-eval'\n"
    "runpy.run_module('agent_eval', run_name='__main__')\n"
)


def _watched(*args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, "-c", _WATCH, *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300, input=stdin)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return proc, report


def test_settle_does_nothing_in_a_process_the_command_line_did_not_start():
    before = (gc.isenabled(), gc.get_freeze_count(), gc.get_threshold())
    heap.settle()
    assert (gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()) == before


def test_a_command_that_plays_nothing_settles_as_soon_as_it_is_resolved():
    proc, report = _watched("schema", "scenario")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["title"]  # the command did its work
    assert report["enabled"] is True
    assert report["frozen"] > 10_000  # click, pydantic and the package, frozen
    assert [0, True] not in report["seen"], "the collector ran while the process started"


def test_check_batch_settles_when_its_batch_starts():
    """``check --batch`` imports the engine and reads the allow-list with the collector
    off, then judges with it on: verdicts as without the setting."""
    lines = "".join(json.dumps({"command": c}) + "\n" for c in
                    ["ls | head", "uv run scripts/lights.py status"] * 300)
    proc, report = _watched("check", "--allowlist", str(REPO / "allowlists" / "ralf.yaml"),
                            "--batch", "-", "--format", "jsonl", stdin=lines)
    assert proc.returncode == 0, proc.stderr
    decisions = [json.loads(line)["decision"] for line in proc.stdout.splitlines()]
    assert decisions == ["deny", "allow"] * 300
    assert report["enabled"] is True and report["frozen"] > 10_000
    assert [0, True] not in report["seen"], "the collector ran while the process started"


def test_a_run_starts_lean_and_plays_with_the_collector_on_and_start_up_frozen(tmp_path):
    """A real run (4 x 29 sessions) against the simulator, in its own process: no
    collection before the first session is played; then the collector on, the openai
    SDK, SQLAlchemy and the suite frozen, the young generation at YOUNG_THRESHOLD and
    collected during the run; the run's sessions all stored."""
    sim = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(RALF)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    try:
        base_url = sim.stdout.readline().strip()
        db = tmp_path / "runs.db"
        proc, report = _watched(
            "run", "--suite", str(RALF), "--base-url", base_url, "--model", "sim-disciplined",
            "--repeats", "4", "--concurrency", "4", "--db", str(db), "--json")
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "finished" and out["sessions_stored"] > 100
    assert report["enabled"] is True and report["young"] == heap.YOUNG_THRESHOLD
    assert report["frozen"] > 50_000  # the SDK's types alone are tens of thousands
    # settled once, before the sessions were played (play_items settles first): the
    # collector on from there, what start-up built frozen
    assert report["settled"], "settle() never ran"
    enabled, frozen, young = report["settled"][0]
    assert enabled is True and frozen > 50_000 and young == heap.YOUNG_THRESHOLD
    assert [0, True] not in report["seen"], "the collector ran while the process started"
