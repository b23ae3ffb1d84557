"""Reading a relayed exchange back: the request's JSON and the reply the server sent,
streamed deltas reassembled.  Pure: bytes in, records out.

Anything malformed (a body that is not JSON, bytes that are not UTF-8, a stream cut
short) is read as far as it goes and marked, never raised: the client already got the
bytes unchanged, the record only says what could be read.

``ReplyStatus`` (the end of one reply, as recorded on its turn's ``finish_reason`` when
the server gave none):

    ``complete``        the answer ended with a finish reason (and ``[DONE]`` if streamed)
    ``client-abort``    the client went away first; its partial calls are kept in the
                        transcript but never judged, so they never count against the model
    ``upstream-error``  the upstream answered an error status, or died mid-answer
    ``truncated``       the answer ended cleanly but without its end (no finish reason)
    ``unparseable``     the answer (or the request) is not a chat completion we can read
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_eval.transcript import LONE_SURROGATE_ESCAPE

ReplyStatus = Literal["complete", "client-abort", "upstream-error", "truncated", "unparseable"]


@dataclass(slots=True)
class ParsedCall:
    id: str | None
    name: str
    arguments: str


@dataclass(slots=True)
class ParsedReply:
    """The first choice of one chat completion, and the usage the server reported."""

    status: ReplyStatus = "complete"
    content: str = ""
    reasoning: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    lone_surrogates: bool = False  # the body escapes one: its session is stored mended

    def message(self) -> dict[str, Any]:
        """The reply as an assistant message (for the stored transcript)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.calls
            ]
        return msg


def parse_request(body: bytes) -> dict[str, Any] | None:
    """The request's JSON object, or None when it is not one (forwarded all the same)."""
    try:
        value = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("messages"), list) else None


DECODED = ("gzip", "x-gzip", "deflate")
"""Content codings the recorder undoes to read a body; any other (``br``, ``zstd``,
several stacked) leaves the body unread: its turn is recorded as ``unparseable``."""


def decode_body(body: bytes, encoding: str, limit: int) -> bytes | None:
    """The body as the sender meant it: gzip or deflate undone, or None when it cannot be
    read within ``limit`` bytes (corrupt, cut short, a coding not in :data:`DECODED`, or
    inflating past the limit).  The output is capped as it is produced
    (``decompressobj(...).decompress(data, max_length)``), so a 408 KB gzip bomb that
    inflates to 400 MiB costs at most twice ``limit`` bytes of memory, never 400 MiB."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return body
    if coding in ("gzip", "x-gzip"):
        return _inflate(body, 16 + zlib.MAX_WBITS, limit, members=True)
    if coding == "deflate":  # zlib-wrapped as RFC 9110 says, or raw as some servers send
        wrapped = _inflate(body, zlib.MAX_WBITS, limit)
        return wrapped if wrapped is not None else _inflate(body, -zlib.MAX_WBITS, limit)
    return None


def _inflate(data: bytes, wbits: int, limit: int, *, members: bool = False) -> bytes | None:
    """``data`` inflated, at most ``limit`` bytes; None when more, corrupt or cut short.
    ``members``: gzip allows several members one after the other (``gzip.decompress``
    reads them all, so does this)."""
    parts: list[bytes] = []
    size = 0
    while True:
        inflater = zlib.decompressobj(wbits)
        try:
            part = inflater.decompress(data, limit - size + 1)  # +1: tells "more" from "exactly"
        except zlib.error:
            return None
        size += len(part)
        if size > limit or inflater.unconsumed_tail or not inflater.eof:
            return None
        parts.append(part)
        data = inflater.unused_data
        if not members or not data:
            return b"".join(parts)


def parse_reply(body: bytes, *, streamed: bool) -> ParsedReply:
    text = body.decode("utf-8", "replace")
    reply = _parse_stream(text) if streamed else _parse_whole(text)
    reply.lone_surrogates = LONE_SURROGATE_ESCAPE.search(body) is not None
    return reply


def _parse_whole(text: str) -> ParsedReply:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return ParsedReply(status="unparseable")
    choice = _first_choice(obj)
    if choice is None:
        return ParsedReply(status="unparseable")
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    reply = ParsedReply(
        content=_str(message.get("content")), reasoning=_reasoning(message),
        finish_reason=_str(choice.get("finish_reason")) or None,
        usage=obj.get("usage") if isinstance(obj.get("usage"), dict) else {},
        model=_str(obj.get("model")) or None,
    )
    for tc in message.get("tool_calls") or []:
        if isinstance(tc, dict):
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            args = fn.get("arguments")
            reply.calls.append(ParsedCall(
                id=_str(tc.get("id")) or None, name=_str(fn.get("name")),
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
    calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
    done = seen = False
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            continue
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            continue
        if not isinstance(chunk, dict):
            continue
        seen = True
        reply.model = reply.model or _str(chunk.get("model")) or None
        if isinstance(chunk.get("usage"), dict):
            reply.usage = chunk["usage"]
        choice = _first_choice(chunk)
        if choice is None:
            continue
        reply.finish_reason = _str(choice.get("finish_reason")) or reply.finish_reason
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        content.append(_str(delta.get("content")))
        reasoning.append(_reasoning(delta))
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                _fold_call(calls, tc)
    reply.content, reply.reasoning = "".join(content), "".join(reasoning)
    reply.calls = [ParsedCall(c[0], c[1], "".join(c[2])) for _, c in sorted(calls.items())]
    if not seen:
        reply.status = "unparseable"
    elif reply.finish_reason is None or not done:
        reply.status = "truncated"
    return reply


def _fold_call(calls: dict[int, list[Any]], tc: dict[str, Any]) -> None:
    index = tc.get("index")
    if not isinstance(index, int):  # servers that omit the index: a new id starts a call
        index = max(calls, default=-1) + (1 if tc.get("id") or not calls else 0)
    entry = calls.setdefault(index, [None, "", []])
    if tc.get("id"):
        entry[0] = _str(tc["id"])
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
    name, arguments = _str(fn.get("name")), fn.get("arguments")
    if name and name != entry[1]:
        entry[1] += name
    if isinstance(arguments, str) and arguments:
        entry[2].append(arguments)


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


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
