"""The recorder in a process of its own, so the relay's process only relays.

Judging and storing an exchange costs about as much CPU as relaying it; in one process
the two share one interpreter lock, so every judged reply delayed the next bytes. Here
the relay's process does nothing after a reply has been sent but hand the raw exchange
(the bytes it already holds) to a bounded :class:`multiprocessing.Queue` with
``put_nowait``: a full queue drops the exchange and counts it, the client never waits.
Exchanges go over in batches (up to ``BATCH`` of them, or what ``FLUSH_S`` seconds
gathered), which halves what the hand-off costs the relay per exchange (measured: 111
against 56 microseconds of CPU, most of it waking the queue's feeder thread); replies
are never delayed by it, only their records.
The child process builds the usual :class:`~agent_eval.proxy.recorder.Recorder` from a
picklable :class:`RecorderConfig` (it opens its own store connection), so every promise
of ``recorder.py`` holds unchanged: the bounded queue, the journal while the store is
down, the counted losses.  Its counters come back through shared memory for the status
page and the exit line.

The child ignores SIGINT, SIGTERM and SIGHUP (:data:`STOPPING`): Ctrl-C, a closed
terminal, ``kill -TERM -PGID`` from systemd or ``timeout`` reach the whole process group,
and a child that died of them lost every session it held open.  Only the parent decides:
it stops the child with a sentinel on the queue once the relay has stopped (so the
exchanges of the last answers are in), after which the child drains, closes every open
session and writes them, like :meth:`Recorder.stop`.  A child whose parent died does
the same; only SIGKILL (or an out-of-memory kill) can stop it short, and the CLI then
says so and marks the run ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue
import signal
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_eval.proxy.relay import Exchange
from agent_eval.wire import PROTOCOLS

if TYPE_CHECKING:
    from agent_eval.proxy.otel import TracedStore
    from agent_eval.proxy.recorder import Recorder
    from agent_eval.store import Store

STATS = ("run_id", "open_sessions", "stored_sessions", "stored_turns", "journaled_sessions",
         "lost_turns", "unparseable_requests", "store_errors", "journal_errors",
         "pruned_request_texts", "truncations", "parity_twins", "parity_skipped",
         *(f"{kind}_{name}" for name in PROTOCOLS for kind in ("recorded", "not_recorded")))
"""The recorder's counters the child publishes (``Recorder.status`` keys)."""
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals a terminal or a service manager sends to stop the proxy: the parent stops
on each, the child ignores them all."""
_NONE = -1  # run_id not known yet (the store was down when the run was to be created)
_PUBLISH_S = 0.25
BATCH = 32
FLUSH_S = 0.02


@dataclass(frozen=True)
class RecorderConfig:
    """Everything the child needs to build its Recorder: paths and values, no objects."""

    db: str | None
    allowlist_path: str
    upstream: str
    agent: str | None = None  # with an agent CLI's configuration: the agent fixed by --agent
    label: str | None = None
    idle_s: float = 600.0
    journal: str = "agent-eval-proxy.journal"
    protocols_path: str | None = None
    otel_endpoint: str | None = None
    keep_requests_days: int = 0
    stack_notes: tuple[tuple[str, str], ...] = ()  # --stack-parser, --stack-template
    stream_parity: bool = False  # --stream-parity


class RecorderProcess:
    """A :class:`Recorder` served by a child process; the same ``start``, ``submit``,
    ``status``, ``stop`` and ``run_id`` as the in-process one."""

    def __init__(self, config: RecorderConfig, *, queue_size: int = 1024) -> None:
        """``queue_size``: exchanges handed over and not yet taken by the child, at most
        (counted in batches of up to ``BATCH``, so never more than that many)."""
        ctx = multiprocessing.get_context("spawn")  # never fork a process running a loop
        self.config = config
        self.queue: Any = ctx.Queue(maxsize=max(1, queue_size // BATCH))
        self._pending: list[Exchange] = []
        self._lock = threading.Lock()  # stop() flushes from another thread than submit()
        self._timer: asyncio.TimerHandle | None = None
        self._stats: Any = ctx.Array("q", [_NONE] + [0] * (len(STATS) - 1), lock=False)
        self._ready = ctx.Event()
        self._process = ctx.Process(target=serve, name="agent-eval-proxy-recorder",
                                    args=(config, self.queue, self._stats, self._ready,
                                          os.getpid()))
        self.dropped = 0

    @property
    def run_id(self) -> int | None:
        value = self._stats[0]
        return None if value == _NONE else int(value)

    def start(self, timeout: float = 120.0) -> None:
        """Start the child and wait until it has opened the store (or found it down);
        a second call does nothing, like a second :meth:`stop`."""
        if self._process.pid is not None:
            return
        from agent_eval.errors import AgentEvalError

        self._process.start()
        while not self._ready.wait(0.2):
            timeout -= 0.2
            if not self._process.is_alive() or timeout <= 0:
                self._process.kill()
                raise AgentEvalError("the proxy's recorder process could not start (its "
                                     "error is above); nothing was relayed")

    def submit(self, exchange: Exchange) -> bool:
        """Hand an exchange over without waiting; False (and counted as lost) when the
        queue is full.  On an event loop the batch goes within ``FLUSH_S`` seconds;
        without one (a test, a script) at once."""
        if self.queue.full():
            self.dropped += 1
            return False
        with self._lock:
            self._pending.append(exchange)
            if len(self._pending) < BATCH and self._timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    loop = None
                if loop is not None:
                    self._timer = loop.call_later(FLUSH_S, self.flush)
                    return True
        if len(self._pending) >= BATCH or self._timer is None:
            self.flush()
        return True

    def flush(self) -> None:
        """Put the gathered exchanges on the queue as one batch (full: dropped, counted)."""
        with self._lock:
            batch, self._pending = self._pending, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if batch:
            try:
                self.queue.put_nowait(batch)
            except queue.Full:
                self.dropped += len(batch)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(zip(STATS, self._stats[:], strict=True))
        out["run_id"] = self.run_id
        out["lost_turns"] += self.dropped
        with contextlib.suppress(NotImplementedError):  # qsize is missing on macOS
            out["queued"] = self.queue.qsize()
        return out

    def stop(self, timeout: float = 120.0) -> None:
        """Drain the queue, close and write every open session; wait for the child."""
        if self._process.pid is None or self._process.exitcode is not None:
            return
        self.flush()
        self.queue.put(None)
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()  # it ignores SIGTERM (STOPPING)
            self._process.join(5)

    @property
    def exitcode(self) -> int | None:
        """The child's exit code once it ended (negative: the signal that killed it)."""
        return self._process.exitcode


