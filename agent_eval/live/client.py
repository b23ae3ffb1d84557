"""One chat completion against an OpenAI-compatible server, with timings and faults.

The only module that talks to a model server.  It promises the orchestrator one thing:
``ModelClient.complete`` returns a :class:`Reply` or raises :class:`HarnessFault`; no
openai/httpx exception ever escapes, so a server that crashes, stalls or answers garbage
ends a session as ``status="error"`` and is never counted as a model error.

Retries are ours (the SDK runs with ``max_retries=0``), decided by :func:`classify_fault`:

    retried       connection refused or dropped, timeouts, 429, 500/502/503/504, a 200
                  that is not a chat completion, a stream that ends early, carries an
                  error event or garbled JSON
    not retried   any other 4xx (context too long, model not found, bad request), other 5xx,
                  a reply past the target's ``deadline_s`` (an endless stream) or past its
                  ``max_reply_bytes``: both are the server's fault, and a retry would
                  burn the same time and memory again;
                  and a 500 whose body is word for word the previous attempt's
                  (a request the server cannot take, as llama-cpp-python's 500 on
                  ``content: null``): these raise ``RequestRejected``, whose message
                  starts with :data:`REJECTED`, so the run can stop a target whose
                  first sessions all hit the same one.

Hostile bytes never escape as a crash: bytes that are not UTF-8 are replaced by U+FFFD
before any decoder sees them (the reply is kept and judged), and a body nested too deep
for the JSON decoder is a garbled reply.

The API key is read from an environment variable when the client is created; it is never
stored on a :class:`Target`, in :meth:`Target.settings`, in an error message or a log.
Targets and the targets file live in ``targets.py`` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import ssl
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion

from agent_eval import wire
from agent_eval.errors import (
    ConfigError,
    ContextExceeded,
    HarnessFault,
    RequestRejected,
    ServerUnreachable,
)
from agent_eval.live.context import context_overflow
from agent_eval.live.guard import (
    DeadlinePassed,
    GuardedTransport,
    ReplyTooLarge,
    hostile_cause,
    within_deadline,
)
from agent_eval.live.manners import ServerGate, server_gate
from agent_eval.live.shaping import shape_messages
from agent_eval.live.targets import (
    RunConfig,
    Sampling,
    Target,
    ToolChoice,
    load_run_config,
    load_targets,
    target_from_settings,
    tool_choice_field,
)
from agent_eval.wire.chat import ChatStream
from agent_eval.wire.markup import find_tool_markup, notes_markers, template_markers
from agent_eval.wire.records import ParsedReply, token_figures

try:  # the openai SDK ships its HTTP stack as ``httpx2`` from 3.x on
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs use httpx itself
    import httpx  # type: ignore[no-redef]

__all__ = [  # targets are re-exported: they are what a client is made from
    "REJECTED", "SEED_HEADER", "Fault", "ModelClient", "Reply", "RunConfig", "Sampling", "Target",
    "ToolCallOut", "ToolChoice", "classify_fault", "load_run_config",
    "load_targets", "target_from_settings",
]

SEED_HEADER = "X-Agent-Eval-Seed"
REJECTED = "request rejected: "  # how a RequestRejected message (and the session error) starts

@dataclass
class ToolCallOut:
    """One tool call as the server parsed it.  ``arguments`` is raw text, maybe not JSON."""

    id: str | None
    name: str
    arguments: str


@dataclass
class Reply:
    """One model reply and its cost.  Times in seconds; tokens as the server reported them
    (``None`` when it did not).  ``markup`` holds spans in ``content`` of tool-call markup
    the server did not parse (AE104)."""

    content: str
    reasoning: str
    tool_calls: list[ToolCallOut]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None
    latency_s: float
    ttft_s: float | None
    decode_tps: float | None
    markup: list[tuple[int, int]] = field(default_factory=list)
    request: dict[str, Any] | None = None  # the body as sent (headers apart), for replay
    # where streamed tool-call deltas collided (wire.records.DeltaFolder), for AE508
    stream_faults: list[str] = field(default_factory=list)
    parity: Reply | None = None  # stream parity: the same request's streamed reply (AE510)


FaultKind = Literal[
    "refused", "dropped", "timeout", "status", "garbled", "client", "deadline", "too_large",
]


@dataclass(frozen=True)
class Fault:
    """What went wrong with one attempt, and whether another attempt may help."""

    kind: FaultKind
    reason: str
    detail: str
    retry: bool
    retry_after_s: float | None = None
    status: int | None = None


class _GarbledReply(Exception):
    """A 200 answer that is not a chat completion: no choices, the wrong shape, or a
    stream that closed with neither a finish reason nor a usage chunk."""


_RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
_BUSY_STATUS = frozenset({429, 503})  # the server asks everyone to slow down (manners.py)


def classify_fault(exc: BaseException, timeout_s: float) -> Fault:
    """Sort an exception from one attempt into a :class:`Fault` (pure)."""
    hostile = hostile_cause(exc)
    if isinstance(hostile, ReplyTooLarge):
        return Fault("too_large", "reply too large", str(hostile), False)
    if isinstance(hostile, DeadlinePassed):
        return Fault("deadline", "reply deadline passed", str(hostile), False)
    if isinstance(exc, RecursionError):
        return Fault("garbled", "garbled reply (JSON nested too deep to decode)",
                     "the body nests deeper than the decoder's recursion limit", True)
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return Fault("timeout", f"timeout (no answer within {timeout_s:g} s)", str(exc), True)
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        if isinstance(cause, httpx.ConnectError):
            return Fault("refused", "connection refused", str(cause) or str(exc), True)
        return Fault("dropped", "connection dropped", str(cause or exc), True)
    if isinstance(exc, openai.APIStatusError):
        code, detail = exc.status_code, _server_message(exc)
        if code == 429:
            after = _retry_after(exc.response.headers.get("retry-after"))
            return Fault("status", "rate limited (429)", detail, True, after, status=429)
        if code >= 500:
            after = _retry_after(exc.response.headers.get("retry-after")) if code == 503 else None
            return Fault("status", f"server error {code}", detail, code in _RETRIED_STATUS,
                         after, status=code)
        return Fault("status", f"server refused the request ({code})", detail, False,
                     status=code)
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        return Fault("garbled", "stream error", exc.message, True)
    if isinstance(exc, json.JSONDecodeError):
        return Fault("garbled", "garbled reply (not JSON)", str(exc), True)
    if isinstance(exc, _GarbledReply):
        return Fault("garbled", "garbled reply", str(exc), True)
    return Fault("client", "client error", f"{type(exc).__name__}: {exc}", False)


# 429/503 repeat while a server is busy or loading, 502/504 while a proxy's backend
# restarts: those keep their retries.  A 500 repeated word for word is the request's.
_SAME_ANSWER_RETRIES = frozenset({500})


def _deterministic(fault: Fault, previous: Fault | None) -> bool:
    """A refusal retrying cannot change: any 4xx but 429, a context overflow whatever its
    status (llama-cpp-python reports one as a 500), or a 5xx repeated word for word."""
    code = fault.status
    if code is None or code == 429:
        return False
    if code < 500 or context_overflow(fault.detail) is not None:
        return True  # a full context does not empty itself on a retry
    return (code in _SAME_ANSWER_RETRIES and previous is not None
            and (previous.status, previous.detail) == (code, fault.detail))


def _rejected(fault: Fault, attempts: int) -> RequestRejected:
    if fault.status is not None and fault.status >= 500:
        how = f"{fault.reason} (the same answer on {attempts} attempts)"
    else:
        how = f"{fault.reason} (after {attempts} attempt{'s' if attempts > 1 else ''})"
    message = f"{REJECTED}{how}: {fault.detail}"
    overflow = context_overflow(fault.detail)
    if overflow is not None:
        return ContextExceeded(message, status=fault.status or 0, server_message=fault.detail,
                               context=overflow.context, prompt=overflow.prompt,
                               writing=overflow.writing)
    return RequestRejected(message, status=fault.status or 0, server_message=fault.detail)


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)[:500]
    return str(body or exc.message)[:500]


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), 30.0) if value else None
    except ValueError:
        return None


_CAUGHT = (openai.OpenAIError, httpx.HTTPError, ValueError, _GarbledReply, ReplyTooLarge,
           DeadlinePassed, RecursionError)


@functools.cache
def _tls(https: bool) -> ssl.SSLContext:
    """The TLS context every client of the process shares, built once per kind.

    For an ``https`` server, the one httpx builds by default (the CA bundle,
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured): reading the bundle costs ~16 ms, and a
    run builds a client for the probe, one per target and one per ``/v1/models`` check.
    A plain ``http`` server (the usual local vLLM or llama.cpp) never needs one, so its
    clients get a context with no CA at all: it still requires a verified certificate
    and the host name, so a redirect to ``https`` fails closed instead of trusting it."""
    if https:
        return httpx.create_ssl_context()
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ModelClient:
    """Chat completions for one :class:`Target` over one pooled ``AsyncOpenAI``.

    ``backoff_s`` is the first retry delay; each retry doubles it, with jitter.  Use as
    ``async with ModelClient(target) as client: reply = await client.complete(...)``.
    """

    def __init__(self, target: Target, *, backoff_s: float = 0.2,
                 transport: httpx.AsyncBaseTransport | None = None):
        """``transport``: what carries the HTTP requests (an ``httpx.MockTransport`` in a
        test, a proxy's own); default httpx's, pooled to the target's concurrency.  The
        reply-size guard (``guard.py``) wraps whichever is given."""
        self.target = target
        self.backoff_s = backoff_s
        api_key = "EMPTY"
        if target.api_key_env:
            if target.api_key_env not in os.environ:
                raise ConfigError(
                    f"environment variable {target.api_key_env} is not set; export it "
                    f"(target {target.name!r})",
                    field="api_key_env",
                )
            api_key = os.environ[target.api_key_env] or "EMPTY"
        n = target.concurrency
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        self._http = openai.DefaultAsyncHttpxClient(
            limits=limits,
            transport=GuardedTransport(transport or httpx.AsyncHTTPTransport(
                limits=limits, verify=_tls(target.base_url.lower().startswith("https:"))),
                target.max_reply_bytes),
        )
        self._client = openai.AsyncOpenAI(  # pool=None: waiting for a free slot is no fault
            base_url=target.base_url, api_key=api_key, max_retries=0,
            timeout=httpx.Timeout(target.timeout_s, pool=None), http_client=self._http,
        )
        self._request = self._build_request()
        self._markers: tuple[frozenset[str] | None] | None = None  # template_markers, once
        self._gate_on: tuple[weakref.ref[asyncio.AbstractEventLoop], ServerGate] | None = None

    def _build_request(self) -> dict[str, Any]:
        t = self.target
        standard, extra = t.sampling.to_request()
        if t.chat_template_kwargs:
            extra["chat_template_kwargs"] = dict(t.chat_template_kwargs)
        extra.update(t.extra_body or {})
        request: dict[str, Any] = {"model": t.model, **standard}
        if t.max_tokens is not None:
            request["max_tokens"] = t.max_tokens
        if t.stream and not t.stream_parity:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        if extra:
            request["extra_body"] = extra
        return request

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, messages: list[dict], tools: list[dict] | None = None, *,
        seed_key: str | None = None,
    ) -> Reply:
        """One completion, retried on server faults.  A Reply or a ``HarnessFault``.

        ``messages`` go out shaped the way every major server accepts them
        (``shaping.shape_messages``); the caller's list is not changed."""
        shaped = shape_messages(messages, send_reasoning=self.target.send_reasoning)
        request = dict(self._request, messages=shaped)
        if tools:
            request["tools"] = tools
            if self.target.tool_choice is not None:
                request["tool_choice"] = tool_choice_field(self.target.tool_choice)
        if not self.target.stream_parity:
            return await self._send(request, seed_key)
        # stream parity: the same context whole, then streamed (one after the other, so
        # the second never shares a batch with the first); the session goes on whole
        reply = await self._send(dict(request), seed_key, stream=False)
        reply.parity = await self._send(
            dict(request, stream=True, stream_options={"include_usage": True}), seed_key,
            stream=True)
        return reply

    async def resend(self, body: dict[str, Any], *, seed_key: str | None = None,
                     protocol: str | None = None) -> Reply:
        """Send a stored request body again (``agent-eval replay``), retried like
        :meth:`complete`.  ``protocol`` is the wire protocol the turn was recorded in
        (``agent_eval.wire``; None: Chat Completions): a turn the proxy recorded from
        OpenAI Responses, Anthropic Messages or Gemini goes out in that protocol again
        (:meth:`_resend_in`).

        The body keeps everything it had (messages, tools, ``tool_choice``, sampling,
        ``max_tokens``, template kwargs) except: ``model`` is this target's, any knob the
        target sets (sampling, ``max_tokens``, template kwargs, ``extra_body``) wins, and
        ``stream`` follows the target (how the reply travels, not what the model sees).
        Messages are shaped again with reasoning kept: shaping a body this client
        shaped gives it back unchanged (tests/live/test_replay.py checks it), so what goes out
        is the stored context, and a body from another source is made acceptable the
        same way a live run's is."""
        if protocol not in (None, "chat"):
            return await self._resend_in(protocol, body, seed_key)
        kept = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        kept["messages"] = shape_messages(list(body.get("messages") or ()), send_reasoning=True)
        return await self._send({**kept, **self._request}, seed_key)

    async def _resend_in(self, protocol: str, body: dict[str, Any],
                         seed_key: str | None) -> Reply:
        """A stored turn of another protocol, written back in it (``wire.write_request``):
        ``model`` is this target's and ``stream`` follows the target; the rest of the
        stored request (sampling and all) goes as it was recorded.  The answer is read
        whole and parsed as the protocol's reply; one that did not end (no terminal event)
        is a garbled reply, retried.  Gemini's methods live under ``/v1beta``: a base URL
        ending in ``/v1`` is taken as the same server's ``/v1beta`` for them."""
        request = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        request.update(model=self.target.model, stream=bool(self.target.stream))
        path, native = wire.write_request(protocol, request)
        url = str(self._client.base_url).rstrip("/")
        if protocol == "gemini" and url.endswith("/v1"):
            url = url[:-3] + "/v1beta"
        headers = {SEED_HEADER: seed_key} if seed_key is not None else {}

        async def once() -> Reply:
            start = time.perf_counter()
            answer = await self._client.post(url + path, body=native, cast_to=httpx.Response,
                                             options={"headers": headers} if headers else {})
            latency = time.perf_counter() - start
            streamed = "text/event-stream" in answer.headers.get("content-type", "")
            parsed = wire.parse_reply(protocol, answer.content, streamed=streamed)
            if parsed.status != "complete":
                raise _GarbledReply(f"not a whole {protocol} reply ({parsed.status})")
            return wire_reply(parsed, latency)

        async def attempt() -> Reply:
            gate = self._gate()
            async with gate.slot():
                return await within_deadline(once(), self.target.deadline_s)

        reply = await self._retrying(attempt, silence_is_unreachable=False)
        reply.request = request
        return reply

    async def _send(self, request: dict[str, Any], seed_key: str | None, *,
                    stream: bool | None = None) -> Reply:
        if seed_key is not None:
            request["extra_headers"] = {SEED_HEADER: seed_key}
        streamed = self.target.stream if stream is None else stream
        once = self._stream_once if streamed else self._complete_once

        async def attempt(body: dict[str, Any]) -> Reply:
            gate = self._gate()
            async with gate.slot() as epoch:
                reply = await within_deadline(once(body), self.target.deadline_s)
            gate.observe(epoch, reply.ttft_s)  # streamed only: a latency mixes in the length
            return reply

        async def send(body: dict[str, Any]) -> Reply:
            return await self._retrying(lambda: attempt(body), silence_is_unreachable=False)

        try:
            reply = await send(request)
        except ContextExceeded as exc:
            # The prompt fits but the reply budget does not (vLLM counts max_tokens
            # against the window): once more with the room that is left, as the server
            # does itself when max_tokens is not given.
            room = None if exc.context is None or exc.prompt is None else exc.context - exc.prompt
            if room is None or room < 1 or room >= request.get("max_tokens", room + 1):
                raise
            request = dict(request, max_tokens=room)
            reply = await send(request)
        reply.request = sent_body(request)
        return reply

    async def try_model(self) -> None:
        """One one-token request without tools: whether the server answers this target's
        model name at all (``RequestRejected`` when it refuses it)."""
        request = dict(self._request, messages=[{"role": "user", "content": "Say OK."}],
                       max_tokens=1)
        await self._send(request, None)

    async def list_models(self) -> dict[str, Any]:
        """The server's ``/v1/models`` answer; ``ServerUnreachable`` when nothing answers."""

        async def once() -> dict[str, Any]:
            answer = await self._client.get("/models", cast_to=object)
            if not isinstance(answer, dict):
                raise _GarbledReply(f"/models answer is not a JSON object: {str(answer)[:200]}")
            return answer

        return await self._retrying(once, silence_is_unreachable=True)

    async def server_identity(self) -> dict[str, Any]:
        """What the server says of itself, for the run's stack fingerprint: the
        ``Server`` header of its ``/models`` answer, and from the server's root (the base
        URL without ``/v1``) llama.cpp's ``/props`` (its build and chat template) and
        vLLM's ``/version``.  One attempt each, short; whatever fails is left out: a
        server that does not have them is no fault."""
        out: dict[str, Any] = {}
        base = str(self._client.base_url).rstrip("/")
        root = base[:-3] if base.endswith("/v1") else base
        timeout = httpx.Timeout(min(self.target.timeout_s, 5.0))
        for key, url in (("models", base + "/models"), ("props", root + "/props"),
                         ("version", root + "/version")):
            try:
                answer = await self._client.get(url, cast_to=httpx.Response,
                                                options={"timeout": timeout})
            except _CAUGHT:
                continue
            if key == "models":
                out["server_header"] = answer.headers.get("server")
                continue
            with contextlib.suppress(ValueError, RecursionError):
                body = answer.json()
                if isinstance(body, dict):
                    out[key] = body
        return out

    async def template_markers(self) -> frozenset[str] | None:
        """The call markers of the format this model's chat template writes, to tell a
        parser's failure (AE511) from the model's wrong format (AE104): the target's
        ``stack.parser`` note, else its ``stack.template`` note, when either names a known
        format; else the chat template the server reports (llama.cpp's ``/props``), read
        once; None when nothing says (the markup is then the model's AE104)."""
        if self._markers is None:
            known = notes_markers(self.target.stack)
            if known is None:
                props = (await self.server_identity()).get("props")
                known = template_markers(props.get("chat_template")
                                         if isinstance(props, dict) else None)
            self._markers = (known,)
        return self._markers[0]

    async def _retrying(self, once, *, silence_is_unreachable: bool):
        """Run ``once`` until it succeeds or a fault is final.  Connection refused on every
        attempt is ``ServerUnreachable``; with ``silence_is_unreachable`` so are drops and
        timeouts (a models listing has nothing else to fail on)."""
        attempts = self.target.retries + 1
        kinds: set[str] = set()
        previous: Fault | None = None
        for n in range(1, attempts + 1):
            try:
                return await once()
            except _CAUGHT as exc:
                fault = classify_fault(exc, self.target.timeout_s)
                kinds.add(fault.kind)
                if _deterministic(fault, previous):
                    raise _rejected(fault, n) from exc
                previous = fault
                delay = self.backoff_s * 2 ** (n - 1) * (0.5 + random.random())
                if fault.status in _BUSY_STATUS:  # every request to this server waits
                    self._gate().busy(fault.retry_after_s, delay)
                if fault.retry and n < attempts:
                    await asyncio.sleep(max(delay, fault.retry_after_s or 0.0))
                    continue
                tries = f"after {n} attempt{'s' if n > 1 else ''}"
                if kinds == {"refused"} or (
                    silence_is_unreachable and kinds <= {"refused", "dropped", "timeout"}
                ):
                    raise ServerUnreachable(
                        f"no model server answered at {self.target.base_url} {tries}: "
                        f"{fault.reason}: {fault.detail}"
                    ) from exc
                failed = HarnessFault(f"{fault.reason} {tries}: {fault.detail}")
                failed.status, failed.server_message = fault.status, fault.detail
                raise failed from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _gate(self) -> ServerGate:
        """This server's gate on the running loop, shared with every client of the process
        that sends to the same base URL (looked up once per loop: the registry is keyed
        by the loop through a weak reference, made anew on each lookup)."""
        loop = asyncio.get_running_loop()
        if self._gate_on is None or self._gate_on[0]() is not loop:
            self._gate_on = (weakref.ref(loop), server_gate(self.target.base_url,
                                                            cap=self.target.server_limit,
                                                            adaptive=self.target.adaptive))
        return self._gate_on[1]

    async def _create(self, request: dict[str, Any]) -> Any:
        """POST ``/chat/completions`` through the SDK's documented custom-request path:
        the raw answer (``httpx.Response``, read whole through the guard), or with
        ``stream`` the SDK's chunk stream.

        ``chat.completions.create`` first walks the whole message list through the SDK's
        TypedDict transform on every call: with a long prompt that is the biggest cost on
        the client side, and our body is plain JSON already.  ``post`` sends the same body
        over the same HTTP stack, status faults and all (``openai.APIStatusError``).
        """
        body = sent_body(request)
        headers = request.get("extra_headers")
        if body.get("stream"):
            return await self._client.post(
                "/chat/completions", body=body, cast_to=ChatCompletion,
                options={"headers": headers} if headers else {},
                stream=True, stream_cls=openai.AsyncStream[object])
        return await self._client.post("/chat/completions", body=body, cast_to=httpx.Response,
                                       options={"headers": headers} if headers else {})

    async def _complete_once(self, request: dict[str, Any]) -> Reply:
        """One whole reply, read by ``wire``'s Chat Completions parser (the one the proxy
        and ``replay`` read replies with), not built into the SDK's ``ChatCompletion``
        models: a fifth of the client's CPU per turn went to building objects whose
        fields are read once.  A 200 that is not a chat completion (HTML, no choices, a
        choice without a message) is a garbled reply, retried."""
        start = time.perf_counter()
        answer = await self._create(request)
        latency = time.perf_counter() - start
        parsed = wire.parse_reply("chat", answer.content, streamed=False)
        if parsed.status == "unparseable":
            text = answer.text
            with contextlib.suppress(ValueError):
                json.loads(text)  # nested too deep: a RecursionError, classified as such
            raise _GarbledReply(f"not a chat completion: {text[:200]}")
        return wire_reply(parsed, latency)

    async def _stream_once(self, request: dict[str, Any]) -> Reply:
        """A streamed reply, its chunks read as they arrive by ``wire``'s Chat Completions
        stream reader (``wire.chat.ChatStream``: the one the proxy and ``replay`` read
        streams with), as plain JSON objects: the SDK still raises on an error event."""
        start = time.perf_counter()
        ttft = None
        chunks = ChatStream()
        stream = await self._create(request)
        async with stream:
            async for chunk in stream:
                if chunks.add(chunk) and ttft is None:
                    ttft = time.perf_counter() - start
        latency = time.perf_counter() - start
        parsed = chunks.reply()
        if parsed.finish_reason is None and not chunks.usage:
            raise _GarbledReply("stream ended early: no finish reason and no usage")
        return wire_reply(parsed, latency, ttft)


def wire_reply(parsed: ParsedReply, latency: float, ttft: float | None = None) -> Reply:
    """The one place a Reply is built, streamed or whole, from a reply read by
    ``agent_eval.wire`` (usage in Chat Completions' keys): its token figures are
    ``wire.records.token_figures``', the proxy's own."""
    figures = token_figures(parsed.usage, latency, ttft)
    reply = Reply(
        content=parsed.content, reasoning=parsed.reasoning,
        tool_calls=[ToolCallOut(c.id, c.name, c.arguments) for c in parsed.calls],
        finish_reason=parsed.finish_reason, prompt_tokens=figures.prompt_tokens,
        completion_tokens=figures.completion_tokens,
        reasoning_tokens=figures.reasoning_tokens, cached_tokens=figures.cached_tokens,
        latency_s=latency, ttft_s=ttft, decode_tps=figures.decode_tps,
        markup=find_tool_markup(parsed.content))
    reply.stream_faults = list(parsed.stream_faults)
    return reply


def sent_body(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON body that goes over the wire for ``request``: ``extra_body`` merged in,
    ``extra_headers`` left out (they travel as headers)."""
    body = {k: v for k, v in request.items() if k not in ("extra_headers", "extra_body")}
    body.update(request.get("extra_body") or {})
    return body
