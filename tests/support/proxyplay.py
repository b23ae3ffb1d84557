"""Helpers for the proxy tests: the proxy on its own event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_eval.policy import load_allowlist
from agent_eval.proxy import Recorder, running_proxy

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released): an unreachable upstream."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proxied:
    base_url: str
    recorder: Recorder


@contextmanager
def proxy_in_thread(upstream: str, store, tmp_path: Path, *, client_timeout_s: float = 60.0,
                    policy=None, **recorder_options) -> Iterator[Proxied]:
    """The proxy in front of ``upstream``, recording into ``store``; on exit it stops and
    the recorder has written (or journaled) every session.  ``policy``: what judges the
    calls (default: the ralf allow-list)."""
    recorder_options.setdefault("journal", tmp_path / "proxy.journal")
    recorder = Recorder(store, load_allowlist(ALLOWLIST) if policy is None else policy,
                        upstream=upstream, **recorder_options)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    found: list = []

    async def serve() -> None:
        try:
            async with running_proxy(recorder, upstream,
                                     client_timeout_s=client_timeout_s) as server:
                found.append(server.base_url)
                ready.set()
                await stop.wait()
        except BaseException as exc:  # handed to the test's thread
            found.append(exc)
            ready.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    ready.wait(30)
    if isinstance(found[0], BaseException):
        raise found[0]
    try:
        yield Proxied(found[0], recorder)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()


def wait_for(check, what: str, bound_s: float = 120.0):
    """Poll ``check`` until it returns a true value (returned) or the bound passes."""
    deadline = time.monotonic() + bound_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what} within {bound_s:g} s")
        time.sleep(0.05)
