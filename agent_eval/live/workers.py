"""Workers: many processes, on any machines, play one planned run through a shared store.

``plan_work`` stores a run's plan as work items (``run --plan-only``); ``join_run``
checks that this machine would measure the same thing (its fingerprint: suite, policies,
engine, server models, sampling) and ``work_run`` plays items until none is left.  All
coordination is in the database (store/work.py): a claim is one ``SELECT … FOR UPDATE
SKIP LOCKED``, a heartbeat thread renews the leases of the items in flight, and a
session is stored together with its item's ``done`` mark, exactly once.

A worker stops early when a target's server stops answering: the unplayed item is
given back at once for another worker (or a later one), and ``WorkerTally.server_gone``
names the target.  It also stops, as ``run`` does, when its first sessions of a target
(:data:`~agent_eval.live.run.FIRST_SESSIONS`) were all refused the same way by the
server: ``WorkerTally.stopped`` holds the one line quoting the server and the likely
fix, and the items it has not played stay open for a worker started after the fix.  Database hiccups (a PostgreSQL restart, a dropped connection) are
retried for :data:`DB_RETRY_S` seconds before the worker gives up.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from agent_eval.errors import ConfigError, HarnessFault
from agent_eval.live.client import ModelClient, Target
from agent_eval.live.orchestrator import run_session
from agent_eval.live.run import (
    FIRST_SESSIONS,
    ClientFactory,
    WorkItem,
    _answers,
    _any_error,
    _rejection,
    plan_run,
    run_fingerprint,
    stop_line,
)
from agent_eval.scenario import Suite
from agent_eval.store import ClaimedItem, Store

DEFAULT_LEASE_S = 60.0
DB_RETRY_S = 60.0
T = TypeVar("T")


class DatabaseGone(HarnessFault):
    """The store stayed unreachable for :data:`DB_RETRY_S` seconds.  Exit code 3."""


@dataclass
class WorkerTally:
    """What this worker did: sessions stored, copies discarded as duplicates (another
    worker stored the item first), items given back, and whether it marked the run
    finished (exactly one worker does)."""

    worker: str
    stored: int = 0
    duplicates: int = 0
    released: int = 0
    marked_finished: bool = False
    server_gone: str | None = None  # the target whose server stopped answering
    stopped: str | None = None  # one line: a target's first sessions all refused alike


def plan_work(store: Store, run_id: int, suite: Suite, targets: list[Target],
              repeats: int) -> int:
    """Store the run's plan as work items (one per top-level session); how many."""
    items = plan_run(suite, targets, repeats)
    return store.add_work_items(run_id, [(i.target.name, i.scenario.name, i.repeat)
                                         for i in items])


