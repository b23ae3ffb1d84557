"""Reading a relayed exchange back: the request's JSON and the reply the server sent,
streamed deltas reassembled (each protocol's reader is in ``agent_eval.wire``; this
module keeps the body decoding and the Chat Completions entry points).  Pure: bytes in,
records out.

Anything malformed (a body that is not JSON, bytes that are not UTF-8, a stream cut
short) is read as far as it goes and marked, never raised: the client already got the
bytes unchanged, the record only says what could be read.

``ReplyStatus`` (how one reply ended) is documented in ``agent_eval/wire/records.py``.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from agent_eval.wire import chat
from agent_eval.wire.records import ParsedCall, ParsedReply, ReplyStatus

__all__ = ["ParsedCall", "ParsedReply", "ReplyStatus", "decode_body", "parse_reply",
           "parse_request"]


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
    """A Chat Completions reply (``agent_eval.wire`` reads the other protocols)."""
    return chat.parse_reply(body.decode("utf-8", "replace"), streamed=streamed)
