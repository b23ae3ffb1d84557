"""Read Qwen Code sessions: ``~/.qwen/projects/<cwd>/chats/<session>.jsonl`` and the
subagent files ``~/.qwen/projects/<cwd>/subagents/<session>/agent-<agent id>.jsonl``.

The format (Qwen Code 0.24.4; github.com/QwenLM/qwen-code,
``packages/core/src/services/chatRecordingService.ts``, ``ChatRecord``): one JSON record a
line, ``{"uuid", "parentUuid", "sessionId", "timestamp", "type", "message", ...}`` with
``type`` one of ``user``, ``assistant``, ``tool_result`` and ``system``.  ``message`` is a
Gemini ``Content`` (``{"role": "user"|"model", "parts": [...]}``), not Claude Code's
``content`` blocks, although the envelope looks like Claude Code's (which is why the
format is told apart by ``message.parts``, :mod:`.detect`):

* an ``assistant`` record is one model reply (one turn): ``text`` parts and
  ``functionCall`` parts (``{"id", "name", "args"}``), one call each;
* a ``tool_result`` record answers one call: a ``functionResponse`` part with the call's
  ``id`` and ``response.output`` (or ``response.error``), and ``toolCallResult.status``
  (``success``, ``error``, ``cancelled``);
* ``system`` records (telemetry, attribution snapshots, compression checkpoints) carry no
  call and are passed over; ``user`` records are the prompts and notifications.

Tool names are Qwen Code's own: ``run_shell_command {command}`` and ``read_file
{file_path}`` are judged by their tool profile (``policy/profiles.py``), as the proxy
judges them; every other tool keeps its name (``agent``, ``write_file`` ...).

Qwen Code's own verdict: ``success`` means the tool ran (``allow``); ``cancelled`` (the
user declined the confirmation) is ``deny``; an ``error`` (the tool failed or its
arguments were invalid) records no verdict, the error kept as the reason.

Subagents (the ``agent`` tool) are written beside the session, one file each, their
records carrying the parent's ``sessionId`` plus ``agentId`` and ``isSidechain: true``; the
``.meta.json`` beside each names the parent session (``parentSessionId``), the spawning
call (``toolUseId``) and the model (the subagent's replies do not); measured on the 0.24.4
capture in ``tests/fixtures/clis/qwen-code`` (the ``agent`` tool is
``packages/core/src/tools/agent/agent.ts``).  A subagent becomes the session ``<session>:agent-<agent id>``, a child
of ``<session>``, and the ``agent`` call is linked to it.  PATH may be one file, a
project folder or ``~/.qwen/projects``; a session file is read before its subagents.

Records are read in file order (the file is append-only; the ``parentUuid`` tree only
branches after a rewind, which is read as the lines were written).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    classify_call,
    dict_field,
    from_iso,
    iter_jsonl,
    text_of,
)
from agent_eval.transcript import Decision, TurnRecord


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield every session in a session (or subagent) file, or under a folder."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.jsonl"))  # chats/ before subagents/
        if not files:
            raise ConfigError("no *.jsonl session files in this folder", path=str(path))
    else:
        files = [path]
    for file in files:
        yield from read_file(file, model=model, on_skip=on_skip)


def read_file(path: Path, *, model: str | None, on_skip: SkipReporter | None) -> Iterator[ImportedSession]:
    """The sessions of one file (one, or one per ``sessionId`` should a file mix them)."""
    builders: dict[str, _SessionBuilder] = {}
    meta = _subagent_meta(path)
    for _, obj in iter_jsonl(path, on_skip=on_skip):
        if not isinstance(obj, dict):
            continue
        sid = str(obj.get("sessionId") or path.stem)
        agent = obj.get("agentId") if isinstance(obj.get("agentId"), str) else None
        key = f"{sid}:agent-{agent}" if agent else sid
        builder = builders.get(key)
        if builder is None:
            builder = builders[key] = _SessionBuilder(key)
            if agent:
                builder.session.parent = str(meta.get("parentSessionId") or sid)
                builder.model = meta["model"] if isinstance(meta.get("model"), str) else None
        builder.add(obj)
    for builder in builders.values():
        if builder.session.turns or builder.session.messages:
            if ":agent-" not in builder.session.id:
                _link_children(builder, path)
            yield builder.finish(model)


def _subagent_meta(path: Path) -> dict[str, Any]:
    """The ``.meta.json`` beside a subagent file, or {}."""
    meta = path.with_suffix(".meta.json")
    if not path.stem.startswith("agent-") or not meta.is_file():
        return {}
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _link_children(builder: _SessionBuilder, path: Path) -> None:
    """Link each ``agent`` call to the subagent file whose ``.meta.json`` names it
    (``<project>/subagents/<session>/agent-*.meta.json``, ``toolUseId``)."""
    folder = path.parent.parent / "subagents" / builder.session.id
    if path.parent.name != "chats" or not folder.is_dir():
        return
    for meta_file in sorted(folder.glob("agent-*.meta.json")):
        meta = _subagent_meta(meta_file.with_name(meta_file.name.removesuffix(".meta.json") + ".jsonl"))
        use_id = meta.get("toolUseId")
        call = builder.calls_by_id.get(use_id) if isinstance(use_id, str) else None
        agent = meta.get("agentId")
        if call is not None and isinstance(agent, str):
            call.child = f"{builder.session.id}:agent-{agent}"


class _SessionBuilder:
    """Accumulates one session's records; :meth:`finish` returns it whole."""

    def __init__(self, id: str) -> None:
        self.session = ImportedSession(id=id, model="unknown")
        self.model: str | None = None
        self.calls_by_id: dict[str, ImportedCall] = {}

    def add(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        stamp = from_iso(obj.get("timestamp"))
        if stamp:
            self.session.started_at = self.session.started_at or stamp
            self.session.finished_at = stamp
        message = dict_field(obj, "message")
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)] \
            if isinstance(message.get("parts"), list) else []
        if kind == "assistant":
            if isinstance(obj.get("model"), str) and obj["model"]:
                self.model = obj["model"]
            self._reply(parts, obj.get("usageMetadata"))
        elif kind == "tool_result":
            result = dict_field(obj, "toolCallResult")
            for part in parts:
                if isinstance(part.get("functionResponse"), dict):
                    self._result(part["functionResponse"], result)
        elif kind == "user":
            text = "\n".join(str(p.get("text")) for p in parts if isinstance(p.get("text"), str))
            if text:
                self.session.messages.append({"role": "user", "content": text})

    def _reply(self, parts: list[dict[str, Any]], usage: Any) -> None:
        s = self.session
        if not parts:
            return  # an empty reply record (a subagent's first): nothing said or called
        usage = usage if isinstance(usage, dict) else {}
        turn = TurnRecord(index=len(s.turns), prompt_tokens=usage.get("promptTokenCount"),
                          completion_tokens=usage.get("candidatesTokenCount"),
                          reasoning_tokens=usage.get("thoughtsTokenCount"),
                          cached_tokens=usage.get("cachedContentTokenCount"))
        s.turns.append(turn)
        out: dict[str, Any] = {"role": "assistant", "content": ""}
        for part in parts:
            if isinstance(part.get("text"), str):
                if part.get("thought"):
                    turn.reasoning += part["text"]
                else:
                    turn.content += part["text"]
            call = part.get("functionCall")
            if not isinstance(call, dict):
                continue
            name = str(call.get("name") or "")
            args = call.get("args")
            arguments = json.dumps(args, ensure_ascii=False) if args is not None else ""
            tkind, text = classify_call(name, args)
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            imported = ImportedCall(tool=name, arguments=arguments, turn_index=turn.index,
                                    kind=tkind, text=text, call_id=call_id)
            s.calls.append(imported)
            if call_id:
                self.calls_by_id[call_id] = imported
            out.setdefault("tool_calls", []).append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        out["content"] = turn.content
        s.messages.append(out)

    def _result(self, response: dict[str, Any], result: dict[str, Any]) -> None:
        call_id = response.get("id") if isinstance(response.get("id"), str) else None
        output = function_response_text(response)
        self.session.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        call = self.calls_by_id.get(call_id) if call_id else None
        if call is None:
            return
        call.output = output
        call.source_decision, call.source_reason = source_verdict(result.get("status"), output)

    def finish(self, model: str | None) -> ImportedSession:
        s = self.session
        s.model = model or self.model or "unknown"
        if s.calls and s.calls[-1].source_decision is None and not s.calls[-1].source_reason:
            s.status, s.error = "error", "session file ends before the result of its last call"
        return s


def function_response_text(response: dict[str, Any]) -> str:
    """The text of a Gemini ``functionResponse``: its ``response.output`` (or ``error``),
    else the response as JSON (pure)."""
    body = response.get("response")
    if isinstance(body, dict):
        for key in ("output", "error", "llmContent"):
            if isinstance(body.get(key), str):
                return body[key]
    return text_of(body)


def source_verdict(status: Any, output: str) -> tuple[Decision | None, str | None]:
    """Qwen Code's own decision on a call, from its ``toolCallResult.status`` (pure)."""
    if status == "success":
        return "allow", None
    if status == "cancelled":
        return "deny", f"cancelled: {output[:300]}"
    if status == "error":
        return None, f"tool error in qwen code: {output[:300]}"
    return ("allow", None) if output else (None, None)
