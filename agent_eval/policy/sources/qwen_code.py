"""Qwen Code's permissions: ``settings.json`` read as written, a shell command judged as the
pinned release judges it unattended (``qwen -p``).

Read from the source of the pinned release (QwenLM/qwen-code 0.24.4, the published
bundle: ``packages/core/src/permissions/rule-parser.ts``, ``permission-manager.ts``,
``shell-semantics.ts``, and ``packages/cli/src/config/config.ts``; documented at
https://qwenlm.github.io/qwen-code-docs/en/users/configuration/settings/):

- ``permissions.allow`` / ``ask`` / ``deny``: rules written as Claude Code writes them,
  ``Bash(git diff *)``, ``Bash(npm run:*)`` (``:*`` is `` *``), ``Bash`` alone for the
  whole tool; ``run_shell_command``, ``Shell`` and ``Bash`` name the same tool.  The
  legacy ``tools.allowed`` is added to ``allow``, ``tools.exclude`` to ``deny``;
  ``tools.core`` lists the only tools registered.
- a command pattern matches the command with its leading ``VAR=value`` assignments
  removed: without ``*`` the command itself or it followed by a blank and more; a ``*``
  after a blank matches nothing or a blank and anything, elsewhere anything.
- a command is cut at ``&&``, ``||``, ``;``, ``|``, ``&`` and newlines outside quotes
  (``splitCompoundCommand``); each part is judged: a ``deny`` rule matching it denies the
  call, else an ``ask`` rule asks, else an ``allow`` rule allows it, else (interactively)
  it runs when read-only and asks otherwise; the most restrictive part decides.  The
  strict verdict reads the rules so, with no read-only default: a part no rule allows
  is refused.

Unattended (``-p``, no stream-json input), as the pinned release was recorded doing
(tests/fixtures/conformance/qwen-code-*; ``denyUnlessAllowed`` in config.ts):

- in ``default``, ``plan``, ``auto`` and ``auto-edit`` the shell tool is not registered
  unless a rule allows the whole tool (``Bash``, ``run_shell_command``) or ``tools.core``
  lists it: every command is refused, whatever the narrower rules say;
- once it is registered, and in ``yolo``, nobody is asked: a ``deny`` rule refuses, and
  everything else runs, what an ``ask`` rule matches included;
- in ``default``, ``plan`` and ``auto`` the edit tools are denied the same way unless a
  rule allows them whole, and a command that writes a file (an output redirection other
  than ``/dev/null``, ``tee``, ``touch``, ``cp``, ``mv``, ``mkdir``...) is checked as an
  edit: refused.

Not emulated: the checks of the file and network operations inside a command against
``Read``/``Edit``/``WebFetch`` rules with a path or domain (``cat f`` judged as a read of
``f``), and the write analysis's finer points (``sed -i``, ``find -delete``, ``cp -t``);
docs/policies.md lists them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.sources.files import read_json
from agent_eval.policy.sources.model import Action, AgentPolicy, HarnessVerdict, PolicySource, Rule
from agent_eval.policy.sources.shellsplit import all_commands

MODES = ("default", "plan", "auto-edit", "auto", "yolo")
SHELL = "run_shell_command"
SHELL_NAMES = (SHELL, "Shell", "ShellTool", "Bash")
OPERATORS = ("&&", "||", ";;", ";", "|&", "|", "&", "\n")
WRITE_COMMANDS = frozenset({"touch", "mkdir", "mkfifo", "tee", "cp", "mv", "ln", "install",
                            "truncate", "rm", "rmdir", "unlink", "shred"})
"""Commands whose path arguments Qwen Code checks as writes (shell-semantics.ts)."""
EDIT_NAMES = frozenset({"edit", "Edit", "EditTool", "write_file", "WriteFile", "Write",
                        "WriteFileTool"})
EDITS_DENIED_MODES = ("default", "plan", "auto")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _rule(text: Any, action: Action, path: str, field: str) -> Rule:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("must be a rule such as Bash(git diff *)", path=path, field=field)
    raw = text.strip()
    tool, paren, rest = raw.partition("(")
    if paren and not raw.endswith(")"):
        raise ConfigError(f"{raw!r} opens a ( it never closes; write Tool(specifier)",
                          path=path, field=field)
    tool = tool.strip()
    name = "Bash" if tool in SHELL_NAMES else tool
    spec = rest[:-1] if paren else ""
    if name == "Bash":
        spec = spec.replace(":*", " *")
    return Rule(name, spec, action, field)


def load(path: Path) -> PolicySource:
    """Qwen Code's ``settings.json`` (``~/.qwen/settings.json`` or a project's
    ``.qwen/settings.json``)."""
    settings = read_json(path, "Qwen Code settings.json")
    where = str(path)
    permissions = settings.get("permissions") or {}
    tools = settings.get("tools") or {}
    if not isinstance(permissions, dict) or not isinstance(tools, dict):
        raise ConfigError("permissions and tools must be objects", path=where)

    def listed(value: Any, field: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ConfigError("must be a list of rules", path=where, field=field)
        return value

    rules: list[Rule] = []
    kinds: tuple[tuple[Action, str | None], ...] = (("deny", "exclude"), ("ask", None),
                                                    ("allow", "allowed"))
    for action, extra in kinds:
        for index, text in enumerate(listed(permissions.get(action), f"permissions.{action}")):
            rules.append(_rule(text, action, where, f"permissions.{action}[{index}]"))
        if extra is not None:
            for index, text in enumerate(listed(tools.get(extra), f"tools.{extra}")):
                rules.append(_rule(text, action, where, f"tools.{extra}[{index}]"))
    core = tuple(SHELL if name == "Bash" else name
                 for name in (_rule(t, "allow", where, f"tools.core[{i}]").permission
                              for i, t in enumerate(listed(tools.get("core"), "tools.core"))))
    mode = "default"
    general = settings.get("general") or {}
    if isinstance(general, dict) and general.get("defaultApprovalMode") in MODES:
        mode = general["defaultApprovalMode"]
    agent = AgentPolicy("qwen-code", "default", tuple(rules), tools=core or None,
                        source=where, mode=mode)
    return PolicySource("qwen-code", where, {"default": agent}, "default")


# -- judging ----------------------------------------------------------------------------


def split_command(command: str) -> list[str]:
    """``splitCompoundCommand``: the parts between operators outside quotes (a ``&``
    right after a redirection's ``>`` or ``<`` is not one)."""
    parts: list[str] = []
    single = double = escaped = False
    last = 0
    i = 0
    while i < len(command):
        ch = command[i]
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "'" and not double:
            single = not single
        elif ch == '"' and not single:
            double = not double
        elif not (single or double):
            op = next((o for o in OPERATORS if command.startswith(o, i)), None)
            if op == "&" and (command[i + 1:i + 2] == ">"
                              or command[:i].rstrip(" \t")[-1:] in ("<", ">")):
                op = None
            if op is not None:
                part = command[last:i].strip(" \t")
                if part:
                    parts.append(part)
                last = i + len(op)
                i = last
                continue
        i += 1
    tail = command[last:].strip(" \t")
    if tail:
        parts.append(tail)
    return parts or [command]


def _without_assignments(command: str) -> str:
    words = command.strip().split()
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    return " ".join(words)


def command_matches(pattern: str, command: str) -> bool:
    """``matchesCommandPattern`` of rule-parser.ts."""
    text = _without_assignments(command)
    if pattern in ("", "*"):
        return True
    if "*" not in pattern:
        return text == pattern or text.startswith(pattern + " ")
    regex, pos = "^", 0
    while pos < len(pattern):
        star = pattern.find("*", pos)
        if star < 0:
            regex += re.escape(pattern[pos:])
            break
        literal = pattern[pos:star]
        if star > 0 and pattern[star - 1] == " ":
            regex += re.escape(literal[:-1]) + "( .*)?"
        else:
            regex += re.escape(literal) + ".*"
        pos = star + 1
    return re.match(regex + "$", text, re.S) is not None


def _first(agent: AgentPolicy, action: str, part: str) -> Rule | None:
    return next((r for r in agent.rules if r.action == action and r.permission == "Bash"
                 and command_matches(r.pattern, part)), None)


def shell_registered(agent: AgentPolicy, mode: str) -> bool:
    """Whether the shell tool exists in an unattended session (``denyUnlessAllowed``)."""
    if agent.tools is not None and SHELL not in agent.tools:
        return False
    if mode in ("yolo", "strict"):
        return True
    whole = any(r.permission == "Bash" and r.action == "allow" and r.pattern == ""
                for r in agent.rules)
    return whole or (agent.tools is not None and SHELL in agent.tools)


def writes_file(command: str) -> str | None:
    """What a command writes, as Qwen Code's shell analysis sees it, or None."""
    for piece in all_commands(command):
        for op, target in piece.redirects:
            if ">" in op and not op.endswith(">&") and not target.startswith("&") \
                    and target.strip("'\"") != "/dev/null":
                return target
        if piece.words and piece.words[0] in WRITE_COMMANDS:
            paths = [w for w in piece.words[1:] if not w.startswith("-")]
            if paths:
                return paths[-1]
    return None


def _edits_denied(agent: AgentPolicy, mode: str) -> bool:
    if mode not in EDITS_DENIED_MODES:
        return False
    whole = any(r.action == "allow" and r.pattern == "" and r.permission in EDIT_NAMES
                for r in agent.rules)
    return not whole and not (agent.tools is not None and EDIT_NAMES & set(agent.tools))


def judge_command(agent: AgentPolicy, command: str, mode: str) -> HarnessVerdict:
    """Qwen Code's permission manager on a shell command, unattended, in ``mode``
    (``strict``: the rules alone, the tool taken as registered, ``ask`` blocking, no
    read-only default)."""
    if any(r.permission == "Bash" and r.action == "deny" and r.pattern == ""
           for r in agent.rules):
        rule = next(r for r in agent.rules if r.permission == "Bash" and r.action == "deny"
                    and r.pattern == "")
        return HarnessVerdict("deny", (rule,), reason=f"the shell tool is denied by {rule.label()}")
    if not shell_registered(agent, mode):
        return HarnessVerdict("deny", (), reason=f"unattended in mode {mode} the shell tool is "
                              "not registered: no rule allows the whole tool (Bash)")
    used: list[Rule] = []
    parts = split_command(command)
    for part in parts:
        denied = _first(agent, "deny", part)
        if denied is not None:
            return HarnessVerdict("deny", (denied,), reason=f"{part!r} matches {denied.label()}")
    written = writes_file(command) if mode != "strict" and _edits_denied(agent, mode) else None
    if written is not None:
        return HarnessVerdict("deny", (), reason=f"writes {written}: a write in a shell command "
                              f"is an edit, and unattended in mode {mode} the edit tools are "
                              "denied")
    if mode != "strict":  # unattended nobody is asked: what no deny rule refuses runs
        for part in parts:
            allowed = _first(agent, "allow", part)
            if allowed is not None and allowed not in used:
                used.append(allowed)
        return HarnessVerdict("allow", tuple(used), reason=f"no deny rule matches: unattended "
                              f"in mode {mode} nobody is asked, so it runs")
    return _strict_verdict(agent, parts)


def _strict_verdict(agent: AgentPolicy, parts: list[str]) -> HarnessVerdict:
    """The rules alone on the parts no deny rule refused: the first part an ``ask`` rule
    matches, or no rule allows, asks; else every part is allowed by a rule."""
    used: list[Rule] = []
    for part in parts:
        asked = _first(agent, "ask", part)
        if asked is not None:
            return HarnessVerdict("ask", (asked,), reason=f"{part!r} matches {asked.label()}")
        allowed = _first(agent, "allow", part)
        if allowed is None:
            return HarnessVerdict("ask", (), reason=f"{part!r}: no rule allows it")
        if allowed not in used:
            used.append(allowed)
    return HarnessVerdict("allow", tuple(used), reason="every part allowed by a rule")


def judge_tool(agent: AgentPolicy, tool: str) -> HarnessVerdict:
    """Any other tool: deny, then ask, then allow rules naming it; read-only tools run."""
    for action in ("deny", "ask", "allow"):
        rule = next((r for r in agent.rules if r.action == action and r.permission == tool
                     and r.pattern == ""), None)
        if rule is not None:
            return HarnessVerdict(rule.action, (rule,), reason=f"{tool}: {rule.label()}")
    if tool in ("read_file", "Read", "glob", "grep_search", "list_directory"):
        return HarnessVerdict("allow", (), reason=f"{tool} is read-only")
    return HarnessVerdict("ask", (), reason=f"{tool}: no rule allows it")
