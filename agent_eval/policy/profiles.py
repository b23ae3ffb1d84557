"""Tool profiles: the shell, read and subagent tools of the agent CLIs, as they define them.

A call relayed by the proxy or imported from a CLI's session file comes from a harness
that is not agent-eval's: its tools have their own names and argument keys.  A profile
declares, for one CLI, each such tool with every key it takes (``ToolSpec`` and
``ArgumentSpec``, exactly as an allow-list declares its own tools), mapped onto the kinds
the engine judges: a ``Bash`` call is judged exactly as a ``bash`` call, ``exec_command``'s
``cmd`` too, a working directory (``workdir``, ``directory``, ``dir_path``) is allowed
only when it is the project root (or the allow-list lists it for the tool: ``workdirs``),
and the switches that leave the sandbox or the model's sight
(``dangerouslyDisableSandbox``, ``sandbox_permissions: require_escalated``,
``run_in_background``, ``is_background``) are denials of their own class (AE106, AE107).
Every other tool of a CLI (edit, write, grep, web fetch ...) is in no profile, so it is
AE101 under an allow-list whose harness offers only a shell and a read tool.

Each tool was read off the CLI's own request (``tests/fixtures/clis/<cli>/tools.json``,
captured from the versions below) and checked against its source:

- OpenCode 1.18.33 (github.com/sst/opencode ``packages/opencode/src/tool/bash.ts``,
  ``read.ts``, ``task.ts``); ``description`` on ``bash`` is what 1.18.34 sends.
- Qwen Code 0.24.4 (github.com/QwenLM/qwen-code ``packages/core/src/tools/shell.ts``,
  ``read-file.ts``, ``agent/agent.ts``).
- Codex CLI 0.169.0 (github.com/openai/codex ``codex-rs/core/src/tools/spec.rs``,
  ``handlers/multi_agents_spec.rs``); ``shell {command: [argv]}``, ``shell_command`` and
  ``with_escalated_permissions`` are what earlier versions' rollouts hold.
- Claude Code 2.1.332 (the ``Bash``, ``Read`` and ``Agent`` definitions it sends;
  ``Task`` is the older name of ``Agent``).
- Gemini CLI 0.61.0 (github.com/google-gemini/gemini-cli ``packages/core/src/tools/
  shell.ts``, ``read-file.ts``, ``agents/agent-tool.ts``, ``tools/complete-task.ts``).
- OpenHands (github.com/All-Hands-AI/OpenHands ``openhands/agenthub/codeact_agent/tools/
  bash.py``): ``execute_bash``.

Qwen Code and Gemini CLI share the names ``run_shell_command`` and ``read_file`` with
different keys; the one spec of each name declares the keys of both.
"""

from __future__ import annotations

from typing import Any

from agent_eval.policy.allowlist import ProfileSpec, ToolSpec

_TEXT: dict[str, Any] = {"holds": "value"}
_INT: dict[str, Any] = {"holds": "value", "type": "integer"}
_NUMBER: dict[str, Any] = {"holds": "value", "type": "number"}
_BOOL: dict[str, Any] = {"holds": "value", "type": "boolean"}
_ARRAY: dict[str, Any] = {"holds": "value", "type": "array"}
_OBJECT: dict[str, Any] = {"holds": "value", "type": "object"}
_WORKDIR: dict[str, Any] = {"holds": "workdir", "description": "working directory"}
_COMMAND: dict[str, Any] = {"holds": "command", "required": True}
_READ_PATH: dict[str, Any] = {"holds": "path", "required": True}
_ESCALATION: dict[str, Any] = {"holds": "absent", "denial": "sandbox-escalation"}
_BACKGROUND: dict[str, Any] = {"holds": "absent", "denial": "background-run"}
_REQUIRED_TEXT: dict[str, Any] = {"holds": "value", "required": True}


def _tool(name: str, kind: str, **arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "kind": kind, "arguments": arguments}


_RUN_SHELL_COMMAND = _tool(  # Qwen Code's keys and Gemini CLI's
    "run_shell_command", "bash", command=_COMMAND, description=_TEXT, directory=_WORKDIR,
    dir_path=_WORKDIR, is_background=_BACKGROUND, timeout=_INT, delay_ms=_INT,
)
_READ_FILE = _tool(  # Qwen Code's keys and Gemini CLI's
    "read_file", "read", file_path=_READ_PATH, offset=_INT, limit=_INT, pages=_TEXT,
    start_line=_INT, end_line=_INT,
)
_SUBAGENT = {"description": _REQUIRED_TEXT, "prompt": _REQUIRED_TEXT, "subagent_type": _TEXT}

