"""Workers share a planned run through the store: claims under a lease, exactly-once
storage, one finisher, a refused fingerprint; and the kill test, where eight
``agent-eval worker`` processes on one PostgreSQL lose three to ``kill -9``, one to a
pause past its lease and the database to a restart (a private PostgreSQL cluster,
tests/support/pgcluster.py, stopped and started mid-run), and the run still ends with exactly the
planned sessions, the same numbers as one process playing it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run
from support.forked_cli import ForkedCommand

from agent_eval.cli import main
from agent_eval.scenario import load_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.store import work as work_store
from agent_eval.transcript import SessionRecord

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def require_postgres(request) -> str:
    """The session's PostgreSQL URL (``pg_url``); under CI=true a missing PostgreSQL
    fails the test instead of skipping it."""
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        if _in_ci():
            pytest.fail("CI=true but PostgreSQL is not reachable on 127.0.0.1:5432",
                        pytrace=False)
    return request.getfixturevalue("pg_url")  # skips locally when PostgreSQL is missing


# --- the store's side: claims, leases, completion, the finisher ------------------------


@pytest.fixture
def planned(store):
    """A run with one target and three work items; yields its id."""
    run_id = add_run(store, label=None, suite="s", targets={"t": "m"}, base_url="http://x/v1")
    assert store.add_work_items(run_id, [("t", "a", 0), ("t", "b", 0), ("t", "c", 0)]) == 3
    return run_id


def record(key: str) -> SessionRecord:
    target, scenario, repeat = key.split("/")
    return SessionRecord(key=key, target=target, scenario=scenario, repeat=int(repeat),
                         status="completed", tags=[], messages=[], turns=[], calls=[])


def test_each_claim_takes_a_different_item_and_a_lapsed_lease_is_claimed_again(store, planned):
    first = work_store.claim_work_item(store.engine, planned, "A", "host:1", 30)
    second = work_store.claim_work_item(store.engine, planned, "B", "host:2", 30)
    third = work_store.claim_work_item(store.engine, planned, "B", "host:2", 30)
    assert [first.key, second.key, third.key] == ["t/a/0", "t/b/0", "t/c/0"]
    assert work_store.claim_work_item(store.engine, planned, "C", "host:3", 30) is None
    assert store.work_progress(planned).leased == 3

    later = datetime.now(UTC) + timedelta(seconds=31)  # A died: its lease lapsed
    assert work_store.renew_work_leases(store.engine, "B", [second.id, third.id], 60) == 2
    again = work_store.claim_work_item(store.engine, planned, "C", "host:3", 30, now=later)
    assert (again.key, again.attempts) == ("t/a/0", 2)
    assert work_store.renew_work_leases(store.engine, "A", [first.id], 60) == 0  # not A's


def test_a_copy_stored_after_another_is_discarded_and_counted(store, planned):
    item = work_store.claim_work_item(store.engine, planned, "A", "host:1", 30)
    assert work_store.complete_work_item(store.engine, planned, item.id, "B",
                                         [record(item.key)]) == "stored"
    assert work_store.complete_work_item(store.engine, planned, item.id, "A",
                                         [record(item.key)]) == "duplicate"
    # the stored copy's own token retrying (its commit's answer lost) is not a duplicate
    assert work_store.complete_work_item(store.engine, planned, item.id, "B",
                                         [record(item.key)]) == "stored"
    assert store.finished_keys(planned) == {"t/a/0"}
    progress = store.work_progress(planned)
    assert (progress.planned, progress.done, progress.duplicates) == (3, 1, 1)


def test_only_the_worker_that_completes_the_last_item_marks_the_run_finished(store, planned):
    for token in ("A", "B", "C"):
        item = work_store.claim_work_item(store.engine, planned, token, "h", 30)
        assert not work_store.finish_run_if_done(store.engine, planned)
        work_store.complete_work_item(store.engine, planned, item.id, token, [record(item.key)])
    assert [work_store.finish_run_if_done(store.engine, planned) for _ in range(3)] == [
        True, False, False]
    assert store.get_run(planned).status == "finished"


@pytest.mark.postgres
def test_a_claim_skips_an_item_another_transaction_holds_locked(request):
    """FOR UPDATE SKIP LOCKED: a worker never waits on (nor takes) a row being claimed."""
    from sqlalchemy import select, text

    from agent_eval.store.schema import work_items

    with open_store(require_postgres(request)) as store:
        run_id = store.create_run(label=None, kind="live", suite="s", config={},
                                  fingerprint={})
        store.add_work_items(run_id, [("t", "a", 0), ("t", "b", 0)])
        with store.engine.connect() as other, other.begin():
            other.execute(text("SET LOCAL lock_timeout = '5s'"))
            other.execute(select(work_items.c.id).where(
                work_items.c.run_id == run_id, work_items.c.key == "t/a/0").with_for_update())
            item = work_store.claim_work_item(store.engine, run_id, "B", "h", 30)
        assert item.key == "t/b/0"


# --- through the CLI: plan, work, refuse -----------------------------------------------


def plan_args(db: str, base_url: str, suite: Path = RALF, *extra: str) -> list[str]:
    return ["run", "--plan-only", "--suite", str(suite), "--base-url", base_url,
            "--model", "sim-disciplined", "--name", "disciplined", "--db", db, "--json",
            *extra]


def test_a_planned_run_is_played_by_a_worker_and_marked_finished(tmp_path):
    db = str(tmp_path / "runs.db")
    runner = CliRunner()
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        planned = runner.invoke(main, plan_args(db, base_url, RALF, "--limit", "3"))
        assert planned.exit_code == 0, planned.output
        run_id = json.loads(planned.stdout)["run"]
        with open_store(db) as store:
            assert store.finished_keys(run_id) == set()
            assert store.work_progress(run_id).planned == 3
        worked = runner.invoke(main, ["worker", str(run_id), "--db", db, "--json"])
    assert worked.exit_code == 0, worked.output
    tally = json.loads(worked.output)
    assert (tally["stored"], tally["duplicates"], tally["marked_finished"]) == (3, 0, True)
    with open_store(db) as store:
        assert store.get_run(run_id).status == "finished"
        assert len(store.finished_keys(run_id)) >= 3  # the three, and any children


def test_resuming_a_planned_run_plays_its_work_items_here_and_leaves_none(tmp_path):
    """`run --resume` of a run planned for workers is one more worker: every work item is
    marked done, so a worker started afterwards finds nothing and stores nothing."""
    db = str(tmp_path / "runs.db")
    runner = CliRunner()
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        planned = runner.invoke(main, plan_args(db, base_url, RALF, "--limit", "3"))
        run_id = json.loads(planned.stdout)["run"]
        resumed = runner.invoke(main, ["run", "--resume", str(run_id), "--db", db, "--json"])
        late = runner.invoke(main, ["worker", str(run_id), "--db", db, "--json"])
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.output[resumed.output.index("{"):])
    assert (summary["status"], summary["sessions_stored"]) == ("finished", 3)
    assert "playing them here as one more worker" in resumed.output
    assert late.exit_code == 0, late.output
    assert (json.loads(late.output)["stored"], json.loads(late.output)["done"]) == (0, 3)
    with open_store(db) as store:
        progress = store.work_progress(run_id)
        assert (progress.planned, progress.done, progress.duplicates) == (3, 3, 0)
        assert store.get_run(run_id).status == "finished"


def test_a_worker_whose_suite_differs_from_the_planners_is_refused(tmp_path):
    shutil.copytree(RALF, tmp_path / "scenarios" / "ralf")
    shutil.copytree(REPO / "allowlists", tmp_path / "allowlists")
    suite = tmp_path / "scenarios" / "ralf"
    db = str(tmp_path / "runs.db")
    runner = CliRunner()
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        planned = runner.invoke(main, plan_args(db, base_url, suite, "--limit", "2"))
        run_id = json.loads(planned.stdout)["run"]
        edited = suite / "calendar-book-review.yaml"
        edited.write_text(edited.read_text().replace("45-minute", "50-minute"))
        refused = runner.invoke(main, ["worker", str(run_id), "--db", db])
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == [
        f"Error: worker: run {run_id} was planned with a different suite than this worker "
        "has: it would not measure the same thing; use the same agent-eval, suite and "
        "servers as the planner, or plan a new run"]
    with open_store(db) as store:
        assert store.work_progress(run_id).done == 0


def test_a_worker_on_a_run_not_planned_for_workers_is_refused(tmp_path):
    db = str(tmp_path / "runs.db")
    with open_store(db) as store:
        run_id = store.create_run(label=None, kind="live", suite=str(RALF),
                                  config={"suite": str(RALF), "repeats": 1, "targets": []},
                                  fingerprint={})
    refused = CliRunner().invoke(main, ["worker", str(run_id), "--db", db])
    assert refused.exit_code == 2
    assert "was not planned for workers" in refused.output
    assert "Traceback" not in refused.output


# --- the kill test ---------------------------------------------------------------------

LEASE_S = 3.0
LATENCY_S = 0.25
REPEATS = 3
WORKERS, LATE = 8, 2


PG_DOWN_S = 2.0  # how long PostgreSQL stays stopped: most of a lease


def start_sim() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "sim-server", "--port", "0", "--suite", str(RALF),
         "--latency", str(LATENCY_S)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    return proc, proc.stdout.readline().strip()


def start_worker(run_id: int, url: str, logs: Path) -> ForkedCommand:
    """``agent-eval worker`` in its own process, forked from one that imported the package
    (tests/support/forked_cli.py): ten fresh interpreters importing it took most of a minute."""
    return ForkedCommand(["worker", str(run_id), "--db", url, "--concurrency", "2",
                          "--lease-s", str(LEASE_S), "--json"], cwd=REPO,
                         logs=logs)


def wait_for(what: str, check, deadline_s: float = 300.0) -> None:
    """Poll ``check()`` until true; fail (never hang) at the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"not within {deadline_s:g} s: {what}")


