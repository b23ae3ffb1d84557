"""Read OpenHands event streams: a trajectory export (a JSON list of events, as
``--save-trajectory-path`` and the UI download write it, 0.2x to 0.5x), the event files
of a stored conversation (``sessions/<id>/events/<n>.json``; PATH is that ``events``
folder or the session folder), or JSONL with one event a line.  Events of the V1
software-agent SDK (``"kind": "ActionEvent"`` / ``"ObservationEvent"``, a conversation
folder ``<id>/events/event-NNNNN-<uuid>.json`` beside ``base_state.json``) are read too:
a call's arguments are the ``tool_call.arguments`` the model sent, a ``file_editor``
``view`` is a read of its path, a user ``MessageEvent`` is a user message, and the model
is ``base_state.json``'s ``agent.llm.model``.

Each action the agent emitted as a tool call is one call (``message`` and ``system``
events and state changes are not calls): the tool name is the function the model called
(``tool_call_metadata.function_name``: ``execute_bash``, ``str_replace_editor``,
``finish``), else the action (``run``, ``read``).  ``run`` actions (``args.command``) are
judged as bash, ``read`` actions (``args.path``) as read.  The output is the observation
whose ``cause`` is the action's id (V1: the same ``tool_call_id``).

OpenHands's own verdict: ``confirmation_state`` ``rejected`` or a ``user_rejected``
observation is ``deny``; ``confirmed``, or an observation other than an error, means it
ran (``allow``); an ``error`` observation or no observation records none.  Model: the
``model`` of the recorded model response.  Status ``error`` when an error observation
ends the stream or the agent state became ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.call_recorder import ToolKind
from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    classify_call,
    dict_field,
    from_iso,
    iter_jsonl,
    load_json_document,
    loads,
    looks_like_jsonl,
    read_text,
    text_of,
)
from agent_eval.transcript import Decision, TurnRecord

NOT_CALLS = frozenset({"message", "system", "change_agent_state", "recall", "null", "condensation",
                       "condensation_request", "mcp_list"})
KIND_OF_ACTION: dict[str, ToolKind] = {"run": "bash", "read": "read"}
EDITORS = frozenset({"file_editor", "str_replace_editor"})
"""V1 editor tools: a ``view`` command is a read of its ``path``."""


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the session of a trajectory file, a JSONL stream or an events folder."""
    path = Path(path)
    if path.is_dir():
        events_dir = path / "events" if (path / "events").is_dir() else path
        files = sorted(events_dir.glob("*.json"), key=_event_order)
        if not files:
            raise ConfigError("no OpenHands event files (events/*.json) in this folder", path=str(path))
        events = [load_json_document(f) for f in files]
        conversation = path if events_dir != path else path.parent
        sid = conversation.name
        model = model or _base_state_model(conversation / "base_state.json")
    else:
        text = read_text(path)
        if looks_like_jsonl(text):
            events = [obj for _, obj in iter_jsonl(path, text, on_skip=on_skip)]
        else:
            events = load_json_document(path, text)
        sid = path.stem
    if isinstance(events, dict) and isinstance(events.get("events"), list):
        events = events["events"]
    if not isinstance(events, list) or not any(_is_event(e) for e in events):
        raise ConfigError(
            "not an OpenHands event stream: expected a list of events with `action`/`observation` "
            "(or `kind`); pass a trajectory .json, an events/ folder or pick another FORMAT",
            path=str(path),
        )
    session = session_of(sid, [e for e in events if isinstance(e, dict)], model)
    for _ in range(sum(1 for e in events if not isinstance(e, dict))):
        session.skip_call("an event that is not an object (it may have been a call)")
    yield session


def session_of(sid: str, events: list[dict[str, Any]], model: str | None) -> ImportedSession:
    """One session from its events in order (pure)."""
    session = ImportedSession(id=sid, model="unknown")
    outputs = _observations(events)
    found_model: str | None = None
    for event in events:
        stamp = from_iso(event.get("timestamp"))
        if stamp:
            session.started_at = session.started_at or stamp
            session.finished_at = stamp
        found_model = found_model or _model(event)
        _state(session, event)
        call = call_of(event, len(session.turns), outputs)
        if call is None:
            _message(session, event)
            continue
        session.turns.append(TurnRecord(index=call.turn_index, content=_thought(event)))
        session.calls.append(call)
        session.messages.append({"role": "assistant", "content": _thought(event), "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": call.tool, "arguments": call.arguments}}]})
        session.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": call.output})
    session.model = model or found_model or "unknown"
    return session


def call_of(event: dict[str, Any], turn: int, outputs: dict[Any, dict[str, Any]]) -> ImportedCall | None:
    """The call an agent action event makes, or None for anything else (pure)."""
    if event.get("kind") == "ActionEvent":
        return _v1_call(event, turn, outputs)
    action = event.get("action")
    if event.get("source") != "agent" or not isinstance(action, str) or action in NOT_CALLS:
        return None
    args = dict_field(event, "args")
    meta = dict_field(event, "tool_call_metadata")
    tool = str(meta.get("function_name") or action)
    kind: ToolKind = KIND_OF_ACTION.get(action, "other")
    text = args.get("command") if kind == "bash" else args.get("path") if kind == "read" else None
    observation = outputs.get(_key(event.get("id")))
    decision, reason = verdict(args.get("confirmation_state"), observation)
    call_id = meta.get("tool_call_id") or (f"event{event['id']}" if "id" in event else None)
    emitted = _emitted_arguments(meta)
    return ImportedCall(
        tool=tool, arguments=emitted if emitted is not None else json.dumps(args, ensure_ascii=False),
        turn_index=turn, kind=kind,
        text=text if isinstance(text, str) else None, call_id=str(call_id) if call_id else None,
        output=_content(observation), source_decision=decision, source_reason=reason,
    )


