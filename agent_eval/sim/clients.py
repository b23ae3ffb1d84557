"""The simulator in front of an agent CLI (a minimal, separable piece): find the bundled
scenario's task inside the CLI's wrapped first user messages, and answer with the shell or
read tool the request offers under the CLI's own name and argument key.

Agent CLIs put their context around the user's prompt (Codex an ``<environment_context>``
message before it, Claude Code and Qwen Code ``<system-reminder>`` parts beside it), so the
first user message is rarely the task itself: :func:`find_scenario` also looks for a
scenario's whole task inside the first user messages.  The scenarios call ``bash``
(``{"command": ...}``) and ``read`` (``{"path": ...}``); a request that offers neither but
offers a CLI's shell or read tool gets the call under that tool's name and key
(:func:`adapt_calls`), the names and keys being those of docs/clients.md.  A fuller
"simulator plays any client" (tool profiles shared with the policy engine) replaces this.
"""

from __future__ import annotations

from typing import Any

from agent_eval.scenario import LoadedScenario
from agent_eval.sim.behaviour import Reply, TaskIndex, first_user_text, message_text
from agent_eval.sim.mutations import PlannedCall

SHELL_TOOLS = {"bash": "command", "Bash": "command", "run_shell_command": "command",
               "exec_command": "cmd", "shell_command": "command", "execute_bash": "command"}
"""A CLI's shell tool and the argument that carries the command (docs/clients.md)."""
READ_TOOLS = {"read": "path", "Read": "file_path", "read_file": "file_path"}
"""A CLI's read tool and the argument that carries the path."""
USER_MESSAGES = 4
"""How many user messages from the start may hold the task (Codex: the second)."""


def find_scenario(index: TaskIndex, messages: list[dict[str, Any]]
                  ) -> tuple[LoadedScenario | None, str]:
    """``(scenario, its task text)`` the conversation plays: the first user message's
    text as a task, else a task found whole inside one of the first user messages."""
    task = first_user_text(messages)
    found = index.find(task)
    if found is not None:
        return found, task
    users = [message_text(m) for m in messages if m.get("role") == "user"][:USER_MESSAGES]
    for text in users:
        for known, scenario in index.exact.items():
            if known and known in text:
                return scenario, known
    return None, task


def adapt_calls(reply: Reply, tools: list[Any] | None) -> Reply:
    """The reply with each ``bash``/``read`` call renamed to the shell or read tool the
    request offers instead, when it offers no tool of that name."""
    offered = _offered(tools)
    if not offered or not reply.calls:
        return reply
    calls = []
    for call in reply.calls:
        table, key = (SHELL_TOOLS, "command") if call.tool == "bash" else \
            (READ_TOOLS, "path") if call.tool == "read" else ({}, "")
        target = next((n for n in table if n in offered), None)
        if call.tool in offered or target is None or key not in call.arguments:
            calls.append(call)
            continue
        arguments = {k: v for k, v in call.arguments.items() if k != key}
        arguments[table[target]] = call.arguments[key]
        calls.append(PlannedCall(target, arguments, call.intended))
    return Reply(reply.reasoning, reply.content, tuple(calls))


def _offered(tools: list[Any] | None) -> set[str]:
    names = set()
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names
