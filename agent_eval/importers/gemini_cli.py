"""Read Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``
and each subagent's ``chats/<session id>/<subagent session id>.jsonl``.

The format (Gemini CLI 0.61.0; github.com/google-gemini/gemini-cli,
``packages/core/src/services/chatRecordingService.ts`` and ``chatRecordingTypes.ts``) is a
log of a ``ConversationRecord`` (``{sessionId, projectHash, startTime, lastUpdated,
messages, summary, kind}``), one JSON record a line, replayed in order:

* a record without ``id`` holding ``sessionId`` and ``projectHash`` is the metadata (the
  first line; ``kind`` is ``main`` or ``subagent``);
* a record with an ``id`` is a message; a later record with the same ``id`` replaces it
  in place (a reply is written first without its tool calls, then again with them and
  their results);
* ``{"$set": {...}}`` updates the metadata, and ``$set.messages`` replaces every message;
* ``{"$rewindTo": ID}`` drops message ID and every message after it (all of them when ID
  is unknown).

Earlier versions wrote the same record as one JSON document (``session-*.json``); it is
read the same way.  Messages are ``user`` (``content``: a string or Gemini parts),
``gemini`` (one model reply: one turn; ``content``, ``thoughts``, ``tokens``, ``model``
and ``toolCalls``) and ``info``/``warning``/``error`` notices.  Each entry of a reply's
``toolCalls`` (``{id, name, args, result, status, agentId}``) is one call; its ``result``
(``functionResponse`` parts) is the output.  ``run_shell_command {command}`` and
``read_file {file_path}`` are judged by their tool profile, as the proxy judges them.

Gemini CLI's own verdict (``status``): ``success`` is ``allow``, ``cancelled`` (declined
at the confirmation) is ``deny``, ``error`` records no verdict (the error kept as the
reason).  A session whose last message is an ``error`` notice is ``error``.

Subagents (``invoke_agent``): the call's ``agentId`` is the subagent's session id, and
the subagent's file lies in the folder named after its parent session with ``kind:
subagent``; the import links the call to the child and the child to its parent.  PATH
may be a session file, a ``chats`` folder, or ``~/.gemini/tmp``; a folder's session
files are read before the subagent folders beside them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.claude_code import transcript_order
from agent_eval.importers.qwen_code import function_response_text
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    classify_call,
    dict_field,
    from_iso,
    iter_jsonl,
    list_field,
    load_json_document,
    read_text,
    text_of,
)
from agent_eval.transcript import Decision, TurnRecord


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the session of each session file (one file, or every one under a folder)."""
    path = Path(path)
    if path.is_dir():
        files = sorted((f for f in path.rglob("*") if f.suffix in (".jsonl", ".json") and f.is_file()),
                       key=transcript_order)
        if not files:
            raise ConfigError("no Gemini CLI session files (*.jsonl, *.json) in this folder", path=str(path))
    else:
        files = [path]
    for file in files:
        session = read_file(file, model=model, on_skip=on_skip)
        if session is not None:
            yield session


