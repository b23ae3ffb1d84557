"""The simulator's HTTP server: OpenAI-compatible ``/v1`` on loopback, with fault knobs.

It speaks the four protocols agent CLIs use (``agent_eval.wire``): OpenAI Chat
Completions (``/v1/chat/completions``, vLLM's shape), OpenAI Responses (``/v1/responses``),
Anthropic Messages (``/v1/messages``) and Gemini
(``/v1beta/models/M:generateContent`` and ``:streamGenerateContent?alt=sse``); a request
in any of them is read into a chat conversation, the same behaviour plays it, and the
reply goes back in the request's protocol, streamed when asked.  In front of an agent CLI
it finds the scenario's task inside the CLI's wrapped first messages, answers with the
CLI's own shell and read tools, and answers the CLI's side requests with text
(``clients.py``).

It sees only the HTTP request, like a real model server: it finds the scenario by the
first user message (a child template's filled task too, see ``TaskIndex``), the profile by the ``model`` field (a profile name or ``sim-<name>``;
anything else gets the server's default profile), and seeds its randomness from the
``X-Agent-Eval-Seed`` header (else the first user message), the server seed, the profile
and the number of messages.  Faults are drawn from one server-wide generator in arrival
order, so a retried request gets a fresh draw.

Three ways to run it: ``create_app`` (an ``aiohttp.web.Application``), ``SimServer``
(``async with``) and ``run_sim_in_thread`` (``with``; its own loop in a daemon thread).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from aiohttp import web

from agent_eval import wire
from agent_eval.errors import ConfigError
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import BUNDLED_SUITE_NAME, data_dir
from agent_eval.sim import hostile
from agent_eval.sim.behaviour import TaskIndex, index_tasks, plan_reply
from agent_eval.sim.clients import SIDE_REPLY, adapt_calls, is_side_request, locate
from agent_eval.sim.completions import (
    build_completion,
    render_chunks,
    render_completion,
    render_error,
)
from agent_eval.sim.profiles import PROFILES, Profile, get_profile
from agent_eval.sim.stack import PARSER_FAILED, check_stack, pick_fault, play_on_chunks, split_model
from agent_eval.sim.stack import play as stack_play

DEFAULT_SUITE = data_dir() / "scenarios" / BUNDLED_SUITE_NAME  # see scenario/bundled.py
SEED_HEADER = "X-Agent-Eval-Seed"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class Faults:
    """Injected server faults.  Rates are per request, in [0, 1]; times are seconds.

    ``error_rate`` answers 500 or 503; ``hang_rate`` accepts and never answers (until the
    client gives up, the server stops, or ``hang_s`` passes); ``truncate_rate`` cuts a
    stream mid-way without ``[DONE]`` (or sends half a JSON body); ``malformed_args_rate``
    emits tool-call arguments that are not JSON; ``drop_rate`` closes the connection
    without an answer.  ``latency_s`` is added to every answer (spread over a stream),
    ``ttft_s`` before its first token.

    Hostile output (see ``hostile.py``): ``endless_rate`` answers forever (a write every
    ``endless_pause_s``); ``huge_reply_rate`` pads the content to ``huge_reply_chars``;
    ``invalid_utf8_rate`` puts bytes that are not UTF-8 into the content;
    ``nested_args_rate`` and ``nested_body_rate`` nest the tool-call arguments, or a
    field of the body, ``nesting_depth`` deep; ``control_chars_rate`` opens the content
    with terminal escape sequences.

    A busy shared server (``manners.py`` is what meets it): ``slots`` answers that many
    requests at once and queues the rest (0: no queue), as vLLM's ``--max-num-seqs``
    does, and counts them on ``/metrics`` as ``vllm:num_requests_waiting``;
    ``max_in_flight`` answers ``busy_status`` (429 or 503) with ``Retry-After:
    retry_after_s`` to a request that finds that many in flight already (0: never).

    Stack faults (``stack.py``): ``stack`` names a server family (``vllm``,
    ``llamacpp``, ``sglang``, ``ollama``; a model name's ``+STACK`` suffix picks one per
    request) whose faults are played on ``stack_rate`` of the replies.
    """

    latency_s: float = 0.0
    ttft_s: float = 0.0
    error_rate: float = 0.0
    hang_rate: float = 0.0
    truncate_rate: float = 0.0
    malformed_args_rate: float = 0.0
    drop_rate: float = 0.0
    hang_s: float = 300.0
    endless_rate: float = 0.0
    endless_pause_s: float = 0.005
    huge_reply_rate: float = 0.0
    huge_reply_chars: int = 10_000_000
    invalid_utf8_rate: float = 0.0
    nested_args_rate: float = 0.0
    nested_body_rate: float = 0.0
    control_chars_rate: float = 0.0
    nesting_depth: int = 10_000
    slots: int = 0
    max_in_flight: int = 0
    retry_after_s: float = 1.0
    busy_status: int = 429
    stack: str = ""
    stack_rate: float = 0.0

    def __post_init__(self) -> None:
        if self.busy_status not in (429, 503):
            raise ConfigError(f"must be 429 or 503, got {self.busy_status}",
                              field="faults.busy_status")
        check_stack(self.stack)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                continue
            if value < 0 or (f.name.endswith("_rate") and value > 1):
                limit = "between 0 and 1" if f.name.endswith("_rate") else "0 or more"
                raise ConfigError(f"must be {limit}, got {value}", field=f"faults.{f.name}")


@dataclass
class SimState:
    """What every request handler reads; built once at startup."""

    profile: Profile
    scenarios: TaskIndex
    seed: int
    faults: Faults
    model_name: str
    fault_rng: random.Random
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: int = 0  # requests being answered or queued now
    peak_in_flight: int = 0  # the most at once, for tests of the client's manners
    waiting: int = 0  # queued behind ``faults.slots`` (vLLM's num_requests_waiting)
    busy_answers: int = 0  # 429/503 answers given for ``faults.max_in_flight``
    queue: asyncio.Semaphore | None = None

    def profile_for(self, model: object) -> Profile:
        if isinstance(model, str):
            key = model.removeprefix("sim-")
            if key in PROFILES:
                return PROFILES[key]
        return self.profile


STATE = web.AppKey("sim_state", SimState)


def index_suite(suite: str | Path | None) -> TaskIndex:
    """Scenarios by task text.  The bundled suite may be absent (then: generic replies);
    an explicitly named suite must load."""
    if suite is None:
        if not DEFAULT_SUITE.is_dir() or not any(DEFAULT_SUITE.glob("*.yaml")):
            return TaskIndex({})
        suite = DEFAULT_SUITE
    return index_tasks(load_suite(suite).scenarios.values())


def create_app(
    profile: str | Profile,
    *,
    suite: str | Path | None = None,
    seed: int = 0,
    faults: Faults | None = None,
    model_name: str | None = None,
) -> web.Application:
    """The simulator as an aiohttp application (routes ``/v1/models``,
    ``/v1/chat/completions``, ``/health``)."""
    default = get_profile(profile) if isinstance(profile, str) else profile
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE] = SimState(
        profile=default,
        scenarios=index_suite(suite),
        seed=seed,
        faults=faults or Faults(),
        model_name=model_name or default.model_id,
        fault_rng=random.Random(seed),
    )
    app.router.add_get("/v1/models", list_models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/responses", chat_completions)
    app.router.add_post("/v1/messages", chat_completions)
    app.router.add_post("/v1beta/models/{method}", chat_completions)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.on_shutdown.append(_release_hangs)
    return app


async def _release_hangs(app: web.Application) -> None:
    app[STATE].stopping.set()


async def health(request: web.Request) -> web.Response:
    return web.Response(text="")


async def metrics(request: web.Request) -> web.Response:
    """vLLM's queue gauges in Prometheus text, as ``vllm serve`` exports them."""
    state = request.app[STATE]
    label = json.dumps(state.model_name)
    running = state.in_flight - state.waiting
    text = ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{{model_name={label}}} {float(running)}\n"
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{{model_name={label}}} {float(state.waiting)}\n")
    return web.Response(text=text, content_type="text/plain")


