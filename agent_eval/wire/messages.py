"""Anthropic Messages (``POST .../v1/messages``, Claude Code's ``?beta=true`` too), as
Claude Code and llama.cpp's ``llama-server`` speak it, read into and written from Chat
Completions' vocabulary.  Pure.

Checked against anthropic-sdk-python's types (``src/anthropic/types/``:
``message_param.py``, ``tool_use_block.py``, ``tool_result_block_param.py``,
``raw_message_stream_event.py``, ``input_json_delta.py``), Anthropic's streaming docs
(https://docs.anthropic.com/en/docs/build-with-claude/streaming), llama.cpp's
``tools/server/README.md`` section "POST /v1/messages" (added in ggml-org/llama.cpp PR
17570; tool use needs ``--jinja``) and Claude Code 2.1.332's captures
(tests/fixtures/clis/claude-code).

Request to chat messages:

- ``system`` (a string or text blocks) → a leading ``system`` message, content as sent;
- a user message's ``tool_result`` blocks → one ``tool`` message each (``tool_use_id``,
  its content as sent), then the rest of its blocks (Claude Code's ``<system-reminder>``
  texts) as a user message;
- an assistant message's ``text`` blocks → its content, ``thinking`` blocks →
  ``reasoning_content``, ``tool_use`` blocks → ``tool_calls`` (``input`` serialised as
  the argument text);
- ``role: "system"`` entries inside ``messages`` (Claude Code sends them) stay system
  messages where they are; the session's system prompt is the leading ones only;
- tools: ``{name, description, input_schema}`` → chat function tools; server tools
  (``web_search_...``) are kept as sent; every other field (``max_tokens``, ``thinking``,
  ``metadata``, ``stream``, ...) is kept as sent.

Reply: one ``message`` object, or its stream (``message_start``, ``content_block_start``,
``content_block_delta`` with ``text_delta`` / ``input_json_delta`` / ``thinking_delta``,
``content_block_stop``, ``message_delta`` with ``stop_reason`` and usage,
``message_stop``; ``ping`` ignored; ``error`` is an upstream error).  A stream without
``message_stop`` is ``truncated``.  ``stop_reason`` maps to a chat finish reason:
``tool_use`` → ``tool_calls``, ``end_turn`` / ``stop_sequence`` → ``stop``,
``max_tokens`` → ``length``, any other kept.  Usage: the prompt is ``input_tokens`` plus
the cache reads and writes (Anthropic counts them apart), cached = the cache reads.
"""

from __future__ import annotations

from typing import Any

from agent_eval.wire.records import (
    ParsedCall,
    ParsedReply,
    arguments_object,
    arguments_text,
    chat_usage,
    dicts,
    json_object,
    mapping,
    sse_objects,
    string,
)

NAME = "messages"
STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "stop_sequence": "stop",
                "max_tokens": "length"}


def matches(path: str) -> bool:
    return path.endswith("/messages")


# --- requests ----------------------------------------------------------------------------

def read_request(body: dict[str, Any], path: str = "") -> dict[str, Any] | None:
    if not isinstance(body.get("messages"), list):
        return None
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str | list) and system:
        messages.append({"role": "system", "content": system})
    for m in dicts(body["messages"]):
        messages.extend(_chat_messages(m))
    chat = {k: v for k, v in body.items() if k not in ("system", "messages", "tools")}
    chat["messages"] = messages
    if isinstance(body.get("tools"), list):
        chat["tools"] = [_chat_tool(t) for t in dicts(body["tools"])]
    return chat


