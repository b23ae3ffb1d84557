"""The model client, against a real HTTP server on 127.0.0.1 that plays canned answers.

Each test scripts the answers of a small aiohttp app (one per request; the last one
repeats) and checks what the client returns and what the server received.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import socket
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from multidict import CIMultiDict

from agent_eval.errors import ConfigError, HarnessFault, RequestRejected, ServerUnreachable
from agent_eval.live.client import (
    SEED_HEADER,
    ModelClient,
    Sampling,
    Target,
    classify_fault,
    load_run_config,
    load_targets,
    target_from_settings,
)

Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


def run_async(fn):
    """Run an ``async def`` test on a fresh event loop (no pytest plugin needed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@dataclass
class Seen:
    path: str
    body: dict
    headers: CIMultiDict[str]


@dataclass
class FakeServer:
    """Serves ``answers`` in order (the last one repeats) and records every request."""

    answers: list[Answer]
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    peers: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: int = 0
    max_in_flight: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else {}
        self.seen.append(Seen(request.path, body, CIMultiDict(request.headers)))
        answer = self.answers[min(len(self.seen), len(self.answers)) - 1]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await answer(request)
        finally:
            self.in_flight -= 1


SERVER = web.AppKey("server", FakeServer)


@asynccontextmanager
async def serve(*answers: Answer):
    server = FakeServer(list(answers))
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.handle)
    app.router.add_get("/v1/models", server.handle)
    app[SERVER] = server
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server
    finally:
        server.stop.set()
        await runner.cleanup()


# ---- canned answers -------------------------------------------------------------------


def reply_json(payload: dict, status: int = 200) -> Answer:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response(payload, status=status)

    return answer


def error_json(status: int, message: str) -> Answer:
    return reply_json({"error": {"message": message, "type": "BadRequestError", "code": status}}, status)


