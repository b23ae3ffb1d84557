"""The request path: every request relayed to the upstream and its answer relayed back,
unchanged, chunk by chunk as it arrives.

Promises (tests/proxy/test_relay.py holds them):

- bodies, status codes and headers pass untouched, except the hop-by-hop headers
  (RFC 9110 section 7.6.1: the fixed ones and those the ``Connection`` header names) and
  ``Host``; compressed bodies stay compressed both ways
  (``auto_decompress=False`` on the client session and on the server, so a gzip request
  body reaches the upstream as the client sent it); ``Authorization`` is forwarded and
  never kept;
- a request body is sent to the upstream as each piece arrives, never gathered first
  (:class:`RequestBody`), and a streamed answer is written to the client as each piece
  arrives, never buffered: the relay's memory per request is bounded by what it keeps
  for the recorder (:data:`CAPTURE_LIMIT` of the request and of the answer), not by
  the bodies' size;
- nothing is judged or stored here: once the last byte is written the exchange is handed
  to the recorder's queue with ``put_nowait`` (a full queue drops the record and counts
  it, it never waits);
- an upstream that cannot be reached gets the client a 502 naming the upstream (without
  the user and password an ``--upstream`` URL may carry, nor the values of its query
  parameters named like credentials: :func:`public_url`); one that
  dies mid-answer gets the client's connection closed the same way (an incomplete body,
  never a clean end the client could mistake for a whole answer);
- a client gets ``client_timeout_s`` seconds to send a request's headers (from the
  connection's start or the end of the previous answer; aiohttp's keep-alive timer) and
  as long again for its body (then a 408 and the connection closed at once: no lingering
  read of the rest), so connections that trickle bytes cannot hold the relay's memory
  for ever;
- a client that goes away cancels the handler (``handler_cancellation``), which closes
  the upstream request at once, so the server stops decoding.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import unquote_plus

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, MultiMapping
from yarl import URL

from agent_eval.wire import protocol_of

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})
SESSION_HEADERS = (
    "x-agent-eval-session", "x-claude-code-session-id", "thread-id", "x-session-id",
    "session-id", "x-codex-parent-thread-id", "x-parent-session-id", "x-agent-eval-agent",
)
"""Headers that name a conversation or its parent, strongest first (the override leads;
docs/clients.md says which CLI sends which), and the agent whose rules judge it
(``x-agent-eval-agent``: an agent of the CLI configuration given as ``--allowlist``).  Only these request headers reach the
recorder; nothing else of the request's headers is kept."""
CAPTURE_LIMIT = 64 * 1024 * 1024
"""Bytes of one request, and of one answer, kept for judging, and the most a compressed
body is inflated to when the recorder reads it; the upstream and the client always get
all of it, as sent.  A request or answer past it is relayed whole and not judged."""
CLIENT_TIMEOUT_S = 60.0
"""Default seconds a client has to send a request's headers, and again its body."""
STATUS_PATH = "/_agent_eval/status"

Outcome = Literal["complete", "client-abort", "upstream-error"]
"""How the relay ended: ``complete`` the upstream's answer ended and all of it reached
the client; ``client-abort`` the client went away first; ``upstream-error`` the upstream
could not be reached or died mid-answer.  ``truncated`` (a stream that ended cleanly
without its end marker) is found later by the parser."""


@dataclass(slots=True)
class Exchange:
    """One relayed request and its answer, as the recorder receives it."""

    path: str
    request_body: bytes | bytearray  # the first CAPTURE_LIMIT bytes, as sent
    session_headers: dict[str, str]
    started_at: datetime
    request_encoding: str = ""  # the request's Content-Encoding: its body is kept as sent
    request_captured_all: bool = True  # False: the body passed CAPTURE_LIMIT (not recorded)
    status: int = 0
    content_type: str = ""
    content_encoding: str = ""
    response_body: bytearray = field(default_factory=bytearray)
    captured_all: bool = True
    outcome: Outcome = "complete"
    error: str | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    user_agent: str = ""  # the client's User-Agent: the agent CLI release it names


class RequestBody:
    """A request's body as it arrives from the client, handed to the upstream piece by
    piece (never gathered: the relay holds one piece at a time, not the body), its first
    :data:`CAPTURE_LIMIT` bytes kept for the recorder when the path is recorded (past
    that, ``request_captured_all`` is False and the recorder counts the exchange as not
    recorded).  The whole body must arrive within ``timeout_s`` seconds; otherwise
    ``timed_out`` is set and the upload fails, which the relay answers with a 408."""

    def __init__(self, request: web.Request, exchange: Exchange | None,
                 timeout_s: float) -> None:
        self.request = request
        self.exchange = exchange
        self.timeout_s = timeout_s
        self.timed_out = False
        self.client_failed = False

    async def pieces(self) -> AsyncIterator[bytes]:
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    piece = await self.request.content.readany()
            except TimeoutError:
                self.timed_out = True
                raise
            except (OSError, aiohttp.ClientError, web.HTTPException):
                self.client_failed = True
                raise
            if not piece:
                return
            ex = self.exchange
            if ex is not None and ex.request_captured_all:
                if len(ex.request_body) + len(piece) <= CAPTURE_LIMIT:
                    ex.request_body += piece
                else:
                    ex.request_captured_all = False
                    ex.request_body = bytearray()  # unread anyway: free it now
            yield piece


    async def drain(self) -> None:
        """Read what is left of the body (the upstream could not take it), keeping its
        first bytes as :meth:`pieces` does; a client that stalls or goes away ends it."""
        try:
            async for _ in self.pieces():
                pass
        except (TimeoutError, OSError, aiohttp.ClientError, web.HTTPException):
            pass