def _chat_messages(m: dict[str, Any]) -> list[dict[str, Any]]:
    role, content = m.get("role"), m.get("content")
    if not isinstance(role, str):
        return []
    if not isinstance(content, list):
        return [{"role": role, "content": content if isinstance(content, str) else ""}]
    blocks = dicts(content)
    if role == "assistant":
        msg: dict[str, Any] = {"role": "assistant",
                               "content": [b for b in blocks if b.get("type") == "text"]}
        thinking = "".join(string(b.get("thinking")) for b in blocks
                           if b.get("type") == "thinking")
        if thinking:
            msg["reasoning_content"] = thinking
        calls = [{"id": string(b.get("id")), "type": "function",
                  "function": {"name": string(b.get("name")),
                               "arguments": arguments_text(b.get("input", {}))}}
                 for b in blocks if b.get("type") in ("tool_use", "server_tool_use")]
        if calls:
            msg["tool_calls"] = calls
        return [msg]
    out: list[dict[str, Any]] = []
    rest = []
    for b in blocks:
        if b.get("type") == "tool_result":
            result = b.get("content")
            tool: dict[str, Any] = {"role": "tool", "tool_call_id": string(b.get("tool_use_id")),
                    "content": result if isinstance(result, str | list) else ""}
            if b.get("is_error"):
                tool["is_error"] = True
            out.append(tool)
        else:
            rest.append(b)
    if rest or not out:
        out.append({"role": role, "content": rest})
    return out


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if "input_schema" not in tool:  # a server tool (web search, code execution...)
        return tool
    fn = {k: v for k, v in tool.items() if k not in ("input_schema", "type")}
    fn["parameters"] = tool["input_schema"]
    return {"type": "function", "function": fn}


