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

import gzip
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


def decode_body(body: bytes, encoding: str) -> bytes:
    """The body as the server meant it: gzip or deflate undone (the client got it as sent)."""
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError):
        return b""
    return body


def parse_reply(body: bytes, *, streamed: bool) -> ParsedReply:
    """A Chat Completions reply (``agent_eval.wire`` reads the other protocols)."""
    return chat.parse_reply(body.decode("utf-8", "replace"), streamed=streamed)
