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
    stream = ChatStream()
    for _, chunk in sse_objects(text):
        stream.add(chunk)
    return stream.reply()


class ChatStream:
    """A streamed reply read chunk by chunk: the one reader of ``chat.completion.chunk``
    events, for a body read whole (the proxy, ``replay``: :func:`parse_reply`) and for
    chunks as they arrive (the live client, which times the first token by what
    :meth:`add` returns).  Only the first choice is read; a ``usage`` that is not an
    object is no usage; tool-call deltas are folded by ``records.DeltaFolder``."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.usage: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.done = False  # ``[DONE]`` seen
        self.seen = False  # a chunk (a JSON object) seen
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls = DeltaFolder()

    def add(self, chunk: Any) -> bool:
        """Read one event's value (a decoded chunk, or the ``[DONE]`` marker); True when
        it carried text, reasoning or a tool-call delta (the first token, for timing)."""
        if not isinstance(chunk, dict):
            self.done = self.done or chunk == "[DONE]"
            return False
        self.seen = True
        self.model = self.model or string(chunk.get("model")) or None
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choice = _first_choice(chunk)
        if choice is None:
            return False
        self.finish_reason = string(choice.get("finish_reason")) or self.finish_reason
        delta = mapping(choice.get("delta"))
        text, think = string(delta.get("content")), _reasoning(delta)
        self.content.append(text)
        self.reasoning.append(think)
        deltas = delta.get("tool_calls") or []
        for tc in deltas if isinstance(deltas, list) else []:
            if isinstance(tc, dict):
                fn = mapping(tc.get("function"))
                self.calls.add(tc.get("index"), tc.get("id"), fn.get("name"), fn.get("arguments"))
        return bool(text or think or deltas)

    def reply(self) -> ParsedReply:
        """The reply so far: ``unparseable`` when no chunk came, ``truncated`` without a
        finish reason or the ``[DONE]`` marker."""
        reply = ParsedReply(content="".join(self.content), reasoning="".join(self.reasoning),
                            finish_reason=self.finish_reason, usage=self.usage,
                            model=self.model)
        reply.calls, reply.stream_faults = self.calls.calls(), list(self.calls.faults)
        if not self.seen:
            reply.status = "unparseable"
        elif reply.finish_reason is None or not self.done:
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
