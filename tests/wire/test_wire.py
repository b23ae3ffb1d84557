"""agent_eval.wire: each protocol read into chat turn records and written back, and hostile
bodies read to a clear status, never an exception."""

from __future__ import annotations

import json

import pytest

from agent_eval import wire
from agent_eval.wire.records import ParsedCall, ParsedReply

CMD = json.dumps({"command": "uv run scripts/db_query.py --sql 'SELECT 1'"})
CHAT = {
    "model": "m", "temperature": 0.5,
    "messages": [
        {"role": "system", "content": "You are the research subagent."},
        {"role": "user", "content": "Open attempts, please."},
        {"role": "assistant", "content": "Looking.", "reasoning_content": "db_query is allowed",
         "tool_calls": [{"id": "call-1", "type": "function",
                         "function": {"name": "bash", "arguments": CMD}}]},
        {"role": "tool", "tool_call_id": "call-1", "name": "bash", "content": "[]"},
        {"role": "user", "content": "Thanks."},
    ],
    "tools": [{"type": "function", "function": {
        "name": "bash", "description": "run", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}}}}}],
}


def normal(messages):
    """What a round trip must keep: roles, texts, reasoning, calls, results."""
    from agent_eval.proxy.linking import content_text

    return [(m["role"], content_text(m.get("content")), m.get("reasoning_content", ""),
             [(c["function"]["name"], json.loads(c["function"]["arguments"]))
              for c in m.get("tool_calls") or []]) for m in messages]


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages", "gemini"])
def test_a_chat_request_written_in_a_protocol_reads_back_the_same(protocol):
    path, body = wire.write_request(protocol, CHAT)
    back = wire.read_request(protocol, json.dumps(body).encode(), "/v1beta" + path
                             if protocol == "gemini" else "/v1" + path)
    assert wire.protocol_of(("/v1beta" if protocol == "gemini" else "/v1") + path) == protocol
    assert normal(back["messages"]) == normal(CHAT["messages"])
    assert [t["function"]["name"] for t in back["tools"]] == ["bash"]
    assert back["model"] == "m"


@pytest.mark.parametrize("protocol", ["responses", "messages", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_rendered_in_a_protocol_parses_back_the_same(protocol, stream):
    reply = ParsedReply(content="Looking.", reasoning="allowed", finish_reason="tool_calls",
                        calls=[ParsedCall("call-1", "bash", CMD)], model="m",
                        usage={"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
                        response_id="resp_1")
    events = wire.PROTOCOLS[protocol].render_reply(reply, stream=stream, created=0)
    if stream:
        text = "".join(f"event: {e.get('type', '')}\ndata: {json.dumps(e)}\n\n" for e in events)
    else:
        text = json.dumps(events[0])
    back = wire.parse_reply(protocol, text.encode(), streamed=stream)
    assert back.status == "complete" and back.finish_reason == "tool_calls"
    assert (back.content, back.reasoning) == ("Looking.", "allowed")
    assert [(c.name, json.loads(c.arguments)) for c in back.calls] == [("bash", json.loads(CMD))]
    assert back.usage["prompt_tokens"] == 10 and back.usage["completion_tokens"] == 4


HOSTILE = [b"", b"not json", b"\xff\xfe\x00garbage", b"[" * 100_000 + b"]" * 100_000,
           b'{"input": 5}', b'{"messages": "x"}', b'{"contents": [1, null, "x"]}',
           b'{"input": [{"type": "function_call", "arguments": {"a": [1]}}, 7, null]}',
           b'{"messages": [{"role": "user", "content": [{"type": "tool_result"}]}, 3]}']


@pytest.mark.parametrize("protocol", ["responses", "messages", "gemini"])
@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_bodies_read_to_a_clear_outcome(protocol, body):
    request = wire.read_request(protocol, body, "/v1beta/models/m:generateContent")
    assert request is None or isinstance(request["messages"], list)
    for streamed in (False, True):
        reply = wire.parse_reply(protocol, body, streamed=streamed)
        assert reply.status in ("unparseable", "truncated", "upstream-error", "complete")


@pytest.mark.parametrize("body, status", [
    ({"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]},
     "complete"),
    ({"choices": [{"index": 0, "message": {"content": "hi"}}]}, "truncated"),
    ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "unparseable"),
    ({"choices": [{"index": 0, "message": "hi", "finish_reason": "stop"}]}, "unparseable"),
    ({"choices": []}, "unparseable"),
], ids=["whole", "no-finish", "no-message", "message-not-an-object", "no-choices"])
def test_a_chat_completion_needs_a_choice_with_a_message(body, status):
    """A choice without a message object is not a chat completion (the live client's
    garbled reply, retried); one without a finish reason is a reply cut short."""
    reply = wire.parse_reply("chat", json.dumps(body).encode(), streamed=False)
    assert reply.status == status
    if status != "unparseable":
        assert reply.content == "hi"
