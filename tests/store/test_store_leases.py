"""The store: run leases: one process plays a run at a time.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select


def _lease_row(store, run_id):
    from agent_eval.store.schema import run_leases

    with store.engine.connect() as conn:
        return conn.execute(select(run_leases).where(run_leases.c.run_id == run_id)).first()


def _age_lease(store, run_id, **values):
    from sqlalchemy import update

    from agent_eval.store.schema import run_leases

    with store.engine.begin() as conn:
        conn.execute(update(run_leases).where(run_leases.c.run_id == run_id).values(**values))


def test_a_held_lease_refuses_a_second_holder_naming_pid_and_host(store, run_id):
    import os
    import socket

    from agent_eval.store.leases import RunLeased, acquire_lease

    first = acquire_lease(store.engine, run_id)
    _age_lease(store, run_id, pid=os.getppid())  # held by another live process here

    with pytest.raises(RunLeased, match="is being resumed by pid") as caught:
        acquire_lease(store.engine, run_id)

    assert str(caught.value).startswith(
        f"run {run_id} is being resumed by pid {os.getppid()} on host {socket.gethostname()}")
    assert caught.value.exit_code == 2
    assert _lease_row(store, run_id).token == first.token


def test_a_lease_whose_process_died_is_taken_over_at_once(store, run_id):
    import subprocess
    import sys

    from agent_eval.store.leases import acquire_lease

    acquire_lease(store.engine, run_id)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _age_lease(store, run_id, pid=gone.pid)

    second = acquire_lease(store.engine, run_id)

    assert _lease_row(store, run_id).token == second.token


def test_a_lease_on_another_host_lapses_only_when_its_heartbeat_is_old(store, run_id):
    from agent_eval.store.leases import STALE_AFTER_S, RunLeased, acquire_lease

    acquire_lease(store.engine, run_id)
    _age_lease(store, run_id, host="gpu-node-7", pid=1)
    with pytest.raises(RunLeased, match="on host gpu-node-7"):
        acquire_lease(store.engine, run_id)

    old = datetime.now(UTC) - timedelta(seconds=STALE_AFTER_S + 5)
    _age_lease(store, run_id, heartbeat_at=old)
    taken = acquire_lease(store.engine, run_id)

    import socket

    row = _lease_row(store, run_id)
    assert (row.token, row.host) == (taken.token, socket.gethostname())


def test_a_released_lease_frees_the_run_and_a_lost_one_cannot_be_renewed(store, run_id):
    from agent_eval.store.leases import acquire_lease, release_lease, renew_lease

    first = acquire_lease(store.engine, run_id)
    assert renew_lease(store.engine, first)
    release_lease(store.engine, first)
    assert _lease_row(store, run_id) is None

    second = acquire_lease(store.engine, run_id)
    assert not renew_lease(store.engine, first)  # not ours any more
    release_lease(store.engine, first)  # and releasing it does not free someone else's
    assert _lease_row(store, run_id).token == second.token


def test_store_lease_holds_the_run_for_the_with_block(store, run_id):
    from agent_eval.store.leases import RunLeased, acquire_lease

    with store.lease(run_id) as lease:
        import os

        _age_lease(store, run_id, pid=os.getppid())
        with pytest.raises(RunLeased, match="is being resumed by pid"):
            acquire_lease(store.engine, run_id)
        _age_lease(store, run_id, pid=lease.pid)
    assert _lease_row(store, run_id) is None


def test_two_processes_racing_for_a_lease_get_it_once(store, run_id):
    import threading

    from agent_eval.store.leases import RunLeased, acquire_lease

    start = threading.Barrier(4)
    won, refused = [], []

    def race() -> None:
        start.wait()
        try:
            won.append(acquire_lease(store.engine, run_id))
        except RunLeased:
            refused.append(1)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert (len(won), len(refused)) == (1, 3)
    assert _lease_row(store, run_id).token == won[0].token
