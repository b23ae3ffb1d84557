"""Shared-server manners: how hard one process presses on one model server.

Several targets of a run (two sampling settings of one model, a nightly's model list)
and every ``--concurrency`` worker of each often send to one server.  Each target's
``concurrency`` bounds only that target; the server sees the sum.  A :class:`ServerGate`
per server (keyed by base URL, shared by every client of the process on one event loop)
holds the manners that must be counted across them:

- **a cap**: at most ``limit`` requests in flight to the server, never more than the
  largest ``server_limit`` the targets on that server set (no cap when none sets one);
- **backoff**: a 429 or 503 pauses *every* request to that server until its
  ``Retry-After`` (or the client's own backoff) has passed, not only the one retried,
  and halves the limit;
- **adaptive concurrency** (AIMD, as TCP): when a reply's time to first token (or, not
  streamed, its latency) climbs past ``slow_factor`` times the fastest seen, or vLLM's
  ``/metrics`` shows requests waiting in its queue (``vllm:num_requests_waiting``), the
  limit is halved; every ``limit`` replies that come back fast raise it by one, up to the
  cap (or, with none, until it is lifted), so it is restored slowly.  Signals from
  requests sent before the last cut are ignored: they measure the load before it.

Across processes (``agent-eval worker`` on several machines) each process keeps its own
gate: give each target ``server_limit`` = the server's batch size divided by the number
of workers (docs/servers.md, "One server, many clients").  A gate never fails a request:
it only makes it wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

SLOW_FACTOR = 3.0  # a reply this many times slower than the fastest seen means a queue
SLOW_SLACK_S = 0.25  # ... and at least this much slower (fast servers jitter)
METRICS_EVERY_S = 2.0  # how often /metrics is read while requests are in flight
MAX_PAUSE_S = 60.0  # longest a Retry-After is honoured

_WAITING = re.compile(r"^vllm:num_requests_waiting(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)


def requests_waiting(metrics_text: str) -> float | None:
    """vLLM's ``num_requests_waiting`` summed over its models, from Prometheus text;
    ``None`` when the server does not export it (pure)."""
    values = [float(v) for v in _WAITING.findall(metrics_text)]
    return sum(values) if values else None


@dataclass
class ServerGate:
    """The manners of one process toward one server (see the module docstring).

    ``limit`` is ``None`` while nothing has called for one and no cap is set.
    ``metrics_url`` is the server's Prometheus ``/metrics``; ``None`` once it proved to
    have no ``num_requests_waiting``.
    """

    cap: int | None = None
    adaptive: bool = True
    metrics_url: str | None = None
    limit: int | None = None
    in_flight: int = 0
    peak: int = 0  # most requests in flight at once before the first cut
    cuts: int = 0  # every halving, for tests and the closing line
    paused_until: float = 0.0
    fastest_s: float | None = None
    _epoch: int = 0
    _good: int = 0
    _queued: int = 0  # requests waiting for a slot
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _poller: asyncio.Task | None = None

    def __post_init__(self) -> None:
        self.limit = self.cap

    def set_cap(self, cap: int | None) -> None:
        """Raise the cap to ``cap`` (the largest of the targets sharing the server)."""
        if cap is not None and (self.cap is None or cap > self.cap):
            grow = self.limit is None or self.limit == self.cap
            self.cap = cap
            if grow:
                self.limit = cap

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one of the server's slots; yields the epoch to hand back to :meth:`observe`.

        With room and nobody waiting (the run's usual case) the slot is taken at once;
        otherwise in turn, under the condition, woken when a slot is handed back."""
        if self._queued or not self._room():
            epoch = await self._wait_for_slot()
        else:
            epoch = self._take()
        self._start_poller()
        try:
            yield epoch
        finally:
            self.in_flight -= 1
            if self._queued:
                async with self._changed:
                    self._changed.notify_all()

    def _room(self) -> bool:
        return self.paused_until <= time.monotonic() and (
            self.limit is None or self.in_flight < self.limit)

    def _take(self) -> int:
        self.in_flight += 1
        if not self.cuts:
            self.peak = max(self.peak, self.in_flight)
        return self._epoch

    async def _wait_for_slot(self) -> int:
        self._queued += 1
        try:
            async with self._changed:
                while True:
                    wait = self.paused_until - time.monotonic()
                    if wait > 0:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._changed.wait(), wait)
                        continue
                    if self.limit is None or self.in_flight < self.limit:
                        return self._take()
                    await self._changed.wait()
        finally:
            self._queued -= 1

    def observe(self, epoch: int, seconds: float | None) -> None:
        """A reply came back; ``seconds`` is its time to first token (``None`` when not
        streamed: then it only counts toward restoring the limit after a cut)."""
        if epoch != self._epoch:
            return
        if self.adaptive and seconds is not None:
            if self.fastest_s is None or seconds < self.fastest_s:
                self.fastest_s = seconds
            slow = max(self.fastest_s * SLOW_FACTOR, self.fastest_s + SLOW_SLACK_S)
            if seconds > slow:
                self.cut()
                return
        self._good += 1
        if self.limit is not None and self._good >= self.limit:
            self._good = 0
            self.limit += 1
            if self.cap is None and self.limit > max(self.peak, 1):
                self.limit = None  # restored past the demand seen: no limit again
            elif self.cap is not None:
                self.limit = min(self.limit, self.cap)
            self._notify()

    def busy(self, retry_after_s: float | None, backoff_s: float) -> None:
        """The server answered 429 or 503: every request to it waits, and the limit halves."""
        pause = min(max(retry_after_s or 0.0, backoff_s), MAX_PAUSE_S)
        self.paused_until = max(self.paused_until, time.monotonic() + pause)
        self.cut()

    def cut(self) -> None:
        """Halve the limit (multiplicative decrease), at least 1; a new epoch begins."""
        base = self.in_flight if self.limit is None else min(self.limit, max(self.in_flight, 1))
        self.limit = max(1, base // 2)
        self.cuts += 1
        self._good = 0
        self._epoch += 1
        self._notify()

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._changed:
                self._changed.notify_all()

        with contextlib.suppress(RuntimeError):  # no running loop: nobody waits
            asyncio.get_running_loop().create_task(wake())

    def _start_poller(self) -> None:
        if self.adaptive and self.metrics_url is not None and self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll_metrics())

    async def _poll_metrics(self) -> None:
        """Read ``/metrics`` while requests are in flight; requests waiting in the server's
        queue cut the limit once per read.  A server without the metric is left alone."""
        try:
            while self.metrics_url is not None and self.in_flight:
                await asyncio.sleep(METRICS_EVERY_S)
                text = await asyncio.to_thread(read_metrics, self.metrics_url)
                waiting = requests_waiting(text) if text is not None else None
                if waiting is None:
                    self.metrics_url = None  # not vLLM: time to first token is the signal
                elif waiting > 0 and self.in_flight:
                    self.cut()
        finally:
            self._poller = None


