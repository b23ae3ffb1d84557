"""Read Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Versions read: 0.3x to 0.89 and later, whose lines are ``{"timestamp", "type",
"payload"}`` (``session_meta``, ``turn_context``, ``response_item``, ``event_msg``,
``compacted``), and the earlier rollouts whose lines are the response items themselves
after a first ``{"id", "timestamp", "instructions"}`` line.  PATH may be one file or a
folder (every ``rollout-*.jsonl`` below it, else every ``*.jsonl``).

Calls are the ``response_item`` entries the model emitted:

* ``function_call`` named ``shell`` (``{"command": ["bash", "-lc", "ls"]}``, an argv),
  ``shell_command`` (``{"command": "ls"}``) or ``exec_command`` (``{"cmd": "ls"}``,
  unified exec) are judged as the Codex profile declares them (``policy/profiles.py``),
  every key included; an argv ``[bash|sh|zsh, -lc|-c, SCRIPT]`` is the script, any
  other argv is shell-quoted and joined.  ``local_shell_call`` (tool ``local_shell``, its
  ``action`` as arguments: ``command``, ``env``, ``working_directory``, ``user``) and
  ``container.exec`` are in no profile: unknown tools (AE101), as the proxy judges them;
* any other ``function_call`` / ``custom_tool_call`` (``apply_patch``, MCP tools) keeps
  its name and arguments; a function of a namespace tool is named ``namespace.name``
  (``multi_agent_v1.spawn_agent``), as the proxy names it (``wire/responses.py``);
* ``web_search_call`` (Codex's built-in web search, run by the Responses API: no output
  item follows it) is a call of tool ``web_search`` whose arguments are its ``action``
  (``{"type": "search", "query": ...}`` or ``open_page``); ``status: completed`` means
  it ran (``allow``).

Subagents (0.16x, ``[features] multi_agent``): each thread writes its own rollout; a
subagent's ``session_meta`` names its parent thread (``parent_thread_id``), and the
parent's ``event_msg`` ``item_completed`` of the ``CollabAgentToolCall`` item of tool
``spawn_agent`` (id = the call's ``call_id``) names the child threads it started
(``receiver_thread_ids``): the import links the child to its parent and the spawning call
to its child (checked against the 0.169.0 rollouts in ``tests/fixtures/clis/codex``;
``codex-rs/core/src/tools/handlers/multi_agents/spawn.rs`` in github.com/openai/codex).
Rollouts are read in name order (their start time), a parent before its children.

Output: the ``function_call_output`` / ``custom_tool_call_output`` /
``local_shell_call_output`` with the same ``call_id``.  Codex's own verdict: an output
saying the command was rejected or declined (approval policy, user) is ``deny``; any
other output means it ran (``allow``); a call without output has none.  Model: the
``turn_context`` model.  Status ``error`` when the rollout ends before the output of its
last call or records an ``error`` event.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    dict_field,
    from_iso,
    iter_jsonl,
    text_of,
    warn_skipped,
)
from agent_eval.transcript import TurnRecord

SHELL_FUNCTIONS = frozenset({"shell", "shell_command", "exec_command", "container.exec", "local_shell"})
CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash"})
INJECTED = ("<permissions instructions>", "# AGENTS.md instructions for", "<environment_context>",
            "<user_instructions>")
"""How the user-role messages Codex writes itself begin (its instructions and context, not a prompt)."""
REJECTED = re.compile(r"rejected by (the )?user|declined|not approved|approval (was )?denied", re.IGNORECASE)


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the session of each rollout file (one file, or every one under a folder)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("rollout-*.jsonl")) or sorted(path.rglob("*.jsonl"))
        if not files:
            raise ConfigError("no rollout-*.jsonl files in this folder", path=str(path))
    else:
        files = [path]
    for file in files:
        yield read_file(file, model=model, on_skip=on_skip)


def read_file(path: Path, *, model: str | None, on_skip: SkipReporter | None = None) -> ImportedSession:
    """The one session of a rollout file."""
    builder = _Rollout(path.stem)
    broken = 0
    objects = 0

    def count_skip(file: Path, line: int, reason: str) -> None:
        nonlocal broken
        broken += 1
        (on_skip or warn_skipped)(file, line, reason)

    for _, obj in iter_jsonl(path, on_skip=count_skip):
        if isinstance(obj, dict):
            objects += 1
            builder.add(obj)
    if not objects and broken:
        raise ConfigError(f"not a Codex rollout: none of its {broken} lines is a JSON object "
                          "(a pretty-printed JSON document?); pick its FORMAT or use auto", path=str(path))
    return builder.finish(model)


def unwrap(obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(line kind, payload) of a rollout line; old rollouts store bare items (pure)."""
    payload = obj.get("payload")
    if isinstance(payload, dict) and isinstance(obj.get("type"), str):
        return obj["type"], payload
    if "instructions" in obj and "id" in obj and "type" not in obj:
        return "session_meta", obj
    return "response_item", obj


