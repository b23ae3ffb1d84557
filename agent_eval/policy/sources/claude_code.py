"""Claude Code's permissions: ``settings.json`` rules and ``.claude/agents/*.md`` agents.

Claude Code's source is not public, so the emulation follows its documentation
(https://code.claude.com/docs/en/permissions and /docs/en/settings, /docs/en/sub-agents)
and the behaviour reported in its public issue tracker, each report named where it is
used.  What is read:

- ``permissions.allow``, ``permissions.ask``, ``permissions.deny``: lists of rules
  ``Tool`` or ``Tool(specifier)``; ``permissions.additionalDirectories``; and
  ``permissions.defaultMode`` (``bypassPermissions`` lets unmatched calls through,
  ``dontAsk`` refuses them; every other mode asks, which blocks an unattended stack).
- agents in ``.claude/agents/*.md`` beside the settings (front matter ``name``,
  ``description``, ``tools`` as a comma-separated list; the body is the prompt).  An
  agent keeps the settings' rules and is offered only its ``tools``.

Documented semantics emulated: rules are consulted deny first, then ask, then allow; the
first list with a match decides.  A bare ``Bash`` (or ``Bash(*)``) matches every command;
``Bash(prefix:*)`` (the legacy form) matches ``prefix`` and ``prefix`` followed by a
blank and anything; a ``*`` anywhere else matches any characters, and a pattern ending in
a blank and its only ``*`` also matches without the tail (``Bash(ls *)`` matches ``ls`` and
``ls -la``, not ``lsof``); otherwise the command must equal the specifier.  A compound
command is cut at ``&&``, ``||``, ``;``, ``|``, ``&`` and newlines and every part must be
allowed ("Claude Code is aware of shell operators").  Before a part is matched its
leading ``VAR=value`` assignments and the wrappers ``timeout time nice stdbuf nohup
command builtin noglob`` (with their options) are removed (the list reported in
https://github.com/anthropics/claude-code/issues/92542), and so are its redirections
(changelog 1.0.123: ``Bash(python:*)`` matches ``python script.py > output.txt``).  A
command with ``$(...)``, backticks or process substitution asks.  A write redirected into
``.claude/``, ``.git/``, ``.vscode/`` or ``.idea/`` asks (the protected directories of the
permission-modes page).  ``Read(path)`` rules use gitignore patterns (``//abs``,
``~/home``, ``/project-root``, ``relative``); a read in the work directory or an
additional directory needs no rule, any other read asks.

Quirks (each reported against a released Claude Code, emulated unless turned off):

``whole-command-prefix``
    https://github.com/anthropics/claude-code/issues/4956 (1.0.x): an allow rule matched
    the start of the whole compound command, so ``Bash(echo *)`` let
    ``echo "test" && ls`` run without a prompt.
``cd-chain``
    https://github.com/anthropics/claude-code/issues/28784 (2.1.x): ``Bash(cd:*)`` let
    ``cd /some/path && python3 script.py`` run; the later parts of a command that starts
    with ``cd DIR &&`` were never judged (also
    https://github.com/anthropics/claude-code/issues/59498, where their ``ask`` rules were
    skipped).
``inline-shell-unseen``
    https://github.com/anthropics/claude-code/issues/43085: the script of ``bash -c '...'``
    was not inspected, so ``bash -c 'echo ... >> .claude/file'`` wrote into a protected
    directory with no prompt while the same ``echo ... >> .claude/file`` asked.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.sources.files import read_front_matter, read_json
from agent_eval.policy.sources.model import (
    Action,
    AgentPolicy,
    HarnessDecision,
    HarnessVerdict,
    PolicySource,
    Rule,
)
from agent_eval.policy.sources.shellsplit import Piece, top_commands
from agent_eval.policy.sources.wildcard import glob_match

QUIRKS = ("whole-command-prefix", "cd-chain", "inline-shell-unseen")
"""The quirks reported against old releases (``emulation.BEHAVIOURS`` says which hold for
which version); ``judge_command`` applies them all unless told otherwise."""
READ_ONLY = frozenset({"ls", "pwd", "cat", "head", "tail", "wc", "echo", "which", "file",
                       "stat", "grep", "rg", "tree", "diff", "date", "whoami", "id", "uname",
                       "du", "df", "realpath", "basename", "dirname", "true", "false"})
"""Commands the ``read-only-unasked`` behaviour runs with no rule (the commands of the
conformance corpus the pinned release ran unasked; its full list is not published)."""
READ_ONLY_GIT = frozenset({"status", "log", "diff", "show", "rev-parse", "ls-files", "blame"})
UNSAFE_FIND = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls")
READ_ONLY_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk")
"""Modes that run read-only commands with no rule (``read-only-unasked``; ``dontAsk``
too, as the conformance corpus recorded)."""
PATH_COMMANDS = frozenset({"ls", "cat", "head", "tail", "wc", "stat", "tree", "du", "file",
                           "diff", "grep", "rg"})
"""Read-only commands whose arguments name files (``path-outside-asks``); ``grep`` and
``rg`` take a pattern first."""
_BRACE = re.compile(r"(?<!\$)\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
FILE_COMMANDS = frozenset({"mkdir", "touch", "mv", "cp"})
"""What ``acceptEdits`` adds without a rule (code.claude.com/docs/en/permissions, modes)."""
WRAPPERS = ("timeout", "time", "nice", "stdbuf", "nohup", "command", "builtin", "noglob")
PROTECTED = (".claude", ".git", ".vscode", ".idea")
READ_ONLY_TOOLS = ("Read", "Glob", "Grep", "LS", "NotebookRead", "TodoWrite", "Agent", "Task")
"""Tools that run without approval: the read-only ones, and the subagent tool (``Agent``,
formerly ``Task``), which an ``Agent(name)`` deny rule can stop but nothing asks for
(code.claude.com/docs/en/permissions, "Tool-specific permission rules")."""
SHELLS = ("bash", "sh", "zsh", "dash")
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
DEFAULT_AGENT = "main"
_RULE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_\-]*)\s*(?:\((.*)\))?\s*", re.DOTALL)


def _parse_rule(text: Any, action: Action, path: str, field: str) -> Rule:
    if not isinstance(text, str):
        raise ConfigError("each rule must be a string such as Bash(git status:*)", path=path,
                          field=field)
    m = _RULE.fullmatch(text)
    if m is None:
        raise ConfigError(f"{text!r} is not a rule; write Tool or Tool(specifier)", path=path,
                          field=field)
    tool, spec = m.group(1), m.group(2)
    return Rule(tool, "" if spec is None else spec, action, f"{field}: {text}")


def _tools_list(value: Any, path: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError("must be a comma-separated list of tool names", path=path,
                          field="tools")
    return tuple(i.strip().split("(", 1)[0] for i in items if i.strip())


def load(path: Path) -> PolicySource:
    """Read a Claude Code ``settings.json`` and the agents beside it."""
    where = str(path)
    config = read_json(path, "Claude Code settings.json")
    permissions = config.get("permissions", {})
    if not isinstance(permissions, dict):
        raise ConfigError("must be an object with allow, ask and deny lists", path=where,
                          field="permissions")
    rules: list[Rule] = []
    actions: tuple[Action, ...] = ("deny", "ask", "allow")
    for action in actions:
        items = permissions.get(action, [])
        if not isinstance(items, list):
            raise ConfigError("must be a list of rules", path=where,
                              field=f"permissions.{action}")
        rules += [_parse_rule(item, action, where, f"permissions.{action}[{i}]")
                  for i, item in enumerate(items)]
    directories = permissions.get("additionalDirectories", [])
    if not isinstance(directories, list) or not all(isinstance(d, str) for d in directories):
        raise ConfigError("must be a list of folder paths", path=where,
                          field="permissions.additionalDirectories")
    mode = permissions.get("defaultMode", "default")
    if mode not in MODES:
        raise ConfigError(f"{mode!r} is not a mode; use one of {', '.join(MODES)}",
                          path=where, field="permissions.defaultMode")
    notes = (f"defaultMode {mode}",) if mode != "default" else ()
    default = AgentPolicy(harness="claude-code", name=DEFAULT_AGENT, rules=tuple(rules),
                          directories=tuple(directories), source=where, mode=mode)
    agents = {DEFAULT_AGENT: default}
    folder = path.parent / "agents" if path.parent.name == ".claude" else \
        path.parent / ".claude" / "agents"
    for file in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        front, body = read_front_matter(file, "Claude Code agent file")
        name = front.get("name", file.stem)
        if not isinstance(name, str) or not name:
            raise ConfigError("must be the agent's name", path=str(file), field="name")
        description = front.get("description", "")
        agents[name] = dataclasses.replace(
            default, name=name, prompt=body or None,
            description=description if isinstance(description, str) else "",
            tools=_tools_list(front.get("tools"), str(file)), source=str(file))
    return PolicySource("claude-code", where, agents, DEFAULT_AGENT, notes)


# -- matching ---------------------------------------------------------------------------


def bash_rule_matches(spec: str, command: str) -> bool:
    """Whether a ``Bash(spec)`` rule matches one command part (module docstring)."""
    if spec in ("", "*"):
        return True
    if spec.endswith(":*"):
        prefix = spec[:-2]
        return command == prefix or command.startswith(prefix + " ")
    if "*" in spec:
        if spec.endswith(" *") and spec.count("*") == 1:
            return command == spec[:-2] or glob_match(command, spec, question=False)
        return glob_match(command, spec, question=False)
    return command == spec


def _strip(piece: Piece) -> list[str]:
    """The part's words as written, without wrappers and their options."""
    words = list(piece.raw_words)
    while words and words[0] in WRAPPERS:
        name = words.pop(0)
        while words and words[0].startswith("-"):
            flag = words.pop(0)
            if name in ("timeout", "nice", "stdbuf") and flag in ("-s", "-k", "-n", "-o", "-e",
                                                               "-i", "--signal",
                                                               "--kill-after") and words:
                words.pop(0)
        if name == "timeout" and words:
            words.pop(0)  # the duration
    return words


