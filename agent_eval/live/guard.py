"""The guard on every reply the client reads: a total deadline, a size cap, UTF-8 repair.

A model server can answer forever (a degenerate model streaming without end never idles
long enough for a read timeout), answer gigabytes, or send bytes that are not UTF-8.
:class:`GuardedTransport` wraps the HTTP transport so every response body is read through
:class:`GuardedStream` (cap + repair); :func:`within_deadline` bounds one attempt in all.
Both raise exceptions the client sorts as final server faults (``client.classify_fault``).
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar, cast

try:  # the openai SDK ships its HTTP stack as ``httpx2`` from 3.x on
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx itself
    import httpx  # type: ignore[no-redef]


T = TypeVar("T")

class ReplyTooLarge(Exception):
    """The reply passed the target's ``max_reply_bytes`` (raised while it is read)."""


class DeadlinePassed(Exception):
    """The reply was still coming when the target's ``deadline_s`` passed."""


def hostile_cause(exc: BaseException) -> BaseException | None:
    """A size-cap or deadline fault anywhere in ``exc``'s chain (the SDK wraps what the
    transport raises in ``APIConnectionError``)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ReplyTooLarge | DeadlinePassed):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class GuardedStream(httpx.AsyncByteStream):
    """A response body read through a size cap, with invalid UTF-8 replaced by U+FFFD.

    Every body this client reads is JSON or server-sent events, both UTF-8 text, so the
    repair never changes a valid body; a split multi-byte character is kept across reads.
    """

    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int):
        self._inner = inner
        self._max_bytes = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max_bytes:
                raise ReplyTooLarge(
                    f"the server sent more than {self._max_bytes} bytes for one reply; "
                    "raise max_reply_bytes (--max-reply-bytes) if replies this long are real"
                )
            yield decoder.decode(chunk).encode()
        if tail := decoder.decode(b"", final=True):
            yield tail.encode()

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """The HTTP transport with every response body read as a :class:`GuardedStream`."""

    def __init__(self, inner: httpx.AsyncBaseTransport, max_bytes: int):
        self._inner = inner
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        # an async transport's body is an async stream (the sync half of the union is
        # for httpx's sync transports)
        stream = cast(httpx.AsyncByteStream, response.stream)
        response.stream = GuardedStream(stream, self._max_bytes)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def within_deadline(attempt: Awaitable[T], deadline_s: float) -> T:
    """Await ``attempt``, cut off once ``deadline_s`` has passed in all: the read timeout
    alone never ends a stream that keeps sending."""
    try:
        async with asyncio.timeout(deadline_s) as scope:
            return await attempt
    except TimeoutError as exc:
        if not scope.expired():
            raise
        raise DeadlinePassed(
            f"the reply was still coming after {deadline_s:g} s; raise deadline_s "
            "(--deadline) if replies this slow are real"
        ) from exc