def command_text(argv: Any) -> str | None:
    """The shell script an argv or command string runs (pure)."""
    if isinstance(argv, str):
        return argv
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return None
    if len(argv) == 3 and argv[0] in SHELLS and argv[1] in ("-lc", "-c"):
        return argv[2]
    return shlex.join(argv)


def call_from_item(item: dict[str, Any], turn: int) -> ImportedCall:
    """One call from a ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` (pure)."""
    kind = item.get("type")
    call_id = item.get("call_id") or item.get("id")
    call_id = str(call_id) if call_id is not None else None
    if kind == "local_shell_call":
        action = dict_field(item, "action")
        text = command_text(action.get("command"))
        return ImportedCall(tool="local_shell", arguments=json.dumps(action, ensure_ascii=False),
                            turn_index=turn, kind="bash", text=text, call_id=call_id)
    name = str(item.get("name") or "")
    if isinstance(item.get("namespace"), str) and item["namespace"]:
        name = f"{item['namespace']}.{name}"
    raw = item.get("arguments") if kind == "function_call" else item.get("input")
    arguments = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    if name not in SHELL_FUNCTIONS:
        return ImportedCall(tool=name, arguments=arguments, turn_index=turn, call_id=call_id)
    try:
        args = json.loads(arguments) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        args = None
    text = None
    if isinstance(args, dict):
        text = command_text(args.get("command")) or command_text(args.get("cmd"))
    return ImportedCall(tool=name, arguments=arguments, turn_index=turn, kind="bash", text=text,
                        call_id=call_id)


def web_search_from_item(item: dict[str, Any], turn: int) -> ImportedCall:
    """One call from a ``web_search_call`` item, which carries its own status (pure)."""
    action = dict_field(item, "action")
    call_id = item.get("id") or item.get("call_id")
    return ImportedCall(
        tool="web_search", arguments=json.dumps(action, ensure_ascii=False), turn_index=turn,
        call_id=str(call_id) if call_id is not None else None,
        source_decision="allow" if item.get("status") == "completed" else None,
    )


def output_text(item: dict[str, Any]) -> str:
    """The text of a call output item: a string, ``{"content": ...}`` or ``{"output": ...}``."""
    output = item.get("output")
    if isinstance(output, dict):
        output = output.get("content", output.get("output", output))
    if isinstance(output, str):
        try:
            inner = json.loads(output)
        except (ValueError, RecursionError):
            return output
        if isinstance(inner, dict) and isinstance(inner.get("output"), str):
            return inner["output"]
        return output
    return text_of(output)


