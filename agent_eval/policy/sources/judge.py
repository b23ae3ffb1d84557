"""Two verdicts per call: the harness's (its CLI's matcher, emulated) and the strict one.

The **harness verdict** is what the agent CLI itself decides under the agent's rules,
quirks included (``opencode.py``, ``claude_code.py``, ``codex.py``); ``ask`` blocks, as
nobody answers a prompt in an unattended stack.

The **strict verdict** reads the same rules the way agent-eval reads an allow-list: an
allowed pattern admits only plain words where its wildcard is.  It is built from the
engine itself, not from a second shell parser:

1. the command is judged by the engine against an allow-list that allows any single
   program with plain words (``patterns: ["*"]``, no runner): every chain, pipe,
   redirection, substitution, expansion, glob, heredoc, wrapper and inline-code
   interpreter is refused there with its AE class;
2. what passes is one simple command of literal words; it is allowed only when the
   harness's own rules allow exactly that command, with no quirk (else
   ``disallowed-program``, naming the rule that refused it).

A read path is judged the same way: the engine's path checks first (empty, ``~``,
control characters, ``..`` escaping; an absolute path is checked as the relative path
below ``/`` it names), then the harness's rules on the normalised path.

A **leak** is a call the harness allowed that the strict reading denies
(``DualVerdict.leak``); its class is the strict verdict's primary code.  Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_eval.policy.allowlist import allowlist_from_dict
from agent_eval.policy.engine import check_command, check_read
from agent_eval.policy.profiles import BASH_TOOLS, READ_TOOLS
from agent_eval.policy.rules import code_for
from agent_eval.policy.sources import claude_code, codex, gemini_cli, opencode, qwen_code
from agent_eval.policy.sources.emulation import CODEX_DEFAULT_MODE, Emulation, emulation_for
from agent_eval.policy.sources.model import AgentPolicy, DualVerdict, HarnessVerdict
from agent_eval.policy.verdict import Finding, Verdict

STRUCTURE = allowlist_from_dict({
    "name": "strict-structure", "runner": [], "patterns": ["*"],
    "read": {"roots": ["."]},
}, source="<strict structure>")
"""Any one program with plain words; every other shell construct refused."""

MAX_EMULATED = 65536
COMMAND_KEYS = ("command", "cmd")
PATH_KEYS = ("filePath", "file_path", "path")


@dataclass(frozen=True, slots=True)
class Setting:
    """Where and how the emulated CLI runs: its work directory and the home directory
    ``~`` names; its release (``version``, None: the pinned one) and mode (None: the
    configuration's own, else the CLI's unattended default); the quirks emulated (None:
    those reported for that release; ``emulation.py``)."""

    workdir: str = opencode.DEFAULT_WORKDIR
    home: str = opencode.DEFAULT_HOME
    quirks: frozenset[str] | None = None
    version: str | None = None
    mode: str | None = None

    def emulation(self, agent: AgentPolicy) -> Emulation:
        """The release, mode and behaviours a verdict on ``agent``'s calls assumes."""
        mode = self.mode or (agent.mode if agent.harness != "opencode" else "default")
        if agent.harness == "codex" and "/" not in mode:
            mode = CODEX_DEFAULT_MODE
        return emulation_for(agent.harness, self.version, mode, self.quirks)


def harness_command(agent: AgentPolicy, command: str, setting: Setting,
                    *, quirks: bool = True) -> HarnessVerdict:
    """The harness's verdict on a bash command (``quirks=False``: the rules alone, read
    by their documented semantics: no quirk, no mode's default, no sandbox).

    A command longer than ``MAX_EMULATED`` characters is not emulated (the matchers are
    linear per rule, but not free): it is reported ``ask`` with that reason, so it can
    never count as a leak."""
    if len(command) > MAX_EMULATED:
        return HarnessVerdict("ask", (), reason=f"longer than the {MAX_EMULATED} characters "
                                                "the emulation reads")
    if agent.harness == "opencode":
        return opencode.judge_command(agent, command, workdir=setting.workdir)
    emulated = setting.emulation(agent)
    if agent.harness == "gemini-cli":
        return gemini_cli.judge_command(agent, command, emulated.mode if quirks else "default")
    if agent.harness == "qwen-code":
        if not quirks:  # the rules alone: the shell tool taken as registered
            return qwen_code.judge_command(agent, command, "strict")
        return qwen_code.judge_command(agent, command, emulated.mode)
    if agent.harness == "claude-code":
        if not quirks:
            return claude_code.judge_command(agent, command, quirks=frozenset(), mode="default")
        return claude_code.judge_command(agent, command, quirks=emulated.behaviours,
                                         mode=emulated.mode, workdir=setting.workdir)
    return codex.judge_command(agent, command, emulated.mode if quirks else None)


