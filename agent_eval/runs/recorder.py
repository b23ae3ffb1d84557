"""The run recorder: a run's life in the store, whoever plays it.

``run``, ``run --resume``, ``worker`` and ``replay`` all go through one
:class:`RunRecorder`, which sets the run's status through its :class:`RunWriter`
(``writer.py``, the one run writer every source uses).  Its shape is inspect_ai's eval-log
recorder (UKGovernmentBEIS/inspect_ai, ``src/inspect_ai/log/_recorders/recorder.py``:
``log_init``, ``log_start``, ``log_sample``, ``flush``, ``log_finish(status)``)::

    recorder = RunRecorder(store, run_id)     # init: a run created (start_run) or found
    with recorder.claim():                    # run, --resume: this process's lease
        with recorder.recording():            # start: status running, the writer started
            await recorder.session(records)   # each finished session (and its children)
    # leaving recording(): every session handed over is stored, then finish(status):
    # finished, interrupted (Ctrl-C, a server gone: resumable) or failed (a harness fault)

**One writer.**  Sessions are written by one writer thread per run, never one thread per
session: :meth:`RunRecorder.session` hands a finished session over and returns, the
writer wakes on the first session handed over, lets :data:`LINGER_S` pass (sessions
handed over meanwhile do not wake it), and writes every session waiting in one
transaction (at most :data:`BATCH_SESSIONS` sessions).  A transaction costs about the
same whether it holds one session or fifty, so this removes most of what the harness
spent per turn on the store (BENCHMARKS.md, "The session write path").  A session is handed over whole with its children, so a batch never
holds part of a family; a batch the store refuses (a key stored already) is written again
session by session, so one refused session never takes the others with it.  Writes never
block the event loop, and Ctrl-C lets the writer store everything handed over before the
run is marked ``interrupted``: a finished session is never lost to Ctrl-C.  A killed
process (SIGKILL) loses what the writer had not yet committed (at most ``LINGER_S`` of
sessions), which ``--resume`` plays again.

Workers share one run (:class:`WorkerRecorder`): a session is stored with its work
item's ``done`` mark (``store/work.py``), the run's status is left to the worker that
completes the last item, and a worker's Ctrl-C leaves the run ``running`` for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from agent_eval import testhook
from agent_eval.errors import ConfigError
from agent_eval.runs.writer import RunWriter
from agent_eval.store import RunStatus, Store
from agent_eval.transcript import SessionRecord

LINGER_S = 0.2
"""Seconds the writer waits for more sessions before it writes a batch."""
BATCH_SESSIONS = 64
"""Most sessions (families) written in one transaction."""
MAX_WAITING = 1024
"""Sessions handed over but not written yet past which :meth:`RunRecorder.session`
waits for the writer (a slow store slows the run instead of filling memory)."""


@dataclass
class Handed:
    """One session handed to the writer: its records (the session first, then its
    children) and what the caller attached (a worker's claimed item)."""

    records: list[SessionRecord]
    item: Any = None


@dataclass
class Counts:
    """What the writer did: sessions stored, copies discarded as duplicates."""

    stored: int = 0
    duplicates: int = 0


class SessionWriter:
    """The one writer thread of a run; see the module docstring."""

    def __init__(self, write: Callable[[list[Handed]], None], name: str) -> None:
        self._write = write
        self._queue: queue.SimpleQueue[Handed | None] = queue.SimpleQueue()
        self._waiting = 0
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.written = 0  # sessions this writer has written (or discarded as duplicates)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, handed: Handed) -> None:
        with self._lock:
            self._waiting += 1
        self._queue.put(handed)

    @property
    def waiting(self) -> int:
        return self._waiting

    def close(self) -> None:
        """Store everything handed over, then stop the thread; re-raise a write's error."""
        self._closing.set()
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()  # idle: the next session wakes the writer
            if first is None:
                return
            # then the writer sleeps through the linger, woken only by close(): sessions
            # handed over meanwhile cost the event loop a queue put, not a thread switch
            if self._waiting < BATCH_SESSIONS:  # a full batch waiting is written at once
                self._closing.wait(LINGER_S)
            batch = [first]
            room = testhook.batch_room(self.written) or BATCH_SESSIONS
            while len(batch) < min(room, BATCH_SESSIONS):
                try:
                    handed = self._queue.get_nowait()
                except queue.Empty:
                    break
                if handed is None:
                    stop = True
                    break
                batch.append(handed)
            writing = self.error is None
            if writing:
                try:
                    self._write(batch)
                except BaseException as exc:  # raised again by close()
                    self.error = exc
            n = len(batch)
            del batch  # written: nothing of it is kept while the writer waits for more
            first = handed = None
            if writing:
                self.written += n
                testhook.stored(self.written)
            with self._lock:
                self._waiting -= n
            testhook.hold(stop=self._closing.is_set)  # the run cannot end while held


class RunRecorder:
    """One run's life in the store: status, lease and the session writer."""

    interrupted_status: RunStatus | None = "interrupted"  # what Ctrl-C leaves the run as

    def __init__(self, store: Store, run_id: int) -> None:
        self.store = store
        self.run_id = run_id
        self.run = RunWriter(store, run_id)
        self.counts = Counts()
        self._writer: SessionWriter | None = None
        self._handed = 0

    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        """Hold the run's lease for this process (``store/leases.py``): a second process
        that wants to play the same run is refused, naming the holder (exit 2)."""
        with self.store.lease(self.run_id):
            yield

    def start(self) -> None:
        """The run is being played: status ``running``; the writer starts."""
        self.run.set_status("running")
        self._open_writer()

    def _open_writer(self) -> None:
        self._writer = SessionWriter(self._write, name=f"agent-eval-writer-{self.run_id}")

    async def session(self, records: list[SessionRecord], item: Any = None) -> None:
        """Hand one finished session (and its children) to the writer.  Waits only
        while the writer is :data:`MAX_WAITING` sessions behind; raises the writer's
        error, so a run whose sessions cannot be stored stops instead of playing on."""
        writer = self._writer
        if writer is None:
            raise RuntimeError("RunRecorder.session before start")
        if writer.error is not None:
            raise writer.error
        writer.put(Handed(records, item))
        self._handed += 1
        while writer.waiting > MAX_WAITING and writer.error is None:
            await asyncio.sleep(0.01)
        await testhook.hold_handed(self._handed)

    def flush(self) -> None:
        """Store every session handed over (the writer stops; ``start`` opens a new one)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def finish(self, status: RunStatus | None) -> None:
        """Store every session handed over, then set the run's ``status`` (None: leave
        it).  When a write failed, a run that would be ``finished`` is ``failed`` (some
        session is not stored), and the write's error is raised."""
        try:
            self.flush()
        except BaseException:
            if status is not None:
                self.run.set_status("failed" if status == "finished" else status)
            raise
        if status is not None:
            self.run.set_status(status)

    @contextlib.contextmanager
    def recording(self, status: Callable[[], RunStatus | None] = lambda: "finished"
                  ) -> Iterator[None]:
        """``start``, then ``finish`` with ``status()`` when the block ends, ``interrupted``
        on Ctrl-C (resumable) or ``failed`` when a fault escapes it."""
        self.start()
        try:
            yield
        except KeyboardInterrupt:
            self.finish(self.interrupted_status)
            raise
        except BaseException:
            with contextlib.suppress(Exception):  # the first fault is the one to report
                self.finish("failed")
            raise
        self.finish(status())

    def _write(self, batch: list[Handed]) -> None:
        """Write a batch in one transaction; refused, again session by session, so every
        session the store takes is stored (the first refusal is raised after)."""
        try:
            self.run.write([r for h in batch for r in h.records])
        except ConfigError:
            if len(batch) == 1:
                raise
            refused: ConfigError | None = None
            for handed in batch:
                try:
                    self._write([handed])
                except ConfigError as exc:
                    refused = refused or exc
            if refused is not None:
                raise refused from None
            return
        self.counts.stored += len(batch)


