"""The client's guard on every response body: a size cap, and UTF-8 repaired, never
changed when it was valid (a multi-byte character split across reads stays whole)."""

from __future__ import annotations

import asyncio

import pytest

from agent_eval.live.client import Fault, classify_fault
from agent_eval.live.guard import GuardedStream, ReplyTooLarge


class _Chunks:
    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks

    async def __aiter__(self):
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        pass


def _read(chunks: list[bytes], cap: int = 1 << 20) -> bytes:
    async def go() -> bytes:
        return b"".join([c async for c in GuardedStream(_Chunks(chunks), cap)])

    return asyncio.run(go())


def test_valid_utf8_split_inside_a_character_comes_through_unchanged():
    text = '{"content": "naïve 🚀 ；"}'.encode()
    cut = text.index("🚀".encode()) + 2  # in the middle of the 4-byte emoji
    assert _read([text[:cut], text[cut:]]) == text


def test_bytes_that_are_not_utf8_become_replacement_characters():
    assert _read([b'{"content": "a\xff', b'\xfeb"}']) == '{"content": "a\ufffd\ufffdb"}'.encode()


def test_a_body_past_the_cap_raises_reply_too_large_and_classifies_as_a_final_fault():
    with pytest.raises(ReplyTooLarge, match="more than 1024 bytes") as caught:
        _read([b"x" * 600, b"x" * 600], cap=1024)
    fault = classify_fault(caught.value, 120)
    assert fault == Fault("too_large", "reply too large", str(caught.value), False)
    assert "more than 1024 bytes" in fault.detail


def test_deep_nesting_is_a_garbled_reply_not_a_crash():
    fault = classify_fault(RecursionError("maximum recursion depth exceeded"), 120)
    assert (fault.kind, fault.retry) == ("garbled", True)
    assert "nested too deep" in fault.reason
