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
- once it is registered, in ``default``, ``auto`` and ``auto-edit``, nobody answers a
  confirmation: a ``deny`` rule refuses; a part an ``ask`` rule matches, or a simple
  command no ``allow`` rule matches that is not read-only (``READ_ONLY``; a wrapper, an
  absolute path, ``git`` with a flag before its subcommand are not), is declined
  ("requires permission ... declined (non-interactive mode cannot prompt for
  confirmation)"); ``bash -c SCRIPT`` is its script; the rest runs;
- in ``plan`` its own shell check runs only what it can tell read-only: a substitution,
  an assignment or a part not read-only is not run, an output redirection or a git
  subcommand that writes is refused as state-modifying;
- in ``yolo`` only the ``deny`` rules hold: everything else runs;
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
from agent_eval.policy.sources.model import (
    Action,
    AgentPolicy,
    HarnessDecision,
    HarnessVerdict,
    PolicySource,
    Rule,
)
from agent_eval.policy.sources.shellsplit import Piece, all_commands

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
READ_ONLY = frozenset({"awk", "basename", "cat", "cd", "column", "cut", "df", "dirname", "du",
                       "echo", "find", "grep", "head", "less", "ls", "more", "printenv",
                       "printf", "ps", "pwd", "rg", "sed", "sort", "stat", "tail", "tree",
                       "uniq", "wc", "which", "whoami"})
"""``READ_ONLY_ROOT_COMMANDS`` of permissions/shell-semantics.ts (``git`` apart)."""
READ_ONLY_GIT = frozenset({"blame", "branch", "cat-file", "diff", "grep", "log", "ls-files",
                           "remote", "rev-parse", "show", "status", "describe"})
"""git's read-only subcommands, named right after ``git`` (``git --no-pager diff`` and
``git -C . diff`` asked, recorded)."""
INLINE_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
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


def _top_pieces(command: str) -> list[Piece]:
    return [p for p in all_commands(command) if not p.nested]


def _read_only(piece: Piece) -> bool:
    """The read-only analysis on one simple command, approximated (``shell-semantics.ts``):
    its first word, as written, among :data:`READ_ONLY` (``git`` with a read-only
    subcommand right after it); a wrapper (``timeout``, ``env``, ``time``, ``xargs``...) or
    an absolute path is not read-only."""
    first = piece.text[len(" ".join(piece.assignments)):].split(None, 1)
    name = first[0] if first else ""
    if name == "git":
        return len(piece.words) > 1 and piece.words[0] == "git" \
            and piece.words[1] in READ_ONLY_GIT
    return name in READ_ONLY and piece.words[:1] == [name]


def _inline_script(piece: Piece) -> str | None:
    words = piece.words
    if len(words) == 3 and words[0] in INLINE_SHELLS and words[1] == "-c":
        return words[2]
    return None


def _unconfirmed(agent: AgentPolicy, command: str, depth: int = 0) -> str | None:
    """The first simple command that needs a confirmation (nobody answers unattended):
    one an ``ask`` rule matches, or one no ``allow`` rule matches that is not read-only
    (``bash -c SCRIPT`` is its script); None: it runs."""
    for part in split_command(command):
        if _first(agent, "ask", part) is not None:
            return part
    for piece in _top_pieces(command):
        text = piece.text
        if _first(agent, "allow", text) is not None or _read_only(piece):
            continue
        script = _inline_script(piece)
        if script is not None and depth < 3 and _unconfirmed(agent, script, depth + 1) is None:
            continue
        return text
    return None


def _plan_blocks(command: str) -> tuple[HarnessDecision, str] | None:
    """Plan mode's own shell check, unattended: a command it cannot tell read-only is not
    run (a substitution, an assignment, a part not read-only); one it classes
    state-modifying (any output redirection, a git subcommand that writes) is refused."""
    if "`" in command or re.search(r"\$\((?!\()", command):
        return "ask", "plan mode cannot tell a command substitution read-only"
    for piece in _top_pieces(command):
        if any(">" in op for op, _ in piece.redirects) or (
                piece.words[:1] == ["git"] and not _read_only(piece)
                and len(piece.words) > 1 and not piece.words[1].startswith("-")):
            return "deny", f"plan mode classes {piece.text!r} state-modifying"
        if piece.assignments or not _read_only(piece):
            return "ask", f"plan mode cannot tell {piece.text!r} read-only"
    return None


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
    if mode == "plan":
        blocked = _plan_blocks(command)
        if blocked is not None:
            return HarnessVerdict(blocked[0], (), reason=f"{blocked[1]}, and unattended "
                                  "nobody approves it")
    elif mode not in ("strict", "yolo"):
        needs = _unconfirmed(agent, command)
        if needs is not None:
            return HarnessVerdict("ask", (), reason=f"{needs!r} needs a confirmation (an ask "
                                  "rule, or no allow rule and not read-only): declined "
                                  "unattended")
    if mode != "strict":  # what needs no confirmation runs
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
