"""What every protocol's reply is read into, whatever the wire: one assistant reply in the
Chat Completions vocabulary the rest of agent-eval speaks.  Pure records and helpers.

``ReplyStatus`` (the end of one reply, as recorded on its turn's ``finish_reason`` when
the server gave none):

    ``complete``        the answer ended with its end marker (a finish reason and ``[DONE]``,
                        ``response.completed``, ``message_stop``, a candidate's
                        ``finishReason``)
    ``client-abort``    the client went away before the answer's end marker; its partial
                        calls are kept in the transcript but never judged, so they never
                        count against the model (a client that leaves after the end marker,
                        as Codex does on ``response.completed``, got a complete answer)
    ``upstream-error``  the upstream answered an error status or an error event, or died
                        mid-answer
    ``truncated``       the answer ended cleanly but without its end (a stream cut
                        mid-event, no terminal event)
    ``unparseable``     the answer (or the request) is not one the protocol can read

Finish reasons are mapped onto Chat Completions' (``stop``, ``tool_calls``, ``length``,
``content_filter``); a reason with no equivalent is kept as the server said it, lower
case.  Usage is mapped onto Chat Completions' keys (``prompt_tokens``,
``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
``completion_tokens_details.reasoning_tokens``), with the prompt counting cached tokens
as Chat Completions does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

ReplyStatus = Literal["complete", "client-abort", "upstream-error", "truncated", "unparseable"]


@dataclass(slots=True)
class ParsedCall:
    """One tool call: the id the conversation refers to it by, its (possibly namespaced)
    name and the exact argument text (JSON text; a protocol that sends an object has it
    serialised)."""

    id: str | None
    name: str
    arguments: str
    namespace: str | None = None  # Responses: the namespace tool ``name`` is in (``ns.name``)


@dataclass(slots=True)
class ParsedReply:
    """One reply as read from the wire, and the usage the server reported."""

    status: ReplyStatus = "complete"
    content: str = ""
    reasoning: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    response_id: str | None = None  # Responses: what ``previous_response_id`` names later
    stream_faults: list[str] = field(default_factory=list)  # deltas that collided (DeltaFolder)

    def message(self) -> dict[str, Any]:
        """The reply as a Chat Completions assistant message (the stored transcript's)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments},
                 **({"namespace": c.namespace} if c.namespace else {})}
                for c in self.calls
            ]
        return msg


class DeltaFolder:
    """Streamed tool-call deltas folded into calls by their index, as every client folds
    them, noting where the deltas collide: a second id at an index that has one (two calls
    sent at one index), or a name that changes once arguments have started."""

    def __init__(self) -> None:
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        self.faults: list[str] = []

    def add(self, index: Any, call_id: Any, name: Any, arguments: Any) -> None:
        calls = self._calls
        if not isinstance(index, int):  # servers that omit the index: a new id starts a call
            index = max(calls, default=-1) + (1 if call_id or not calls else 0)
        entry = calls.setdefault(index, [None, "", []])
        if isinstance(call_id, str) and call_id:
            if entry[0] is not None and entry[0] != call_id:
                self.faults.append(f"two calls at index {index} (ids {entry[0]!r} and "
                                   f"{call_id!r})")
            entry[0] = call_id
        if isinstance(name, str) and name and name != entry[1]:
            if entry[1] and entry[2]:
                self.faults.append(f"name at index {index} changed from {entry[1]!r} to "
                                   f"{name!r} after its arguments began")
            entry[1] += name
        if isinstance(arguments, str) and arguments:
            entry[2].append(arguments)

    def calls(self) -> list[ParsedCall]:
        return [ParsedCall(c[0], c[1], "".join(c[2])) for _, c in sorted(self._calls.items())]


def chat_usage(prompt: Any, completion: Any, *, cached: Any = None,
               reasoning: Any = None) -> dict[str, Any]:
    """Usage in Chat Completions' keys; values that are not integers are left out."""
    out: dict[str, Any] = {}
    if _is_int(prompt):
        out["prompt_tokens"] = prompt
    if _is_int(completion):
        out["completion_tokens"] = completion
    if _is_int(prompt) and _is_int(completion):
        out["total_tokens"] = prompt + completion
    if _is_int(cached):
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    if _is_int(reasoning):
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def sse_events(text: str) -> Iterator[tuple[str, str]]:
    """``(event name, data)`` of each server-sent event, as framed (blank-line separated,
    ``\\r\\n`` or ``\\n``); ``data:`` lines of one event are joined by newlines.  A last
    event cut before its blank line is still yielded: its JSON may be whole or not."""
    name = ""
    data: list[str] = []
    for line in text.splitlines():
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "", []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            name = line[6:].strip()
    if data:
        yield name, "\n".join(data)


def sse_objects(text: str) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """``(event name, JSON object)`` of each event of a stream; an event whose data is not
    one JSON object is tried line by line (servers that leave out the blank line between
    events), and data that is no JSON at all (``[DONE]``) comes back as its text."""
    for name, data in sse_events(text):
        obj = json_object(data)
        if obj is not None:
            yield name, obj
            continue
        for line in data.split("\n"):
            obj = json_object(line)
            yield name, obj if obj is not None else line.strip()


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None (not JSON, nested too deep, not an object)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def text_of(content: Any) -> str:
    """The text of a content value: a string, or the ``text`` of each part of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def arguments_text(value: Any) -> str:
    """A call's arguments as JSON text: a string as sent, anything else serialised."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def arguments_object(text: Any) -> Any:
    """The arguments text back as a value for protocols that send an object (Messages'
    ``input``, Gemini's ``args``); text that is not a JSON object stays a string."""
    if not isinstance(text, str):
        return text
    value = json_object(text)
    return text if value is None else value


def string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a field that is missing or of
    the wrong type reads as no fields)."""
    return value if isinstance(value, dict) else {}


def dicts(value: Any) -> list[dict[str, Any]]:
    """The dict items of a list (anything else: none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class TokenFigures:
    """A turn's token counts and decode speed, as every source stores them: the live
    client and the proxy build them here, from the reply's usage (Chat Completions'
    keys) and its timing, so a reply read either way stores the same figures."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    decode_tps: float | None = None


def token_count(value: Any) -> int | None:
    """A token count as a server reports it: a whole number >= 0, else unknown (a
    string, a negative, a boolean)."""
    return value if type(value) is int and value >= 0 else None


def token_figures(usage: Any, latency_s: float | None, ttft_s: float | None) -> TokenFigures:
    """The figures of a reply whose ``usage`` came in Chat Completions' keys (a usage that
    is not an object is none).  Decode speed is completion tokens over the time after the
    first token (the whole latency when that time is unknown); unknown without a
    completion count or a positive time."""
    usage = usage if isinstance(usage, dict) else {}

    def detail(outer: str, inner: str) -> int | None:
        value = usage.get(outer)
        return token_count(value.get(inner)) if isinstance(value, dict) else None

    completion = token_count(usage.get("completion_tokens"))
    decode = latency_s - ttft_s if latency_s is not None and ttft_s is not None else latency_s
    return TokenFigures(
        prompt_tokens=token_count(usage.get("prompt_tokens")), completion_tokens=completion,
        reasoning_tokens=detail("completion_tokens_details", "reasoning_tokens"),
        cached_tokens=detail("prompt_tokens_details", "cached_tokens"),
        decode_tps=completion / decode if completion is not None and decode is not None
        and decode > 0 else None)
