"""Stack faults: what the serving stack lost or mangled between the model and the wire.

The model wrote a tool call; the server's parser, chat template, streaming code or
output cap decides what reaches the client.  :func:`check_reply` reads one exchange (the
request's tool settings and the reply as it came off the wire) and names every sign that
the stack, not the model, failed: each a rule of scope ``stack`` (AE5xx) in the registry.
A stack fault is never a model error: it is counted apart (stack faults per 100 calls),
never in a model's errors/100.  Pure; never raises; codes come from the registry by name.

``ends`` on a fault says the reply holds nothing the harness could judge as the model's
(a cut call, a call the server lost, a name that is not a name, deltas that collide):
the session stops there as ``error``, out of every model rate, as a server fault does.
The other faults (a finish reason that disagrees with calls that came whole, a bad call
id, one call too many) leave the calls judged as usual; so does a ``tool_choice`` that
was not honoured by a reply in text: the text is the model's, and ends the session as any
final answer does (the fault is counted all the same), while a reply with neither call nor
text leaves nothing and ends it as ``error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_eval.policy.rules import code_for
from agent_eval.policy.schemas import broken_schema, offered_schemas

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")
"""A tool name as the protocols allow one (OpenAI: letters, digits, ``_`` and ``-``, up to
64; namespaced names add ``.`` and ``:``): no spaces, no markup, no template token."""
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_PARSER_FAILED = re.compile(
    r"fail\w* to parse|pars(?:er|ing) (?:error|fail)|error (?:in )?(?:extracting|parsing) "
    r"tool|tool[ _-]?call\w*[^.\n]{0,40}pars|unexpected (?:token|character|end of)|"
    r"JSONDecodeError|invalid (?:json|tool[ _-]?call)|template (?:error|render)",
    re.IGNORECASE)
RAW_LIMIT = 2000  # characters of the offending wire text kept with a fault


@dataclass(frozen=True, slots=True)
class WireCall:
    """One tool call as the client read it off the wire."""

    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request's tool settings and the reply read from the wire.

    ``stream_faults`` are what reassembling streamed deltas found (two ids at one index,
    a name that changed mid-call); ``earlier_ids`` the call ids of the session's earlier
    replies.  ``status``/``error_body``: an HTTP error answered instead of a reply."""

    finish_reason: str | None = None
    content: str = ""
    reasoning: str = ""
    calls: tuple[WireCall, ...] = ()
    completion_tokens: int | None = None
    max_tokens: int | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    streamed: bool = False
    stream_faults: tuple[str, ...] = ()
    earlier_ids: frozenset[str] = field(default_factory=frozenset)
    status: int | None = None
    error_body: str = ""
    tools: tuple[Any, ...] = ()  # the request's offered tools, checked by check_tools


@dataclass(frozen=True, slots=True)
class StackFault:
    """One stack fault: its registry code and name, what was seen, the wire text behind
    it (cut to :data:`RAW_LIMIT`), and whether it ends the session (module docstring)."""

    code: str
    name: str
    message: str
    raw: str = ""
    ends: bool = False


def _fault(name: str, message: str, raw: str = "", *, ends: bool = False) -> StackFault:
    return StackFault(code_for(name), name, message, raw[:RAW_LIMIT], ends)


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def _concatenated(text: str) -> bool:
    """Two or more JSON values run together (``{}{"command": ...}``): argument pieces of
    different calls folded into one."""
    decoder = json.JSONDecoder()
    try:
        _, end = decoder.raw_decode(text.lstrip())
    except (ValueError, RecursionError):
        return False
    rest = text.lstrip()[end:].strip()
    return bool(rest) and rest[0] in "{["


def parser_failed(status: int | None, body: str) -> bool:
    """An HTTP 5xx whose body says the server's parser or template failed."""
    return status is not None and 500 <= status < 600 and bool(_PARSER_FAILED.search(body))


