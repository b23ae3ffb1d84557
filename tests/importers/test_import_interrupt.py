"""Ctrl-C during ``agent-eval import``: exit 130, the run marked interrupted, and
``latest`` never names the half-read import as if it were complete.

A real ``agent-eval import`` subprocess gets a real SIGINT once its first batch of
sessions is in the store: the import holds there and says so (``agent_eval/testhook.py``),
so the signal lands mid-import however fast the machine, and the file stays small.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agent_eval.store import open_store
from agent_eval.testhook import HOLD

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "allowlists" / "ralf.yaml"
SESSIONS = 2_000


def _line(i: int) -> str:
    args = json.dumps({"command": f"uv run scripts/lights.py status --room r{i}"})
    return json.dumps({"id": f"s{i}", "model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}]})


def _runs(db: Path) -> list[tuple[int, str, int]]:
    """(id, status, sessions) of every run, read with sqlite3 so the test never migrates
    or locks the database the import is writing."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute(
                "SELECT r.id, r.status, (SELECT count(*) FROM sessions s WHERE s.run_id = r.id) "
                "FROM runs r ORDER BY r.id").fetchall()
    except sqlite3.Error:
        return []


def start_held_import(big: Path, db: Path, hold: Path, **popen) -> subprocess.Popen:
    """``agent-eval import`` of ``big``, returned once it holds with sessions stored."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "import", "openai", str(big), "--allowlist",
         str(RALF), "--db", str(db)], env=dict(os.environ, **{HOLD: str(hold)}), **popen)
    end = time.monotonic() + 300
    while not hold.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the import stored nothing within 300 s"
        time.sleep(0.02)
    return proc


def test_ctrl_c_during_import_exits_130_and_latest_skips_the_run(tmp_path):
    db = tmp_path / "s.db"
    small = tmp_path / "small.jsonl"
    small.write_text(_line(0) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent_eval", "import", "openai", str(small), "--allowlist",
         str(RALF), "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(_line(i) for i in range(SESSIONS)) + "\n")

    proc = start_held_import(big, db, tmp_path / "hold", stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 130, err
    assert "Interrupted: run 2 is marked interrupted" in err
    assert "Traceback" not in err
    status = {rid: (st, n) for rid, st, n in _runs(db)}
    assert status[2][0] == "interrupted" and 0 < status[2][1] < SESSIONS
    with open_store(str(db)) as store:
        assert store.resolve_run("latest").id == 1
        assert store.resolve_run("2").status == "interrupted"


def test_an_import_killed_outright_is_never_latest(tmp_path):
    """SIGKILL leaves no chance to mark anything: the run stays ``running``."""
    db = tmp_path / "s.db"
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(_line(i) for i in range(SESSIONS)) + "\n")
    small = tmp_path / "small.jsonl"
    small.write_text(_line(0) + "\n")
    subprocess.run([sys.executable, "-m", "agent_eval", "import", "openai", str(small),
                    "--allowlist", str(RALF), "--db", str(db)], check=True, capture_output=True,
                   timeout=120)
    proc = start_held_import(big, db, tmp_path / "hold", stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert {rid: st for rid, st, _ in _runs(db)}[2] == "running"
    with open_store(str(db)) as store:
        assert store.resolve_run("latest").id == 1
