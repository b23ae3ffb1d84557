"""The relay's event loop: uvloop where it is installed, asyncio's own otherwise.

uvloop (libuv under asyncio's API) spends less CPU per socket read and write than the
default loop, and everything the relay does per request is socket reads and writes, so
on a machine whose cores are shared with the model server and the agents it is the
difference between a proxy that queues requests and one that does not (BENCHMARKS.md,
"proxy on uvloop").  It is a dependency on Linux and macOS; on Windows, or when it cannot
be imported, the proxy runs on asyncio's loop and behaves the same, only slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop's loop when uvloop is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
