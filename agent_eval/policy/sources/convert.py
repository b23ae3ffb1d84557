"""An agent's rules written as an agent-eval allow-list, with what cannot be expressed.

Bash rules become ``patterns`` (``policy/wordpatterns.py``): each allowing rule is one
entry, and the rules that can overrule it become its ``unless`` list, so the allow-list
allows exactly what the CLI's rules allow for a plain command:

- OpenCode (last matching rule wins): the non-allow rules *after* the allowing one;
- Claude Code (deny, then ask, then allow): every deny and ask rule;
- Codex (strictest decision wins): every prompt and forbidden rule; a token with
  alternatives becomes one entry per alternative; a prefix admits further words.

Everything the strict reading adds (no chains, redirections, substitutions...) is the
engine's own judgement.  What a pattern language of whole words cannot say is listed in
the notes: a ``*`` inside a word that OpenCode or Claude Code lets run across blanks,
quotes inside a pattern, and read rules beyond roots and blocked names.  Where a rule
cannot be expressed it is left out (the allow-list denies more, never more allows) unless
the note says otherwise.  Pure.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from agent_eval.policy.allowlist import AllowList, allowlist_from_dict
from agent_eval.policy.sources import claude_code, codex, gemini_cli, opencode
from agent_eval.policy.sources.model import AgentPolicy, Rule
from agent_eval.policy.sources.wildcard import wildcard_match
from agent_eval.policy.wordpatterns import match_words

OPENCODE_TOOLS = ("edit", "write", "glob", "grep", "list", "webfetch", "websearch", "task",
                  "todowrite", "todoread", "skill")
CLAUDE_TOOLS = ("Glob", "Grep", "LS", "Edit", "Write", "MultiEdit", "NotebookEdit",
                "WebFetch", "WebSearch", "Task", "TodoWrite")


@dataclass(slots=True)
class Conversion:
    """The allow-list (as a mapping, ready for YAML) and what it could not express."""

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def allowlist(self) -> AllowList:
        return allowlist_from_dict(self.data, source=f"<converted {self.data['name']}>")


def _word_pattern(pattern: str, label: str, notes: list[str]) -> str | None:
    text = pattern.strip()
    if not text:
        notes.append(f"{label}: an empty pattern matches nothing here; left out")
        return None
    if any(q in text for q in "'\"\\"):
        notes.append(f"{label}: quotes or backslashes in a pattern are compared with the "
                     "words after quote removal here, with the text as written by the CLI")
    words = text.split()
    if any(_within_word(w, i == len(words) - 1) for i, w in enumerate(words)):
        notes.append(f"{label}: a `*` or `?` inside a word matches only within that word "
                     "here; the CLI's runs across blanks")
    return " ".join(words)


def _within_word(word: str, last: bool) -> bool:
    """A wildcard that the word pattern keeps inside one word (a lone ``*``, and a last
    word's trailing ``*``, run over words as the CLI's do)."""
    if word == "*":
        return False
    body = word[:-1] if last and word.endswith("*") else word
    return "*" in body or "?" in body


def _opencode_patterns(agent: AgentPolicy, notes: list[str]) -> list[dict[str, Any]]:
    rules = opencode.bash_rules(agent)
    entries = []
    for index, rule in enumerate(rules):
        if rule.action != "allow":
            continue
        later = [r for r in rules[index + 1:] if r.action != "allow"]
        if any(r.pattern == "*" for r in later):
            continue  # overruled for every command
        match = _word_pattern(rule.pattern, rule.label(), notes)
        if match is None:
            continue
        unless = []
        for r in later:
            word = _word_pattern(r.pattern, r.label(), notes)
            if word is not None and word not in unless:
                unless.append(word)
        entries.append({"match": match, "unless": unless, "_rule": rule})
    return entries


def _claude_spec(spec: str) -> str:
    """A Bash rule's specifier as a word pattern; a ``?`` (literal to Claude Code, a
    wildcard in a word pattern) is refused by ``_word_pattern``'s caller."""
    if spec in ("", "*"):
        return "*"
    if spec.endswith(":*"):
        return spec[:-2] + " *"
    return spec