def command_parts(command: str) -> list[str]:
    """The parts a command is matched as: cut at the shell's operators, wrappers and
    assignments removed (``judge_command`` before any quirk)."""
    return [" ".join(_strip(p)) for p in top_commands(command)[0] if _strip(p)]


def _bash_rules(agent: AgentPolicy, action: str) -> list[Rule]:
    return [r for r in agent.rules if r.permission == "Bash" and r.action == action]


def _first_match(agent: AgentPolicy, action: str, text: str) -> Rule | None:
    return next((r for r in _bash_rules(agent, action) if bash_rule_matches(r.pattern, text)),
                None)


def _protected_write(piece: Piece) -> str | None:
    for op, target in piece.redirects:
        if ">" not in op or op.endswith(">&"):
            continue
        clean = posixpath.normpath(target.strip("'\""))
        first = clean.split("/", 1)[0]
        if first in PROTECTED:
            return target
    return None


def _inline_script(piece: Piece) -> str | None:
    words = piece.words
    if len(words) >= 3 and posixpath.basename(words[0]) in SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return None


def _protected_inside(script: str, depth: int) -> str | None:
    """A protected write anywhere in ``script``, looking into nested ``bash -c`` too."""
    for piece in top_commands(script)[0]:
        target = _protected_write(piece)
        if target is not None:
            return target
        inner = _inline_script(piece)
        if inner is not None and depth < 4:
            target = _protected_inside(inner, depth + 1)
            if target is not None:
                return target
    return None


