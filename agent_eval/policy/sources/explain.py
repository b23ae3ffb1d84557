"""Why a CLI's rules decide a call as they do, and what a rule change changes.

``explain`` answers "which rule of which file decided this command, under which mode and
release, on which parse, and what does the strict reading say" for one command or read
path (``agent-eval policy explain``).  ``diff_calls`` judges the same calls under two
configurations and lists what changed: calls newly allowed or newly refused, leaks opened
or closed (``agent-eval policy diff``).  Pure: the calls come in as ``AuditCall`` records.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_eval.policy.sources import claude_code, codex, qwen_code
from agent_eval.policy.sources.audit import AuditCall, judge_audit_call
from agent_eval.policy.sources.emulation import Emulation
from agent_eval.policy.sources.judge import Setting, judge_command, judge_read
from agent_eval.policy.sources.model import AgentPolicy, DualVerdict
from agent_eval.policy.sources.shellsplit import all_commands

MAX_LISTED = 200


@dataclass(frozen=True, slots=True)
class Explanation:
    """One command (or read path) under one agent's rules, with every reason."""

    agent: AgentPolicy
    emulation: Emulation
    parse: tuple[str, ...]
    cut: str
    dual: DualVerdict

    def as_dict(self) -> dict[str, Any]:
        h, s = self.dual.harness, self.dual.strict
        return {
            "harness": self.agent.harness, "agent": self.agent.name,
            "config": self.agent.source, "emulated": self.emulation.as_dict(),
            "kind": self.dual.kind, "text": self.dual.text,
            "parse": {"cut": self.cut, "parts": list(self.parse)},
            "decision": h.decision, "reason": h.reason, "quirk": h.quirk,
            "rules": [{"rule": r.label(), "file": self.agent.source, "origin": r.origin}
                      for r in h.rules],
            "strict": {"decision": s.decision, "primary": s.primary,
                       "findings": [{"code": f.code, "message": f.message, "start": f.start,
                                     "end": f.end} for f in s.findings]},
            "leak": self.dual.leak_class,
        }


def parse_of(agent: AgentPolicy, command: str) -> tuple[tuple[str, ...], str]:
    """What the CLI matches its rules against, and how it cut the command."""
    if agent.harness == "codex":
        argvs, how = codex.argv_lists(command)
        cut = {"plain": "plain commands joined by && || ; | (each checked)",
               "heredoc": "one command with a heredoc (its words checked)",
               "whole": "not plain words: the whole bash -lc argv checked"}[how]
        return tuple(shlex.join(a) for a in argvs), cut
    if agent.harness == "claude-code":
        return tuple(claude_code.command_parts(command)), "cut at && || ; | & and newlines; wrappers, assignments and " \
                      "redirections removed from each part"
    if agent.harness == "qwen-code":
        return tuple(qwen_code.split_command(command)), \
            "cut at && || ; | & and newlines outside quotes; leading assignments removed"
    pieces = all_commands(command)
    if agent.harness == "gemini-cli":
        return (command, *(p.text for p in pieces if p.words and p.text != command.strip())), \
            "the whole command, then every simple command of the parse (substitutions' " \
            "included) on its own"
    return tuple(p.text for p in pieces if p.words and p.words[0] != "cd"), \
        "every simple command, substitutions' included, cd left out"


def explain(agent: AgentPolicy, text: str, setting: Setting | None = None,
            kind: str = "bash") -> Explanation:
    """``text`` (a command, or a read path with ``kind="read"``) under ``agent``'s rules."""
    setting = setting or Setting()
    if kind == "read":
        dual = judge_read(agent, text, setting)
        parse: tuple[tuple[str, ...], str] = ((text,), "a read path")
    else:
        dual = judge_command(agent, text, setting)
        parse = parse_of(agent, text)
    return Explanation(agent, setting.emulation(agent), parse[0], parse[1], dual)


@dataclass(frozen=True, slots=True)
class Change:
    """One call whose verdict differs between the old and the new configuration."""

    where: str
    kind: str
    text: str
    old: str
    new: str
    old_leak: str | None
    new_leak: str | None
    rules: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "kind": self.kind, "text": self.text, "old": self.old,
                "new": self.new, "old_leak": self.old_leak, "new_leak": self.new_leak,
                "rules": list(self.rules)}


@dataclass(slots=True)
class Diff:
    """What a rule change would have changed on the calls: counts and the calls."""

    calls: int = 0
    newly_allowed: list[Change] = field(default_factory=list)
    newly_refused: list[Change] = field(default_factory=list)
    leaks_opened: list[Change] = field(default_factory=list)
    leaks_closed: list[Change] = field(default_factory=list)
    other: list[Change] = field(default_factory=list)  # e.g. ask became deny

    def add(self, change: Change, old: DualVerdict, new: DualVerdict) -> None:
        ran_before, runs_now = old.harness.allowed, new.harness.allowed
        lists = []
        if runs_now and not ran_before:
            lists.append(self.newly_allowed)
        elif ran_before and not runs_now:
            lists.append(self.newly_refused)
        if new.leak and not old.leak:
            lists.append(self.leaks_opened)
        elif old.leak and not new.leak:
            lists.append(self.leaks_closed)
        for chosen in lists or [self.other]:
            if len(chosen) < MAX_LISTED:
                chosen.append(change)

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, **{name: [c.as_dict() for c in getattr(self, name)]
                                        for name in ("newly_allowed", "newly_refused",
                                                     "leaks_opened", "leaks_closed",
                                                     "other")}}


def diff_calls(old: AgentPolicy, new: AgentPolicy, calls: Iterable[AuditCall],
               setting: Setting | None = None) -> Diff:
    """Every call judged under ``old`` and ``new``; the ones whose outcome changed."""
    setting = setting or Setting()
    diff = Diff()
    for call in calls:
        diff.calls += 1
        before = judge_audit_call(old, call, setting)
        after = judge_audit_call(new, call, setting)
        if (before.harness.decision, before.leak_class) == \
                (after.harness.decision, after.leak_class):
            continue
        rules = tuple(r.label() for r in after.harness.rules or before.harness.rules)
        diff.add(Change(call.where, after.kind, after.text or call.tool, before.harness.decision,
                        after.harness.decision, before.leak_class, after.leak_class, rules),
                 before, after)
    return diff