def sse(chunks: list[dict | str], *, done: bool = True, drop_after: bool = False) -> Answer:
    """A streamed answer; a ``str`` chunk is sent raw (to garble it)."""

    async def answer(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for chunk in chunks:
            data = chunk if isinstance(chunk, str) else json.dumps(chunk)
            await resp.write(f"data: {data}\n\n".encode())
        if drop_after:
            request.transport.close()
            return resp
        if done:
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    return answer


async def drop(request: web.Request) -> web.StreamResponse:
    """Close the connection without answering, as a crashing server does."""
    request.transport.close()
    return web.Response()


async def hang(request: web.Request) -> web.StreamResponse:
    """Never answer (until the test server shuts down)."""
    await request.app[SERVER].stop.wait()
    return web.Response()


def after_peers(n: int, payload: dict) -> Answer:
    """Hold each request until ``n`` are in flight at once, then answer them all."""

    async def answer(request: web.Request) -> web.StreamResponse:
        server = request.app[SERVER]
        if server.in_flight >= n:
            server.peers.set()
        await server.peers.wait()
        return web.json_response(payload)

    return answer


def completion(message: dict, *, finish: str = "stop", usage: dict | None = None) -> dict:
    return {
        "id": "cmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def chunk(delta: dict | None = None, *, finish: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out


OK = completion({"content": "done"})
MESSAGES = [{"role": "user", "content": "close the stage"}]
BASH_TOOL = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
STAGE_CMD = 'uv run scripts/update_stage_status.py --status awaiting_eval'


def target_for(server: FakeServer, **overrides) -> Target:
    return Target(name="t", base_url=server.base_url, model="qwen", **overrides)


def client_for(server: FakeServer, **overrides) -> ModelClient:
    overrides.setdefault("retries", 2)
    return ModelClient(target_for(server, **overrides), backoff_s=0.001)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- replies --------------------------------------------------------------------------


@run_async
async def test_non_streaming_reply_carries_tool_calls_reasoning_and_usage():
    message = {
        "content": "",
        "reasoning_content": "The stage is done; report it.",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": STAGE_CMD})}}],
    }
    usage = {"prompt_tokens": 41000, "completion_tokens": 30, "total_tokens": 41030,
             "prompt_tokens_details": {"cached_tokens": 40960},
             "completion_tokens_details": {"reasoning_tokens": 12}}
    async with serve(reply_json(completion(message, finish="tool_calls", usage=usage))) as server:
        async with client_for(server) as client:
            reply = await client.complete(MESSAGES, BASH_TOOL)
    assert reply.reasoning == "The stage is done; report it."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_1", "bash", {"command": STAGE_CMD})
    ]
    assert reply.finish_reason == "tool_calls"
    assert (reply.prompt_tokens, reply.completion_tokens) == (41000, 30)
    assert (reply.reasoning_tokens, reply.cached_tokens) == (12, 40960)
    assert reply.ttft_s is None
    assert reply.decode_tps == pytest.approx(30 / reply.latency_s)
    assert reply.markup == []


@run_async
async def test_a_reply_read_whole_keeps_only_what_it_can_trust():
    """The whole reply is read by ``wire``'s chat parser: token counts that are not whole
    numbers (a string, a negative, a boolean) are unknown, not stored as they came;
    arguments sent as an object arrive as its JSON text; a reply without a finish reason
    is still a reply."""
    message = {"content": "ok", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]}
    usage = {"prompt_tokens": "41000", "completion_tokens": -3,
             "prompt_tokens_details": {"cached_tokens": True},
             "completion_tokens_details": {"reasoning_tokens": 7}}
    body = completion(message, usage=usage)
    body["choices"][0]["finish_reason"] = None
    async with serve(reply_json(body)) as server:
        async with client_for(server) as client:
            reply = await client.complete(MESSAGES, BASH_TOOL)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens) == (None, None, None)
    assert reply.reasoning_tokens == 7 and reply.decode_tps is None
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("c1", "bash", {"command": "ls"})]
    assert (reply.content, reply.finish_reason) == ("ok", None)


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": "41000", "completion_tokens": -3,
     "prompt_tokens_details": {"cached_tokens": -2}},
    "not a usage object",
], ids=["odd-counts", "usage-a-string"])
@run_async
async def test_a_streamed_reply_keeps_only_whole_token_counts(usage):
    """The streamed path builds its Reply where the whole one does: counts that are not
    whole numbers are unknown, and a usage that is not an object is no usage at all."""
    chunks = [chunk({"content": "ok"}), chunk({}, finish="stop"), chunk(None, usage=usage)]
    async with serve(sse(chunks)) as server:
        async with client_for(server, stream=True) as client:
            reply = await client.complete(MESSAGES, None)
    assert reply.content == "ok" and reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens) == (None,) * 3
    assert reply.decode_tps is None


@run_async
async def test_streaming_assembles_split_tool_call_deltas_and_reasoning():
    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "Need the "}),
        chunk({"reasoning": "handshake."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "bash", "arguments": '{"command": "uv run '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'scripts/ralf_spawn.py"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "read", "arguments": '{"path": "notes.md"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540}),
    ]
    async with serve(sse(chunks)) as server:
        async with client_for(server, stream=True) as client:
            reply = await client.complete(MESSAGES, BASH_TOOL)
    assert reply.reasoning == "Need the handshake."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "bash", '{"command": "uv run scripts/ralf_spawn.py"}'),
        ("call_b", "read", '{"path": "notes.md"}'),
    ]
    assert reply.finish_reason == "tool_calls"
    assert (reply.prompt_tokens, reply.completion_tokens) == (500, 40)
    assert 0 < reply.ttft_s <= reply.latency_s
    assert reply.decode_tps == pytest.approx(40 / (reply.latency_s - reply.ttft_s))
    assert server.seen[0].body["stream"] is True
    assert server.seen[0].body["stream_options"] == {"include_usage": True}


@run_async
async def test_streaming_reasoning_content_and_text_are_joined():
    chunks = [
        chunk({"reasoning_content": "think"}),
        chunk({"content": "All "}),
        chunk({"content": "done."}, finish="stop"),
    ]
    async with serve(sse(chunks)) as server:
        async with client_for(server, stream=True) as client:
            reply = await client.complete(MESSAGES, None)
    assert (reply.reasoning, reply.content, reply.finish_reason) == ("think", "All done.", "stop")
    assert reply.completion_tokens is None and reply.decode_tps is None