def comparable(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint without what differs between two identical servers asked twice:
    ``/v1/models`` carries a ``created`` timestamp on vLLM and OpenAI."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "created"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(fingerprint)


def check_fingerprint(run_id: int, stored: dict[str, Any], mine: dict[str, Any]) -> None:
    """Refuse (ConfigError) to join a run this machine would measure differently."""
    stored, mine = comparable(stored), comparable(mine)
    differ = sorted(k for k in stored.keys() | mine.keys() if stored.get(k) != mine.get(k))
    if differ:
        raise ConfigError(
            f"run {run_id} was planned with a different {', '.join(differ)} than this "
            "worker has: it would not measure the same thing; use the same agent-eval, "
            "suite and servers as the planner, or plan a new run", field="worker")


async def join_run(store: Store, run_id: int, suite: Suite, targets: list[Target],
                   client_factory: ClientFactory = ModelClient) -> None:
    """Check this machine against the run's fingerprint (probes each target's server)."""
    from agent_eval.live.run import probe_targets

    info = store.get_run(run_id)
    if info.status == "finished":
        return
    mine = run_fingerprint(suite, targets, await probe_targets(targets, client_factory))
    check_fingerprint(run_id, info.fingerprint, mine)


async def work_run(store: Store, run_id: int, suite: Suite, targets: list[Target], *,
                   concurrency: int = 4, lease_s: float = DEFAULT_LEASE_S,
                   poll_s: float | None = None,
                   client_factory: ClientFactory = ModelClient,
                   on_item: Callable[[WorkerTally], None] | None = None) -> WorkerTally:
    """Claim and play the run's items, ``concurrency`` at a time, until none is open;
    then try to mark the run finished.  Items held by a dead worker are claimed once
    their lease lapses, so a worker waits (polling) while others hold the last items."""
    tally = WorkerTally(worker=f"{socket.gethostname()}:{os.getpid()}")
    token = secrets.token_hex(16)
    poll_s = poll_s if poll_s is not None else min(1.0, lease_s / 4)
    by_name = {t.name: t for t in targets}
    clients = {t.name: client_factory(t) for t in targets}
    held: set[int] = set()
    first: dict[str, list[str | None]] = {t.name: [] for t in targets}
    lock = threading.Lock()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(lease_s / 4):
            with lock:
                ids = sorted(held)
            try:
                store.renew_work_leases(token, ids, lease_s)
            except Exception:  # noqa: BLE001 - a missed beat only ages the leases
                pass

    async def db(fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(_retrying, fn, *args)

    async def slot() -> None:
        while tally.server_gone is None and tally.stopped is None:
            item = await db(store.claim_work_item, run_id, token,
                            tally.worker, lease_s)
            if item is None:
                progress = await db(store.work_progress, run_id)
                if progress.open == 0:
                    return
                await asyncio.sleep(poll_s)
                continue
            with lock:
                held.add(item.id)
            try:
                await play(item)
            finally:
                with lock:
                    held.discard(item.id)

    async def play(item: ClaimedItem) -> None:
        target = by_name.get(item.target)
        scenario = suite.scenarios.get(item.scenario)
        if target is None or scenario is None:
            raise ConfigError(f"run {run_id} holds item {item.key!r}, which its config does "
                              "not plan: the run's config was changed", field="worker")
        client = clients[target.name]
        key = WorkItem(target, scenario, item.repeat).key
        records = await run_session(scenario, client, target=target.name, suite=suite,
                                    repeat=item.repeat, key=key)
        if _any_error(records) and (tally.server_gone or not await _answers(client)):
            tally.server_gone = tally.server_gone or target.name
            await db(store.release_work_item, item.id, token)
            tally.released += 1
            return
        outcome = await db(store.complete_work_item, run_id, item.id, token,
                           records)
        if outcome == "stored":
            tally.stored += 1
        else:
            tally.duplicates += 1
        seen = first[target.name]
        if len(seen) < FIRST_SESSIONS:
            seen.append(_rejection(records[0]))
            if len(seen) == FIRST_SESSIONS and seen[0] and seen.count(seen[0]) == len(seen):
                tally.stopped = tally.stopped or stop_line(target.name, len(seen), seen[0])
        if on_item:
            on_item(tally)

    thread = threading.Thread(target=beat, name=f"agent-eval-worker-{run_id}", daemon=True)
    thread.start()
    try:
        await asyncio.gather(*(slot() for _ in range(max(1, concurrency))))
    finally:
        stop.set()
        for client in clients.values():
            await client.aclose()
    if tally.server_gone is None and tally.stopped is None:
        tally.marked_finished = await db(store.finish_run_if_done, run_id)
    return tally


def _retrying(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, retried while the database is unreachable or dropped the connection
    (a restart); ``DatabaseGone`` after :data:`DB_RETRY_S` seconds.  Safe because every
    store call it wraps is one transaction and idempotent for the same token."""
    end = time.monotonic() + DB_RETRY_S
    delay = 0.2
    while True:
        try:
            return fn(*args)
        except (OperationalError, DBAPIError) as exc:
            if not _transient(exc) or time.monotonic() > end:
                if _transient(exc):
                    raise DatabaseGone(f"the store stopped answering for {DB_RETRY_S:g} s: "
                                       f"{_first_line(exc)}") from None
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _transient(exc: DBAPIError) -> bool:
    return bool(exc.connection_invalidated) or isinstance(exc, OperationalError)


def _first_line(exc: BaseException) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