def replay(records: Iterator[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata and the messages a session log's records leave (pure)."""
    metadata: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for gone in ids[cut:]:
                del messages[gone]
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = record
        elif isinstance(record.get("$set"), dict):
            update = record["$set"]
            if isinstance(update.get("messages"), list):
                messages = {m["id"]: m for m in update["messages"]
                            if isinstance(m, dict) and isinstance(m.get("id"), str)}
            metadata.update({k: v for k, v in update.items() if k != "messages"})
        elif "sessionId" in record:
            metadata.update({k: v for k, v in record.items() if k != "messages"})
            if isinstance(record.get("messages"), list):  # the one-document form
                messages = {m["id"]: m for m in record["messages"]
                            if isinstance(m, dict) and isinstance(m.get("id"), str)}
    return metadata, list(messages.values())


def read_file(path: Path, *, model: str | None, on_skip: SkipReporter | None) -> ImportedSession | None:
    """The session of one session file; None for a file with no message."""
    if path.suffix == ".json":
        metadata, messages = replay(iter([load_json_document(path, read_text(path))]))
    else:
        metadata, messages = replay(obj for _, obj in iter_jsonl(path, on_skip=on_skip))
    if not messages:
        return None
    sid = str(metadata.get("sessionId") or path.stem)
    session = ImportedSession(
        id=sid, model="unknown", title=metadata.get("summary") if metadata.get("kind") != "subagent" else None,
        started_at=from_iso(metadata.get("startTime")), finished_at=from_iso(metadata.get("lastUpdated")),
    )
    if metadata.get("kind") == "subagent" and path.parent.parent.name == "chats":
        session.parent = path.parent.name
    found_model: str | None = None
    for message in messages:
        kind = message.get("type")
        if kind == "gemini":
            found_model = found_model or (message["model"] if isinstance(message.get("model"), str) else None)
            _reply(session, message)
        elif kind == "user":
            text = content_text(message.get("content"))
            if text:
                session.messages.append({"role": "user", "content": text})
    last = messages[-1]
    if last.get("type") == "error":
        session.status, session.error = "error", f"gemini cli: {content_text(last.get('content'))[:200]}"
    elif session.calls and session.calls[-1].source_decision is None and not session.calls[-1].source_reason:
        session.status, session.error = "error", "session file ends before the result of its last call"
    session.model = model or found_model or "unknown"
    return session


def _reply(session: ImportedSession, message: dict[str, Any]) -> None:
    tokens = dict_field(message, "tokens")
    thoughts = list_field(message, "thoughts")
    turn = TurnRecord(
        index=len(session.turns), content=content_text(message.get("content")),
        reasoning="\n".join(str(t.get("description") or "") for t in thoughts if isinstance(t, dict)),
        prompt_tokens=tokens.get("input"), completion_tokens=tokens.get("output"),
        reasoning_tokens=tokens.get("thoughts"), cached_tokens=tokens.get("cached"),
        started_at=from_iso(message.get("timestamp")),
    )
    session.turns.append(turn)
    out: dict[str, Any] = {"role": "assistant", "content": turn.content}
    results = []
    calls = list_field(message, "toolCalls")
    for entry in calls:
        if not isinstance(entry, dict):
            continue
        call = call_from_entry(entry, turn.index)
        session.calls.append(call)
        out.setdefault("tool_calls", []).append(
            {"id": call.call_id, "type": "function", "function": {"name": call.tool, "arguments": call.arguments}})
        results.append({"role": "tool", "tool_call_id": call.call_id, "content": call.output})
    session.messages.append(out)
    session.messages.extend(results)


def call_from_entry(entry: dict[str, Any], turn: int) -> ImportedCall:
    """One call from a ``toolCalls`` entry, with Gemini CLI's own verdict (pure)."""
    name = str(entry.get("name") or "")
    args = entry.get("args")
    arguments = json.dumps(args, ensure_ascii=False) if args is not None else ""
    kind, text = classify_call(name, args)
    result = entry.get("result")
    parts = result if isinstance(result, list) else [result] if isinstance(result, dict) else []
    outputs = [function_response_text(p["functionResponse"]) for p in parts
               if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
    output = "\n".join(outputs) if outputs else (text_of(result) if result is not None else "")
    decision, reason = source_verdict(entry.get("status"), output)
    agent = entry.get("agentId")
    return ImportedCall(
        tool=name, arguments=arguments, turn_index=turn, kind=kind, text=text,
        call_id=entry.get("id") if isinstance(entry.get("id"), str) else None, output=output,
        source_decision=decision, source_reason=reason,
        child=agent if isinstance(agent, str) and agent else None,
    )


def source_verdict(status: Any, output: str) -> tuple[Decision | None, str | None]:
    """Gemini CLI's own decision on a call, from the entry's ``status`` (pure)."""
    if status == "success":
        return "allow", None
    if status == "cancelled":
        return "deny", f"cancelled: {output[:300]}"
    if status == "error":
        return None, f"tool error in gemini cli: {output[:300]}"
    return None, None


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string or a list of Gemini parts (pure)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return text_of(content) if content is not None else ""
