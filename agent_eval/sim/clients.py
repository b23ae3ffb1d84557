"""The simulator plays any client: it finds the scenario's task inside a client's wrapped
first messages, answers with the shell or read tool the request offers, under that tool's
own name and argument key, and answers a client's side requests with text.

Agent CLIs put their context around the user's prompt (Codex an ``<environment_context>``
message before it, Claude Code and Qwen Code ``<system-reminder>`` parts beside it), so the
first user message is rarely the task itself: :func:`locate` also looks for a
scenario's whole task inside the first user messages.

The scenarios call ``bash`` (``{"command": ...}``) and ``read`` (``{"path": ...}``).  A
request that offers neither gets each call under the tool it offers of that kind, found
through the same tool profiles the policy engine judges the CLIs' calls by
(``policy/profiles.py``): the offered tool's name is a profile's shell (or read) tool and
its argument schema has that tool's command (or path) key, so ``Bash {command}``,
``exec_command {cmd}``, ``read {filePath}``, ``Read {file_path}``, Codex's ``shell
{command: [argv]}`` (``["bash", "-lc", COMMAND]``); a tool of the same name whose schema
lacks the key is not taken (another program's ``read_file {absolute_path}``), nor an image
viewer for a text file (Codex's ``view_image``: Codex reads through its shell, and so the
read step stays ``read``, which Codex does not offer).  The offered tools are tried in
the order the request lists them.

Side requests (``wire/side.py``): a CLI's known side request (Qwen Code's memory
extraction, which offers a shell tool), and a request that offers no tool while the task
was found only inside the client's wrapping (OpenCode's title request quotes the user's
prompt), are answered with text: no scenario call goes to a request that is not the
conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_eval.policy.allowlist import ToolSpec
from agent_eval.policy.profiles import BUILTIN
from agent_eval.scenario import LoadedScenario
from agent_eval.sim.behaviour import Reply, TaskIndex, first_user_text, message_text
from agent_eval.sim.mutations import PlannedCall
from agent_eval.wire.side import side_request_of

USER_MESSAGES = 4
"""How many user messages from the start may hold the task (Codex: the second)."""
IMAGE_READERS = frozenset({"view_image"})
"""Read tools of a profile that show an image: never given a scenario's text file."""
SIDE_REPLY = Reply(reasoning="This is a side request of the client, not the task.",
                   content="Agent-eval simulated session")
"""The answer to a side request: a short text (OpenCode uses it as the title)."""


@dataclass(frozen=True)
class Found:
    """The scenario a request plays, the task text, and whether the task was the first
    user message itself (``exact``) or found inside the client's wrapping."""

    scenario: LoadedScenario | None
    task: str
    exact: bool


def locate(index: TaskIndex, messages: list[dict[str, Any]]) -> Found:
    """The scenario the conversation plays: the first user message's text as a task,
    else a task found whole inside one of the first user messages (``exact`` False)."""
    task = first_user_text(messages)
    found = index.find(task)
    if found is not None:
        return Found(found, task, True)
    users = [message_text(m) for m in messages if m.get("role") == "user"][:USER_MESSAGES]
    for text in users:
        for known, scenario in index.exact.items():
            if known and known in text:
                return Found(scenario, known, False)
    return Found(None, task, False)


def is_side_request(messages: list[dict[str, Any]], tools: list[Any] | None,
                    found: Found) -> bool:
    """Whether the request is a client's side request (module docstring)."""
    if side_request_of(messages) is not None:
        return True
    return found.scenario is not None and not found.exact and not _offered(tools)


@dataclass(frozen=True)
class Target:
    """An offered tool a ``bash``/``read`` call goes to, and how its key is written."""

    name: str
    key: str
    argv: bool = False  # the command as ``["bash", "-lc", COMMAND]``

    def arguments(self, value: str) -> dict[str, Any]:
        return {self.key: ["bash", "-lc", value] if self.argv else value}


def target_for(kind: str, tools: list[Any] | None) -> Target | None:
    """The first offered tool that a built-in profile declares as a ``kind`` tool
    (``bash`` or ``read``) and whose offered schema has its command or path key."""
    for name, schema in _offered(tools).items():
        if kind == "read" and name in IMAGE_READERS:
            continue
        for spec in _profile_tools(name, kind):
            key = spec.judged_key
            if key is None:
                continue
            if not _has_key(schema, key):
                continue
            return Target(name, key, spec.arguments[key].holds == "argv")
    return None


def adapt_calls(reply: Reply, tools: list[Any] | None) -> Reply:
    """The reply with each ``bash``/``read`` call given to the shell or read tool the
    request offers instead, when it offers no tool of the call's own name and key
    (OpenCode's ``read`` takes ``filePath``)."""
    offered = _offered(tools)
    if not offered or not reply.calls:
        return reply
    calls = []
    for call in reply.calls:
        key = {"bash": "command", "read": "path"}.get(call.tool)
        own = call.tool in offered and _has_key(offered[call.tool], key or "")
        target = target_for(call.tool, tools) if key and not own else None
        if target is None or key not in call.arguments:
            calls.append(call)
            continue
        arguments = {k: v for k, v in call.arguments.items() if k != key}
        arguments.update(target.arguments(call.arguments[key]))
        calls.append(PlannedCall(target.name, arguments, call.intended))
    return Reply(reply.reasoning, reply.content, tuple(calls))


def _has_key(schema: Any, key: str) -> bool:
    """Whether an offered argument schema takes ``key`` (a schema naming no keys may)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return not (isinstance(properties, dict) and properties) or key in properties


def _profile_tools(name: str, kind: str) -> list[ToolSpec]:
    return [t for p in BUILTIN.values() for t in p.tools if t.name == name and t.kind == kind]


def _offered(tools: list[Any] | None) -> dict[str, Any]:
    """The offered tools' names and argument schemas, in the request's order."""
    out: dict[str, Any] = {}
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.setdefault(fn["name"], fn.get("parameters"))
    return out
