"""Caps on the model text a session stores, so one runaway reply cannot fill the disk.

A model that writes 10 MB per reply once made an 821 MB database out of 29 sessions:
every reply is stored in its turn, and again in the session's message list.  Each text
field a session stores (a turn's content and reasoning, a call's arguments, command,
output and source reason, and each string in the message list) keeps its first
``STORED_TEXT_CHARS`` characters followed by a visible marker that says how many were cut.
Metrics never read these texts; verdicts and findings are computed before the cut, on the
whole reply, so capping changes what ``show`` and the report display, never a rate.  A
``rescore`` of a capped call judges the capped text.  Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, overload

from agent_eval.transcript import CallRecord, SessionRecord, TurnRecord

STORED_TEXT_CHARS = 65_536
"""Characters kept per stored text field (README, "Hostile output")."""

CAP_MARKER = "\n[agent-eval: stored {kept} of {total} characters; the rest was cut]"


@overload
def cap_text(text: str, limit: int = STORED_TEXT_CHARS) -> str: ...
@overload
def cap_text(text: None, limit: int = STORED_TEXT_CHARS) -> None: ...
@overload
def cap_text(text: str | None, limit: int = STORED_TEXT_CHARS) -> str | None: ...
def cap_text(text: str | None, limit: int = STORED_TEXT_CHARS) -> str | None:
    """``text`` itself when short enough, else its first ``limit`` characters and the
    marker naming both lengths."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + CAP_MARKER.format(kept=limit, total=len(text))


def cap_session(record: SessionRecord, limit: int = STORED_TEXT_CHARS) -> SessionRecord:
    """A copy of ``record`` with every stored text field capped (the record itself is
    left alone: the caller may still use the full text)."""
    if not _needs_cap(record, limit):
        return record
    return replace(
        record,
        turns=[_cap_turn(t, limit) for t in record.turns],
        calls=[_cap_call(c, limit) for c in record.calls],
        messages=[cap_message(m, limit) for m in record.messages],
    )


def _needs_cap(record: SessionRecord, limit: int) -> bool:
    texts: list[str | None] = [t for turn in record.turns for t in (turn.content, turn.reasoning)]
    texts += [t for c in record.calls for t in (c.arguments, c.command, c.output, c.source_reason)]
    return any(t is not None and len(t) > limit for t in texts) or any(
        _has_long_text(m, limit) for m in record.messages
    )


def _has_long_text(value: Any, limit: int) -> bool:
    """Whether a string inside ``value`` is longer than ``limit`` (what ``cap_message``
    would cut), found without serialising the message."""
    if isinstance(value, str):
        return len(value) > limit
    if isinstance(value, dict):
        return any(_has_long_text(v, limit) for v in value.values())
    if isinstance(value, list):
        return any(_has_long_text(v, limit) for v in value)
    return False


def _cap_turn(turn: TurnRecord, limit: int) -> TurnRecord:
    return replace(turn, content=cap_text(turn.content, limit),
                   reasoning=cap_text(turn.reasoning, limit))


def _cap_call(call: CallRecord, limit: int) -> CallRecord:
    return replace(
        call, arguments=cap_text(call.arguments, limit), command=cap_text(call.command, limit),
        output=cap_text(call.output, limit), source_reason=cap_text(call.source_reason, limit),
    )


def cap_message(value: Any, limit: int) -> Any:
    """Every string inside a chat message (content, parts, tool-call arguments) capped."""
    if isinstance(value, str):
        return cap_text(value, limit)
    if isinstance(value, dict):
        return {k: cap_message(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cap_message(v, limit) for v in value]
    return value