def _claude_patterns(agent: AgentPolicy, notes: list[str]) -> list[dict[str, Any]]:
    bash = [r for r in agent.rules if r.permission == "Bash"]
    blockers = []
    for r in bash:
        if r.action != "allow":
            word = _word_pattern(_claude_spec(r.pattern), r.label(), notes)
            if word is not None and word not in blockers:
                blockers.append(word)
    if "*" in blockers:
        return []
    entries = []
    for rule in (r for r in bash if r.action == "allow"):
        if "?" in rule.pattern:
            notes.append(f"{rule.label()}: `?` is a literal character to Claude Code and a "
                         "wildcard in a word pattern; left out")
            continue
        match = _word_pattern(_claude_spec(rule.pattern), rule.label(), notes)
        if match is not None:
            entries.append({"match": match, "unless": list(blockers), "_rule": rule})
    if agent.mode == "bypassPermissions":
        notes.append("defaultMode bypassPermissions runs every unmatched command; only the "
                     "allow rules are written here")
    return entries


def _codex_words(rule: Rule, notes: list[str]) -> list[str]:
    out = []
    for combo in codex.expand(rule.tokens):
        if any(not t or any(c in t for c in "*? \t\n") for t in combo):
            notes.append(f"{rule.label()}: a token with a blank or a `*`/`?` is compared "
                         "literally by Codex and cannot be a word pattern here; left out")
            return []
        out.append(" ".join(combo) + " *")
    return out


def _gemini_patterns(agent: AgentPolicy, notes: list[str]) -> list[dict[str, Any]]:
    """Gemini CLI: the shell rules in priority order; an allow of a command prefix is a
    word pattern, the prefixes of the deny and ask rules above it its exceptions."""
    shell = [r for r in agent.rules if r.permission in (gemini_cli.SHELL, "*")]
    entries: list[dict[str, Any]] = []
    blockers: list[str] = []
    for rule in shell:
        kind = rule.tokens[0][0] if rule.tokens else "any"
        if rule.action != "allow":
            if kind == "any" and rule.permission == gemini_cli.SHELL:
                break  # every later allow is overruled
            if kind == "prefix":
                word = _word_pattern(rule.pattern + " *", rule.label(), notes)
                if word is not None and word not in blockers:
                    blockers.append(word)
            elif kind == "regex":
                notes.append(f"{rule.label()}: a regular expression is not expressible as a "
                             "word pattern; left out")
            continue
        if kind == "prefix":
            match = _word_pattern(rule.pattern + " *", rule.label(), notes)
            if match is not None:
                entries.append({"match": match, "unless": list(blockers), "_rule": rule})
        elif kind == "any" and rule.permission == gemini_cli.SHELL:
            entries.append({"match": "*", "unless": list(blockers), "_rule": rule})
        else:
            notes.append(f"{rule.label()}: not expressible as a word pattern; left out")
    return entries


def _codex_patterns(agent: AgentPolicy, notes: list[str]) -> list[dict[str, Any]]:
    blockers: list[str] = []
    for r in agent.rules:
        if r.action != "allow":
            blockers += [w for w in _codex_words(r, notes) if w not in blockers]
    entries = []
    for rule in (r for r in agent.rules if r.action == "allow"):
        for word in _codex_words(rule, notes):
            entries.append({"match": word, "unless": list(blockers), "_rule": rule})
    return entries


