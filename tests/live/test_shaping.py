"""Conversation shaping: what goes on the wire is what every major server accepts.

Built from a real failure: llama-cpp-python answers 500 to an assistant turn with
``content: null`` (llama-cpp-python#1805) and to one without ``content``; vLLM answers 400
to an empty assistant turn without tool calls (vllm#21089).  The end-to-end tests play a
real scenario through the real client against a loopback server that refuses exactly what
those servers refuse.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web
from support.loopback import strict_refusal

from agent_eval.live.client import ModelClient, Target
from agent_eval.live.orchestrator import run_session
from agent_eval.live.shaping import made_up_call_id, shape_messages
from agent_eval.scenario import load_suite

RALF = Path(__file__).resolve().parents[2] / "scenarios" / "ralf"

# The second request of that failure, as agent-eval sent it before the fix.
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "uv run scripts/lights.py --status"}'}}
ISSUE_10 = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "turn the lights off"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "all lights off"},
]


def test_assistant_turn_with_tool_calls_and_null_content_goes_out_with_empty_content():
    shaped = shape_messages(ISSUE_10)
    assert shaped[2] == {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert ISSUE_10[2]["content"] is None  # the caller's list is untouched


def test_assistant_turn_without_content_key_gets_empty_content():
    shaped = shape_messages([{"role": "assistant", "tool_calls": [CALL]}])
    assert shaped[0]["content"] == ""


def test_models_text_beside_tool_calls_is_kept():
    shaped = shape_messages([{"role": "assistant", "content": "Checking.", "tool_calls": [CALL]}])
    assert shaped[0]["content"] == "Checking."


def test_empty_assistant_turn_without_tool_calls_is_left_out():
    messages = [{"role": "user", "content": "A"}, {"role": "assistant", "content": ""},
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "user", "content": "B"}]
    assert shape_messages(messages) == [messages[0], messages[3]]


def test_empty_tool_calls_list_is_not_sent():
    shaped = shape_messages([{"role": "assistant", "content": "done", "tool_calls": []}])
    assert shaped == [{"role": "assistant", "content": "done"}]


def test_missing_ids_are_made_up_unique_and_the_tool_results_follow_them():
    no_id = {"type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [no_id, no_id]},
        {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
        {"role": "assistant", "content": "", "tool_calls": [no_id]},
        {"role": "tool", "content": "c"},
    ]
    shaped = shape_messages(messages)
    ids = [tc["id"] for m in shaped if m["role"] == "assistant" for tc in m["tool_calls"]]
    assert ids == [made_up_call_id(0, 0), made_up_call_id(0, 1), made_up_call_id(3, 0)]
    assert len(set(ids)) == 3 and all(len(i) == 9 and i.isalnum() for i in ids)
    assert [m["tool_call_id"] for m in shaped if m["role"] == "tool"] == ids


def test_server_ids_are_kept_as_given():
    odd = dict(CALL, id="chatcmpl-tool-9f1c2e")
    shaped = shape_messages([{"role": "assistant", "content": "", "tool_calls": [odd]},
                             {"role": "tool", "tool_call_id": "chatcmpl-tool-9f1c2e", "content": "x"}])
    assert shaped[0]["tool_calls"][0]["id"] == "chatcmpl-tool-9f1c2e"
    assert shaped[1]["tool_call_id"] == "chatcmpl-tool-9f1c2e"


def test_tool_results_and_arguments_are_strings():
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": {"path": "a"}}}
    shaped = shape_messages([{"role": "assistant", "content": None, "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": "c1", "content": {"ok": True}}])
    assert shaped[0]["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    assert shaped[1]["content"] == '{"ok": true}'


def test_reasoning_is_sent_back_only_when_the_target_asks():
    turn = {"role": "assistant", "content": "", "reasoning_content": "think", "reasoning": "think",
            "tool_calls": [CALL]}
    assert "reasoning_content" not in shape_messages([turn])[0]
    assert "reasoning" not in shape_messages([turn])[0]
    assert shape_messages([turn], send_reasoning=True)[0]["reasoning_content"] == "think"


# ---- end to end: a strict server that refuses what llama-cpp-python and vLLM refuse ----

def strict_app(replies: list[dict], seen: list[dict]) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        refusal = strict_refusal(body["messages"])
        if refusal:
            return web.json_response({"error": {"message": refusal[1]}}, status=refusal[0])
        message = replies[min(len(seen), len(replies)) - 1]
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _play_against_strict_server(replies: list[dict]):
    seen: list[dict] = []
    runner = web.AppRunner(strict_app(replies, seen), handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        suite = load_suite(RALF)
        target = Target(name="strict", base_url=base_url, model="m", retries=1)
        async with ModelClient(target, backoff_s=0.001) as client:
            records = await run_session(suite.scenarios["lights-evening-off"], client,
                                        target="strict", suite=suite)
    finally:
        await runner.cleanup()
    return records[0], seen


def _bash(command: str, call_id: str | None) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def test_session_against_a_strict_server_is_judged_not_an_error():
    """Null content beside tool calls, no ids and reasoning all go out shaped."""
    replies = [
        {"content": None, "reasoning_content": "list first",
         "tool_calls": [_bash("uv run scripts/lights.py status", None)]},
        {"content": None, "tool_calls": [_bash("ls scripts | head", None),
                                         _bash("uv run scripts/lights.py status", None)]},
        {"content": "All done."},
    ]
    record, seen = asyncio.run(_play_against_strict_server(replies))
    assert record.status != "error", record.error
    assert len(seen) == 3  # no request was refused, none retried
    assert [(c.decision, c.primary) for c in record.calls] == [
        ("allow", None), ("deny", "AE301"), ("allow", None)]
    second = seen[1]["messages"]
    assert second[2]["content"] == "" and "reasoning_content" not in second[2]
    ids = [tc["id"] for m in seen[2]["messages"] if m["role"] == "assistant"
           for tc in m["tool_calls"]]
    assert len(set(ids)) == 3
