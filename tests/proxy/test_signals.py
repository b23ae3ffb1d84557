"""Stopping ``agent-eval proxy`` the ways a service manager or a terminal does: SIGTERM
(systemd, ``timeout``, ``docker stop``), SIGINT (Ctrl-C) and SIGHUP (a closed terminal),
each sent to the proxy's process and to its whole process group (``kill -TERM -PGID``
reaches the recorder child too).  Every relayed turn must be stored, the exit line must
say so, and the run must end ``finished``.

No timing is asserted: the tests wait on what the proxy shows (its status page, its exit)
with generous bounds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from support.proxyplay import wait_for

from agent_eval.scenario import load_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
TURNS = 5
SECRET = "Kq7upstreamsecret"


def first_request() -> dict:
    sc = load_suite(REPO / "scenarios" / "ralf").scenarios["db-open-attempts"]
    return {"model": "sim-piper",
            "messages": [{"role": "system", "content": sc.system_prompt()},
                         {"role": "user", "content": sc.spec.task}],
            "tools": sc.tool_schemas()}


def start_proxy(upstream: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """The CLI in a session of its own (its own process group, as under systemd or a
    terminal), with an upstream URL carrying a credential in its query."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "proxy", "--upstream",
         f"{upstream}?api_key={SECRET}", "--allowlist", str(ALLOWLIST), "--port", "0",
         "--db", str(tmp_path / "proxy.db"), "--journal", str(tmp_path / "journal"),
         "--idle-timeout", "3600"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=dict(os.environ, COLUMNS="160"))
    line = proc.stdout.readline().strip()
    if not line.startswith("http://"):
        proc.kill()
        raise AssertionError(proc.communicate()[1])
    return proc, line


def status(base_url: str) -> dict:
    return httpx.get(base_url.removesuffix("/v1") + "/_agent_eval/status", timeout=30).json()


@pytest.mark.parametrize("target", ["process", "group"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stopping_signal_stores_every_relayed_turn_and_finishes_the_run(tmp_path, sig,
                                                                          target):
    body = first_request()
    with run_sim_in_thread("piper") as upstream:
        proc, base_url = start_proxy(upstream, tmp_path)
        try:
            for _ in range(TURNS):
                resp = httpx.post(base_url + "/chat/completions", json=body, timeout=60)
                assert resp.status_code == 200
            # the relay has handed all five to the recorder; the child holds them open
            wait_for(lambda: status(base_url)["relayed"] == TURNS, "5 exchanges relayed")
            wait_for(lambda: status(base_url)["open_sessions"] == TURNS, "5 open sessions")
            if target == "group":
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert proc.returncode == 0, err
    assert (f"{TURNS} sessions, {TURNS} turns stored; 0 sessions in the journal; "
            "0 turns not recorded") in err, err
    assert SECRET not in out + err and "api_key=***" in err  # the banner hides it
    with open_store(str(tmp_path / "proxy.db")) as store:
        run = store.resolve_run("latest")
        assert run.kind == "proxy" and run.status == "finished"
        rows = list(store.session_rows([run.id]))
        assert len(rows) == TURNS and sum(r.n_turns for r in rows) == TURNS
        assert SECRET not in repr(run.config) + repr(store.run_targets(run.id))


def recorder_child(pid: int) -> int:
    """The recorder process among the proxy's children (not multiprocessing's resource
    tracker), from /proc."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for child in map(int, children):
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"resource_tracker" not in cmdline:
            return child
    raise AssertionError(f"no recorder child among {children}")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_recorder_killed_outright_is_named_as_lost_and_the_run_marked_interrupted(tmp_path):
    body = first_request()
    with run_sim_in_thread("piper") as upstream:
        proc, base_url = start_proxy(upstream, tmp_path)
        try:
            for _ in range(2):
                assert httpx.post(base_url + "/chat/completions", json=body,
                                  timeout=60).status_code == 200
            wait_for(lambda: status(base_url)["open_sessions"] == 2, "2 open sessions")
            os.kill(recorder_child(proc.pid), signal.SIGKILL)
            os.kill(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert proc.returncode == 0, err
    assert ("the recorder process was killed (signal 9): the 2 sessions it held open are "
            "lost and the run is marked interrupted") in err, err
    with open_store(str(tmp_path / "proxy.db")) as store:
        assert store.resolve_run("latest").status == "interrupted"
