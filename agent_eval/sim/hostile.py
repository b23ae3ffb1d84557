"""Hostile model output, on the wire: what a degenerate model or a broken server sends.

The fault knobs in ``server.Faults`` that do not fail the request but answer with bytes a
client must survive:

    endless       an answer that never ends: SSE content chunks forever, or a JSON body
                  whose content string never closes (until the client hangs up)
    huge reply    a well-formed reply whose content is padded to ``huge_reply_chars``
    invalid UTF-8 a reply whose content holds bytes that are not UTF-8 (``\\xff\\xfe``)
    nested args   tool-call arguments nested ``nesting_depth`` deep (``[[[[...]]]]``)
    nested body   a body with an extra field nested ``nesting_depth`` deep
    control chars content that opens with terminal escapes: clear screen, an OSC 52
                  clipboard write, an OSC 8 link, the 8-bit CSI, a carriage return

Each keeps the reply's tool calls (except ``endless``), so the session goes on and the
client's handling shows up in what is stored and judged.  The bytes are built by string
concatenation, never by ``json.dumps`` of a deep structure.  Pure, except ``write_endless``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from agent_eval.sim.completions import Completion, WireCall

INVALID_UTF8_MARK = "@@bad-utf8@@"  # shorter than a streamed piece
INVALID_UTF8_BYTES = b"\xff\xfe\xc3("  # a lone 0xff, 0xfe and a broken two-byte sequence
ENDLESS_PIECE = "endless " * 512  # 4 KiB of content per write


def nested_text(depth: int) -> str:
    """``[[[...]]]`` nested ``depth`` deep: valid JSON no recursive decoder survives."""
    return "[" * depth + "]" * depth


def nest_arguments(done: Completion, depth: int) -> Completion:
    """Every tool call's arguments become ``{"command": [[[...]]]}`` nested ``depth`` deep."""
    text = '{"command": ' + nested_text(depth) + "}"
    calls = tuple(WireCall(c.id, c.name, text) for c in done.calls)
    return dataclasses.replace(done, calls=calls)


def pad_content(done: Completion, chars: int) -> Completion:
    """The reply with ``chars`` characters of padding appended to its content."""
    reply = done.reply
    padded = (reply.content or "") + "x" * chars
    return dataclasses.replace(done, reply=dataclasses.replace(reply, content=padded))


TERMINAL_ESCAPES = ("\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4=\x07"
                    "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\\x9b31m\rowned ")


def add_control_chars(done: Completion) -> Completion:
    """Content that opens with :data:`TERMINAL_ESCAPES`."""
    reply = done.reply
    text = TERMINAL_ESCAPES + (reply.content or "")
    return dataclasses.replace(done, reply=dataclasses.replace(reply, content=text))


def mark_invalid_utf8(done: Completion) -> Completion:
    """Content that starts with a mark :func:`break_utf8` turns into invalid bytes."""
    reply = done.reply
    marked = INVALID_UTF8_MARK + (reply.content or "")
    return dataclasses.replace(done, reply=dataclasses.replace(reply, content=marked))


def break_utf8(payload: bytes) -> bytes:
    """Replace the mark of :func:`mark_invalid_utf8` by bytes that are not UTF-8."""
    return payload.replace(INVALID_UTF8_MARK.encode(), INVALID_UTF8_BYTES)


def nest_body(payload: bytes, depth: int) -> bytes:
    """A JSON object ``payload`` with a field ``nested`` holding ``depth`` nested lists."""
    assert payload.startswith(b"{")
    return b'{"nested": ' + nested_text(depth).encode() + b", " + payload[1:]


async def write_endless(request: web.Request, *, stream: bool, pause_s: float,
                        stopping: asyncio.Event) -> web.StreamResponse:
    """An answer that never ends, until the client hangs up or the server stops."""
    content_type = "text/event-stream" if stream else "application/json"
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    if stream:
        chunk = {"id": "chatcmpl-endless", "object": "chat.completion.chunk", "created": 0,
                 "model": "endless", "choices": [{"index": 0, "delta": {"content": ENDLESS_PIECE},
                                                  "finish_reason": None}]}
        piece = b"data: " + json.dumps(chunk).encode() + b"\n\n"
    else:
        await response.write(b'{"id": "chatcmpl-endless", "object": "chat.completion", '
                             b'"choices": [{"index": 0, "message": {"role": "assistant", '
                             b'"content": "')
        piece = ENDLESS_PIECE.encode()
    try:
        while not stopping.is_set():
            await response.write(piece)
            await asyncio.sleep(pause_s)
    except (ConnectionError, RuntimeError):
        pass  # the client hung up: the only way this answer ends
    return response


def draw(faults: Any, draw: Callable[[], float]) -> frozenset[str]:
    """Which hostile-output knobs fire for this request (one draw per knob turned on)."""
    names = ("huge_reply", "invalid_utf8", "nested_args", "nested_body", "control_chars")
    return frozenset(n for n in names
                     if getattr(faults, f"{n}_rate") and draw() < getattr(faults, f"{n}_rate"))


def apply(done: Completion, faults: Any, fired: frozenset[str]) -> Completion:
    """The completion with the reply-level knobs that fired applied."""
    if "huge_reply" in fired:
        done = pad_content(done, faults.huge_reply_chars)
    if "invalid_utf8" in fired:
        done = mark_invalid_utf8(done)
    if "nested_args" in fired:
        done = nest_arguments(done, faults.nesting_depth)
    if "control_chars" in fired:
        done = add_control_chars(done)
    return done


def apply_bytes(payload: bytes, faults: Any, fired: frozenset[str]) -> bytes:
    """The serialized answer (or first SSE chunk) with the byte-level knobs applied."""
    if "invalid_utf8" in fired:
        payload = break_utf8(payload)
    if "nested_body" in fired:
        payload = nest_body(payload, faults.nesting_depth)
    return payload

