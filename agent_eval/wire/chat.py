"""OpenAI Chat Completions (``POST .../chat/completions``): the vocabulary every other
protocol is read into, so reading a request is checking it and writing one is a copy.
Replies: one ``chat.completion`` or ``chat.completion.chunk`` events ended by ``[DONE]``
(https://platform.openai.com/docs/api-reference/chat).  Pure."""

from __future__ import annotations

import json
from typing import Any

from agent_eval.wire.records import (
    DeltaFolder,
    ParsedCall,
    ParsedReply,
    json_object,
    mapping,
    sse_objects,
    string,
)

NAME = "chat"


def matches(path: str) -> bool:
    return path.endswith("/chat/completions")


def read_request(body: dict[str, Any], path: str = "") -> dict[str, Any] | None:
    """The request as is, when it carries a ``messages`` list; None otherwise."""
    return body if isinstance(body.get("messages"), list) else None


def write_request(chat: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(path under the base URL, body)`` of a stored request."""
    return "/chat/completions", dict(chat)


def parse_reply(text: str, *, streamed: bool) -> ParsedReply:
    return _parse_stream(text) if streamed else _parse_whole(text)


def _parse_whole(text: str) -> ParsedReply:
    obj = json_object(text)
    choice = _first_choice(obj)
    if obj is None or choice is None or not isinstance(choice.get("message"), dict):
        return ParsedReply(status="unparseable")  # not a chat completion
    message = choice["message"]
    reply = ParsedReply(
        content=string(message.get("content")), reasoning=_reasoning(message),
        finish_reason=string(choice.get("finish_reason")) or None,
        usage=mapping(obj.get("usage")),
        model=string(obj.get("model")) or None,
    )
    for tc in message.get("tool_calls") or []:
        if isinstance(tc, dict):
            fn = mapping(tc.get("function"))
            args = fn.get("arguments")
            reply.calls.append(ParsedCall(
                id=string(tc.get("id")) or None, name=string(fn.get("name")),
                arguments=args if isinstance(args, str) else json.dumps(args),
            ))
    if reply.finish_reason is None:
        reply.status = "truncated"
    return reply


def _parse_stream(text: str) -> ParsedReply:
    """Server-sent events: ``data: {chunk}`` lines folded into one reply."""
    reply = ParsedReply()
    content: list[str] = []
    reasoning: list[str] = []
    calls = DeltaFolder()
    done = seen = False
    for _, chunk in sse_objects(text):
        if not isinstance(chunk, dict):
            done = done or chunk == "[DONE]"
            continue
        seen = True
        reply.model = reply.model or string(chunk.get("model")) or None
        if isinstance(chunk.get("usage"), dict):
            reply.usage = chunk["usage"]
        choice = _first_choice(chunk)
        if choice is None:
            continue
        reply.finish_reason = string(choice.get("finish_reason")) or reply.finish_reason
        delta = mapping(choice.get("delta"))
        content.append(string(delta.get("content")))
        reasoning.append(_reasoning(delta))
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                fn = mapping(tc.get("function"))
                calls.add(tc.get("index"), tc.get("id"), fn.get("name"), fn.get("arguments"))
    reply.content, reply.reasoning = "".join(content), "".join(reasoning)
    reply.calls, reply.stream_faults = calls.calls(), list(calls.faults)
    if not seen:
        reply.status = "unparseable"
    elif reply.finish_reason is None or not done:
        reply.status = "truncated"
    return reply


def _first_choice(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    return choices[0]


def _reasoning(obj: dict[str, Any]) -> str:
    for name in ("reasoning_content", "reasoning"):
        value = obj.get(name)
        if isinstance(value, str) and value:
            return value
    return ""