# One registry per event loop: asyncio primitives belong to the loop they run on, and a
# gate must outlive the clients of one target (it is shared by all of them).
_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ServerGate]] = (
    weakref.WeakKeyDictionary())


def read_metrics(url: str) -> str | None:
    """The Prometheus text at ``url``, or ``None`` when the server has none (any error)."""
    try:
        with urllib.request.urlopen(url, timeout=2.0) as answer:  # the target's own URL
            return answer.read(4 * 1024 * 1024).decode("utf-8", "replace")
    except (OSError, ValueError, urllib.error.URLError):
        return None


def metrics_url(base_url: str) -> str:
    """Where an OpenAI-compatible server keeps ``/metrics``: beside ``/v1``."""
    root = base_url.rstrip("/")
    return (root[: -len("/v1")] if root.endswith("/v1") else root) + "/metrics"


def server_key(base_url: str) -> str:
    """Targets that differ only in a trailing slash or the case of the host share a gate."""
    return base_url.rstrip("/").lower()


def server_gate(base_url: str, *, cap: int | None, adaptive: bool) -> ServerGate:
    """The gate of the server at ``base_url`` on the running loop, made on first use."""
    gates = _GATES.setdefault(asyncio.get_running_loop(), {})
    key = server_key(base_url)
    gate = gates.get(key)
    if gate is None:
        gate = gates[key] = ServerGate(cap=cap, adaptive=adaptive,
                                       metrics_url=metrics_url(base_url))
    else:
        gate.set_cap(cap)
        gate.adaptive = gate.adaptive and adaptive
    return gate