def _prune(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop exceptions that can never apply (nothing the entry matches can match them is
    not decidable in general; only exceptions that a literal entry cannot meet go)."""
    for entry in entries:
        if "*" not in entry["match"] and "?" not in entry["match"]:
            words = entry["match"].split()
            entry["unless"] = [u for u in entry["unless"] if match_words(u, words)]
    return entries


def _read_policy(agent: AgentPolicy, workdir: str, notes: list[str]) -> dict[str, Any]:
    """The allow-list's ``read`` section: none for Codex (it has no read tool), the work
    directory for Gemini CLI and Qwen Code, converted from OpenCode's and Claude Code's
    read rules."""
    if agent.harness == "codex":
        return {"roots": []}
    if agent.harness in ("gemini-cli", "qwen-code"):
        return {"roots": ["./"]}
    reads = _opencode_reads if agent.harness == "opencode" else _claude_reads
    roots, blocked, allow_absolute = reads(agent, workdir, notes)
    return {"roots": list(dict.fromkeys(roots)), "blocked": list(dict.fromkeys(blocked)),
            "allow_absolute": allow_absolute}


def _opencode_reads(agent: AgentPolicy, workdir: str, notes: list[str]
                    ) -> tuple[list[str], list[str], bool]:
    """OpenCode's readable roots, blocked names and whether absolute paths are read: the
    work directory if a plain file there is readable, a blocked name per read rule that
    is not an allow, a root per allowed ``external_directory``."""
    probe = opencode.judge_read(agent, "file", workdir=workdir)
    blocked = _opencode_blocked(agent, workdir, notes)
    absolute = _opencode_external_roots(agent, notes)
    if any(r.permission == "read" and r.action == "allow" and r.pattern not in ("*",)
           for r in agent.rules):
        notes.append("read allow rules for single files are not expressible; reads "
                     "outside the work directory need an external_directory root")
    return (["./"] if probe.allowed else []) + absolute, blocked, bool(absolute)


def _opencode_blocked(agent: AgentPolicy, workdir: str, notes: list[str]) -> list[str]:
    """A blocked name per read rule that is not an allow, but for ``*``: its reach shows
    in the probe of the work directory."""
    blocked = []
    for rule in (r for r in agent.rules if wildcard_match("read", r.permission)
                 and r.action != "allow" and r.pattern != "*"):
        name = _blocked_name(rule.pattern, workdir)
        if name:
            blocked.append(name)
            notes.append(f"{rule.label()}: read as blocked {name!r} (blocks that name "
                         "and its dotted variants at any depth)")
        else:
            notes.append(f"{rule.label()}: not expressible as a blocked name; left out "
                         "(the allow-list may allow such reads)")
    return blocked


def _opencode_external_roots(agent: AgentPolicy, notes: list[str]) -> list[str]:
    """A readable root per allowed ``external_directory`` (OpenCode's own default ``*``
    left out without a note)."""
    roots = []
    for rule in (r for r in agent.rules if r.permission == "external_directory"
                 and r.action == "allow"):
        root = _root_of(rule.pattern)
        if root:
            roots.append(root)
        elif rule.pattern != "*" or "(OpenCode default)" not in rule.origin:
            notes.append(f"{rule.label()}: not expressible as a readable root; left out")
    return roots


def _claude_reads(agent: AgentPolicy, workdir: str, notes: list[str]
                  ) -> tuple[list[str], list[str], bool]:
    """Claude Code's readable roots, blocked names and whether absolute paths are read:
    the work directory if a plain file there is readable, the absolute
    ``additionalDirectories``, and per ``Read`` rule a root (an allow of ``//path/**``)
    or a blocked name (a deny or ask)."""
    probe = claude_code.judge_read(agent, "file", workdir=workdir, home="/home/user")
    absolute: list[str] = []
    for directory in agent.directories:
        if directory.startswith("/"):
            absolute.append(directory.rstrip("/") + "/")
        else:
            notes.append(f"additionalDirectories {directory!r}: relative folder outside "
                         "the work directory not expressible; left out")
    blocked = []
    for rule in (r for r in agent.rules if r.permission == "Read"):
        if rule.action == "allow":
            root = _root_of(rule.pattern[1:] if rule.pattern.startswith("//") else "")
            if root:
                absolute.append(root)
            else:
                notes.append(f"{rule.label()}: not expressible as a readable root; left out")
            continue
        name = _blocked_name(rule.pattern.removeprefix("./"), workdir)
        if name:
            blocked.append(name)
        else:
            notes.append(f"{rule.label()}: not expressible as a blocked name; left out")
    return (["./"] if probe.allowed else []) + absolute, blocked, bool(absolute)


def _blocked_name(pattern: str, workdir: str) -> str | None:
    """``*.env`` -> ``.env``; ``<workdir>/secrets/*`` or ``secrets/**`` -> ``secrets/``."""
    text = pattern.removeprefix(workdir.rstrip("/") + "/")
    if text.startswith("*") and "/" not in text and not any(c in text[1:] for c in "*?"):
        return text[1:] or None
    for tail in ("/**", "/*"):
        if text.endswith(tail) and not any(c in text[:-len(tail)] for c in "*?"):
            return text[:-len(tail)].strip("/") + "/"
    if text and not any(c in text for c in "*?/"):
        return text
    return None


def _root_of(pattern: str) -> str | None:
    """``/data/rendered/*`` or ``/data/**`` -> ``/data/rendered/``; else None."""
    for tail in ("/**", "/*"):
        if pattern.startswith("/") and pattern.endswith(tail) \
                and not any(c in pattern[:-len(tail)] for c in "*?"):
            return posixpath.normpath(pattern[:-len(tail)]).rstrip("/") + "/"
    return None


def _tools(agent: AgentPolicy) -> list[dict[str, Any]]:
    from agent_eval.policy.sources.judge import harness_tool

    if agent.harness in ("gemini-cli", "qwen-code"):
        return [{"name": "run_shell_command", "kind": "bash", "argument": "command",
                 "required": ["command"]},
                {"name": "read_file", "kind": "read", "argument": "file_path",
                 "required": ["file_path"]}]
    if agent.harness == "codex":
        return [{"name": "shell_command", "kind": "bash", "argument": "command",
                 "required": ["command"]},
                {"name": "exec_command", "kind": "bash", "argument": "cmd", "required": ["cmd"]}]
    if agent.harness == "opencode":
        tools = [{"name": "bash", "kind": "bash", "argument": "command", "required": ["command"]},
                 {"name": "read", "kind": "read", "argument": "filePath",
                  "required": ["filePath"]}]
        others = OPENCODE_TOOLS
    else:
        tools = [{"name": "Bash", "kind": "bash", "argument": "command", "required": ["command"]},
                 {"name": "Read", "kind": "read", "argument": "file_path",
                  "required": ["file_path"]}]
        others = CLAUDE_TOOLS
    if agent.tools is not None:
        tools = [t for t in tools if t["name"] in agent.tools]
    for name in others:
        if harness_tool(agent, name).decision != "deny":
            tools.append({"name": name, "kind": "other"})
    return tools


def convert_agent(agent: AgentPolicy, *, config_name: str, workdir: str = opencode.DEFAULT_WORKDIR
                  ) -> Conversion:
    """The allow-list equivalent of ``agent``'s rules, and the notes on what differs."""
    notes: list[str] = []
    builder = {"opencode": _opencode_patterns, "claude-code": _claude_patterns,
               "codex": _codex_patterns, "gemini-cli": _gemini_patterns,
               "qwen-code": _claude_patterns}[agent.harness]
    entries = _prune(builder(agent, notes))
    patterns = [{"match": e["match"], **({"unless": e["unless"]} if e["unless"] else {})}
                for e in entries]
    if agent.harness == "claude-code":
        notes.append("the harness's quirks (docs/policies.md) are not part of the allow-list: "
                     "it allows only what the documented rules allow, read strictly")
    data = {
        "name": f"{config_name}-{agent.name}",
        "description": f"{agent.harness} rules of agent {agent.name} from {agent.source}, "
                       "converted by agent-eval policy convert",
        "runner": [],
        "patterns": patterns,
        "read": _read_policy(agent, workdir, notes),
        "tools": _tools(agent),
        "denial_message": f"Denied by the {agent.harness} rules of agent {agent.name} "
                          "({code} {name}): {message}.",
    }
    return Conversion(data, list(dict.fromkeys(notes)))
