"""Read tool calls out of OpenTelemetry exports (OTLP/JSON logs and traces); pure.

``agent-eval collect`` receives what an agent CLI or framework already exports and hands
each request body to :func:`tool_events`, which keeps only the records that describe a
tool call, as :class:`ToolEvent`.  :class:`Stitcher` joins them into sessions
(:class:`ImportedSession`), which the importers' ``Judge`` then judges through the call
recorder like any import.  Where each name comes from (checked against the emitters'
sources, docs/telemetry.md has the links):

- OpenTelemetry GenAI spans: a span whose ``gen_ai.operation.name`` is ``execute_tool``
  (or named ``execute_tool ...``), tool ``gen_ai.tool.name``, arguments
  ``gen_ai.tool.call.arguments`` (opt-in content; older conventions had none), call id ``gen_ai.tool.call.id``, session
  ``gen_ai.conversation.id`` (else ``session.id``, else the trace id).
- Claude Code log events ``claude_code.tool_decision`` (``tool_name``, ``decision``
  accept/reject, ``source`` config/hook/user_...) and ``claude_code.tool_result``
  (``tool_name``, ``tool_use_id``, ``tool_input`` only with ``OTEL_LOG_TOOL_DETAILS=1``,
  its values cut at 512 characters), joined by ``session.id`` and ``prompt.id``.
- Codex log events ``codex.tool_decision`` (``tool_name``, ``call_id``, ``decision``,
  ``source``) and ``codex.tool_result`` (``tool_name``, ``call_id``, ``arguments``),
  session ``conversation.id``.
- Gemini CLI log event ``gemini_cli.tool_call`` (``function_name``, ``function_args``
  only with ``telemetry.logPrompts``, ``decision`` accept/reject/modify/auto_accept,
  ``prompt_id``), session ``session.id``.
- The tools offered: ``gen_ai.tool.definitions`` on any span or log record (the GenAI
  conventions' inference spans and ``gen_ai.client.inference.operation.details`` event),
  kept per session (:attr:`OpenSession.tools`) so each call is also checked against its
  own tool's schema (``policy/schemas.py``).

What telemetry cannot prove it does not claim: a call whose arguments are absent, not a
JSON object, or possibly cut (a string value of the emitter's cut length or more) is kept
as **not judged** with the reason (:attr:`ToolEvent.not_judged`), never judged as if the
part seen were the whole; the CLI's own decision and its source travel beside it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agent_eval.call_recorder import classify_call
from agent_eval.importers.reading import ImportedCall, ImportedSession
from agent_eval.transcript import Decision

Signal = Literal["logs", "traces"]
Emitter = Literal["gen_ai", "claude_code", "codex", "gemini_cli"]

CLAUDE_CODE_CUT = 512
"""Claude Code cuts each ``tool_input`` value longer than this (its monitoring docs)."""

ALLOW_WORDS = frozenset({"accept", "allow", "approved", "approved_for_session",
                         "approved_execpolicy_amendment", "auto_accept", "modify", "yes"})
DENY_WORDS = frozenset({"reject", "deny", "denied", "abort", "cancel", "no"})


class PayloadError(ValueError):
    """A request body that is not an OTLP/JSON export of the signal posted: the
    sender's fault, answered with one 400 line; never raised for a record we skip."""


@dataclass(slots=True)
class ToolEvent:
    """One tool call as an emitter reported it (one event or span, before joining)."""

    emitter: Emitter
    session: str
    tool: str
    arguments: str | None = None  # the raw argument text; None: the event carries none
    not_judged: str | None = None  # why the arguments cannot be judged
    call_id: str | None = None
    prompt_id: str | None = None
    model: str | None = None
    decision: str | None = None  # the CLI's own word (accept, approved, ...)
    decision_source: str | None = None  # who decided (config, hook, user_...)
    is_result: bool = False  # a result event (Claude Code, Codex): carries the arguments
    time: datetime | None = None
    definitions: list[Any] | None = None  # the tools offered (not a call): GenAI's
    # ``gen_ai.tool.definitions``, ``[{type, name, description, parameters}]``


