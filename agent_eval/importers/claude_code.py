"""Read Claude Code transcripts: ``~/.claude/projects/<project>/<session>.jsonl``, and the
``claude -p --output-format stream-json`` stream, which has the same message lines.

Versions read: 1.x and 2.0 (one file per session), 2.1 (2.1.38/2.1.39 and later: the
lines of one assistant message written apart, with the results of parallel tool calls
between them; ``progress``, ``queue-operation``, ``attachment`` and other bookkeeping
lines, which carry no call and are passed over; subagents in
``<session>/subagents/agent-<id>.jsonl`` beside the session file).

PATH may be one ``.jsonl`` file or a directory (a project folder, or ``~/.claude/projects``
itself): every ``*.jsonl`` below it is read, in name order, a session file before its
subagents.  Lines are grouped by session id; subagent lines kept inline by older versions
(``isSidechain: true``) form their own session ``<id>:sidechain`` so their calls do not
interleave with the parent's.  A subagent file becomes the session
``<id>:agent-<agent id>``, a child of session ``<id>``, and the ``Agent``/``Task`` call
that started it is linked to it: the call's result line names the subagent in
``toolUseResult.agentId`` (2.1.332 writes it for the background and the waited-for
subagent alike), or else the subagent's ``.meta.json`` names the call (``toolUseId``).

Each ``tool_use`` block is one call; its ``tool_result`` (matched by ``tool_use_id``) is
the output.  ``Bash`` and ``Read`` are judged as our bash and read tools (``command``,
``file_path``); every other tool name is kept as it is.  Claude Code's own verdict is
kept beside ours:

* ``permissionDecision.decision`` ``accept``/``reject`` when the line has it;
* otherwise a ``toolDenialKind``, a ``system``/``permission_denied`` event, a
  ``<tool_use_error>`` result (unknown tool, invalid input) or a permission-denial text
  is ``deny``; any other recorded result means the tool ran: ``allow``.

A broken JSON line is skipped and reported; the rest of its session still imports.
"""

from __future__ import annotations

import json
import re
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

