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
import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from agent_eval.errors import ConfigError, HarnessFault
from agent_eval.live.client import ModelClient, Target
from agent_eval.live.loop import play_items
from agent_eval.live.run import (
    FIRST_SESSIONS,
    ClientFactory,
    RunTally,
    WorkItem,
    plan_run,
    run_fingerprint,
    session_counter,
    session_player,
)
from agent_eval.live.stackprint import STACK_KEY
from agent_eval.runs import Handed, WorkerRecorder
from agent_eval.scenario import Suite
from agent_eval.store import Store
from agent_eval.transcript import SessionRecord

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
    ``/v1/models`` carries a ``created`` timestamp on vLLM and OpenAI; and without the
    stacks (``stackprint.py``): the planner's probe of each server is the one recorded,
    and the settings they hold are compared as the targets' own."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "created"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip({k: v for k, v in fingerprint.items() if k != STACK_KEY})


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


class ClaimedItems:
    """A planned run's work items, claimed from the store one at a time (the worker's
    :class:`~agent_eval.live.loop.ItemSource`).  Items claimed are ``held`` until stored
    or given back, and a heartbeat thread renews their leases meanwhile.  Stopping one
    target stops the worker: its unplayed items stay open for another."""

    def __init__(self, store: Store, run_id: int, suite: Suite, targets: list[Target],
                 tally: WorkerTally, *, lease_s: float, poll_s: float) -> None:
        self.store = store
        self.run_id, self.suite, self.tally = run_id, suite, tally
        self.by_name = {t.name: t for t in targets}
        self.lease_s, self.poll_s = lease_s, poll_s
        self.token = secrets.token_hex(16)
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.stopped = False
        self._ids: dict[int, int] = {}  # id(WorkItem) -> work item id
        self._beat = threading.Event()

    async def take(self, lane: str | None) -> WorkItem | None:
        while not self.stopped:
            claimed = await _db(self.store.claim_work_item, self.run_id,
                                self.token, self.tally.worker, self.lease_s)
            if claimed is None:
                progress = await _db(self.store.work_progress, self.run_id)
                if progress.open == 0:
                    return None
                await asyncio.sleep(self.poll_s)
                continue
            target = self.by_name.get(claimed.target)
            scenario = self.suite.scenarios.get(claimed.scenario)
            if target is None or scenario is None:
                raise ConfigError(f"run {self.run_id} holds item {claimed.key!r}, which its "
                                  "config does not plan: the run's config was changed",
                                  field="worker")
            item = WorkItem(target, scenario, claimed.repeat)
            with self.lock:
                self.held.add(claimed.id)
                self._ids[id(item)] = claimed.id
            return item
        return None

    def item_id(self, item: WorkItem) -> int:
        return self._ids[id(item)]

    def done(self, item: WorkItem) -> None:
        """The item's session is stored: no more heartbeats for it."""
        with self.lock:
            self.held.discard(self._ids.pop(id(item)))

    async def give_back(self, item: WorkItem) -> None:
        await _db(self.store.release_work_item, self.item_id(item), self.token)
        self.done(item)
        self.tally.released += 1

    def stop(self, item: WorkItem) -> None:
        self.stopped = True

    @contextlib.contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew the held items' leases every quarter lease while the block runs."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_s / 4):
                with self.lock:
                    ids = sorted(self.held)
                try:
                    self.store.renew_work_leases(self.token, ids, self.lease_s)
                except Exception:  # a missed beat only ages the leases
                    pass

        thread = threading.Thread(target=beat, name=f"agent-eval-worker-{self.run_id}",
                                  daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()


async def work_run(store: Store, run_id: int, suite: Suite, targets: list[Target], *,
                   concurrency: int = 4, lease_s: float = DEFAULT_LEASE_S,
                   poll_s: float | None = None,
                   client_factory: ClientFactory = ModelClient,
                   on_item: Callable[[WorkerTally], None] | None = None) -> WorkerTally:
    """Claim and play the run's items, ``concurrency`` at a time, until none is open;
    then try to mark the run finished.  Items held by a dead worker are claimed once
    their lease lapses, so a worker waits (polling) while others hold the last items.
    The sessions are played by the loop ``run`` plays them with (``loop.play_items``)."""
    tally = WorkerTally(worker=f"{socket.gethostname()}:{os.getpid()}")
    source = ClaimedItems(store, run_id, suite, targets, tally, lease_s=lease_s,
                          poll_s=poll_s if poll_s is not None else min(1.0, lease_s / 4))
    def complete(handed: Handed) -> str:
        return _retrying(store.complete_work_item, run_id,
                         source.item_id(handed.item), source.token, handed.records)

    recorder = WorkerRecorder(
        store, run_id, complete=complete, on_done=source.done, retrying=_retrying)
    played = RunTally()
    for t in targets:
        played.target(t.name, FIRST_SESSIONS)
    clients = {t.name: client_factory(t) for t in targets}

    def on_session(_played: RunTally, _records: list[SessionRecord]) -> None:
        if on_item:
            on_item(tally)

    play, after = session_player(suite, clients, played), session_counter(played, on_session)

    try:
        with source.heartbeat(), recorder.recording(
                lambda: "finished" if not (played.server_gone or played.stopped) else None):
            await play_items(source, recorder, {None: concurrency}, play, after)
    finally:
        for client in clients.values():
            await client.aclose()
        tally.stored, tally.duplicates = recorder.counts.stored, recorder.counts.duplicates
        tally.server_gone, tally.stopped = played.server_gone, played.stopped
    tally.marked_finished = recorder.marked_finished
    return tally


def play_as_worker(store: Store, run_id: int, suite: Suite, targets: list[Target], *,
                   concurrency: int = 4, lease_s: float = DEFAULT_LEASE_S) -> WorkerTally:
    """Join the planned run ``run_id`` (:func:`join_run`: refused when this machine would
    measure differently) and play its items as one more worker (:func:`work_run`)."""
    asyncio.run(join_run(store, run_id, suite, targets))
    return asyncio.run(work_run(store, run_id, suite, targets, concurrency=concurrency,
                                lease_s=lease_s))


async def _db(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(_retrying, fn, *args)


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