async def list_models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    ids = [state.model_name] + [p.model_id for p in PROFILES.values()]
    created = int(time.time())
    data: list[dict[str, Any]] = [
        {"id": i, "object": "model", "created": created, "owned_by": "agent-eval-sim",
         "root": i, "parent": None, "max_model_len": 65536, "permission": []}
        for i in dict.fromkeys(ids)
    ]
    return web.json_response({"object": "list", "data": data})


def conversation_rng(seed: int, profile: Profile, key: str, n_messages: int) -> random.Random:
    """Deterministic per (server seed, profile, conversation, length); never ``hash()``."""
    digest = hashlib.sha256(f"{seed}|{profile.name}|{key}|{n_messages}".encode()).hexdigest()
    return random.Random(int(digest, 16))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """One completion, behind the busy-server knobs (``Faults.slots``, ``max_in_flight``)."""
    state = request.app[STATE]
    faults = state.faults
    if faults.max_in_flight and state.in_flight >= faults.max_in_flight:
        state.busy_answers += 1
        return web.json_response(
            render_error(faults.busy_status, "server busy: too many requests in flight"),
            status=faults.busy_status, headers={"Retry-After": f"{faults.retry_after_s:g}"})
    state.in_flight += 1
    state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
    try:
        if not faults.slots:
            return await _answer(request, state)
        if state.queue is None:
            state.queue = asyncio.Semaphore(faults.slots)
        state.waiting += 1
        try:
            await state.queue.acquire()
        finally:
            state.waiting -= 1
        try:
            return await _answer(request, state)
        finally:
            state.queue.release()
    finally:
        state.in_flight -= 1