def tool_events(signal: Signal, body: Any) -> list[ToolEvent]:
    """The tool-call events of one OTLP/JSON export body (already parsed JSON).

    Raises PayloadError when ``body`` is not shaped as that signal's export
    (``resourceLogs`` / ``resourceSpans`` lists of objects); records of other kinds
    (prompts, API requests, chat spans) are skipped silently.
    """
    top = "resourceLogs" if signal == "logs" else "resourceSpans"
    scope_key, item_key = ("scopeLogs", "logRecords") if signal == "logs" else ("scopeSpans", "spans")
    if not isinstance(body, dict):
        raise PayloadError("the body is not a JSON object")
    resources = body.get(top, [])
    if not isinstance(resources, list):
        raise PayloadError(f"{top} is not a list")
    events: list[ToolEvent] = []
    for resource in resources:
        if not isinstance(resource, dict):
            raise PayloadError(f"an entry of {top} is not an object")
        resource_attrs = attributes((resource.get("resource") or {}).get("attributes"))
        for scope in _objects(resource.get(scope_key), scope_key):
            for item in _objects(scope.get(item_key), item_key):
                attrs = {**resource_attrs, **attributes(item.get("attributes"))}
                offered = _definitions(item, attrs)
                if offered is not None:
                    events.append(offered)
                event = (_log_event(item, attrs) if signal == "logs" else _span_event(item, attrs))
                if event is not None:
                    events.append(event)
    return events


TOOL_DEFINITIONS = "gen_ai.tool.definitions"
"""The GenAI conventions' list of tools offered to the model (opt-in; on inference spans
and the ``gen_ai.client.inference.operation.details`` event), structured or as a JSON
string: ``[{"type": "function", "name": ..., "parameters": {JSON schema}}]``."""


def _definitions(item: dict[str, Any], attrs: dict[str, Any]) -> ToolEvent | None:
    """The tools offered, from a span or record carrying ``gen_ai.tool.definitions``
    (session as for ``execute_tool`` spans); None when it carries none readable."""
    raw = attrs.get(TOOL_DEFINITIONS)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if not isinstance(raw, list) or not raw:
        return None
    session = (attrs.get("gen_ai.conversation.id") or attrs.get("session.id")
               or item.get("traceId"))
    return ToolEvent("gen_ai", str(session or "trace"), "", definitions=raw,
                     model=_text(attrs.get("gen_ai.request.model")),
                     time=_time(item.get("startTimeUnixNano") or item.get("timeUnixNano")))


