"""Run leases: one process plays a run at a time, so no session is played twice.

``agent-eval run`` and ``run --resume`` take the run's lease before the first session
and hold it until they stop; a second process that wants the same run is refused with
who holds it ("run 7 is being resumed by pid 4242 on host gpu-1").  The holder renews
the lease every ``HEARTBEAT_S``.  A lease is stale, and taken over, when its heartbeat is
older than ``STALE_AFTER_S`` or, on the same host, when its pid is no longer alive (a
killed runner, without waiting).

Taking a lease is one write transaction that first locks the run's row (``FOR UPDATE``
on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises writers), so two
processes that race for it are ordered and the second sees the first's lease.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, Row, delete, insert, select, update

from agent_eval.errors import ConfigError
from agent_eval.store.database import write_transaction
from agent_eval.store.schema import run_leases, runs

HEARTBEAT_S = 10.0
STALE_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class Lease:
    run_id: int
    token: str
    pid: int
    host: str


class RunLeased(ConfigError):
    """Another live process holds the run's lease.  Exit code 2."""


def acquire_lease(engine: Engine, run_id: int, *, now: datetime | None = None) -> Lease:
    """Take the run's lease for this process, or raise :class:`RunLeased` naming the
    holder.  A stale lease (see module docstring) is taken over."""
    now = now or datetime.now(UTC)
    lease = Lease(run_id, secrets.token_hex(16), os.getpid(), socket.gethostname())
    with write_transaction(engine) as conn:
        locked = conn.execute(
            select(runs.c.id).where(runs.c.id == run_id).with_for_update()
        ).first()
        if locked is None:
            raise ConfigError(f"no run with id {run_id} in this store", field="run")
        held = conn.execute(select(run_leases).where(run_leases.c.run_id == run_id)).first()
        if held is not None and not _stale(held, now):
            age = max(0, int((now - held.heartbeat_at).total_seconds()))
            raise RunLeased(
                f"run {run_id} is being resumed by pid {held.pid} on host {held.host} "
                f"(alive {age} s ago): wait for it to finish, or stop that process; its "
                f"lease lapses {STALE_AFTER_S:g} s after its last heartbeat"
            )
        if held is not None:
            conn.execute(delete(run_leases).where(run_leases.c.run_id == run_id))
        conn.execute(insert(run_leases), {
            "run_id": run_id, "token": lease.token, "pid": lease.pid, "host": lease.host,
            "acquired_at": now, "heartbeat_at": now,
        })
    return lease


def renew_lease(engine: Engine, lease: Lease) -> bool:
    """Move the heartbeat to now; False when the lease was taken over meanwhile."""
    with write_transaction(engine) as conn:
        done = conn.execute(
            update(run_leases)
            .where(run_leases.c.run_id == lease.run_id, run_leases.c.token == lease.token)
            .values(heartbeat_at=datetime.now(UTC))
        )
    return done.rowcount == 1


def release_lease(engine: Engine, lease: Lease) -> None:
    """Give the lease up (only if it is still ours)."""
    with write_transaction(engine) as conn:
        conn.execute(delete(run_leases).where(
            run_leases.c.run_id == lease.run_id, run_leases.c.token == lease.token))


@contextmanager
def holding_lease(engine: Engine, run_id: int) -> Iterator[Lease]:
    """Hold the run's lease for the ``with`` block, renewed by a daemon thread."""
    lease = acquire_lease(engine, run_id)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                renew_lease(engine, lease)
            except Exception:  # a missed beat only ages the lease
                pass

    thread = threading.Thread(target=beat, name=f"agent-eval-lease-{run_id}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=5)
        release_lease(engine, lease)


def lease_held(engine: Engine, run_id: int) -> bool:
    """Whether a live process holds the run's lease (one that is not stale): the run is
    being played now, not left ``running`` by a runner that was killed."""
    with engine.connect() as conn:
        held = conn.execute(select(run_leases).where(run_leases.c.run_id == run_id)).first()
    return held is not None and not _stale(held, datetime.now(UTC))


def _stale(held: Row, now: datetime) -> bool:
    if now - held.heartbeat_at > timedelta(seconds=STALE_AFTER_S):
        return True
    return held.host == socket.gethostname() and not _pid_alive(held.pid)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True