_PROFILES: dict[str, dict[str, Any]] = {
    "opencode": {
        "description": "OpenCode 1.18: bash, read, task",
        "tools": [
            _tool("bash", "bash", command=_COMMAND, description=_TEXT, timeout=_INT,
                  workdir=_WORKDIR),
            _tool("read", "read", filePath=_READ_PATH, offset=_INT, limit=_INT),
            _tool("task", "other", **{**_SUBAGENT, "subagent_type": {**_TEXT, "required": True}},
                  task_id=_TEXT, command=_TEXT),
        ],
    },
    "qwen-code": {
        "description": "Qwen Code 0.24: run_shell_command, read_file, agent",
        "tools": [
            _RUN_SHELL_COMMAND, _READ_FILE,
            _tool("agent", "other", **_SUBAGENT, fork_turns=_TEXT, fork_tools=_ARRAY,
                  fork_profile=_TEXT, run_in_background=_BOOL,
                  isolation={**_TEXT, "choices": ["worktree"]}, working_dir=_WORKDIR),
        ],
    },
    "codex": {
        "description": "Codex CLI 0.169 (and earlier rollouts): exec_command, shell, "
                       "shell_command, view_image, the multi_agent_v1 tools",
        "tools": [
            _tool("exec_command", "bash", cmd=_COMMAND, workdir=_WORKDIR, yield_time_ms=_NUMBER,
                  max_output_tokens=_NUMBER, login=_BOOL, tty=_BOOL,
                  shell={**_ESCALATION, "denial": "undeclared-argument",
                         "choices": ["bash", "/bin/bash", "/usr/bin/bash"],
                         "description": "only bash: the command is judged as bash"},
                  sandbox_permissions={**_ESCALATION, "choices": ["use_default"]},
                  justification=_TEXT, prefix_rule=_ESCALATION,
                  with_escalated_permissions=_ESCALATION),
            _tool("shell", "bash", command={"holds": "argv", "required": True},
                  workdir=_WORKDIR, timeout_ms=_NUMBER, with_escalated_permissions=_ESCALATION,
                  justification=_TEXT),
            _tool("shell_command", "bash", command=_COMMAND, workdir=_WORKDIR, timeout_ms=_NUMBER,
                  login=_BOOL, with_escalated_permissions=_ESCALATION, justification=_TEXT),
            _tool("view_image", "read", path=_READ_PATH),
            _tool("multi_agent_v1.spawn_agent", "other", message=_TEXT, items=_ARRAY,
                  fork_context=_BOOL, model=_TEXT, reasoning_effort=_TEXT),
            _tool("multi_agent_v1.wait_agent", "other", targets={**_ARRAY, "required": True},
                  timeout_ms=_NUMBER),
            _tool("multi_agent_v1.send_input", "other", target={**_TEXT, "required": True},
                  message=_TEXT, items=_ARRAY, interrupt=_BOOL),
            _tool("multi_agent_v1.resume_agent", "other", id={**_TEXT, "required": True}),
            _tool("multi_agent_v1.close_agent", "other", target={**_TEXT, "required": True}),
        ],
    },
    "claude-code": {
        "description": "Claude Code 2.1: Bash, Read, Agent (Task)",
        "tools": [
            _tool("Bash", "bash", command=_COMMAND, description=_TEXT, timeout=_NUMBER,
                  run_in_background=_BACKGROUND, dangerouslyDisableSandbox=_ESCALATION),
            _tool("Read", "read", file_path=_READ_PATH, offset=_INT, limit=_INT, pages=_TEXT,
                  allow_large=_BOOL),
            *(_tool(name, "other", **_SUBAGENT, model=_TEXT, effort=_TEXT,
                    run_in_background=_BOOL, isolation=_TEXT) for name in ("Agent", "Task")),
        ],
    },
    "gemini-cli": {
        "description": "Gemini CLI 0.61: run_shell_command, read_file, invoke_agent, "
                       "complete_task",
        "tools": [
            _RUN_SHELL_COMMAND, _READ_FILE,
            _tool("invoke_agent", "other", agent_name=_REQUIRED_TEXT, prompt=_REQUIRED_TEXT,
                  wait_for_previous=_BOOL),
            _tool("complete_task", "other", result={**_OBJECT, "required": True},
                  wait_for_previous=_BOOL),
        ],
    },
    "openhands": {
        "description": "OpenHands CodeAct: execute_bash",
        "tools": [
            _tool("execute_bash", "bash", command=_COMMAND, timeout=_NUMBER, security_risk=_TEXT,
                  thought=_TEXT,
                  is_input={**_BACKGROUND, "choices": ["false"],
                            "description": "\"true\" sends the command as input to a "
                                           "process still running"}),
        ],
    },
}

BUILTIN: dict[str, ProfileSpec] = {
    name: ProfileSpec.model_validate(profile) for name, profile in _PROFILES.items()
}
"""The built-in profiles by name, in lookup order; every one is on unless an allow-list
switches it off (``profiles: {claude-code: false}``)."""

BUILTIN_TOOLS: dict[str, ToolSpec] = {}
"""Every tool of a built-in profile by name (the first profile naming it), whether or not
an allow-list switched its profile off."""
for _profile in BUILTIN.values():
    for _spec in _profile.tools:
        BUILTIN_TOOLS.setdefault(_spec.name, _spec)

BASH_TOOLS = frozenset({
    "bash", "Bash", "shell", "Shell", "shell_command", "exec_command", "local_shell",
    "execute_bash", "run_shell_command", "run_command", "terminal", "swe-agent-shell",
    "tmux_keystrokes", "__format_error__",
})
"""Tool names of any harness that run a shell command: the one list, read by the call
recorder (``call_recorder.py``: imported and proxied calls) and by the agent CLIs' judges
(``sources/judge.py``).  Codex's ``shell``, ``shell_command``, ``exec_command`` and
``local_shell``; ``terminal`` is the OpenHands SDK's; the last three name the actions of
SWE-agent, Terminus and unparseable harness replies in flat call records."""

READ_TOOLS = frozenset({"read", "Read", "view", "read_file", "ReadFile"})
"""Tool names of any harness that read a file; the one list, as :data:`BASH_TOOLS`."""

ARGV_SHELL_TOOLS = frozenset({"local_shell"})
"""Shell tools whose command is an argv list with no text key (the Responses API's
``local_shell`` action): the Codex judge reads the argv, while the call recorder
judges them as emitted (AE101 unless the allow-list lists the tool), since no text
command can be renamed onto the allow-list's shell tool."""