def all_alive(workers: list[ForkedCommand]) -> bool:
    """True while every worker runs; a worker that exited early fails the test with why."""
    for proc in workers:
        if proc.poll() is not None:
            pytest.fail(f"worker {proc.pid} exited {proc.returncode} early: "
                        f"{proc.stderr.read()[-2000:]}")
    return True


def held_by(store, run_id: int, pid: int) -> set[int]:
    from sqlalchemy import select

    from agent_eval.store.schema import work_items

    w = work_items.c
    with store.engine.connect() as conn:
        return set(conn.execute(select(w.id).where(
            w.run_id == run_id, w.done_at.is_(None),
            w.worker == f"{socket.gethostname()}:{pid}")).scalars())


def session_numbers(store, run_id: int) -> dict[str, tuple]:
    return {s.key: (s.status, s.n_calls, s.parent_id is None)
            for s in store.session_rows([run_id])}


@pytest.mark.e2e
@pytest.mark.postgres
def test_workers_killed_paused_and_cut_off_still_store_every_planned_session_once(
        pg_cluster, tmp_path):
    url = pg_cluster.create_database("workers")
    sim, base_url = start_sim()
    workers: list[ForkedCommand] = []
    try:
        planned = CliRunner().invoke(main, plan_args(url, base_url, RALF, "--repeats",
                                                     str(REPEATS)))
        assert planned.exit_code == 0, planned.output
        run_id, n_planned = json.loads(planned.stdout)["run"], json.loads(planned.stdout)["planned"]
        store = open_store(url)
        workers = [start_worker(run_id, url, tmp_path / f"w{i}") for i in range(WORKERS)]

        wait_for("a sixth of the run stored",
                 lambda: all_alive(workers)
                 and store.work_progress(run_id).done >= n_planned // 6, deadline_s=300)
        killed = workers[:3]
        for proc in killed:
            proc.send_signal(signal.SIGKILL)
        done_before_restart = store.work_progress(run_id).done
        assert done_before_restart < n_planned
        pg_cluster.restart(pause_s=PG_DOWN_S)  # every connection cut, none taken meanwhile
        workers += [start_worker(run_id, url, tmp_path / f"late{i}") for i in range(LATE)]

        paused = workers[3]
        wait_for("the paused worker holds a session", lambda: held_by(store, run_id, paused.pid))
        paused.send_signal(signal.SIGSTOP)
        its_items = held_by(store, run_id, paused.pid)
        wait_for("the paused worker's sessions reclaimed by others",  # a lease, then a claim:
                 lambda: not held_by(store, run_id, paused.pid) & its_items,  # slow at load 10
                 deadline_s=600)
        paused.send_signal(signal.SIGCONT)

        outs = {}
        for proc in workers[3:]:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-2000:]
            outs[proc.pid] = json.loads(out)
        for proc in killed:
            proc.wait(timeout=10)

        progress = store.work_progress(run_id)
        assert (progress.planned, progress.done) == (n_planned, n_planned)
        assert sum(o["marked_finished"] for o in outs.values()) == 1
        assert store.get_run(run_id).status == "finished"
        # each session the paused worker had in flight was finished twice, kept once
        assert progress.duplicates >= len(its_items)
        assert progress.duplicates >= sum(o["duplicates"] for o in outs.values())
        numbers = session_numbers(store, run_id)
        keys = [s.key for s in store.session_rows([run_id])]
        assert max(Counter(keys).values()) == 1
        top = {k for k, (_, _, is_top) in numbers.items() if is_top}
        assert top == {f"disciplined/{sc.name}/{r}" for r in range(REPEATS)
                       for sc in load_suite(RALF).top_level()}
        assert len(top) == n_planned
        assert "error" not in {status for status, _, _ in numbers.values()}
        store.close()
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=10)
        sim.terminate()
        sim.wait(timeout=10)

    # faults off: one process playing the same plan stores the same numbers
    single = str(tmp_path / "single.db")
    with run_sim_in_thread("disciplined", suite=RALF) as base_url:
        alone = CliRunner().invoke(main, [
            "run", "--suite", str(RALF), "--base-url", base_url, "--model", "sim-disciplined",
            "--name", "disciplined", "--repeats", str(REPEATS), "--concurrency", "8",
            "--db", single])
    assert alone.exit_code == 0, alone.output
    with open_store(single) as one:
        assert session_numbers(one, one.list_runs()[0].id) == numbers