def _emitted_arguments(meta: dict[str, Any]) -> str | None:
    """The call's arguments as the model emitted them (the reply OpenHands keeps in
    ``tool_call_metadata.model_response``), not the action's stored fields, which add
    OpenHands' own (``blocking``, ``hidden``, ``confirmation_state`` ...)."""
    response = meta.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            if (call.get("id") == meta.get("tool_call_id") and isinstance(function, dict)
                    and isinstance(function.get("arguments"), str)):
                return function["arguments"]
    return None


def verdict(confirmation: Any, observation: dict[str, Any] | None) -> tuple[Decision | None, str | None]:
    """OpenHands's own decision on an action, from its confirmation state and observation."""
    kind = (observation or {}).get("observation") or (observation or {}).get("kind")
    if confirmation == "rejected" or kind in ("user_rejected", "UserRejectObservation"):
        return "deny", f"rejected: {_content(observation)[:300]}"
    if kind in ("error", "AgentErrorEvent"):
        return None, f"tool error in openhands: {_content(observation)[:300]}"
    if confirmation == "confirmed" or observation is not None:
        return "allow", None
    return None, None


def _v1_call(event: dict[str, Any], turn: int, outputs: dict[Any, dict[str, Any]]) -> ImportedCall:
    action = dict_field(event, "action")
    tool = str(event.get("tool_name") or action.get("kind") or "")
    args = _v1_arguments(event, action)
    if tool in EDITORS and args.get("command") == "view":
        kind, text = classify_call("view", args)
    else:
        kind, text = classify_call("bash" if tool in ("execute_bash", "terminal", "bash") else tool, args)
    call_id = _key(event.get("tool_call_id"))
    observation = outputs.get(call_id)
    decision, reason = verdict(None, observation)
    return ImportedCall(tool=tool, arguments=json.dumps(args, ensure_ascii=False), turn_index=turn,
                        kind=kind, text=text, call_id=str(call_id) if call_id else None,
                        output=_content(observation), source_decision=decision, source_reason=reason)


def _v1_arguments(event: dict[str, Any], action: dict[str, Any]) -> dict[str, Any]:
    """The arguments the model sent (``tool_call.arguments``), else the action's fields
    (an MCP tool's are under ``data``)."""
    call = dict_field(event, "tool_call")
    raw = call.get("arguments")
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    if action.get("kind") == "MCPToolAction" and isinstance(action.get("data"), dict):
        return dict(action["data"])
    return {k: v for k, v in action.items() if k != "kind"}


def _base_state_model(path: Path) -> str | None:
    """The model a V1 conversation's ``base_state.json`` names (``agent.llm.model``)."""
    if not path.is_file():
        return None
    try:
        state = loads(read_text(path))
    except (ConfigError, OSError, ValueError, RecursionError):  # only a model name: not worth an error
        return None
    agent = state.get("agent") if isinstance(state, dict) else None
    llm = agent.get("llm") if isinstance(agent, dict) else None
    name = llm.get("model") if isinstance(llm, dict) else None
    return name if isinstance(name, str) and name else None


def _observations(events: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    found: dict[Any, dict[str, Any]] = {}
    for e in events:
        if "observation" in e and _key(e.get("cause")) is not None and not isinstance(e.get("observation"), dict):
            found.setdefault(_key(e["cause"]), e)
        elif str(e.get("kind", "")).endswith(("ObservationEvent", "RejectObservation", "AgentErrorEvent")):
            found.setdefault(_key(e.get("tool_call_id")), e)
    return found


def _key(value: Any) -> int | str | None:
    """An event id or tool-call id usable as a key; a hostile list or object is none."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _content(observation: dict[str, Any] | None) -> str:
    if observation is None:
        return ""
    if "content" in observation:
        return text_of(observation.get("content"))
    inner = observation.get("observation")
    if isinstance(inner, dict):
        return text_of(inner.get("content") or inner.get("output") or inner)
    return text_of(observation.get("error") or observation.get("rejection_reason") or "")


def _thought(event: dict[str, Any]) -> str:
    args = dict_field(event, "args")
    thought = args.get("thought") or event.get("thought") or ""
    return text_of(thought)


def _model(event: dict[str, Any]) -> str | None:
    meta = event.get("tool_call_metadata")
    response = meta.get("model_response") if isinstance(meta, dict) else None
    name = response.get("model") if isinstance(response, dict) else None
    return name if isinstance(name, str) and name else None


def _state(session: ImportedSession, event: dict[str, Any]) -> None:
    extras = dict_field(event, "extras")
    if event.get("observation") == "agent_state_changed" and extras.get("agent_state") == "error":
        session.status, session.error = "error", f"openhands agent error: {str(extras.get('reason') or '')[:200]}"


def _message(session: ImportedSession, event: dict[str, Any]) -> None:
    if event.get("kind") == "MessageEvent" and isinstance(event.get("llm_message"), dict):
        message = event["llm_message"]
        role = "assistant" if message.get("role") == "assistant" or event.get("source") == "agent" else "user"
        session.messages.append({"role": role, "content": text_of(message.get("content"))})
        return
    if event.get("action") != "message":
        return
    role = "assistant" if event.get("source") == "agent" else "user"
    args = dict_field(event, "args")
    session.messages.append({"role": role, "content": text_of(args.get("content") or event.get("message"))})


def _is_event(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e or str(e.get("kind", "")).endswith("Event"))


def _event_order(path: Path) -> tuple[int, str]:
    digits = "".join(ch for ch in path.stem.split("-")[1] if ch.isdigit()) if "-" in path.stem else path.stem
    return (int(digits) if digits.isdigit() else 1 << 60, path.name)