def _objects(value: Any, name: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise PayloadError(f"{name} is not a list of objects")
    return value


def attributes(raw: Any) -> dict[str, Any]:
    """OTLP/JSON ``[{"key": k, "value": {"stringValue": v}}]`` as a plain dict; values of
    other shapes are read as far as they go (ints as written, arrays and maps nested)."""
    out: dict[str, Any] = {}
    if not isinstance(raw, list):
        return out
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            out[entry["key"]] = any_value(entry.get("value"))
    return out


def any_value(value: Any) -> Any:
    """One OTLP ``AnyValue`` as a Python value (``intValue`` is a string in OTLP/JSON)."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values"))
    return None


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _time(nanos: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(nanos) / 1e9, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _log_event(record: dict[str, Any], attrs: dict[str, Any]) -> ToolEvent | None:
    # Claude Code names the event in the body (``claude_code.tool_result``) and puts the
    # short name in ``event.name``; Codex and Gemini CLI put the full name there
    names = (attrs.get("event.name"), record.get("eventName"), any_value(record.get("body")))
    name = next((n for n in names if isinstance(n, str) and n in TOOL_EVENTS), None)
    if name is None:
        return None
    when = _time(record.get("timeUnixNano") or record.get("observedTimeUnixNano"))
    if name in ("claude_code.tool_decision", "claude_code.tool_result"):
        result = name.endswith("tool_result")
        args, why = _arguments(attrs.get("tool_input"), cut_at=CLAUDE_CODE_CUT,
                               absent="no tool_input (Claude Code sends it only with "
                                      "OTEL_LOG_TOOL_DETAILS=1)")
        return ToolEvent("claude_code", str(attrs.get("session.id") or "claude-code"),
                         str(attrs.get("tool_name") or ""), args if result else None,
                         why if result else "no tool_result event: a decision carries no tool input",
                         call_id=_text(attrs.get("tool_use_id")),
                         prompt_id=_text(attrs.get("prompt.id")), model=_text(attrs.get("model")),
                         decision=_text(attrs.get("decision")),
                         decision_source=_text(attrs.get("source") or attrs.get("decision_source")),
                         is_result=result, time=when)
    if name in ("codex.tool_decision", "codex.tool_result"):
        result = name.endswith("tool_result")
        args, why = _arguments(attrs.get("arguments"), cut_at=None,
                               absent="no arguments in the event")
        return ToolEvent("codex", str(attrs.get("conversation.id") or "codex"),
                         str(attrs.get("tool_name") or ""), args if result else None,
                         why if result else "no tool_result event: a decision carries no arguments",
                         call_id=_text(attrs.get("call_id")), model=_text(attrs.get("model")),
                         decision=_text(attrs.get("decision")),
                         decision_source=_text(attrs.get("source")), is_result=result, time=when)
    if name == "gemini_cli.tool_call":
        args, why = _arguments(attrs.get("function_args"), cut_at=None,
                               absent="no function_args in the event (Gemini CLI sends "
                                      "them only with telemetry.logPrompts)")
        return ToolEvent("gemini_cli", str(attrs.get("session.id") or "gemini-cli"),
                         str(attrs.get("function_name") or ""), args, why,
                         prompt_id=_text(attrs.get("prompt_id")), model=_text(attrs.get("model")),
                         decision=_text(attrs.get("decision")),
                         is_result=True, time=when)
    return None


TOOL_EVENTS = frozenset({"claude_code.tool_decision", "claude_code.tool_result", "codex.tool_decision",
                         "codex.tool_result", "gemini_cli.tool_call"})

TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments",)
"""The GenAI conventions' argument attribute (opt-in content; conventions before it had
none, so such spans are kept as not judged)."""


def _span_event(span: dict[str, Any], attrs: dict[str, Any]) -> ToolEvent | None:
    name = span.get("name")
    operation = attrs.get("gen_ai.operation.name")
    if operation != "execute_tool" and not (isinstance(name, str) and name.startswith("execute_tool")):
        return None
    tool = attrs.get("gen_ai.tool.name")
    if not tool and isinstance(name, str):
        tool = name.removeprefix("execute_tool").strip()
    raw = next((attrs[k] for k in TOOL_ARGUMENT_KEYS if k in attrs), None)
    args, why = _arguments(raw, cut_at=None, absent="no gen_ai.tool.call.arguments on the span "
                                                    "(content capture off)")
    session = (attrs.get("gen_ai.conversation.id") or attrs.get("session.id")
               or span.get("traceId"))
    return ToolEvent("gen_ai", str(session or "trace"), str(tool or ""), args, why,
                     call_id=_text(attrs.get("gen_ai.tool.call.id")),
                     model=_text(attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model")),
                     is_result=True,
                     time=_time(span.get("startTimeUnixNano")))


def _arguments(raw: Any, *, cut_at: int | None, absent: str) -> tuple[str | None, str | None]:
    """``(argument text, None)`` when ``raw`` is a whole JSON object, else
    ``(text or None, why it cannot be judged)``."""
    if raw is None or raw == "":
        return None, absent
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    try:
        value = json.loads(text) if isinstance(raw, str) else raw
    except ValueError:
        return text, "arguments are not whole JSON (cut by the emitter?)"
    if not isinstance(value, dict):
        return text, "arguments are not a JSON object"
    if cut_at is not None and any(isinstance(v, str) and len(v) >= cut_at for v in value.values()):
        return text, f"a value of {cut_at} characters or more: possibly cut by the emitter"
    return text, None


@dataclass(slots=True)
class StitchedCall:
    """One call of a session being stitched: the decision and the result joined."""

    tool: str
    arguments: str | None = None
    not_judged: str | None = None
    call_id: str | None = None
    prompt_id: str | None = None
    decision: str | None = None
    decision_source: str | None = None
    has_result: bool = False


@dataclass(slots=True)
class OpenSession:
    emitter: Emitter
    id: str
    model: str | None = None
    calls: list[StitchedCall] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)  # the tool definitions offered
    events: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Stitcher:
    """Joins tool events into sessions, with bounded memory.

    Events of one emitter and session id form one session.  A Claude Code or Codex
    decision and its result are one call: joined by call id when both carry it, else the
    oldest call of the same tool (and prompt id) still waiting for its result.  Past
    ``max_sessions`` open sessions the oldest is given back by :meth:`add` to be stored;
    past ``max_calls`` calls a session is given back too and a new one opens.
    """

    def __init__(self, *, max_sessions: int = 1000, max_calls: int = 5000) -> None:
        self.max_sessions = max_sessions
        self.max_calls = max_calls
        self.open: OrderedDict[tuple[str, str], OpenSession] = OrderedDict()

    def add(self, events: list[ToolEvent]) -> list[OpenSession]:
        """Take ``events``; return the sessions pushed out by the bounds (to store)."""
        out: list[OpenSession] = []
        for event in events:
            key = (event.emitter, event.session)
            session = self.open.get(key)
            if session is None or len(session.calls) >= self.max_calls:
                if session is not None:
                    out.append(self.open.pop(key))
                session = self.open[key] = OpenSession(event.emitter, event.session)
            self.open.move_to_end(key)
            session.events += 1
            session.model = session.model or event.model
            if event.time is not None:
                session.started_at = min(session.started_at or event.time, event.time)
                session.finished_at = max(session.finished_at or event.time, event.time)
            if event.definitions is not None:
                _offer(session, event.definitions)
            else:
                _join(session, event)
            while len(self.open) > self.max_sessions:
                out.append(self.open.popitem(last=False)[1])
        return out

    def close_all(self) -> list[OpenSession]:
        """Every open session, oldest first; the stitcher is empty after."""
        sessions = list(self.open.values())
        self.open.clear()
        return sessions


def _offer(session: OpenSession, definitions: list[Any]) -> None:
    """Keep the tools offered, each name once (the last definition of a name wins)."""
    names = {d.get("name") for d in definitions if isinstance(d, dict)}
    session.tools = [*(d for d in session.tools if d.get("name") not in names),
                     *(d for d in definitions if isinstance(d, dict))]


def _join(session: OpenSession, event: ToolEvent) -> None:
    partner = None
    if event.emitter in ("claude_code", "codex"):
        for call in session.calls:
            waiting = (not call.has_result) if event.is_result else call.decision is None
            if not waiting or call.tool != event.tool:
                continue
            if event.call_id and call.call_id and event.call_id != call.call_id:
                continue
            if event.prompt_id and call.prompt_id and event.prompt_id != call.prompt_id:
                continue
            partner = call
            break
    if partner is None:
        partner = StitchedCall(event.tool, call_id=event.call_id, prompt_id=event.prompt_id)
        session.calls.append(partner)
    partner.call_id = partner.call_id or event.call_id
    partner.prompt_id = partner.prompt_id or event.prompt_id
    if event.decision is not None:
        partner.decision, partner.decision_source = event.decision, event.decision_source
    if event.is_result:
        partner.has_result = True
        partner.arguments, partner.not_judged = event.arguments, event.not_judged
    elif not partner.has_result:
        partner.not_judged = event.not_judged


def source_decision(word: str | None) -> Decision | None:
    """The CLI's own decision word as allow / deny (None when it said nothing known)."""
    if word is None:
        return None
    word = word.strip().lower()
    return "allow" if word in ALLOW_WORDS else "deny" if word in DENY_WORDS else None