async def _answer(request: web.Request, state: SimState) -> web.StreamResponse:
    protocol = wire.protocol_of(request.path)
    if protocol is None:
        return _error(404, f"no such method: {request.path}")
    try:
        raw = json.loads(await request.read())
    except (ValueError, RecursionError):
        return _error(400, "request body is not valid JSON")
    body = wire.PROTOCOLS[protocol].read_request(raw, request.path) \
        if isinstance(raw, dict) else None
    messages = body.get("messages") if isinstance(body, dict) else None
    if (not isinstance(body, dict) or not isinstance(messages, list)
            or not all(isinstance(m, dict) for m in messages)):
        what = {"chat": "`messages`", "messages": "`messages`", "responses": "`input`",
                "gemini": "`contents`"}[protocol]
        return _error(400, f"{what} must be a list of message objects")

    faults = state.faults
    draw = state.fault_rng.random
    failed = await _fault_before_reply(request, state, body)
    if failed is not None:
        return failed
    truncate = bool(faults.truncate_rate) and draw() < faults.truncate_rate
    malformed = bool(faults.malformed_args_rate) and draw() < faults.malformed_args_rate
    hostile_draws = hostile.draw(faults, draw)

    model_field, named_stack = split_model(body.get("model"))
    profile = state.profile_for(model_field)
    found = locate(state.scenarios, messages)
    key = request.headers.get(SEED_HEADER) or found.task
    rng = conversation_rng(state.seed, profile, key, len(messages))
    if is_side_request(messages, body.get("tools"), found):
        reply = SIDE_REPLY
    else:
        reply = adapt_calls(plan_reply(messages, found.scenario, profile, rng),
                            body.get("tools"))
    requested = body.get("model")
    model = requested if isinstance(requested, str) else state.model_name
    done = build_completion(
        body, reply, model=model, created=int(time.time()), rng=rng, malformed=malformed
    )
    stack = named_stack or faults.stack
    fault = None
    if stack and faults.stack_rate:
        fault = pick_fault(stack, faults.stack_rate, random.Random(rng.random()),
                           calls=len(done.calls), streamed=bool(body.get("stream")))
        if fault == "parser-500":
            return _error(500, PARSER_FAILED)
        if fault is not None:
            done = stack_play(done, fault, body.get("max_tokens"))
    done = hostile.apply(done, faults, hostile_draws)
    if protocol != "chat":
        return await _answer_in(protocol, request, body, done, faults, truncate,
                                hostile_draws)
    if body.get("stream"):
        options = body.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        piece = 65_536 if "huge_reply" in hostile_draws else 24
        chunks = play_on_chunks(render_chunks(done, include_usage=include_usage,
                                              piece_chars=piece), fault)
        return await _stream(request, chunks, faults, truncate, hostile_draws)
    await _sleep(faults.ttft_s + faults.latency_s)
    payload = hostile.apply_bytes(json.dumps(render_completion(done)).encode(), faults,
                             hostile_draws)
    if truncate:
        payload = payload[: len(payload) // 2]
    return web.Response(body=payload, content_type="application/json")


async def _fault_before_reply(request: web.Request, state: SimState,
                              body: dict[str, Any]) -> web.StreamResponse | None:
    """The faults drawn before any reply is planned, in this order: a dropped
    connection, a 500/503, a hang (then a drop), an endless reply; None when none is
    drawn (each rate set draws once, so the draws that follow stay the same)."""
    faults = state.faults
    draw = state.fault_rng.random
    if faults.drop_rate and draw() < faults.drop_rate:
        return _drop(request)
    if faults.error_rate and draw() < faults.error_rate:
        status = state.fault_rng.choice([500, 503])
        return _error(status, "simulated server fault")
    if faults.hang_rate and draw() < faults.hang_rate:
        try:
            await asyncio.wait_for(state.stopping.wait(), faults.hang_s)
        except TimeoutError:
            pass
        return _drop(request)
    if faults.endless_rate and draw() < faults.endless_rate:
        return await hostile.write_endless(request, stream=bool(body.get("stream")),
                                           pause_s=faults.endless_pause_s,
                                           stopping=state.stopping)
    return None


async def _answer_in(protocol: str, request: web.Request, body: dict[str, Any],
                     done: Any, faults: Faults, truncate: bool,
                     fired: frozenset[str]) -> web.StreamResponse:
    """The reply in the Responses, Messages or Gemini shape (``agent_eval.wire``)."""
    parsed = wire.ParsedReply(
        content=done.reply.content or "", reasoning=done.reply.reasoning,
        calls=[wire.ParsedCall(c.id, c.name, c.arguments) for c in done.calls],
        finish_reason=done.finish_reason, usage=done.usage, model=done.model,
        response_id=done.id)
    stream = bool(body.get("stream"))
    events = wire.PROTOCOLS[protocol].render_reply(parsed, stream=stream, created=done.created)
    if stream:
        named = protocol != "gemini"  # Responses and Messages name each event
        return await _stream(request, events, faults, truncate, fired, named=named,
                             end=None, separator=b"\r\n\r\n" if not named else b"\n\n")
    await _sleep(faults.ttft_s + faults.latency_s)
    payload = hostile.apply_bytes(json.dumps(events[0]).encode(), faults, fired)
    if truncate:
        payload = payload[: len(payload) // 2]
    return web.Response(body=payload, content_type="application/json")


async def _stream(
    request: web.Request, chunks: list[dict[str, Any]], faults: Faults, truncate: bool,
    fired: frozenset[str] = frozenset(), *, named: bool = False,
    end: bytes | None = b"data: [DONE]\n\n", separator: bytes = b"\n\n",
) -> web.StreamResponse:
    """Server-sent events: ``data: JSON`` each (``event: TYPE`` first when ``named``),
    then ``end``; a truncated stream stops half way, without its end."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    if truncate:
        chunks = chunks[: max(1, len(chunks) // 2)]
    pause = faults.latency_s / len(chunks) if faults.latency_s else 0.0
    events = [(f"event: {chunk['type']}\n".encode() if named else b"")
              + b"data: " + hostile.apply_bytes(json.dumps(chunk).encode(), faults,
                                                fired if i == 0 else fired - {"nested_body"})
              + separator
              for i, chunk in enumerate(chunks)]
    if not truncate and end is not None:
        events.append(end)
    try:
        await _sleep(faults.ttft_s)
        if pause:
            for event in events:
                await _sleep(pause)
                await response.write(event)
        else:  # unpaced: one write, so a load test measures the harness, not us
            await response.write(b"".join(events))
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away; nothing left to tell it
    return response


async def _sleep(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)


def _error(status: int, message: str) -> web.Response:
    return web.json_response(render_error(status, message), status=status)


def _drop(request: web.Request) -> web.Response:
    """Close the TCP connection without an answer."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=500)


class SimServer:
    """The simulator on a loopback port (0 = a free one), for ``async with``."""

    def __init__(
        self,
        profile: str | Profile = "disciplined",
        *,
        suite: str | Path | None = None,
        seed: int = 0,
        faults: Faults | None = None,
        model_name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if host not in LOOPBACK_HOSTS and not host.startswith("127."):
            raise ConfigError(
                f"host {host!r} is not a loopback address; use 127.0.0.1", field="host"
            )
        self.app = create_app(profile, suite=suite, seed=seed, faults=faults, model_name=model_name)
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start(self) -> str:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port} ({exc.strerror}); pick another port",
                field="port",
            ) from None
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(
            self.app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock, backlog=1024).start()
        return self.base_url

    async def stop(self) -> None:
        if self._runner is not None:
            self.app[STATE].stopping.set()
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextmanager
def run_sim_in_thread(
    profile: str | Profile = "disciplined",
    *,
    suite: str | Path | None = None,
    seed: int = 0,
    faults: Faults | None = None,
    model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> Iterator[str]:
    """Run a :class:`SimServer` on its own event loop in a daemon thread; yields the
    base URL (``http://127.0.0.1:PORT/v1``) and stops the server on exit."""
    server = SimServer(profile, suite=suite, seed=seed, faults=faults,
                       model_name=model_name, host=host, port=port)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failure: list[BaseException] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=serve, name="agent-eval-sim", daemon=True)
    thread.start()
    ready.wait()
    if failure:
        loop.close()
        raise failure[0]
    try:
        yield server.base_url
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