def harness_read(agent: AgentPolicy, path: str, setting: Setting) -> HarnessVerdict:
    """The harness's verdict on a read of ``path``."""
    if agent.harness == "opencode":
        return opencode.judge_read(agent, path, workdir=setting.workdir)
    if agent.harness == "claude-code":
        return claude_code.judge_read(agent, path, workdir=setting.workdir, home=setting.home)
    if agent.harness == "gemini-cli":
        return gemini_cli.judge_tool(agent, "read_file", setting.emulation(agent).mode)
    if agent.harness == "qwen-code":
        return qwen_code.judge_tool(agent, "read_file")
    return HarnessVerdict("deny", (), reason="Codex has no read tool (files are read "
                                             "through the shell)")


def harness_tool(agent: AgentPolicy, tool: str, setting: Setting | None = None
                 ) -> HarnessVerdict:
    if agent.tools is not None and tool not in agent.tools:
        return HarnessVerdict("deny", (), reason=f"{tool} is not among agent "
                                                 f"{agent.name}'s tools")
    if agent.harness == "opencode":
        return opencode.judge_tool(agent, tool)
    if agent.harness == "claude-code":
        return claude_code.judge_tool(agent, tool)
    if agent.harness == "gemini-cli":
        return gemini_cli.judge_tool(agent, tool, (setting or Setting()).emulation(agent).mode)
    if agent.harness == "qwen-code":
        return qwen_code.judge_tool(agent, tool)
    if tool.startswith(codex.UNGATED_TOOL_PREFIXES):
        return HarnessVerdict("allow", (), reason=f"{tool} is not gated by Codex's rules")
    return HarnessVerdict("ask", (), reason=f"Codex rules govern commands, not tool {tool}")


def _refused(rule: str, message: str, end: int) -> Verdict:
    code = code_for(rule)
    return Verdict("deny", code, (Finding(code, message, 0, end),))


def strict_command(agent: AgentPolicy, command: str, setting: Setting) -> Verdict:
    """agent-eval's strict verdict on a bash command under the agent's rules."""
    verdict = check_command(command, STRUCTURE)
    if not verdict.allowed:
        return verdict
    plain = harness_command(agent, command, setting, quirks=False)
    if plain.allowed:
        return verdict
    return _refused("disallowed-program", f"not allowed by the {agent.harness} rules of "
                    f"agent {agent.name}: {plain.reason}", len(command))


def strict_read(agent: AgentPolicy, path: str, setting: Setting) -> Verdict:
    """agent-eval's strict verdict on a read of ``path`` under the agent's rules."""
    absolute = isinstance(path, str) and path.startswith("/")
    shown = path.lstrip("/") or "." if absolute else path
    verdict = check_read(shown, STRUCTURE)
    if not verdict.allowed:
        return verdict
    normal = "/" + (verdict.path or "").lstrip("/") if absolute else (verdict.path or path)
    decided = harness_read(agent, normal, setting)
    if decided.allowed:
        return Verdict("allow", path=normal)
    return _refused("blocked-read-path", f"not readable under the {agent.harness} rules of "
                    f"agent {agent.name}: {decided.reason}", len(path))


def judge_command(agent: AgentPolicy, command: str, setting: Setting | None = None
                  ) -> DualVerdict:
    setting = setting or Setting()
    return DualVerdict(harness_command(agent, command, setting),
                       strict_command(agent, command, setting), "bash", command)