def imported_session(session: OpenSession, model: str | None = None) -> ImportedSession:
    """The stitched session as an import: judgeable calls as :class:`ImportedCall` (the
    CLI's decision and its source kept as ``source_decision`` / ``source_reason``), the
    others kept in the transcript as not judged, with the reason, counted in the tags."""
    out = ImportedSession(id=f"{session.emitter}:{session.id}",
                          model=model or session.model or "unknown",
                          title=f"otlp {session.emitter}",
                          started_at=session.started_at, finished_at=session.finished_at,
                          tools=list(session.tools) or None)
    for turn, call in enumerate(session.calls):
        reason = (f"{session.emitter} {call.decision}"
                  + (f" by {call.decision_source}" if call.decision_source else "")
                  if call.decision else None)
        message: dict[str, Any] = {
            "role": "assistant", "content": "",
            "tool_calls": [{"id": call.call_id or f"otlp-{turn}", "type": "function",
                            "function": {"name": call.tool, "arguments": call.arguments or ""}}]}
        if call.not_judged is not None or call.arguments is None:
            why = call.not_judged or "no arguments"
            message["content"] = f"[not judged: {why}" + (f"; the CLI: {reason}" if reason else "") + "]"
            out.messages.append(message)
            out.skip_call(why)
            continue
        out.messages.append(message)
        kind, text = classify_call(call.tool, json.loads(call.arguments))
        out.calls.append(ImportedCall(
            tool=call.tool, arguments=call.arguments, turn_index=turn, kind=kind, text=text,
            call_id=call.call_id, source_decision=source_decision(call.decision),
            source_reason=reason))
    return out
