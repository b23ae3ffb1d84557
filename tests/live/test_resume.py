"""Killing the model server or the runner mid-run loses no finished session, and
``agent-eval run --resume RUN`` completes the run with every planned session stored
exactly once.

A run under test holds once it has stored a few sessions and says so
(``agent_eval/testhook.py``): the test steps in while the run is certainly mid-way, however
fast the machine, and waits on that event, never on the clock.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.scenario import load_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.testhook import HOLD, HOLD_AFTER

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
PLANNED = {f"disciplined/{sc.name}/0" for sc in load_suite(RALF).top_level()}


def stored_sessions(db: Path) -> list:
    with open_store(str(db)) as store:
        runs = store.list_runs()
        return list(store.session_rows([runs[0].id])) if runs else []


def held_env(hold: Path, after: int) -> dict[str, str]:
    """The environment of a run that holds once ``after`` sessions are stored."""
    return {HOLD: str(hold), HOLD_AFTER: str(after)}


def wait_until_held(hold: Path, proc: subprocess.Popen | None = None,
                    deadline_s: float = 300.0) -> None:
    """Wait until the run holds (its hold file exists); fail (not hang) otherwise."""
    end = time.monotonic() + deadline_s
    while not hold.exists():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended before it held: {proc.communicate()}")
        if time.monotonic() > end:
            pytest.fail(f"the run did not hold within {deadline_s} s")
        time.sleep(0.02)


def assert_every_planned_session_once(db: Path) -> None:
    sessions = stored_sessions(db)
    top = Counter(s.key for s in sessions if s.parent_id is None)
    assert set(top) == PLANNED
    assert max(top.values()) == 1
    assert max(Counter(s.key for s in sessions).values()) == 1  # children too
    assert "error" not in {s.status for s in sessions}


def run_args(db: Path, base_url: str) -> list[str]:
    return ["run", "--suite", str(RALF), "--base-url", base_url, "--model", "sim-disciplined",
            "--name", "disciplined", "--concurrency", "2", "--db", str(db)]


# --- the model server dies -------------------------------------------------------------


def test_server_killed_mid_run_leaves_the_run_interrupted_and_resume_completes_it(
        tmp_path, monkeypatch):
    db, hold = tmp_path / "runs.db", tmp_path / "hold"
    for name, value in held_env(hold, 5).items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        result: list = []
        play = threading.Thread(target=lambda: result.append(
            runner.invoke(main, run_args(db, base_url))))
        play.start()
        wait_until_held(hold)
    hold.unlink()  # the server is gone: let the run find out
    play.join(timeout=120)
    first = result[0]

    assert first.exit_code == EXIT_FAULT, first.output
    assert "--resume" in first.output
    kept = stored_sessions(db)
    assert "error" not in {s.status for s in kept}  # the dead server burned no session
    assert 5 <= sum(s.parent_id is None for s in kept) < len(PLANNED)
    with open_store(str(db)) as store:
        run = store.list_runs()[0]
        assert run.status == "interrupted"

    with run_sim_in_thread("disciplined", suite=RALF, port=port):
        resumed = runner.invoke(main, ["run", "--resume", str(run.id), "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    assert f"{len(PLANNED) - sum(s.parent_id is None for s in kept)} sessions left" \
        in resumed.output
    assert_every_planned_session_once(db)
    assert {s.id for s in kept} <= {s.id for s in stored_sessions(db)}
    with open_store(str(db)) as store:
        assert store.get_run(run.id).status == "finished"


# --- the runner dies -------------------------------------------------------------------


@pytest.fixture
def sim_process():
    """``agent-eval sim-server`` in its own process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(RALF)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def start_runner(db: Path, base_url: str, after: int = 4) -> subprocess.Popen:
    """``agent-eval run`` in its own process, returned once it holds with ``after``
    sessions stored (or more: the sessions in flight finish)."""
    hold = db.parent / "hold"
    proc = subprocess.Popen([sys.executable, "-m", "agent_eval", *run_args(db, base_url)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=dict(os.environ, COLUMNS="160", **held_env(hold, after)))
    wait_until_held(hold, proc)
    return proc


def resume(db: Path):
    with open_store(str(db)) as store:
        run_id = store.list_runs()[0].id
    return CliRunner().invoke(main, ["run", "--resume", str(run_id), "--db", str(db)]), run_id


def test_ctrl_c_exits_130_with_the_resume_hint_and_keeps_finished_sessions(tmp_path,
                                                                             sim_process):
    db = tmp_path / "runs.db"
    proc = start_runner(db, sim_process)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err
    with open_store(str(db)) as store:
        run = store.list_runs()[0]
    assert run.status == "interrupted"
    assert f"agent-eval run --resume {run.id}" in out
    kept = stored_sessions(db)
    assert 4 <= sum(s.parent_id is None for s in kept) < len(PLANNED)
    assert all(s.finished_at and s.status != "error" for s in kept)

    resumed, _ = resume(db)
    assert resumed.exit_code == 0, resumed.output
    assert_every_planned_session_once(db)
    assert {s.id for s in kept} <= {s.id for s in stored_sessions(db)}


def test_sigkill_of_the_runner_loses_and_duplicates_nothing_on_resume(tmp_path, sim_process):
    db = tmp_path / "runs.db"
    proc = start_runner(db, sim_process)
    proc.kill()
    proc.communicate(timeout=30)
    kept = {s.id: s for s in stored_sessions(db)}
    with open_store(str(db)) as store:
        assert store.list_runs()[0].status == "running"  # nobody was left to say otherwise

    resumed, run_id = resume(db)
    assert resumed.exit_code == 0, resumed.output
    assert_every_planned_session_once(db)
    after = {s.id: s for s in stored_sessions(db)}
    assert all(after[i].key == s.key and after[i].n_calls == s.n_calls for i, s in kept.items())


def test_resume_of_a_finished_run_plays_nothing(tmp_path):
    db = tmp_path / "runs.db"
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        first = CliRunner().invoke(main, run_args(db, base_url) + ["--concurrency", "8"])
        assert first.exit_code == 0, first.output
        again, run_id = resume(db)
    assert again.exit_code == 0, again.output
    assert "0 sessions left" in again.output
    assert_every_planned_session_once(db)


# --- a child session that fails on a dying server is replayed, not kept as `error` -----


class DyingServer:
    """A loopback proxy in front of the simulator that dies (503 to everything, the
    models listing included) at the first request of a child session, whose seed key
    holds ``#``, until ``revive()``.  The parent spawns its child with the handshake's
    last call, so it needs no further reply and closes ``completed`` over a dead server."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.dead = False
        self.dying = True

    def revive(self) -> None:
        self.dead = self.dying = False

    async def handle(self, request):
        from aiohttp import ClientSession, web

        seed = request.headers.get("X-Agent-Eval-Seed", "")
        if self.dying and "#" in seed:
            self.dead = True
        if self.dead:
            return web.json_response({"object": "error", "message": "server died"}, status=503)
        async with ClientSession() as session, session.request(
                request.method, self.upstream + request.path.removeprefix("/v1"),
                data=await request.read(), headers={"Content-Type": "application/json"}) as up:
            return web.Response(body=await up.read(), status=up.status,
                                content_type=up.content_type)


@contextmanager
def serve_in_thread(handler):
    """An aiohttp server on a free loopback port, on its own loop; yields its base URL."""
    import asyncio

    from aiohttp import web

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict = {}

    async def start():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        box["runner"] = runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["port"] = site._server.sockets[0].getsockname()[1]

    def serve():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(box["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(30)
    try:
        yield f"http://127.0.0.1:{box['port']}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


@pytest.fixture
def spawning_suite(tmp_path) -> Path:
    """The scenario whose closing call spawns the evaluator child, and that child."""
    folder = tmp_path / "spawning"
    folder.mkdir()
    (folder / "suite.yaml").write_text((RALF / "suite.yaml").read_text().replace(
        "../../allowlists/ralf.yaml", str(REPO / "allowlists" / "ralf.yaml")))
    for name in ("research-market-scan-web", "evaluator-step"):
        shutil.copy(RALF / f"{name}.yaml", folder / f"{name}.yaml")
    return folder


def test_a_child_that_failed_on_a_dead_server_is_replayed_by_resume(tmp_path, spawning_suite):
    db = tmp_path / "runs.db"
    args = ["run", "--suite", str(spawning_suite), "--model", "sim-disciplined", "--name",
            "disciplined", "--db", str(db)]
    runner = CliRunner()
    with run_sim_in_thread("disciplined", suite=RALF) as sim_url:
        server = DyingServer(sim_url)
        with serve_in_thread(server.handle) as base_url:
            first = runner.invoke(main, [*args, "--base-url", base_url])
            assert server.dead  # the child's request met the dead server
            assert first.exit_code == EXIT_FAULT, first.output
            assert stored_sessions(db) == []  # neither the parent nor its error child kept
            with open_store(str(db)) as store:
                run = store.list_runs()[0]
                assert run.status == "interrupted"
                targets = store.run_targets(run.id)
            server.revive()
            resumed = runner.invoke(main, ["run", "--resume", str(run.id), "--db", str(db)])
    assert targets[0].base_url == base_url
    assert resumed.exit_code == 0, resumed.output
    sessions = stored_sessions(db)
    assert Counter(s.parent_id is None for s in sessions) == {True: 1, False: 1}
    assert {s.status for s in sessions} == {"completed"}
    assert max(Counter(s.key for s in sessions).values()) == 1


# --- one process plays a run at a time (the run lease) -----------------------------------


def test_a_second_resume_of_a_run_being_played_is_refused_naming_pid_and_host(
        tmp_path, sim_process):
    db = tmp_path / "runs.db"
    proc = start_runner(db, sim_process, after=2)
    try:
        second, run_id = resume(db)
        assert proc.poll() is None  # the first is still playing
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)

    assert second.exit_code == 2, second.output
    assert (f"Error: run {run_id} is being resumed by pid {proc.pid} on host "
            f"{socket.gethostname()}") in second.output
    assert "Traceback" not in second.output
    third, _ = resume(db)  # the first let go of the run on Ctrl-C
    assert third.exit_code == 0, third.output
    assert_every_planned_session_once(db)
