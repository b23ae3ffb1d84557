"""``agent_eval.proxy``: judge a real agent stack's traffic live, in front of its model server.

The stack points its base URL at the proxy and changes nothing else.  Three parts, each
in its own module:

- ``relay.py``: the request path (aiohttp).  Every request and answer passes unchanged,
  streamed chunk by chunk; nothing is judged or stored there.
- ``recorder.py``: off the request path.  A bounded queue and one writer thread; closed
  sessions go to the store as a run of kind ``proxy``, or to a local journal while the
  store is down.  ``recorder_process.py`` runs it in a process of its own (what the CLI does), so
  the relay's process only relays; ``otel.py`` optionally exports stored sessions as
  OpenTelemetry spans.
- ``sessions.py`` and ``linking.py`` (pure): which conversation a request continues, and
  each tool call of each reply judged by the policy engine, built into the same
  ``SessionRecord`` a live run or an import builds.

docs/proxy.md explains how to put it in front of vLLM, llama.cpp and SGLang, the session
rule and its limits, and what is stored and what never is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent_eval.proxy.recorder import Recorder
from agent_eval.proxy.relay import CLIENT_TIMEOUT_S, STATUS_PATH, Exchange, Relay, start_relay

__all__ = ["STATUS_PATH", "Exchange", "ProxyServer", "Recorder", "Relay", "running_proxy"]


@dataclass
class ProxyServer:
    """A running proxy: where clients connect, and its two halves."""

    base_url: str
    port: int
    relay: Relay
    recorder: Recorder


@contextlib.asynccontextmanager
async def running_proxy(recorder: Recorder, upstream: str, *, host: str = "127.0.0.1",
                        port: int = 0, client_timeout_s: float = CLIENT_TIMEOUT_S,
                        ) -> AsyncIterator[ProxyServer]:
    """Serve the proxy until the block ends; then drain the recorder (every open session
    is closed and written, or journaled).  ``client_timeout_s``: how long a client may
    take to send a request's headers, and again its body (``relay.py``)."""
    relay = Relay(upstream, recorder.submit, recorder.status, client_timeout_s=client_timeout_s)
    recorder.start()
    runner = None
    try:
        runner, bound = await start_relay(relay, host, port)
        shown = f"[{host}]" if ":" in host else host
        path = relay.base_path or ""
        yield ProxyServer(f"http://{shown}:{bound}{path}", bound, relay, recorder)
    finally:
        if runner is not None:
            await runner.cleanup()
        await asyncio.to_thread(recorder.stop)