def write_request(chat: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(path under the base URL, body)``: the inverse of :func:`read_request`; tool
    results and the user text after them merge into one user message again (the API
    wants user and assistant turns to alternate)."""
    body = {k: v for k, v in chat.items() if k not in ("messages", "tools")}
    messages = [m for m in dicts(chat.get("messages"))]
    if messages and messages[0].get("role") == "system":
        body["system"] = messages.pop(0).get("content")
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result",
                                     "tool_use_id": string(m.get("tool_call_id")),
                                     "content": m.get("content")}
            if m.get("is_error"):
                block["is_error"] = True
            _user_blocks(out).append(block)
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("reasoning_content"):
                blocks.append({"type": "thinking", "thinking": m["reasoning_content"]})
            content = m.get("content")
            blocks += dicts(content) if isinstance(content, list) else (
                [{"type": "text", "text": content}] if content else [])
            for call in dicts(m.get("tool_calls")):
                fn = mapping(call.get("function"))
                blocks.append({"type": "tool_use", "id": string(call.get("id")),
                               "name": string(fn.get("name")),
                               "input": arguments_object(fn.get("arguments") or "{}")})
            out.append({"role": "assistant", "content": blocks})
        elif role == "user" and out and out[-1]["role"] == "user" \
                and isinstance(out[-1]["content"], list):
            content = m.get("content")
            out[-1]["content"] += dicts(content) if isinstance(content, list) else (
                [{"type": "text", "text": content}] if content else [])
        else:
            out.append({"role": role, "content": m.get("content")})
    body["messages"] = out
    if isinstance(chat.get("tools"), list):
        body["tools"] = [_wire_tool(t) for t in dicts(chat["tools"])]
    return "/messages", body


def _user_blocks(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not out or out[-1]["role"] != "user" or not isinstance(out[-1]["content"], list):
        out.append({"role": "user", "content": []})
    return out[-1]["content"]


def _wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function")
    if tool.get("type") != "function" or not isinstance(fn, dict):
        return tool
    out = {k: v for k, v in fn.items() if k != "parameters"}
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    return out


# --- replies -----------------------------------------------------------------------------

def parse_reply(text: str, *, streamed: bool) -> ParsedReply:
    if not streamed:
        obj = json_object(text)
        if obj is None or obj.get("type") == "error" or not isinstance(obj.get("content"), list):
            return ParsedReply(status="upstream-error" if obj and obj.get("type") == "error"
                               else "unparseable")
        return _from_message(obj, obj.get("stop_reason"), obj.get("usage"))
    return _parse_stream(text)


def _from_message(msg: dict[str, Any], stop: Any, usage: Any) -> ParsedReply:
    blocks = dicts(msg.get("content"))
    reply = ParsedReply(
        content="".join(string(b.get("text")) for b in blocks if b.get("type") == "text"),
        reasoning="".join(string(b.get("thinking")) for b in blocks
                          if b.get("type") == "thinking"),
        model=string(msg.get("model")) or None, response_id=string(msg.get("id")) or None,
        calls=[ParsedCall(string(b.get("id")) or None, string(b.get("name")),
                          b["partial"] if isinstance(b.get("partial"), str)
                          else arguments_text(b.get("input", {})))
               for b in blocks if b.get("type") in ("tool_use", "server_tool_use")],
    )
    if isinstance(stop, str) and stop:
        reply.finish_reason = STOP_REASONS.get(stop, stop)
    else:
        reply.status = "truncated"
    if isinstance(usage, dict):
        cached = usage.get("cache_read_input_tokens")
        written = usage.get("cache_creation_input_tokens")
        prompt = usage.get("input_tokens")
        if isinstance(prompt, int):
            prompt += sum(v for v in (cached, written) if isinstance(v, int))
        reply.usage = chat_usage(prompt, usage.get("output_tokens"), cached=cached)
    return reply


def _parse_stream(text: str) -> ParsedReply:
    message: dict[str, Any] = {}
    blocks: dict[Any, dict[str, Any]] = {}
    stop: Any = None
    usage: dict[str, Any] = {}
    ended = seen = False
    for _, event in sse_objects(text):
        if not isinstance(event, dict):
            continue
        seen = True
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            if isinstance(message.get("usage"), dict):
                usage.update(message["usage"])
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[event.get("index")] = dict(event["content_block"])
        elif kind == "content_block_delta" and event.get("index") in blocks:
            _fold_delta(blocks[event["index"]], event.get("delta"))
        elif kind == "message_delta":
            delta = mapping(event.get("delta"))
            stop = delta.get("stop_reason") or stop
            if isinstance(event.get("usage"), dict):
                usage.update({k: v for k, v in event["usage"].items() if v is not None})
        elif kind == "message_stop":
            ended = True
        elif kind == "error":
            return ParsedReply(status="upstream-error", model=string(message.get("model")) or None)
    if not seen:  # a stream cut inside its first event is cut, not garbage
        return ParsedReply(status="truncated" if "data:" in text else "unparseable")
    reply = _from_message(dict(message, content=[blocks[k] for k in blocks]), stop, usage)
    if not ended:
        reply.status = "truncated"
    return reply


def _fold_delta(block: dict[str, Any], delta: Any) -> None:
    if not isinstance(delta, dict):
        return
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = string(block.get("text")) + string(delta.get("text"))
    elif kind == "input_json_delta":
        block["partial"] = string(block.get("partial")) + string(delta.get("partial_json"))
    elif kind == "thinking_delta":
        block["thinking"] = string(block.get("thinking")) + string(delta.get("thinking"))


def render_reply(reply: ParsedReply, *, stream: bool, created: int = 0) -> list[dict[str, Any]]:
    """The reply as Messages sends it: one ``message`` (``stream`` False) or its events
    (the caller frames each as ``event: TYPE`` / ``data: JSON``)."""
    blocks: list[dict[str, Any]] = []
    if reply.reasoning:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for call in reply.calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": arguments_object(call.arguments)})
    stop = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}.get(
        reply.finish_reason or "stop", reply.finish_reason)
    usage = {"input_tokens": reply.usage.get("prompt_tokens", 0),
             "output_tokens": reply.usage.get("completion_tokens", 0),
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {"id": reply.response_id or "msg_0", "type": "message", "role": "assistant",
               "model": reply.model, "content": blocks, "stop_reason": stop,
               "stop_sequence": None, "usage": usage}
    if not stream:
        return [message]
    events: list[dict[str, Any]] = [{"type": "message_start", "message": dict(
        message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))}]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "tool_use":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": dict(block, input={})})
            raw = reply.calls[index - len(blocks) + len(reply.calls)].arguments
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw)]
        else:
            field = "thinking" if kind == "thinking" else "text"
            events.append({"type": "content_block_start", "index": index,
                           "content_block": dict(block, **{field: ""})})
            deltas = [{"type": f"{field}_delta", field: p} for p in _pieces(block[field])]
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]}},
               {"type": "message_stop"}]
    return events


def _pieces(text: str, size: int = 32) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