class WorkerRecorder(RunRecorder):
    """A worker's share of a planned run.  Each session is stored with its work item's
    done mark by ``complete(handed)`` (``store/work.py``; "stored" or "duplicate"), and
    ``on_done(item)`` is told once it is.  The run's status is the workers' together:
    Ctrl-C leaves it to the others, and ``finish("finished")`` marks it only when no
    item is left open (``RunWriter.finish_if_done``: one worker's conditional update
    wins), through ``retrying`` (the worker's patience with a database that restarts)."""

    interrupted_status = None

    def __init__(self, store: Store, run_id: int, *, complete: Callable[[Handed], str],
                 on_done: Callable[[Any], None],
                 retrying: Callable[[Callable[[], bool]], bool] = lambda fn: fn()) -> None:
        super().__init__(store, run_id)
        self._complete = complete
        self._on_done = on_done
        self._retrying = retrying
        self.marked_finished = False

    def start(self) -> None:
        self._open_writer()

    def finish(self, status: RunStatus | None) -> None:
        self.flush()
        if status == "finished":
            self.marked_finished = self._retrying(self.run.finish_if_done)

    def _write(self, batch: list[Handed]) -> None:
        for handed in batch:
            if self._complete(handed) == "stored":
                self.counts.stored += 1
            else:
                self.counts.duplicates += 1
            self._on_done(handed.item)