def judge_read(agent: AgentPolicy, path: str, setting: Setting | None = None) -> DualVerdict:
    setting = setting or Setting()
    return DualVerdict(harness_read(agent, path, setting), strict_read(agent, path, setting),
                       "read", path)


def _arguments(arguments: str | dict[str, Any]) -> dict[str, Any] | None:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _profile_call(tool: str, args: dict[str, Any]) -> tuple[str, str] | None:
    """``(kind, command or path)`` of a shell or read call of an agent CLI, read through
    the built-in tool profiles (``policy/profiles.py``: ``run_shell_command``,
    ``read_file``, ``exec_command``...); None for any other call."""
    from agent_eval.policy.calls import command_text
    from agent_eval.policy.profiles import BUILTIN_TOOLS

    spec = BUILTIN_TOOLS.get(tool)
    if spec is None or spec.kind == "other":
        return None
    value = command_text(spec, args)
    return (spec.kind, value) if value is not None else None


def judge_call(agent: AgentPolicy, tool: str, arguments: str | dict[str, Any],
               setting: Setting | None = None) -> DualVerdict:
    """Both verdicts for one tool call as the model emitted it."""
    setting = setting or Setting()
    args = _arguments(arguments)
    if args is None:
        refused = _refused("malformed-arguments", "the arguments are not a JSON object", 0)
        return DualVerdict(HarnessVerdict("deny", (), reason="arguments not a JSON object"),
                           refused, "other", "")
    offered = agent.tools is None or tool in agent.tools
    profiled = _profile_call(tool, args)
    if profiled is not None and offered:
        kind, value = profiled
        if kind == "bash" and tool != "shell":  # Codex's argv `shell` is read below
            return judge_command(agent, value, setting)
        if kind == "read":
            return judge_read(agent, value, setting)
    if tool in BASH_TOOLS and offered:
        command = next((args[k] for k in COMMAND_KEYS if k in args), None)
        if agent.harness == "codex" and isinstance(command, list) \
                and all(isinstance(v, str) for v in command):
            argvs, how = codex.shell_argv(command)
            text = " ".join(command) if how == "argv" else command[2]
            harness = codex.judge_argv(agent, argvs, how, setting.emulation(agent).mode)
            return DualVerdict(harness, strict_command(agent, text, setting), "bash", text)
        if isinstance(command, str):
            return judge_command(agent, command, setting)
    if tool in READ_TOOLS and offered:
        path = next((args[k] for k in PATH_KEYS if k in args), None)
        if isinstance(path, str):
            return judge_read(agent, path, setting)
    if (tool in BASH_TOOLS or tool in READ_TOOLS) and offered:
        refused = _refused("missing-argument", f"{tool} call without its command or path", 0)
        return DualVerdict(HarnessVerdict("deny", (), reason="required argument missing"),
                           refused, "other", "")
    harness = harness_tool(agent, tool, setting)
    if harness.allowed:
        return DualVerdict(harness, Verdict("allow"), "other", tool)
    return DualVerdict(harness, _refused("unknown-tool", f"tool {tool!r} is not allowed for "
                                         f"agent {agent.name}: {harness.reason}", 0),
                       "other", tool)


def recorded_verdict(dual: DualVerdict) -> Verdict:
    """The verdict stored for a call judged under an agent CLI's rules: the harness's
    decision, since that is what the model was actually refused (``ask`` refuses too).

    A call the harness refused keeps the strict reading's findings when that refuses it
    too (its class says what is wrong with the command); a call only the harness refuses
    is classed by what was refused: a command ``disallowed-program``, a read
    ``blocked-read-path``, another tool ``unknown-tool``, with the harness's reason."""
    if dual.harness.allowed:
        return Verdict("allow", path=dual.strict.path)
    if not dual.strict.allowed:
        return dual.strict
    rule = {"bash": "disallowed-program", "read": "blocked-read-path"}.get(dual.kind,
                                                                          "unknown-tool")
    by = ", ".join(r.label() for r in dual.harness.rules)
    return _refused(rule, f"refused by the agent CLI's rules ({dual.harness.decision}"
                    f"{' by ' + by if by else ''}): {dual.harness.reason}", len(dual.text))
