"""Stream parity through the proxy (``proxy --stream-parity``, agent_eval/proxy/parity.py).

Over real HTTP: a loopback upstream that answers a streamed request with one reply and
the same request whole with another (the streaming path of a server whose incremental
parser loses an argument: sgl-project/sglang#37634's class, AE510), the proxy in front,
the OpenAI SDK streaming through it.  The user's stream reaches the client byte for byte
as the upstream sent it; only after it ended does the recorder ask the upstream the whole
twin, tagged as a side request, and the pair's difference is kept on the user's session.
The twin is never a session of its own."""

from __future__ import annotations

import json

import openai
from aiohttp import web
from support.loopback import serve_in_thread
from support.proxyplay import proxy_in_thread

from agent_eval.proxy.parity import SIDE_HEADER

STREAMED_ARGS = json.dumps({"command": "uv run scripts/lights.py"})  # the stream lost "off"
WHOLE_ARGS = json.dumps({"command": "uv run scripts/lights.py off"})
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> str:
    body: dict = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                  "model": "qwen", "choices": [] if delta is None else [
                      {"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


STREAM = "".join([
    chunk({"role": "assistant", "content": None}),
    chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                           "function": {"name": "bash", "arguments": ""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": STREAMED_ARGS}}]}),
    chunk({}, "tool_calls"),
    chunk(usage={"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}),
    "data: [DONE]\n\n"]).encode()


def whole(arguments: str) -> dict:
    """The whole answer; its call id is drawn anew, as servers draw one per request."""
    return {"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "qwen",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "bash", "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62}}


def upstream(whole_args: str, seen: list) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append((body, request.headers.get(SIDE_HEADER)))
        if body.get("stream"):
            return web.Response(body=STREAM, content_type="text/event-stream")
        return web.json_response(whole(whole_args))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def stream_once(store, tmp_path, whole_args: str, **request):
    seen: list = []
    with serve_in_thread(upstream(whole_args, seen)) as url, \
            proxy_in_thread(url, store, tmp_path, stream_parity=True,
                            ask_upstream=False) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="qwen", stream=True, tools=TOOLS,
            messages=[{"role": "user", "content": "Turn the lights off."}], **request)
        got = raw.http_response.read()
    status = proxy.recorder.status()  # the recorder stopped: every exchange taken
    run = store.resolve_run("latest")
    rows = list(store.session_rows([run.id]))
    return rows, seen, got, status


def test_a_streamed_reply_that_differs_from_its_whole_twin_is_ae510(store, tmp_path):
    rows, seen, got, status = stream_once(store, tmp_path, WHOLE_ARGS, temperature=0)
    assert got == STREAM  # the user's stream, byte for byte
    [(user, user_tag), (twin, twin_tag)] = seen  # the twin came after, tagged
    assert user["stream"] is True and user_tag is None
    assert twin_tag == "stream-parity" and twin["stream"] is False
    assert "stream_options" not in twin
    assert {k: v for k, v in twin.items() if k != "stream"} == \
        {k: v for k, v in user.items() if k not in ("stream", "stream_options")}
    [row] = rows  # the twin is nobody's session
    assert row.n_turns == 1 and row.status == "completed"
    assert row.stack_faults == (("AE510", False),)  # kept, never ending the session
    assert status["parity_twins"] == 1


def test_a_twin_that_agrees_leaves_no_fault(store, tmp_path):
    """The same call under another id is the same reply: ids are drawn per request."""
    rows, seen, _, _ = stream_once(store, tmp_path, STREAMED_ARGS, seed=7)
    assert len(seen) == 2
    [row] = rows
    assert row.stack_faults == ()


def test_decoding_that_does_not_repeat_itself_gets_no_twin(store, tmp_path):
    rows, seen, _, status = stream_once(store, tmp_path, WHOLE_ARGS)  # no temperature 0
    assert len(seen) == 1 and status["parity_twins"] == 0
    assert status["parity_skipped"] == 1
    [row] = rows
    assert row.stack_faults == ()