def read_only(words: list[str]) -> bool:
    """Whether a part's words (wrappers removed) are a read-only command."""
    if not words:
        return False
    name = words[0]
    if name == "git":
        return len(words) > 1 and words[1] in READ_ONLY_GIT
    if name == "find":
        return not any(w in UNSAFE_FIND for w in words[1:])
    if name == "xargs":  # xargs running a read-only command (the corpus: `xargs echo`)
        rest = words[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
        return bool(rest) and rest[0] != "xargs" and read_only(rest)
    return name in READ_ONLY


def _writes_file(piece: Piece) -> str | None:
    """The target of an output redirection into a file (not a descriptor, not /dev/null)."""
    for op, target in piece.redirects:
        if ">" in op and not op.endswith(">&") and not target.startswith("&") \
                and target.strip("'\"") != "/dev/null":
            return target
    return None


def _unmatched(mode: str, piece: Piece, words: list[str], behaviours: frozenset[str]
               ) -> tuple[HarnessDecision, str] | None:
    """What a part no allow rule matches gets in ``mode``; None: it runs."""
    if mode == "bypassPermissions":
        return None
    if "read-only-unasked" in behaviours and mode in READ_ONLY_MODES and read_only(words):
        return None
    if mode == "dontAsk":
        return "deny", "dontAsk refuses what no rule allows"
    if mode == "acceptEdits" and words and words[0] in FILE_COMMANDS:
        return None
    if mode == "plan":
        return "deny", "plan mode runs only read-only commands"
    return "ask", "no rule allows it"


def judge_command(agent: AgentPolicy, command: str, *, quirks: frozenset[str] = frozenset(QUIRKS),
                  mode: str | None = None, workdir: str = "/project") -> HarnessVerdict:
    """Claude Code's Bash permission check for ``command`` (module docstring); in
    ``dontAsk`` whatever would ask is refused.  ``auto`` is judged as ``acceptEdits``: its
    classifier does not run unattended against a model endpoint of the session's own (the
    pinned release, recorded: "Auto mode is unavailable: its safety check does not run
    for this session, so Bash was not run"), and what is left ran or stopped exactly as
    under ``acceptEdits``."""
    judged = "acceptEdits" if (mode or agent.mode) == "auto" else mode or agent.mode
    verdict = _judge(agent, command, quirks, judged, workdir)
    if verdict.decision == "ask" and (mode or agent.mode) == "dontAsk":
        return dataclasses.replace(verdict, decision="deny",
                                   reason=f"dontAsk refuses what would ask: {verdict.reason}")
    return verdict


def _judge(agent: AgentPolicy, command: str, quirks: frozenset[str], mode: str,
           workdir: str) -> HarnessVerdict:
    """Claude Code's Bash permission check for ``command`` (module docstring).

    ``quirks``: the behaviours applied (``emulation.BEHAVIOURS`` names: the old releases'
    quirks and the current release's ``read-only-unasked``, ``redirect-asks``,
    ``assignment-asks``); ``mode``: the permission mode (None: the settings')."""
    mode = mode or agent.mode
    pieces, scan = top_commands(command)
    parts = [(p, " ".join(_strip(p))) for p in pieces if _strip(p)]
    if "cd-chain" in quirks and len(parts) > 1 and parts[0][0].words[:1] == ["cd"] \
            and (len(pieces) < 2 or pieces[1].join in ("&&", ";")):
        parts = parts[:1]
        quirk = "cd-chain"
    else:
        quirk = None
    for action in ("deny", "ask"):
        for _, text in parts:
            rule = _first_match(agent, action, text)
            if rule is not None:
                return HarnessVerdict(action, (rule,), reason=f"{text!r} matches {rule.label()}")
    if mode == "bypassPermissions":  # recorded: substitutions and protected writes run
        return _allowed(agent, parts, mode, quirks, quirk)
    for piece, _ in parts:
        target = _protected_write(piece)
        if target is not None:
            return HarnessVerdict("ask", (), reason=f"writes into protected {target}")
        script = _inline_script(piece)
        if script is not None:
            inside = _protected_inside(script, 0)
            if inside is not None and "inline-shell-unseen" in quirks:
                quirk = quirk or "inline-shell-unseen"
            elif inside is not None:
                return HarnessVerdict("ask", (), reason=f"writes into protected {inside}")
    if any(e.rule == "command-substitution" for e in scan.events):
        return HarnessVerdict("ask", (), reason="command substitution needs approval")
    asked = _asks_by_design(parts, mode, quirks, workdir) or _asks_for_shape(
        agent, pieces, scan, mode, quirks, workdir)
    if asked is not None:
        return asked
    if "whole-command-prefix" in quirks and len(pieces) > 1 and quirk is None:
        rule = _first_match(agent, "allow", command.strip())
        if rule is not None:
            return HarnessVerdict("allow", (rule,), quirk="whole-command-prefix",
                                  reason=f"the whole command matches {rule.label()}")
    return _allowed(agent, parts, mode, quirks, quirk)


def _asks_by_design(parts: list[tuple[Piece, str]], mode: str, quirks: frozenset[str],
                    workdir: str = "/project") -> HarnessVerdict | None:
    """The current release's ``redirect-asks`` and ``assignment-asks``; ``acceptEdits``
    accepts a redirection into a file of the working directory (it accepts edits)."""
    if mode == "bypassPermissions":
        return None
    for piece, _ in parts:
        target = _writes_file(piece) if "redirect-asks" in quirks else None
        if target is not None and mode == "acceptEdits" and not target.startswith("~"):
            path = posixpath.normpath(posixpath.join(workdir, target.strip("'\"")))
            if path.startswith(workdir.rstrip("/") + "/"):
                target = None
        if target is not None:
            return HarnessVerdict("ask", (), reason=f"output redirected into {target} "
                                                    "asks (redirect-asks)")
        if "assignment-asks" in quirks and piece.assignments:
            return HarnessVerdict("ask", (), reason=f"assignment {piece.assignments[0]!r} "
                                                    "asks (assignment-asks)")
    return None


_SHAPE_QUIRKS = ("heredoc-asks", "background-asks", "subshell-asks", "brace-asks",
                 "path-outside-asks", "cd-outside-asks")
"""The shape behaviours :func:`_asks_for_shape` reads, in the order it reads them."""


def _asks_for_shape(agent: AgentPolicy, pieces: list[Piece], scan: Any, mode: str,
                    quirks: frozenset[str], workdir: str) -> HarnessVerdict | None:
    """The current release's ``heredoc-asks``, ``background-asks``, ``subshell-asks``,
    ``brace-asks``, ``path-outside-asks`` and ``cd-outside-asks``
    (``emulation.BEHAVIOURS``): the first that holds asks."""
    if mode == "bypassPermissions":
        return None
    roots = [workdir, *(posixpath.normpath(posixpath.join(workdir, d))
                        for d in agent.directories)]
    for quirk in _SHAPE_QUIRKS:
        if quirk in quirks:
            reason = _shape_asks(quirk, pieces, scan, workdir, roots)
            if reason is not None:
                return HarnessVerdict("ask", (), reason=reason)
    return None


def _shape_asks(quirk: str, pieces: list[Piece], scan: Any, workdir: str,
                roots: list[str]) -> str | None:
    """Why the command asks under one shape behaviour, or None."""
    if quirk == "background-asks":
        return ("a & background job asks (background-asks)"
                if any(c.join is not None and c.join.kind == "&" for c in scan.commands)
                else None)
    if quirk == "subshell-asks":
        return ("a subshell asks (subshell-asks)"
                if any(c.join is not None and c.join.kind == "(" for c in scan.commands)
                else None)
    for piece in pieces:
        reason = _piece_asks(quirk, piece, workdir, roots)
        if reason is not None:
            return reason
    return None


def _piece_asks(quirk: str, piece: Piece, workdir: str, roots: list[str]) -> str | None:
    """Why one part of a command asks under a per-part shape behaviour, or None."""
    if quirk == "heredoc-asks":
        for op, target in piece.redirects:
            if op.startswith("<<") and op != "<<<" and not target.startswith(("'", '"')):
                return f"heredoc with unquoted delimiter {target} asks (heredoc-asks)"
    elif quirk == "brace-asks":
        for raw in piece.raw_words:
            if not raw.startswith(("'", '"')) and _BRACE.search(raw):
                return f"brace expansion in {raw!r} asks (brace-asks)"
    elif quirk == "path-outside-asks":
        outside = _path_outside(_strip_words(piece), workdir, roots)
        if outside is not None:
            return (f"{outside} is outside the working directories: asks, whatever rule "
                    "allows the command (path-outside-asks)")
    elif quirk == "cd-outside-asks" and piece.words[:1] == ["cd"] and len(piece.words) > 1:
        target = posixpath.normpath(posixpath.join(workdir, piece.words[1]))
        if not any(target == r or target.startswith(r.rstrip("/") + "/") for r in roots):
            return f"cd into {target}, outside the working directories, asks (cd-outside-asks)"
    return None


def _path_outside(words: list[str], workdir: str, roots: list[str]) -> str | None:
    """The first file argument of a read-only file command outside ``roots`` (``~`` is
    taken as outside: the home folder holds the working directory)."""
    if not words or words[0] not in PATH_COMMANDS:
        return None
    args = [w for w in words[1:] if not w.startswith("-")]
    if words[0] in ("grep", "rg"):
        args = args[1:]
    for arg in args:
        if arg == "~" or arg.startswith("~/"):
            return arg
        target = posixpath.normpath(posixpath.join(workdir, arg))
        if not any(target == r or target.startswith(r.rstrip("/") + "/") for r in roots):
            return target
    return None


def _allowed(agent: AgentPolicy, parts: list[tuple[Piece, str]], mode: str,
             quirks: frozenset[str], quirk: str | None) -> HarnessVerdict:
    """Every part against the allow rules, what none matches against the mode."""
    used: list[Rule] = []
    unasked: list[str] = []
    for piece, text in parts:
        rule = _first_match(agent, "allow", text)
        if rule is None:
            refused = _unmatched(mode, piece, _strip_words(piece), quirks)
            if refused is not None:
                return HarnessVerdict(refused[0], (), reason=f"{refused[1]}: {text!r}")
            unasked.append(text)
            continue
        if rule not in used:
            used.append(rule)
    if quirk is not None:
        reason = f"allowed through the {quirk} quirk"
    elif unasked and mode in READ_ONLY_MODES:
        reason = f"read-only, run with no rule in mode {mode}: {', '.join(map(repr, unasked))}"
        quirk = "read-only-unasked"
    else:
        reason = "every part allowed" if not unasked else f"mode {mode} runs what no rule allows"
    return HarnessVerdict("allow", tuple(used), quirk=quirk, reason=reason)


def _strip_words(piece: Piece) -> list[str]:
    """The part's word values without wrappers (``_strip`` keeps them as written)."""
    raw = _strip(piece)
    return piece.words[len(piece.words) - len(raw):] if raw else []


# -- reads ------------------------------------------------------------------------------


def _path_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?", re.DOTALL)


def read_rule_matches(spec: str, path: str, *, workdir: str, home: str) -> bool:
    """A ``Read(spec)`` rule against an absolute, normalised ``path`` (gitignore rules:
    ``//`` absolute, ``~/`` home, ``/`` the project root, ``./`` the work directory; a
    pattern with no ``/`` matches a name at any depth, as in ``.gitignore``)."""
    if spec in ("", "*", "**"):
        return True
    if spec.startswith("//"):
        full = spec[1:]
    elif spec.startswith("~/"):
        full = home.rstrip("/") + spec[1:]
    elif spec.startswith("/"):
        full = workdir.rstrip("/") + spec
    elif spec.startswith("./"):
        full = workdir.rstrip("/") + "/" + spec[2:]
    else:
        anywhere = "/" not in spec.rstrip("/")
        full = workdir.rstrip("/") + "/" + ("**/" + spec if anywhere else spec)
    return _path_regex(full.rstrip("/")).fullmatch(path) is not None


def judge_read(agent: AgentPolicy, path: str, *, workdir: str, home: str) -> HarnessVerdict:
    """Claude Code's Read tool: deny, ask, allow rules, then the work directory rule."""
    target = posixpath.normpath(path if path.startswith("/") else posixpath.join(workdir, path))
    for action in ("deny", "ask", "allow"):
        for rule in (r for r in agent.rules if r.permission == "Read" and r.action == action):
            if read_rule_matches(rule.pattern, target, workdir=workdir, home=home):
                return HarnessVerdict(action, (rule,), reason=f"{target} matches {rule.label()}")
    roots = [workdir, *(posixpath.normpath(posixpath.join(workdir, d))
                        for d in agent.directories)]
    if any(target == r.rstrip("/") or target.startswith(r.rstrip("/") + "/") for r in roots):
        return HarnessVerdict("allow", (), reason=f"{target} is in a readable directory")
    if agent.mode == "bypassPermissions":
        return HarnessVerdict("allow", (), reason="bypassPermissions")
    return HarnessVerdict("ask", (), reason=f"{target} is outside the work directory")


def judge_tool(agent: AgentPolicy, tool: str) -> HarnessVerdict:
    """Any other tool: a bare rule naming it, else read-only tools run and others ask."""
    for action in ("deny", "ask", "allow"):
        rule = next((r for r in agent.rules if r.permission == tool and r.action == action
                     and r.pattern in ("", "*")), None)
        if rule is not None:
            return HarnessVerdict(action, (rule,), reason=f"{rule.label()}")
    if tool in READ_ONLY_TOOLS or agent.mode == "bypassPermissions":
        return HarnessVerdict("allow", (), reason=f"{tool} needs no approval")
    return HarnessVerdict("ask", (), reason=f"{tool} asks for approval")
