"""Stack faults read off a session's replies, one after another: the one reading that a
live run (``live/orchestrator.py``), the proxy (``proxy/sessions.py``) and an import
(``importers``) share, so the same bytes get the same verdict whichever way they came.

:class:`StackReading` keeps what a reply's check needs from the replies before it (the
call ids already used: AE506) and keeps each reply's faults (``policy.stack.check_reply``,
read with the request's tool settings: ``policy.stack.exchange_of``) as session records.
A fault that ``ends`` left nothing of the model's in its reply: none of that reply's
calls is judged, so a call the stack cut or mangled is never the model's AE101/AE102.
:func:`ending_reason` is the stored reason of the ``error`` session such a fault ends
(:data:`~agent_eval.transcript.TRUNCATED` for a cut, else
:data:`~agent_eval.transcript.STACK_FAULT`).  A live session always ends there.  A
relayed or imported one ends ``error`` when that reply was its last
(:meth:`StackReading.ended_on`): the agent CLI, not the harness, decides whether it goes
on, and what the model wrote after is its own and is judged; the fault, and the call it
lost, are counted all the same.  Pure; never raises.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from agent_eval.policy import get_rule
from agent_eval.policy.rules import code_for
from agent_eval.policy.stack import (
    RAW_LIMIT,
    Exchange,
    StackFault,
    WireCall,
    check_parity,
    check_reply,
    exchange_of,
)
from agent_eval.transcript import STACK_FAULT, TRUNCATED, StackFaultRecord
from agent_eval.wire.chat import ChatStream

__all__ = ["StackReading", "ending_reason", "exchange_from_example", "fold_chunks", "recorded"]


class StackReading:
    """The stack faults of one session's replies, read in order (module docstring).
    ``check_ids``: False where call ids are not the wire's (Gemini sends none; an
    import's may be its harness's own)."""

    def __init__(self, *, check_ids: bool = True) -> None:
        self.check_ids = check_ids
        self.faults: list[StackFaultRecord] = []
        self.seen_ids: set[str] = set()
        self.turn_ids: dict[int, set[str]] = {}  # the call ids each reply read added
        self.ending: tuple[int, str] | None = None  # (turn, reason) of the last ending fault

    def reply(self, turn_index: int, request: Any, *, finish_reason: str | None,
              content: str, reasoning: str, calls: Sequence[Any],
              completion_tokens: int | None, stream_faults: Iterable[str] = (),
              template_markers: frozenset[str] | None = None) -> list[StackFaultRecord]:
        """The faults of one reply (calls: anything with ``id``, ``name``,
        ``arguments``), kept; any that ``ends`` says none of its calls is judged."""
        exchange = exchange_of(request, finish_reason=finish_reason, content=content,
                               reasoning=reasoning, calls=calls,
                               completion_tokens=completion_tokens,
                               stream_faults=stream_faults, earlier_ids=self.seen_ids,
                               check_ids=self.check_ids, template_markers=template_markers)
        faults = self._keep(turn_index, check_reply(exchange))
        ids = {c.id for c in calls if isinstance(c.id, str) and c.id}
        self.turn_ids.setdefault(turn_index, set()).update(ids)
        self.seen_ids.update(ids)
        ending = next((f for f in faults if f.ends), None)
        if ending is not None:
            self.ending = (turn_index, ending_reason(ending, calls, completion_tokens))
        return faults

    def parity(self, turn_index: int, request: Any, whole: Any,
               streamed: Any) -> list[StackFaultRecord]:
        """The stream-parity fault (AE510) of one turn played whole and streamed from the
        same context (replies as :meth:`reply` reads them); never ends the session.  Each
        half's call ids are checked against the turns before only: the half the session
        went on with (the whole one in a run, the streamed one through the proxy) was
        read by :meth:`reply` already, and a server draws new ids for each request."""
        earlier = set().union(*(ids for turn, ids in self.turn_ids.items()
                                if turn < turn_index))

        def exchange(reply: Any, stream: bool) -> Exchange:
            return exchange_of(dict(request or {}, stream=stream),
                               finish_reason=reply.finish_reason, content=reply.content or "",
                               reasoning=reply.reasoning or "", calls=reply.tool_calls,
                               completion_tokens=reply.completion_tokens,
                               stream_faults=getattr(reply, "stream_faults", None) or (),
                               earlier_ids=earlier,
                               check_ids=self.check_ids)
        return self._keep(turn_index, check_parity(exchange(streamed, True),
                                                   exchange(whole, False)))

    def error(self, turn_index: int, status: int | None, body: str) -> list[StackFaultRecord]:
        """The faults of an HTTP error answered instead of a reply (a parser's 5xx)."""
        return self._keep(turn_index, check_reply(Exchange(status=status, error_body=body)))

    def ended_on(self, turn_index: int) -> str | None:
        """The reason of the ``error`` session, when a fault ended the reply of
        ``turn_index`` (a relayed or imported session's last)."""
        if self.ending is not None and self.ending[0] == turn_index:
            return self.ending[1]
        return None

    def _keep(self, turn_index: int, faults: list[StackFault]) -> list[StackFaultRecord]:
        out = recorded(turn_index, faults)
        self.faults += out
        return out


def recorded(turn_index: int, faults: Iterable[StackFault]) -> list[StackFaultRecord]:
    return [StackFaultRecord(turn_index, f.code, f.message, f.raw, f.ends) for f in faults]


def ending_reason(fault: StackFaultRecord, calls: Sequence[Any],
                  completion_tokens: int | None) -> str:
    """The stored reason of a session a stack fault ended."""
    if fault.code == code_for("cut-by-token-limit"):
        name = next((c.name for c in calls if c.arguments[:RAW_LIMIT] == fault.raw), "")
        return (f"{TRUNCATED}{name!r} after {completion_tokens} completion "
                "tokens; raise the target's max_tokens")
    rule = get_rule(fault.code)
    return f"{STACK_FAULT}{fault.code} {rule.name if rule else ''}: {fault.message}"


def exchange_from_example(text: str) -> Exchange:
    """The exchange a ``wire`` example of the registry describes: a JSON object with
    ``request`` (the body's tool settings), ``reply`` (a Chat Completions ``choices[0]``
    with ``usage`` beside it, or the streamed ``chunks``), or ``status`` and ``body`` for
    an HTTP error.  Used by the rule pages' tests and the wire fixtures."""
    spec = json.loads(text)
    request = spec.get("request") or {}
    settings: dict[str, Any] = {
        "max_tokens": request.get("max_tokens"), "tool_choice": request.get("tool_choice"),
        "parallel_tool_calls": request.get("parallel_tool_calls"),
        "earlier_ids": frozenset(spec.get("earlier_ids") or ()),
        "tools": tuple(request.get("tools") or ()),
        "template_markers": (frozenset(spec["template_markup"]) if "template_markup" in spec
                             else None)}
    if "status" in spec:
        return Exchange(status=spec["status"], error_body=json.dumps(spec.get("body")), **settings)
    if "chunks" in spec:
        streamed = fold_chunks(spec["chunks"], **settings)
        if "whole" in spec:  # a stream-parity pair: the same request answered whole
            whole = exchange_from_example(json.dumps({k: v for k, v in spec.items()
                                                      if k not in ("chunks", "whole")}
                                                     | {"reply": spec["whole"]}))
            return dataclasses.replace(streamed, whole=whole)
        return streamed
    reply = spec.get("reply") or {}
    message = reply.get("message") or {}
    usage = reply.get("usage") or spec.get("usage") or {}
    calls = tuple(WireCall(tc.get("id"), (tc.get("function") or {}).get("name") or "",
                           _text((tc.get("function") or {}).get("arguments")))
                  for tc in message.get("tool_calls") or ())
    return Exchange(finish_reason=reply.get("finish_reason"),
                    content=message.get("content") or "",
                    reasoning=message.get("reasoning_content") or message.get("reasoning") or "",
                    calls=calls, completion_tokens=usage.get("completion_tokens"), **settings)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fold_chunks(chunks: list[dict[str, Any]], **settings: Any) -> Exchange:
    """Streamed ``chat.completion.chunk`` objects folded into an exchange by the one
    stream reader (``wire.chat.ChatStream``), the collisions its
    :class:`~agent_eval.wire.records.DeltaFolder` finds kept as ``stream_faults``."""
    stream = ChatStream()
    for chunk in chunks:
        stream.add(chunk)
    reply = stream.reply()
    return Exchange(finish_reason=reply.finish_reason, content=reply.content,
                    reasoning=reply.reasoning,
                    calls=tuple(WireCall(c.id, c.name, c.arguments) for c in reply.calls),
                    completion_tokens=reply.usage.get("completion_tokens"), streamed=True,
                    stream_faults=tuple(reply.stream_faults), **settings)