DENIAL_TEXT = re.compile(
    r"has been denied|haven't granted it yet|requested permissions to|"
    r"doesn't want to proceed|needs approval|was blocked|permission denied by",
    re.IGNORECASE,
)


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield every session in a transcript file, or in every ``*.jsonl`` under a folder."""
    path = Path(path)
    if path.is_dir():
        files = transcript_files(path)
        if not files:
            raise ConfigError("no *.jsonl transcripts in this folder", path=str(path))
    else:
        files = [path]
    for file in files:
        yield from read_file(file, model=model, on_skip=on_skip)


def transcript_files(folder: Path) -> list[Path]:
    """Every ``*.jsonl`` under ``folder``, in name order, each session file before the
    subagent files of its ``<session>/subagents/`` folder."""
    return sorted(folder.rglob("*.jsonl"), key=transcript_order)


def transcript_order(path: Path) -> tuple[str, ...]:
    """Sort key: name order, with ``<session>/subagents/*.jsonl`` right after ``<session>.jsonl``
    (Claude Code) and a Gemini CLI ``chats/<session>/`` subagent folder after the session
    files of ``chats/`` (Qwen Code's ``subagents/`` folder already sorts after ``chats/``)."""
    parts = list(path.parts)
    if len(parts) >= 3 and parts[-2] == "subagents":
        parts[-3] += ".jsonl\uffff"  # after <session>.jsonl
    elif len(parts) >= 3 and parts[-3] == "chats":
        parts[-2] = "\uffff" + parts[-2]
    return tuple(parts)


def read_file(path: Path, *, model: str | None, on_skip: SkipReporter | None) -> Iterator[ImportedSession]:
    """Yield the sessions of one transcript (or subagent) file.

    The file is streamed twice: once for the rare ``permission_denied`` events (which may
    follow the result they judge), once to build the sessions; only the sessions being
    built are held, never the file's lines.
    """
    denied = permission_denials(path)
    lines = (obj for _, obj in iter_jsonl(path, on_skip=on_skip) if isinstance(obj, dict))
    builders: dict[tuple[str, bool], _SessionBuilder] = {}
    default_id = path.stem
    subagent = path.parent.name == "subagents" and path.stem.startswith("agent-")
    init_model: str | None = None
    for obj in lines:
        kind = obj.get("type")
        sid = str(obj.get("sessionId") or obj.get("session_id") or default_id)
        if kind == "system" and obj.get("subtype") == "init" and isinstance(obj.get("model"), str):
            init_model = obj["model"]
        if kind not in ("assistant", "user", "summary", "result"):
            continue
        key = (sid, bool(obj.get("isSidechain")))
        builder = builders.get(key)
        if builder is None:
            builder = builders[key] = _new_builder(sid, key[1], subagent, path)
        builder.add(obj, denied)
        if builder.session.workdir is None and isinstance(obj.get("cwd"), str):
            builder.session.workdir = obj["cwd"]
        if builder.session.client is None and isinstance(obj.get("version"), str):
            builder.session.client = ("claude-code", obj["version"][:40])
    titles = [b.session.title for b in builders.values() if b.session.title]
    for builder in builders.values():
        if not builder.session.turns and not builder.session.messages:
            continue  # only a `summary` line (older files): nothing was said or called
        if builder.session.title is None and len(titles) == 1:
            builder.session.title = titles[0]
        if not subagent:
            _link_by_meta(builder, path)
        yield builder.finish(model or builder.model or init_model or "unknown")


def _link_by_meta(builder: _SessionBuilder, path: Path) -> None:
    """Link the calls no result line linked to the subagent whose ``.meta.json`` names
    them (``<session>/subagents/agent-<id>.meta.json``, ``toolUseId``): a transcript cut
    before the spawning call's result still links its subagent."""
    folder = path.with_suffix("") / "subagents"
    if not folder.is_dir():
        return
    sid = builder.session.id
    for meta in sorted(folder.glob("agent-*.meta.json")):
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            continue
        use_id = doc.get("toolUseId") if isinstance(doc, dict) else None
        call = builder.calls_by_id.get(use_id) if isinstance(use_id, str) else None
        if call is not None and call.child is None and (folder / f"{meta.name[:-10]}.jsonl").is_file():
            call.child = f"{sid}:{meta.name[:-10]}"


def permission_denials(path: Path) -> dict[str | None, str]:
    """Tool-use id -> reason of each ``system``/``permission_denied`` line (one cheap pass:
    only lines mentioning ``permission_denied`` are parsed)."""
    found: dict[str | None, str] = {}
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if b"permission_denied" not in raw:
                    continue
                try:
                    obj = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict) and obj.get("type") == "system" and obj.get("subtype") == "permission_denied":
                    reason = obj.get("message") or obj.get("decision_reason") or "permission denied"
                    found[_id(obj.get("tool_use_id"))] = str(reason)
    except OSError:
        return found
    return found


def _new_builder(sid: str, sidechain: bool, subagent: bool, path: Path) -> _SessionBuilder:
    if subagent and sidechain:
        builder = _SessionBuilder(f"{sid}:{path.stem}")
        builder.session.parent = sid
        return builder
    return _SessionBuilder(sid + (":sidechain" if sidechain else ""))


class _SessionBuilder:
    """Accumulates one session's lines; :meth:`finish` returns it whole.

    The lines of one assistant message (same ``message.id``) may be written apart, with
    tool results between them (2.1.38+ writes each content block of a reply with
    parallel tool calls as its own line): they still form one turn and one message.
    """

    def __init__(self, id: str) -> None:
        self.session = ImportedSession(id=id, model="unknown")
        self.model: str | None = None
        self.calls_by_id: dict[str, ImportedCall] = {}
        self.last_message_id: object = None
        self.current: dict[str, Any] | None = None
        self.failed: str | None = None

    def add(self, obj: dict[str, Any], denied: dict[Any, str]) -> None:
        kind = obj.get("type")
        stamp = from_iso(obj.get("timestamp"))
        if stamp:
            self.session.started_at = self.session.started_at or stamp
            self.session.finished_at = stamp
        if kind == "summary" and isinstance(obj.get("summary"), str):
            self.session.title = obj["summary"]
        elif kind == "result" and obj.get("is_error"):
            self.failed = str(obj.get("subtype") or "error")
        elif kind == "assistant":
            message = obj.get("message")
            self._add_assistant(message if isinstance(message, dict) else {})
        elif kind == "user":
            self._add_user(obj, denied)

    def _add_assistant(self, message: dict[str, Any]) -> None:
        s = self.session
        name = message.get("model")
        if isinstance(name, str) and name and not name.startswith("<"):
            self.model = name
        msg_id = message.get("id") or object()
        if msg_id != self.last_message_id or self.current is None:
            self.last_message_id = msg_id
            usage = dict_field(message, "usage")
            s.turns.append(TurnRecord(
                index=len(s.turns), finish_reason=message.get("stop_reason"),
                prompt_tokens=usage.get("input_tokens"),
                completion_tokens=usage.get("output_tokens"),
                cached_tokens=usage.get("cache_read_input_tokens"),
            ))
            self.current = {"role": "assistant", "content": "", "tool_calls": []}
            s.messages.append(self.current)
        turn = s.turns[-1]
        out = self.current
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": text_of(content)}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                turn.content += str(block.get("text") or "")
                out["content"] = turn.content
            elif btype == "thinking":
                turn.reasoning += str(block.get("thinking") or "")
            elif btype == "tool_use":
                name = str(block.get("name") or "")
                args = block.get("input")
                arguments = json.dumps(args, ensure_ascii=False) if args is not None else ""
                tkind, text = classify_call(name, args)
                call = ImportedCall(tool=name, arguments=arguments, turn_index=turn.index,
                                    kind=tkind, text=text, call_id=_id(block.get("id")))
                s.calls.append(call)
                if call.call_id:
                    self.calls_by_id[call.call_id] = call
                out["tool_calls"].append({"id": call.call_id, "type": "function",
                                          "function": {"name": name, "arguments": arguments}})

    def _add_user(self, obj: dict[str, Any], denied: dict[Any, str]) -> None:
        message = dict_field(obj, "message")
        content = message.get("content")
        if not isinstance(content, list):
            self.session.messages.append({"role": "user", "content": text_of(content)})
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") != "tool_result":
                if block.get("type") == "text":
                    self.session.messages.append({"role": "user", "content": str(block.get("text") or "")})
                continue
            output = text_of(block.get("content"))
            tool_use_id = _id(block.get("tool_use_id"))
            self.session.messages.append({"role": "tool", "tool_call_id": tool_use_id, "content": output})
            call = self.calls_by_id.get(tool_use_id) if tool_use_id is not None else None
            if call is None:
                continue
            call.output = output
            call.source_decision, call.source_reason = source_verdict(obj, block, output, denied.get(tool_use_id))
            result = obj.get("toolUseResult")
            agent = result.get("agentId") if isinstance(result, dict) else None
            if isinstance(agent, str) and agent and not self.session.id.endswith(":sidechain"):
                call.child = f"{self.session.id.split(':')[0]}:agent-{agent}"

    def finish(self, model: str) -> ImportedSession:
        s = self.session
        s.model = model
        for msg in s.messages:
            if msg.get("role") == "assistant" and not msg.get("tool_calls"):
                msg.pop("tool_calls", None)
        if self.failed:
            s.status, s.error = "error", f"claude code result: {self.failed}"
        elif s.calls and s.calls[-1].source_decision is None:
            s.status, s.error = "error", "transcript ends before the result of its last call"
        return s


def _id(value: Any) -> str | None:
    """A tool-use id as text; anything else (a hostile list or object) is no id."""
    return value if isinstance(value, str) else None


def source_verdict(
    line: dict[str, Any], block: dict[str, Any], output: str, denied: str | None
) -> tuple[Decision, str | None]:
    """Claude Code's own decision on a call, read from its result line (pure)."""
    decision = line.get("permissionDecision")
    if isinstance(decision, dict) and decision.get("decision") in ("accept", "reject"):
        if decision["decision"] == "accept":
            return "allow", None
        code = decision.get("reasonCode") or decision.get("reasonType") or "rejected"
        return "deny", f"{code}: {output[:300]}"
    if line.get("toolDenialKind") or denied is not None:
        return "deny", f"{line.get('toolDenialKind') or 'permission_denied'}: {(output or denied or '')[:300]}"
    if output.startswith("<tool_use_error>"):
        return "deny", output.removeprefix("<tool_use_error>").removesuffix("</tool_use_error>")[:300]
    if block.get("is_error") and DENIAL_TEXT.search(output):
        return "deny", output[:300]
    return "allow", None