def serve(config: RecorderConfig, source: Any, stats: Any, ready: Any, parent: int) -> None:
    """The child: forward exchanges to a Recorder until the sentinel (or an orphaning)."""
    for sig in STOPPING:
        signal.signal(sig, signal.SIG_IGN)
    recorder = build_recorder(config)
    recorder.start()

    def publish() -> None:
        status = recorder.status()
        for i, key in enumerate(STATS):
            value = status.get(key)
            stats[i] = _NONE if value is None else int(value)

    publish()
    ready.set()
    try:
        while True:
            try:
                item = source.get(timeout=_PUBLISH_S)
            except queue.Empty:
                publish()
                if os.getppid() != parent:  # the relay died: keep what we have
                    break
                continue
            if item is None:
                break
            for exchange in item:
                recorder.queue.put(exchange)  # waits for the writer; the parent's is bounded
    finally:
        recorder.stop()
        recorder.store.close()
        publish()


def build_recorder(config: RecorderConfig) -> Recorder:
    """The Recorder a config describes (the CLI validated the files and --db already)."""
    from agent_eval.proxy.recorder import Recorder
    from agent_eval.scenario.bundled import load_policy
    from agent_eval.store import open_store

    protocols = None
    if config.protocols_path is not None:
        from agent_eval.scenario.protocols import load_protocols

        protocols = load_protocols(config.protocols_path)
    store: Store | TracedStore = open_store(config.db)
    if config.otel_endpoint is not None:
        from agent_eval.proxy.otel import TracedStore

        store = TracedStore(store, config.otel_endpoint)
    return Recorder(store, load_policy(config.allowlist_path, config.agent), upstream=config.upstream,
                    label=config.label, allowlist_path=config.allowlist_path,
                    idle_s=config.idle_s, journal=config.journal, protocols=protocols,
                    protocols_path=config.protocols_path,
                    keep_requests_days=config.keep_requests_days,
                    stack_notes=dict(config.stack_notes), stream_parity=config.stream_parity)