class _Rollout:
    """Accumulates one rollout's lines; :meth:`finish` returns the session whole."""

    def __init__(self, default_id: str) -> None:
        self.session = ImportedSession(id=default_id, model="unknown")
        self.model: str | None = None
        self.calls: dict[str, ImportedCall] = {}
        self.in_turn = False
        self.errored: str | None = None

    def add(self, obj: dict[str, Any]) -> None:
        kind, payload = unwrap(obj)
        stamp = from_iso(obj.get("timestamp"))
        if stamp:
            self.session.started_at = self.session.started_at or stamp
            self.session.finished_at = stamp
        if kind in ("session_meta", "turn_context") and isinstance(payload.get("cwd"), str):
            self.session.workdir = self.session.workdir or payload["cwd"]
        if kind == "session_meta" and isinstance(payload.get("cli_version"), str):
            self.session.client = ("codex", payload["cli_version"][:40])
        if kind == "turn_context":
            self.session.mode = codex_mode(payload) or self.session.mode
        if kind == "session_meta" and payload.get("id"):
            self.session.id = str(payload["id"])
            if isinstance(payload.get("parent_thread_id"), str):
                self.session.parent = payload["parent_thread_id"]
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif kind == "event_msg" and payload.get("type") in ("error", "stream_error"):
            self.errored = str(payload.get("message") or payload.get("type"))
        elif kind == "event_msg" and isinstance(payload.get("item"), dict):
            self._spawned(payload["item"])
        elif kind == "response_item":
            self._item(payload)

    def _item(self, item: dict[str, Any]) -> None:
        s = self.session
        itype = item.get("type") if isinstance(item.get("type"), str) else None
        if itype in CALL_TYPES or itype == "web_search_call":
            turn = self._turn().index
            call = call_from_item(item, turn) if itype in CALL_TYPES else web_search_from_item(item, turn)
            s.calls.append(call)
            if call.call_id:
                self.calls[call.call_id] = call
            s.messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call.call_id, "type": "function",
                 "function": {"name": call.tool, "arguments": call.arguments}}]})
        elif itype in OUTPUT_TYPES:
            self.in_turn = False
            self._output(item)
        elif itype == "message":
            text = text_of(item.get("content"))
            if item.get("role") == "assistant":
                self._turn().content += text
            else:
                self.in_turn = False
            s.messages.append({"role": message_role(item.get("role"), text), "content": text})
        elif itype == "reasoning":
            summary = item.get("summary")
            self._turn().reasoning += text_of(summary) if isinstance(summary, list) else ""

    def _spawned(self, item: dict[str, Any]) -> None:
        """Link a ``spawn_agent`` call to the thread it started."""
        if item.get("type") != "CollabAgentToolCall" or item.get("tool") != "spawn_agent":
            return
        call = self.calls.get(item["id"]) if isinstance(item.get("id"), str) else None
        threads = item.get("receiver_thread_ids")
        if call is not None and isinstance(threads, list) and threads and isinstance(threads[0], str):
            call.child = threads[0]

    def _turn(self) -> TurnRecord:
        if not self.in_turn or not self.session.turns:
            self.session.turns.append(TurnRecord(index=len(self.session.turns)))
            self.in_turn = True
        return self.session.turns[-1]

    def _output(self, item: dict[str, Any]) -> None:
        output = output_text(item)
        call_id = str(item.get("call_id")) if item.get("call_id") is not None else None
        self.session.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        call = self.calls.get(call_id) if call_id else None
        if call is None:
            return
        call.output = output
        if REJECTED.search(output[:400]):
            call.source_decision, call.source_reason = "deny", output[:300]
        else:
            call.source_decision = "allow"

    def finish(self, model: str | None) -> ImportedSession:
        s = self.session
        s.model = model or self.model or "unknown"
        if self.errored:
            s.status, s.error = "error", f"codex error: {self.errored[:200]}"
        elif s.calls and s.calls[-1].source_decision is None:
            s.status, s.error = "error", "rollout ends before the output of its last call"
        return s


def message_role(role: Any, text: str) -> Any:
    """The role to store: Codex's ``developer`` messages and the instructions and context it
    sends as ``user`` (AGENTS.md, ``<environment_context>``) are ``system``, so the session's
    task is the first prompt the user typed."""
    if role == "developer" or (role == "user" and text.lstrip().startswith(INJECTED)):
        return "system"
    return role


def codex_mode(context: dict[str, Any]) -> str | None:
    """``APPROVAL/SANDBOX`` of a ``turn_context`` (``approval_policy``, ``sandbox_policy``
    ``{"type": ...}`` or ``{"mode": ...}``), the missing part ``codex exec``'s default;
    None when it names neither or either is not one Codex has."""
    from agent_eval.policy.sources.emulation import (
        CODEX_APPROVALS,
        CODEX_DEFAULT_MODE,
        CODEX_SANDBOXES,
    )

    approval, _, sandbox = CODEX_DEFAULT_MODE.partition("/")
    given = context.get("approval_policy")
    policy = context.get("sandbox_policy")
    kind = policy.get("type", policy.get("mode")) if isinstance(policy, dict) else policy
    if given is None and kind is None:
        return None
    approval = given if isinstance(given, str) else approval
    sandbox = kind if isinstance(kind, str) else sandbox
    if approval not in CODEX_APPROVALS or sandbox not in CODEX_SANDBOXES:
        return None
    return f"{approval}/{sandbox}"