@dataclass(slots=True)
class RelayStats:
    relayed: int = 0
    recorded: int = 0
    dropped: int = 0  # exchanges the full queue could not take
    upstream_errors: int = 0
    client_aborts: int = 0
    client_timeouts: int = 0  # requests whose body did not arrive in time (a 408)


class Relay:
    """The aiohttp side: one upstream, one client session, one hand-off callback.

    ``submit`` is called on the event loop with each finished exchange on a recorded path
    and must not block (``Recorder.submit`` is a ``put_nowait``).
    """

    def __init__(self, upstream: str, submit: Callable[[Exchange], bool],
                 status: Callable[[], dict] | None = None, *,
                 client_timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        self.upstream = public_url(upstream.rstrip("/"))
        parsed = URL(self.upstream)
        self.base_path = parsed.path.rstrip("/")
        self.origin = str(parsed.origin())
        self.submit = submit
        self.status = status
        self.client_timeout_s = client_timeout_s
        self.stats = RelayStats()
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024 * 1024 * 1024)
        app.router.add_get(STATUS_PATH, self.show_status)
        app.router.add_route("*", "/{tail:.*}", self.relay)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, app: web.Application) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        )

    async def _close(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def show_status(self, request: web.Request) -> web.Response:
        body = {"relayed": self.stats.relayed, "dropped": self.stats.dropped,
                "upstream_errors": self.stats.upstream_errors,
                "client_aborts": self.stats.client_aborts,
                "client_timeouts": self.stats.client_timeouts,
                "loop": type(asyncio.get_running_loop()).__module__.partition(".")[0]}
        if self.status is not None:
            body.update(self.status())
        return web.json_response(body)

    def upstream_url(self, request: web.Request) -> str:
        """Where the request goes: the proxy mirrors the upstream's paths, so with an
        upstream of ``http://h:8000/v1`` the client's ``/v1/models`` goes to
        ``http://h:8000/v1/models`` and ``/health`` to ``http://h:8000/health``."""
        url = self.origin + request.rel_url.raw_path
        query = request.rel_url.raw_query_string
        return url + ("?" + query if query else "")

    async def relay(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        hop = hop_by_hop(request.headers)
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in hop)
        recorded = request.method == "POST" and protocol_of(request.path) is not None
        exchange = Exchange(
            path=request.path, request_body=bytearray(),
            session_headers={h: request.headers[h] for h in SESSION_HEADERS
                             if h in request.headers} if recorded else {},
            started_at=datetime.now(UTC),
            request_encoding=request.headers.get("Content-Encoding", "") if recorded else "",
            user_agent=request.headers.get("User-Agent", "")[:300] if recorded else "",
        )
        body = RequestBody(request, exchange if recorded else None, self.client_timeout_s)
        if request.body_exists and request.content_length is not None:
            headers["Content-Length"] = str(request.content_length)  # the same framing
        start = time.perf_counter()
        response: web.StreamResponse | None = None
        try:
            async with self.session.request(request.method, self.upstream_url(request),
                                            headers=headers,
                                            data=body.pieces() if request.body_exists else None,
                                            allow_redirects=False) as upstream:
                self.stats.relayed += 1
                response = self._response_for(upstream)
                exchange.status = upstream.status
                exchange.content_type = upstream.headers.get("Content-Type", "")
                exchange.content_encoding = upstream.headers.get("Content-Encoding", "")
                await response.prepare(request)
                async for piece in upstream.content.iter_any():
                    if exchange.ttft_s is None:
                        exchange.ttft_s = time.perf_counter() - start
                    await response.write(piece)
                    if recorded:
                        self._capture(exchange, piece)
                await response.write_eof()
        except asyncio.CancelledError:
            exchange.outcome = "client-abort"
            self.stats.client_aborts += 1
            self._finish(exchange, start, recorded)
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            if body.timed_out and response is None:
                self.stats.client_timeouts += 1
                return web.Response(status=408, text="agent-eval proxy: request body not "
                                    f"received within {self.client_timeout_s:g} s\n",
                                    headers={"Connection": "close"})
            if body.client_failed and response is None:  # the client went away mid-body
                exchange.outcome = "client-abort"
                self.stats.client_aborts += 1
                self._finish(exchange, start, recorded)
                _cut(request)
                return web.Response(status=400)
            if isinstance(exc, ConnectionResetError) \
                    and response is not None and not _upstream_failed(exc):
                exchange.outcome = "client-abort"
                self.stats.client_aborts += 1
                self._finish(exchange, start, recorded)
                return response
            exchange.outcome, exchange.error = "upstream-error", _describe(exc)
            if response is None:
                self.stats.relayed += 1
                await body.drain()  # what the upstream never read, for the record
            self.stats.upstream_errors += 1
            self._finish(exchange, start, recorded)
            if response is None:
                return self._bad_gateway(exc)
            _cut(request)  # mid-answer: the client must see an incomplete body
            return response
        self._finish(exchange, start, recorded)
        return response

    def _response_for(self, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        hop = hop_by_hop(upstream.headers)
        for key, value in upstream.headers.items():
            if key.lower() not in hop:
                response.headers.add(key, value)
        if upstream.content_length is not None and "Transfer-Encoding" not in upstream.headers:
            response.content_length = upstream.content_length
        return response

    @staticmethod
    def _capture(exchange: Exchange, piece: bytes) -> None:
        if len(exchange.response_body) + len(piece) <= CAPTURE_LIMIT:
            exchange.response_body += piece
        else:
            exchange.captured_all = False

    def _finish(self, exchange: Exchange, start: float, recorded: bool) -> None:
        exchange.latency_s = time.perf_counter() - start
        if recorded:
            if self.submit(exchange):
                self.stats.recorded += 1
            else:
                self.stats.dropped += 1

    def _bad_gateway(self, exc: BaseException) -> web.Response:
        message = f"agent-eval proxy: upstream {self.upstream} unreachable: {_describe(exc)}"
        body = {"object": "error", "message": message, "type": "BadGateway", "param": None,
                "code": 502, "error": {"message": message, "type": "bad_gateway", "code": 502}}
        return web.Response(status=502, body=json.dumps(body).encode(),
                            content_type="application/json")


def hop_by_hop(headers: MultiMapping[str]) -> frozenset[str]:
    """The headers not to forward (lower case): :data:`HOP_BY_HOP` and every header the
    message's ``Connection`` header names (RFC 9110 section 7.6.1: those are meant for
    this connection only)."""
    named = {token.strip().lower() for value in headers.getall("Connection", ())
             for token in value.split(",")}
    return HOP_BY_HOP | named if named else HOP_BY_HOP


CREDENTIAL_NAME = re.compile(
    r"key|token|secret|pass|pwd|auth|credential|sig|session|cookie|jwt|bearer", re.IGNORECASE)
"""A query parameter whose name matches (anywhere, any case, once percent-decoded) holds a
credential: ``key``, ``api_key``, ``access_token``, ``X-Amz-Signature``, ``password``."""


def public_url(url: str) -> str:
    """``url`` as the proxy shows, sends (in a 502 body) and stores it: without the user
    and password it may carry (``http://user:pass@host/v1``), without its fragment, and
    with the value of every query parameter named like a credential
    (:data:`CREDENTIAL_NAME`: ``?key=K`` becomes ``?key=***``).  Read from the text, so
    it never raises, even on a URL nothing can parse (the CLI refuses those).  The relay
    never sends any of it to the upstream either: it asks the upstream's origin with the
    client's own path and query."""
    url = url.partition("#")[0]
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((i for i in (rest.find(c) for c in "/?") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    shown = scheme + sep + authority.rpartition("@")[2]
    path, q, query = tail.partition("?")
    return shown + path + (q + _hide_credentials(query) if q else "")


def _hide_credentials(query: str) -> str:
    parts = re.split(r"([&;])", query)
    for i in range(0, len(parts), 2):
        name, eq, _ = parts[i].partition("=")
        if eq and CREDENTIAL_NAME.search(unquote_plus(name)):
            parts[i] = name + "=***"
    return "".join(parts)


def _upstream_failed(exc: BaseException) -> bool:
    """A reset raised while reading the upstream, not while writing to the client."""
    return isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]


def _cut(request: web.Request) -> None:
    """Close the client's connection without ending the body cleanly."""
    transport = request.transport
    if transport is not None:
        transport.abort()


async def start_relay(relay: Relay, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``relay`` on ``host:port`` (0: a free port); the runner and the bound port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from agent_eval.errors import ConfigError

        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another port",
                          field="port") from None
    runner = web.AppRunner(relay.app(), access_log=None, handler_cancellation=True,
                           shutdown_timeout=1.0, auto_decompress=False,
                           keepalive_timeout=relay.client_timeout_s, lingering_time=0)
    await runner.setup()
    await web.SockSite(runner, sock, backlog=2048).start()
    return runner, sock.getsockname()[1]
