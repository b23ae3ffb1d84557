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

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_eval.policy.rules import code_for
from agent_eval.policy.schemas import broken_schema, offered_schemas
from agent_eval.wire.markup import find_tool_markup, markup_opener

__all__ = ["Exchange", "StackFault", "WireCall", "check_parity", "check_reply", "exchange_of",
           "parser_failed"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")
"""A tool name as the protocols allow one (OpenAI: letters, digits, ``_`` and ``-``, up to
64; namespaced names add ``.`` and ``:``): no spaces, no markup, no template token."""
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_PARSER_FAILED = re.compile(
    r"fail\w* to parse|pars(?:er|ing) (?:error|fail)|error (?:in )?(?:extracting|parsing) "
    r"tool|tool[ _-]?call\w*[^.\n]{0,40}pars|unexpected (?:token|character|end of)|"
    r"JSONDecodeError|invalid (?:json|tool[ _-]?call)|template (?:error|render)|"
    r"(?:tools|tool_choice) param requires --jinja",
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
    check_ids: bool = True  # False where the ids are not the wire's (Gemini's, an import's)
    whole: Exchange | None = None  # stream parity: the same request answered whole
    # the call markers of this model's own template format (None: unknown): markup in
    # that format left in the text is the parser's failure (AE511), any other the model's
    template_markers: frozenset[str] | None = None


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
    """An HTTP 5xx whose body says the server's parser or template failed, or that its
    template engine is off (llama-server without ``--jinja`` refuses every request that
    offers tools: ``tools param requires --jinja flag``)."""
    return status is not None and 500 <= status < 600 and bool(_PARSER_FAILED.search(body))


def check_reply(ex: Exchange) -> list[StackFault]:
    """Every stack fault of one exchange (see the module docstring).  A reply with no
    call is one lost reply, counted once: a tool choice not honoured, else a
    ``tool_calls`` finish with nothing in it, else tokens counted for an empty reply.
    An exchange carrying ``whole`` is the streamed half of a stream-parity pair: it is
    read by :func:`check_parity` alone.  The request's offered tools are checked too
    (:func:`check_tools`)."""
    out: list[StackFault] = check_tools(list(ex.tools))
    if ex.status is not None:
        if parser_failed(ex.status, ex.error_body):
            out.append(_fault("parser-server-error",
                              f"HTTP {ex.status} whose body says the server's parser failed",
                              ex.error_body, ends=True))
        return out
    if ex.whole is not None:
        return check_parity(dataclasses.replace(ex, whole=None), ex.whole)
    calls = ex.calls
    out.extend(_cut_call(ex))
    if calls:
        if ex.finish_reason == "stop":
            out.append(_fault("finish-reason-mismatch",
                              f"finish reason 'stop' beside {len(calls)} tool call(s)"))
        out.extend(_tool_choice(ex))
    else:  # one lost reply counts once: the most specific sign first
        out.extend(_lost_reply(ex)[:1])
    if ex.parallel_tool_calls is False and len(calls) > 1:
        out.append(_fault("parallel-calls-exceeded",
                          f"{len(calls)} calls in one reply with parallel_tool_calls: false"))
    if ex.check_ids:
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


def _cut_call(ex: Exchange) -> list[StackFault]:
    """The first call cut by the output cap: arguments that are not whole JSON in a reply
    that ended at the cap (``length``, or completion tokens at ``max_tokens``)."""
    at_cap = (ex.finish_reason == "length" or (
        ex.completion_tokens is not None and ex.max_tokens is not None
        and ex.completion_tokens >= ex.max_tokens))
    for call in ex.calls if at_cap else ():
        if not _whole_json(call.arguments):
            how = ("finish reason length" if ex.finish_reason == "length" else
                   f"finish reason {ex.finish_reason!r} with {ex.completion_tokens} completion "
                   f"tokens = max_tokens")
            return [_fault("cut-by-token-limit",
                           f"call {call.name!r} cut by the output cap ({how})",
                           call.arguments, ends=True)]
    return []


def _lost_reply(ex: Exchange) -> list[StackFault]:
    """The signs that a reply with no call was lost by the stack, the most specific
    first: the template's own markup left in the text, a tool choice not honoured, a
    ``tool_calls`` finish with nothing in it, tokens counted for an empty reply."""
    lost = []
    if (found := template_markup(ex)) is not None:
        marker, where = found
        lost.append(_fault("template-markup-unparsed",
                           f"a call in the template's own format ({marker}) left in the "
                           f"reply's {where}: the server's parser did not take it out",
                           ex.content if where == "content" else ex.reasoning, ends=True))
    lost += [*_tool_choice(ex)]
    if ex.finish_reason == "tool_calls":
        lost.append(_fault("finish-reason-mismatch",
                           "finish reason 'tool_calls' but the reply carries no call",
                           ex.content, ends=True))
    if (not ex.content and not ex.reasoning and ex.completion_tokens is not None
            and ex.completion_tokens > 1):
        lost.append(_fault("empty-reply-with-tokens",
                           f"{ex.completion_tokens} completion tokens counted, nothing in "
                           "the reply", ends=True))
    return lost


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
def check_parity(streamed: Exchange, whole: Exchange) -> list[StackFault]:
    """AE510: the same request, answered streamed and whole from the same context (a
    stream-parity run, with decoding that repeats itself), must carry the same reply: the
    finish reason, each call's name and arguments (as JSON values, so spacing aside), the
    text.  What differs, and the faults only the streamed reply has (deltas that collide,
    a call cut only there), make one fault: one streamed reply the stack served other
    than the whole one.  It never ends the session: the run goes on with the whole reply."""
    diffs: list[str] = []
    if (streamed.finish_reason or None) != (whole.finish_reason or None):
        diffs.append(f"finish reason {whole.finish_reason!r} whole, "
                     f"{streamed.finish_reason!r} streamed")
    if len(streamed.calls) != len(whole.calls):
        diffs.append(f"{len(whole.calls)} call(s) whole, {len(streamed.calls)} streamed")
    else:
        for i, (a, b) in enumerate(zip(whole.calls, streamed.calls, strict=True)):
            if a.name != b.name:
                diffs.append(f"call {i}: {a.name[:80]!r} whole, {b.name[:80]!r} streamed")
            elif _json_value(a.arguments) != _json_value(b.arguments):
                diffs.append(f"call {i} ({a.name[:80]!r}): arguments differ")
    if streamed.content.strip() != whole.content.strip():
        diffs.append("the text differs")
    whole_codes = {f.code for f in check_reply(whole)}
    diffs += [f"streamed only: {f.code} {f.message}" for f in check_reply(streamed)
              if f.code not in whole_codes]
    if not diffs:
        return []
    raw = "\n".join([streamed.content, *(f"{c.name} {c.arguments}" for c in streamed.calls)])
    return [_fault("stream-parity", "streamed and whole replies differ: " + "; ".join(diffs),
                   raw.strip())]


def _json_value(text: str) -> Any:
    try:
        return ("json", json.loads(text))
    except (ValueError, TypeError, RecursionError):
        return ("text", text)


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


MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
"""Where a request caps its output: Chat Completions' ``max_tokens`` (and the newer
``max_completion_tokens``), Responses' ``max_output_tokens``; Messages' ``max_tokens``."""


def exchange_of(request: Any, *, finish_reason: str | None, content: str, reasoning: str,
                calls: Iterable[Any], completion_tokens: int | None,
                stream_faults: Iterable[str] = (), earlier_ids: Iterable[str] = (),
                check_ids: bool = True,
                template_markers: frozenset[str] | None = None) -> Exchange:
    """The exchange of one reply (anything with ``id``, ``name`` and ``arguments`` per
    call) read with the tool settings of the request that asked for it (a chat request's
    JSON body, or None when it was not kept): the one reading a live run, the proxy and
    an import share."""
    request = request if isinstance(request, dict) else {}
    cap = next((v for k in MAX_TOKENS_FIELDS if type(v := request.get(k)) is int), None)
    parallel = request.get("parallel_tool_calls")
    return Exchange(
        finish_reason=finish_reason, content=content or "", reasoning=reasoning or "",
        calls=tuple(WireCall(c.id, c.name, c.arguments) for c in calls),
        completion_tokens=completion_tokens if type(completion_tokens) is int else None,
        max_tokens=cap, tool_choice=request.get("tool_choice"),
        parallel_tool_calls=parallel if isinstance(parallel, bool) else None,
        streamed=bool(request.get("stream")), stream_faults=tuple(stream_faults),
        earlier_ids=frozenset(earlier_ids), check_ids=check_ids,
        template_markers=template_markers)


def template_markup(ex: Exchange) -> tuple[str, str] | None:
    """``(marker, where)`` of the first call markup in the reply's text or reasoning that
    is this model's own template format (``ex.template_markers``): the server's parser
    should have taken it out (AE511); None when there is none, or the format is unknown."""
    if not ex.template_markers:
        return None
    for where, text in (("content", ex.content), ("reasoning", ex.reasoning)):
        for start, _ in find_tool_markup(text):
            marker = markup_opener(text, start)
            if marker in ex.template_markers:
                return marker, where
    return None