def check_reply(ex: Exchange) -> list[StackFault]:
    """Every stack fault of one exchange (see the module docstring).  A reply with no
    call is one lost reply, counted once: a tool choice not honoured, else a
    ``tool_calls`` finish with nothing in it, else tokens counted for an empty reply."""
    out: list[StackFault] = check_tools(list(ex.tools))
    if ex.status is not None:
        if parser_failed(ex.status, ex.error_body):
            out.append(_fault("parser-server-error",
                              f"HTTP {ex.status} whose body says the server's parser failed",
                              ex.error_body, ends=True))
        return out
    calls = ex.calls
    at_cap = (ex.finish_reason == "length" or (
        ex.completion_tokens is not None and ex.max_tokens is not None
        and ex.completion_tokens >= ex.max_tokens))
    for call in calls:
        if at_cap and not _whole_json(call.arguments):
            how = ("finish reason length" if ex.finish_reason == "length" else
                   f"finish reason {ex.finish_reason!r} with {ex.completion_tokens} completion "
                   f"tokens = max_tokens")
            out.append(_fault("cut-by-token-limit",
                              f"call {call.name!r} cut by the output cap ({how})",
                              call.arguments, ends=True))
            break
    if calls:
        if ex.finish_reason == "stop":
            out.append(_fault("finish-reason-mismatch",
                              f"finish reason 'stop' beside {len(calls)} tool call(s)"))
        out.extend(_tool_choice(ex))
    else:  # one lost reply counts once: the most specific sign first
        lost = [*_tool_choice(ex)]
        if ex.finish_reason == "tool_calls":
            lost.append(_fault("finish-reason-mismatch",
                               "finish reason 'tool_calls' but the reply carries no call",
                               ex.content, ends=True))
        if (not ex.content and not ex.reasoning and ex.completion_tokens is not None
                and ex.completion_tokens > 1):
            lost.append(_fault("empty-reply-with-tokens",
                               f"{ex.completion_tokens} completion tokens counted, nothing in "
                               "the reply", ends=True))
        out.extend(lost[:1])
    if ex.parallel_tool_calls is False and len(calls) > 1:
        out.append(_fault("parallel-calls-exceeded",
                          f"{len(calls)} calls in one reply with parallel_tool_calls: false"))
    out.extend(_call_ids(calls, ex.earlier_ids))
    for call in calls:
        if not _NAME.fullmatch(call.name):
            out.append(_fault("malformed-tool-name",
                              f"tool name {call.name[:80]!r} is not a name", call.name, ends=True))
            break
    broken = list(ex.stream_faults)
    if ex.streamed:
        broken += [f"call {c.name!r}: arguments of several calls run together"
                   for c in calls if _concatenated(c.arguments)]
    if broken:
        out.append(_fault("broken-stream-deltas", "; ".join(broken),
                          "\n".join(c.arguments for c in calls), ends=True))
    return out


def check_tools(tools: Any) -> list[StackFault]:
    """A ``broken-tool-schema`` fault for each offered tool whose schema cannot be an
    argument schema (``policy.schemas.broken_schema``): the client's fault, counted apart;
    the calls of that tool are still judged, but not against that schema."""
    out = []
    for name, schema in offered_schemas(tools).items():
        why = broken_schema(schema)
        if why is not None:
            out.append(_fault("broken-tool-schema", f"tool {name[:80]!r}: {why}",
                              json.dumps(schema, ensure_ascii=False, default=str)))
    return out


def _tool_choice(ex: Exchange) -> Iterable[StackFault]:
    choice = ex.tool_choice
    if choice == "required" and not ex.calls:
        yield _fault("tool-choice-ignored", "tool_choice 'required' answered with no call",
                     ex.content, ends=not ex.content)
    elif isinstance(choice, dict):
        fn = choice.get("function")
        want = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(want, str):
            return
        if not ex.calls:
            yield _fault("tool-choice-ignored", f"tool_choice names {want!r}; no call came",
                         ex.content, ends=not ex.content)
        elif any(c.name != want for c in ex.calls):
            other = next(c.name for c in ex.calls if c.name != want)
            yield _fault("tool-choice-ignored",
                         f"tool_choice names {want!r}; the reply calls {other[:80]!r}")


def _call_ids(calls: tuple[WireCall, ...], earlier: frozenset[str]) -> Iterable[StackFault]:
    seen: set[str] = set()
    for i, call in enumerate(calls):
        cid = call.id
        if not cid:
            yield _fault("bad-call-id", f"call {i} ({call.name[:80]!r}) has no id")
        elif not _CALL_ID.fullmatch(cid):
            yield _fault("bad-call-id", f"call id {cid[:80]!r} is malformed", cid)
        elif cid in seen or cid in earlier:
            where = "within the reply" if cid in seen else "from an earlier turn"
            yield _fault("bad-call-id", f"call id {cid!r} repeated {where}", cid)
        if cid:
            seen.add(cid)


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
        "tools": tuple(request.get("tools") or ())}
    if "status" in spec:
        return Exchange(status=spec["status"], error_body=json.dumps(spec.get("body")), **settings)
    if "chunks" in spec:
        return fold_chunks(spec["chunks"], **settings)
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
    """Streamed ``chat.completion.chunk`` objects folded into an exchange, the collisions
    :class:`DeltaFolder` finds kept as ``stream_faults``."""
    folder = DeltaFolder()
    content: list[str] = []
    reasoning: list[str] = []
    finish = None
    usage: dict[str, Any] = {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for tc in delta.get("tool_calls") or ():
                fn = tc.get("function") or {}
                folder.add(tc.get("index"), tc.get("id"), fn.get("name"), fn.get("arguments"))
    return Exchange(finish_reason=finish, content="".join(content),
                    reasoning="".join(reasoning), calls=folder.calls(),
                    completion_tokens=usage.get("completion_tokens"), streamed=True,
                    stream_faults=tuple(folder.faults), **settings)


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

    def calls(self) -> tuple[WireCall, ...]:
        return tuple(WireCall(c[0], c[1], "".join(c[2])) for _, c in sorted(self._calls.items()))
