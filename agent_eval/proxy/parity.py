"""Stream parity through the proxy (``proxy --stream-parity``): the whole twin of a
streamed request, asked of the upstream after the user's stream ended, off the user's path.

The relay never changes, blocks or delays a byte of the user's traffic, so parity cannot
be judged the way ``run`` judges it (both halves played by the harness).  Instead, once a
streamed Chat Completions turn has been relayed whole and recorded, the recorder asks the
upstream the same request again with ``stream: false`` (and no ``stream_options``), from
its own process, and reads the pair as a run reads it (AE510,
``stack_reading.StackReading.parity``): a streamed reply that differs from the whole one
is the serving stack's streaming path (its incremental tool parser, speculative decoding),
kept on the user's session as a stack fault that never ends it.

The twin is a side request: sent straight to the upstream (it never passes the relay, so
it is never recorded as anyone's session), tagged ``X-Agent-Eval-Side-Request:
stream-parity`` for the server's logs, without the user's credentials (the recorder
never holds them: an upstream that wants a key answers 401, and the turn's parity is left
unjudged, counted).  Only a request whose decoding repeats itself is twinned
(``temperature: 0``, or a ``seed``); others are counted as skipped.  At most one twin is
in flight: a turn that ends while one is still answered is skipped and counted, so the
proxy adds at most one request at a time to the server's load.  What it costs: one whole
generation on the upstream per twinned turn (about the tokens of the user's reply again),
competing with the user's own requests for the server's batch; nothing on the relay.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("agent_eval.proxy")

SIDE_HEADER = "X-Agent-Eval-Side-Request"
SIDE_VALUE = "stream-parity"
TWIN_TIMEOUT_S = 600.0
MAX_TWIN_BYTES = 16 * 1024 * 1024

__all__ = ["ParityAnswer", "ParityTwins", "SIDE_HEADER", "repeats_itself", "twin_body"]


@dataclass(frozen=True)
class ParityAnswer:
    """The upstream's answer to one twin: the session and turn it is the twin of, its
    status (0: no answer) and body."""

    key: str
    turn_index: int
    status: int
    body: bytes


def repeats_itself(request: dict[str, Any]) -> bool:
    """The request's decoding repeats itself: ``temperature: 0`` or a ``seed``."""
    temperature = request.get("temperature")
    seed = request.get("seed")
    return (isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
            and temperature == 0) or (isinstance(seed, int) and not isinstance(seed, bool))


def twin_body(request: dict[str, Any]) -> bytes:
    """The whole twin of a streamed request: the same body, ``stream: false``."""
    twin = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    twin["stream"] = False
    return json.dumps(twin).encode()


class ParityTwins:
    """One thread asking the upstream the twins, one at a time; each answer handed to
    ``deliver`` (the recorder puts it on its own queue)."""

    def __init__(self, origin: str, deliver: Callable[[ParityAnswer], None], *,
                 timeout_s: float = TWIN_TIMEOUT_S) -> None:
        self.origin = origin.rstrip("/")
        self.deliver = deliver
        self.timeout_s = timeout_s
        self.sent = 0
        self._queue: queue.Queue[tuple[str, int, str, bytes] | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._thread = threading.Thread(target=self._work, name="agent-eval-parity",
                                        daemon=True)
        self._thread.start()

    @property
    def ready(self) -> bool:
        """No twin in flight: the next may be asked."""
        return self._idle.is_set()

    def ask(self, key: str, turn_index: int, path: str, body: bytes) -> None:
        """Send one twin (only when :attr:`ready`: the recorder asks first)."""
        self._idle.clear()
        self._queue.put((key, turn_index, path, body))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread once the twin in flight, if any, is answered (or
        ``timeout`` passed: its turn stays unjudged)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no twin is in flight (tests, and the recorder's drain)."""
        return self._idle.wait(timeout)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, turn_index, path, body = item
            try:
                self.deliver(ParityAnswer(key, turn_index, *self._send(path, body)))
            except Exception:  # a twin must never stop the recorder
                log.exception("a stream-parity twin failed")
            finally:
                self._idle.set()

    def _send(self, path: str, body: bytes) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.origin + path, data=body, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json",
                     SIDE_HEADER: SIDE_VALUE})
        self.sent += 1
        try:
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                return answer.status, answer.read(MAX_TWIN_BYTES)
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except Exception:  # unreachable, timed out: no answer
            return 0, b""