@run_async
async def test_malformed_tool_call_arguments_pass_through_raw():
    raw = '{"command": "uv run scripts/db_query.py --sql "SELECT 1"'
    message = {"content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "bash", "arguments": raw}}]}
    async with serve(reply_json(completion(message, finish="tool_calls"))) as server:
        async with client_for(server) as client:
            reply = await client.complete(MESSAGES, BASH_TOOL)
    assert reply.tool_calls[0].arguments == raw
    assert len(server.seen) == 1


@run_async
async def test_tool_call_markup_left_in_content_is_reported_as_spans():
    text = 'Closing now.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    async with serve(reply_json(completion({"content": text}))) as server:
        async with client_for(server) as client:
            reply = await client.complete(MESSAGES, BASH_TOOL)
    assert [reply.content[a:b] for a, b in reply.markup] == [text[text.index("<tool_call>"):]]


# ---- the request ----------------------------------------------------------------------

FIELD_SAMPLING = Sampling(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0,
                          presence_penalty=1.5, repetition_penalty=1.0)


def test_sampling_splits_vllm_fields_into_extra_body_and_drops_none():
    standard, extra = FIELD_SAMPLING.to_request()
    assert standard == {"temperature": 1.0, "top_p": 0.95, "presence_penalty": 1.5}
    assert extra == {"top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0}


def test_default_sampling_sends_nothing():
    assert Sampling().to_request() == ({}, {})


@run_async
async def test_request_body_carries_sampling_and_chat_template_kwargs_exactly():
    async with serve(reply_json(OK)) as server:
        client = client_for(server, sampling=FIELD_SAMPLING, max_tokens=2048,
                            chat_template_kwargs={"enable_thinking": False},
                            extra_body={"skip_special_tokens": False})
        async with client:
            await client.complete(MESSAGES, BASH_TOOL)
    body = server.seen[0].body
    assert {k: body[k] for k in ("model", "temperature", "top_p", "top_k", "min_p",
                                 "presence_penalty", "repetition_penalty", "max_tokens")} == {
        "model": "qwen", "temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
        "presence_penalty": 1.5, "repetition_penalty": 1.0, "max_tokens": 2048}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["skip_special_tokens"] is False
    assert body["tools"] == BASH_TOOL and body["tool_choice"] == "auto"
    assert body["messages"] == MESSAGES
    assert "frequency_penalty" not in body and "seed" not in body and "stream" not in body


@run_async
async def test_tool_choice_is_not_sent_without_tools():
    async with serve(reply_json(OK)) as server:
        async with client_for(server) as client:
            await client.complete(MESSAGES, None)
    assert "tools" not in server.seen[0].body and "tool_choice" not in server.seen[0].body


@pytest.mark.parametrize("seed_key", ["run1/ralf-close/0", None], ids=["given", "absent"])
@run_async
async def test_seed_header_is_sent_only_when_given(seed_key):
    async with serve(reply_json(OK)) as server:
        async with client_for(server) as client:
            await client.complete(MESSAGES, None, seed_key=seed_key)
    assert server.seen[0].headers.get(SEED_HEADER) == seed_key


@run_async
async def test_api_key_from_env_reaches_authorization_but_never_settings(monkeypatch):
    monkeypatch.setenv("AE_TEST_KEY", "sk-secret-123")
    async with serve(reply_json(OK)) as server:
        target = target_for(server, api_key_env="AE_TEST_KEY")
        async with ModelClient(target) as client:
            await client.complete(MESSAGES, None)
    assert server.seen[0].headers["Authorization"] == "Bearer sk-secret-123"
    settings = json.dumps(target.settings())
    assert "sk-secret-123" not in settings
    assert target.settings()["api_key_env"] == "AE_TEST_KEY"


@run_async
async def test_without_api_key_env_the_placeholder_key_is_sent():
    async with serve(reply_json(OK)) as server:
        async with client_for(server) as client:
            await client.complete(MESSAGES, None)
    assert server.seen[0].headers["Authorization"] == "Bearer EMPTY"


def test_unset_api_key_env_is_a_config_error_naming_the_variable(monkeypatch):
    monkeypatch.delenv("AE_TEST_UNSET_KEY", raising=False)
    target = Target(name="t", base_url="http://127.0.0.1:9/v1", model="m",
                    api_key_env="AE_TEST_UNSET_KEY")
    with pytest.raises(ConfigError, match="AE_TEST_UNSET_KEY"):
        ModelClient(target)


def test_settings_are_json_and_list_only_the_sampling_that_is_set():
    target = Target(name="qwen-27b", base_url="http://127.0.0.1:8000/v1", model="Qwen3.5-27B",
                    sampling=Sampling(temperature=1.0, top_k=20))
    settings = json.loads(json.dumps(target.settings()))
    assert settings["sampling"] == {"temperature": 1.0, "top_k": 20}
    assert settings["model"] == "Qwen3.5-27B" and settings["api_key_env"] is None


def test_settings_round_trip_through_json_to_the_same_target():
    target = Target(name="qwen-27b", base_url="http://127.0.0.1:8000/v1", model="Qwen3.5-27B",
                    api_key_env="VLLM_KEY", sampling=FIELD_SAMPLING, stream=True,
                    chat_template_kwargs={"enable_thinking": True}, concurrency=6)
    assert target_from_settings(json.loads(json.dumps(target.settings()))) == target


def test_settings_that_do_not_describe_a_target_are_a_value_error():
    with pytest.raises(ValueError, match="base_url"):
        target_from_settings({"name": "t", "model": "m"})


# ---- faults ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 429, 502], ids=["503", "429", "502"])
@run_async
async def test_retryable_status_twice_then_success(status):
    async with serve(error_json(status, "busy"), error_json(status, "busy"), reply_json(OK)) as server:
        async with client_for(server, retries=3) as client:
            reply = await client.complete(MESSAGES, None)
    assert reply.content == "done"
    assert len(server.seen) == 3


@run_async
async def test_server_error_whose_body_changes_is_a_harness_fault_after_all_retries():
    async with serve(error_json(500, "engine dead (1)"), error_json(500, "engine dead (2)"),
                     error_json(500, "engine dead (3)")) as server:
        async with client_for(server, retries=2) as client:
            with pytest.raises(HarnessFault, match=r"server error 500 after 3 attempts: engine dead \(3\)"):
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 3


# llama-cpp-python 0.3's answer to an assistant turn with `content: null`.
LLAMA_NULL_CONTENT_500 = error_json(
    500, "[{'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content'), "
         "'msg': 'Input should be a valid string', 'input': None}]")


@run_async
async def test_500_repeated_word_for_word_is_rejected_after_one_retry_not_all():
    async with serve(LLAMA_NULL_CONTENT_500) as server:
        async with client_for(server, retries=3) as client:
            with pytest.raises(RequestRejected, match="server error 500") as info:
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 2
    assert str(info.value).startswith("request rejected: server error 500 (the same answer on 2 attempts)")
    assert info.value.status == 500 and "Input should be a valid string" in info.value.server_message


@pytest.mark.parametrize("status", [503, 502], ids=["503-loading", "502-proxy"])
@run_async
async def test_busy_status_repeated_word_for_word_keeps_its_retries(status):
    async with serve(error_json(status, "Loading model")) as server:
        async with client_for(server, retries=2) as client:
            with pytest.raises(HarnessFault, match="server error 50") as info:
                await client.complete(MESSAGES, None)
    assert not isinstance(info.value, RequestRejected)
    assert len(server.seen) == 3


@pytest.mark.parametrize(
    "status, message",
    [(400, "This model's maximum context length is 32768 tokens"),
     (404, "The model `qwen` does not exist.")],
    ids=["400-context-length", "404-model-not-found"],
)
@run_async
async def test_client_errors_are_not_retried_and_carry_the_server_message(status, message):
    async with serve(error_json(status, message)) as server:
        async with client_for(server, retries=3) as client:
            with pytest.raises(HarnessFault, match="server refused the request") as info:
                await client.complete(MESSAGES, None)
    assert str(info.value) == f"request rejected: server refused the request ({status}) (after 1 attempt): {message}"
    assert isinstance(info.value, RequestRejected) and info.value.server_message == message
    assert not isinstance(info.value, ServerUnreachable)
    assert len(server.seen) == 1


@run_async
async def test_dropped_connection_is_retried_then_a_harness_fault():
    async with serve(drop) as server:
        async with client_for(server, retries=2) as client:
            with pytest.raises(HarnessFault, match="connection dropped after 3 attempts"):
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 3


@run_async
async def test_dropped_connection_then_success():
    async with serve(drop, reply_json(OK)) as server:
        async with client_for(server) as client:
            reply = await client.complete(MESSAGES, None)
    assert reply.content == "done" and len(server.seen) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
@run_async
async def test_hanging_server_is_a_timeout_fault(stream):
    async with serve(hang) as server:
        async with client_for(server, timeout_s=0.2, retries=1, stream=stream) as client:
            with pytest.raises(HarnessFault, match=r"timeout \(no answer within 0.2 s\) after 2 attempts"):
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 2


GOOD_STREAM = [chunk({"content": "ok"}), chunk({}, finish="stop")]
BROKEN_STREAMS = {
    "closed-mid-body": sse([chunk({"content": "par"})], drop_after=True),
    "ended-without-finish": sse([chunk({"content": "par"})], done=False),
    "garbled-json": sse([chunk({"content": "par"}), '{"choices": [{"delta": '], done=False),
    "error-event": sse([chunk({"content": "par"}), {"error": {"message": "engine died"}}]),
}


@pytest.mark.parametrize("broken", BROKEN_STREAMS.values(), ids=BROKEN_STREAMS.keys())
@run_async
async def test_broken_stream_is_retried_to_success(broken):
    async with serve(broken, sse(GOOD_STREAM)) as server:
        async with client_for(server, stream=True) as client:
            reply = await client.complete(MESSAGES, None)
    assert reply.content == "ok" and len(server.seen) == 2


@pytest.mark.parametrize("broken", BROKEN_STREAMS.values(), ids=BROKEN_STREAMS.keys())
@run_async
async def test_broken_stream_that_persists_is_a_harness_fault(broken):
    async with serve(broken) as server:
        async with client_for(server, stream=True, retries=1) as client:
            with pytest.raises(HarnessFault, match="after 2 attempts"):
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 2


async def html_page(request: web.Request) -> web.StreamResponse:
    return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")


GARBLED_REPLIES = {
    "html-page": html_page,
    "no-choices": reply_json({"id": "x", "choices": []}),
    "choice-without-message": reply_json({"id": "x", "choices": [{"index": 0}]}),
    "json-array": reply_json([1, 2, 3]),
}


@pytest.mark.parametrize("garbled", GARBLED_REPLIES.values(), ids=GARBLED_REPLIES.keys())
@run_async
async def test_a_200_that_is_not_a_chat_completion_is_a_harness_fault(garbled):
    async with serve(garbled) as server:
        async with client_for(server, retries=1) as client:
            with pytest.raises(HarnessFault, match="garbled reply after 2 attempts"):
                await client.complete(MESSAGES, None)
    assert len(server.seen) == 2


@run_async
async def test_complete_against_a_dead_port_is_server_unreachable():
    url = f"http://127.0.0.1:{dead_port()}/v1"
    async with ModelClient(Target(name="t", base_url=url, model="m", retries=1), backoff_s=0.001) as client:
        with pytest.raises(ServerUnreachable, match=f"no model server answered at {url}"):
            await client.complete(MESSAGES, None)


@run_async
async def test_pool_caps_requests_in_flight_at_concurrency():
    async with serve(after_peers(2, OK)) as server:
        async with client_for(server, concurrency=2, timeout_s=10) as client:
            replies = await asyncio.gather(*(client.complete(MESSAGES, None) for _ in range(6)))
    assert [r.content for r in replies] == ["done"] * 6
    assert server.max_in_flight == 2


def test_unknown_exception_is_a_final_client_fault():
    fault = classify_fault(RuntimeError("boom"), 120)
    assert (fault.kind, fault.retry) == ("client", False)


# ---- /v1/models -----------------------------------------------------------------------


@run_async
async def test_list_models_returns_the_server_answer():
    models = {"object": "list", "data": [{"id": "qwen", "object": "model", "max_model_len": 65536}]}
    async with serve(reply_json(models)) as server:
        async with client_for(server) as client:
            answer = await client.list_models()
    assert answer == models
    assert server.seen[0].path == "/v1/models"


@run_async
async def test_list_models_against_a_dead_port_is_server_unreachable_naming_the_url():
    url = f"http://127.0.0.1:{dead_port()}/v1"
    async with ModelClient(Target(name="t", base_url=url, model="m", retries=1), backoff_s=0.001) as client:
        with pytest.raises(ServerUnreachable, match=url):
            await client.list_models()


# ---- targets file ---------------------------------------------------------------------

GOOD_CONFIG = """
label: nightly
suite: scenarios/ralf
repeats: 3
targets:
  - name: qwen3.5-27b
    base_url: http://127.0.0.1:8000/v1/
    model: Qwen/Qwen3.5-27B
    api_key_env: AE_TEST_CONFIG_KEY
    sampling: {temperature: 1.0, top_p: 0.95, top_k: 20, min_p: 0, presence_penalty: 1.5, repetition_penalty: 1.0}
    chat_template_kwargs: {enable_thinking: false}
    max_tokens: 4096
    stream: true
    timeout_s: 300
    concurrency: 6
  - name: qwen3.6-35b-a3b
    base_url: http://127.0.0.1:8001/v1
    model: Qwen/Qwen3.6-35B-A3B
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_run_config_reads_targets_and_run_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("AE_TEST_CONFIG_KEY", "sk-x")
    config = load_run_config(write(tmp_path, GOOD_CONFIG))
    assert (config.label, config.suite, config.repeats) == ("nightly", "scenarios/ralf", 3)
    first, second = config.targets
    assert first == Target(
        name="qwen3.5-27b", base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3.5-27B",
        api_key_env="AE_TEST_CONFIG_KEY",
        sampling=Sampling(temperature=1.0, top_p=0.95, top_k=20, min_p=0.0,
                          presence_penalty=1.5, repetition_penalty=1.0),
        chat_template_kwargs={"enable_thinking": False}, max_tokens=4096, stream=True,
        timeout_s=300.0, concurrency=6,
    )
    assert second == Target(name="qwen3.6-35b-a3b", base_url="http://127.0.0.1:8001/v1",
                            model="Qwen/Qwen3.6-35B-A3B")
    assert load_targets(write(tmp_path, GOOD_CONFIG)) == config.targets


BAD_CONFIGS = {
    "unknown-field": ("targets:\n  - {name: a, base_url: 'http://h/v1', model: m, temprature: 1}",
                      "targets.0.temprature", "unknown field"),
    "unknown-sampling-field": (
        "targets:\n  - {name: a, base_url: 'http://h/v1', model: m, sampling: {top_n: 3}}",
        "targets.0.sampling.top_n", "unknown field"),
    "literal-api-key": ("targets:\n  - {name: a, base_url: 'http://h/v1', model: m, api_key: sk-1}",
                        "targets.0.api_key", "api_key_env"),
    "literal-api-key-in-extra-body": (
        "targets:\n  - {name: a, base_url: 'http://h/v1', model: m, extra_body: {api_key: sk-1}}",
        "targets.0.extra_body.api_key", "api_key_env"),
    "missing-base-url": ("targets:\n  - {name: a, model: m}", "targets.0.base_url", "missing"),
    "base-url-without-scheme": ("targets:\n  - {name: a, base_url: '127.0.0.1:8000', model: m}",
                                "targets.0.base_url", "http"),
    "unset-api-key-env": (
        "targets:\n  - {name: a, base_url: 'http://h/v1', model: m, api_key_env: AE_TEST_NOT_SET}",
        "targets.0.api_key_env", "AE_TEST_NOT_SET"),
    "duplicate-name": ("targets:\n  - {name: a, base_url: 'http://h/v1', model: m}\n"
                       "  - {name: a, base_url: 'http://h/v1', model: n}", "targets.1.name", "duplicate"),
    "no-targets": ("label: x\n", "targets", "missing"),
    "wrong-type": ("targets:\n  - {name: a, base_url: 'http://h/v1', model: m, concurrency: many}",
                   "targets.0.concurrency", "integer"),
    "bad-tool-choice": ("targets:\n  - {name: a, base_url: 'http://h/v1', model: m, tool_choice: 'always on'}",
                        "targets.0.tool_choice", "auto"),
}


@pytest.mark.parametrize("text, field_name, hint", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_targets_file_is_a_config_error_naming_file_and_field(tmp_path, monkeypatch, text, field_name, hint):
    monkeypatch.delenv("AE_TEST_NOT_SET", raising=False)
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(str(path))) as info:
        load_run_config(path)
    assert info.value.path == str(path)
    assert info.value.field == field_name
    assert hint in str(info.value)
    assert "sk-1" not in str(info.value)


@pytest.mark.parametrize("text, hint", [("targets: [", "not valid YAML"), ("- a\n- b\n", "mapping")],
                         ids=["bad-yaml", "not-a-mapping"])
def test_unreadable_targets_file_is_a_config_error_naming_the_file(tmp_path, text, hint):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=hint) as info:
        load_run_config(path)
    assert info.value.path == str(path)


def test_readme_targets_example_loads(tmp_path, monkeypatch):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Targets file", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("VLLM_API_KEY", "sk-readme")
    config = load_run_config(write(tmp_path, example))
    assert [t.name for t in config.targets] == ["qwen3.5-27b", "qwen3.6-35b-a3b"]
    assert config.targets[0].sampling == FIELD_SAMPLING


def test_missing_targets_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_run_config(tmp_path / "nope.yaml")


@run_async
async def test_clients_share_a_tls_context_per_kind_and_an_http_one_trusts_no_ca():
    """Building httpx's default TLS context reads the CA bundle (~16 ms); a run builds a
    client for the probe, one per target and one per ``/v1/models`` check, so they share
    it.  A plain-http server needs none: its clients share a context with no CA, which
    still demands a verified certificate and host name (a redirect to https fails closed)."""
    import ssl

    contexts = {}
    for name, url in (("a", "https://127.0.0.1:9/v1"), ("b", "HTTPS://127.0.0.1:9/v1"),
                      ("c", "http://127.0.0.1:9/v1"), ("d", "http://127.0.0.1:10/v1")):
        client = ModelClient(Target(name=name, base_url=url, model="m"))
        try:
            contexts[name] = client._http._transport._inner._pool._ssl_context
        finally:
            await client.aclose()
    assert contexts["a"] is contexts["b"] and contexts["c"] is contexts["d"]
    for ctx in contexts.values():
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert contexts["a"].cert_store_stats()["x509_ca"] > 0
    assert contexts["c"].cert_store_stats()["x509_ca"] == 0


@run_async
async def test_a_transport_given_to_the_client_carries_its_requests_through_the_guard():
    """``ModelClient(target, transport=...)``: a test (or a proxy) hands the client what
    carries its requests, instead of reaching into its private httpx wiring; the reply
    size guard still wraps it."""
    from agent_eval.live.client import httpx

    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content)["model"]))
        return httpx.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hi"}}]})

    target = Target(name="t", base_url="http://model.invalid/v1", model="m")
    async with ModelClient(target, transport=httpx.MockTransport(answer)) as client:
        reply = await client.complete([{"role": "user", "content": "hello"}])
    assert seen == [("POST", "/v1/chat/completions", "m")]
    assert reply.content == "hi"

    def huge(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(b"x" * 4096))  # read as it comes

    small = Target(name="t", base_url="http://model.invalid/v1", model="m",
                   max_reply_bytes=1024)
    async with ModelClient(small, transport=httpx.MockTransport(huge)) as client:
        with pytest.raises(HarnessFault, match="1024"):
            await client.complete([{"role": "user", "content": "hello"}])
