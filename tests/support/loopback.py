"""Loopback servers for tests: serve an aiohttp application on 127.0.0.1 (a free port)
from a daemon thread, for tests that drive the CLI (which runs its own event loop), and
the refusals of strict real servers (llama-cpp-python 0.3, vLLM)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web


@contextmanager
def serve_in_thread(app: web.Application, **runner_options) -> Iterator[str]:
    """Yields the base URL ``http://127.0.0.1:PORT/v1``; stops the server on exit.
    ``runner_options`` go to ``web.AppRunner`` (``auto_decompress=False``: the handler
    reads request bodies as they came over the wire)."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, handle_signals=False, **runner_options)
    ready = threading.Event()
    port: list[int] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port.append(runner.addresses[0][1])
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def serve_fixture(path: Path, *, status: int = 200,
                        seen: list[dict] | None = None) -> tuple[web.AppRunner, str]:
    """Serve a recorded reply (``.sse``: a stream, else JSON) to every chat request, in
    the running event loop; the runner (to clean up) and the base URL.  ``seen`` collects
    the request bodies."""
    raw = path.read_bytes()
    kind = "text/event-stream" if path.name.endswith(".sse") else "application/json"

    async def chat(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(await request.json())
        return web.Response(body=raw, content_type=kind, status=status)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/v1"


def strict_refusal(messages: list[dict]) -> tuple[int, str] | None:
    """The first message llama-cpp-python 0.3 or vLLM would refuse, with its status and message."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            if not isinstance(m.get("content"), str):  # llama-cpp-python (pydantic schema)
                return 500, (f"[{{'type': 'string_type', 'loc': ('body', 'messages', {i}, "
                             "'typed-dict', 'content'), 'msg': 'Input should be a valid string'}]")
            if not m["content"] and not m.get("tool_calls"):  # vLLM
                return 400, f"Invalid assistant message: role='assistant' content=None (message {i})"
            if "reasoning_content" in m:
                return 400, "messages.reasoning_content: Extra inputs are not permitted"
        if m.get("role") == "tool" and not isinstance(m.get("content"), str):
            return 500, "tool content: Input should be a valid string"
    return None
