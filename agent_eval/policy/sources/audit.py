"""A configuration's leaks over a set of calls: what its CLI lets through that the strict
reading of its own rules refuses, by class and by the rule responsible.  Pure: the
calls come in as records (``AuditCall``), from wherever the caller read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_eval.policy.rules import get_rule
from agent_eval.policy.sources.judge import Setting, judge_call, judge_command, judge_read
from agent_eval.policy.sources.model import AgentPolicy, DualVerdict

MAX_LISTED = 200


@dataclass(frozen=True, slots=True)
class AuditCall:
    """One call to audit: a bash command (``kind="bash"``), a read path (``"read"``), or
    a tool call as emitted (``"call"``: ``tool`` and ``arguments``); ``where`` says where
    it came from (``line 3``, ``session 12 call 4``)."""

    kind: str
    text: str = ""
    tool: str = ""
    arguments: str | dict[str, Any] = ""
    where: str = ""


@dataclass(frozen=True, slots=True)
class Leak:
    """A call the harness allowed and the strict reading denies."""

    where: str
    kind: str
    text: str
    code: str
    message: str
    rules: tuple[str, ...]
    quirk: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "kind": self.kind, "text": self.text, "class": self.code,
                "name": _name(self.code), "message": self.message, "rules": list(self.rules),
                "quirk": self.quirk}


def _name(code: str | None) -> str:
    rule = get_rule(code) if code else None
    return rule.name if rule else ""


@dataclass(slots=True)
class AuditReport:
    """Counts and leaks of one agent over the audited calls."""

    agent: str
    harness: str
    calls: int = 0
    harness_allowed: int = 0
    strict_allowed: int = 0
    stricter_harness: int = 0
    leaks: list[Leak] = field(default_factory=list)
    leak_count: int = 0
    by_class: Counter[str] = field(default_factory=Counter)
    by_rule: Counter[str] = field(default_factory=Counter)
    by_quirk: Counter[str] = field(default_factory=Counter)

    def add(self, call: AuditCall, dual: DualVerdict) -> None:
        self.calls += 1
        self.harness_allowed += dual.harness.allowed
        self.strict_allowed += dual.strict.allowed
        self.stricter_harness += dual.strict.allowed and not dual.harness.allowed
        if not dual.leak:
            return
        code = dual.leak_class or ""
        rules = tuple(r.label() for r in dual.harness.rules)
        self.leak_count += 1
        self.by_class[code] += 1
        for label in rules or ("(no rule: the CLI's default)",):
            self.by_rule[label] += 1
        if dual.harness.quirk:
            self.by_quirk[dual.harness.quirk] += 1
        if len(self.leaks) < MAX_LISTED:
            finding = next((f for f in dual.strict.findings if f.code == code), None)
            self.leaks.append(Leak(call.where, dual.kind, dual.text, code,
                                   finding.message if finding else "", rules,
                                   dual.harness.quirk))

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "harness": self.harness, "calls": self.calls,
            "harness_allowed": self.harness_allowed, "strict_allowed": self.strict_allowed,
            "stricter_harness": self.stricter_harness, "leaks": self.leak_count,
            "classes": {code: {"name": _name(code), "leaks": n}
                        for code, n in sorted(self.by_class.items())},
            "rules": dict(self.by_rule.most_common()),
            "quirks": dict(self.by_quirk.most_common()),
            "listed": [leak.as_dict() for leak in self.leaks],
        }


def judge_audit_call(agent: AgentPolicy, call: AuditCall, setting: Setting) -> DualVerdict:
    if call.kind == "bash":
        return judge_command(agent, call.text, setting)
    if call.kind == "read":
        return judge_read(agent, call.text, setting)
    return judge_call(agent, call.tool, call.arguments, setting)


def audit(agent: AgentPolicy, calls: Iterable[AuditCall], setting: Setting | None = None
          ) -> AuditReport:
    """Judge every call twice under ``agent``'s rules and collect the leaks."""
    setting = setting or Setting()
    report = AuditReport(agent.name, agent.harness)
    for call in calls:
        report.add(call, judge_audit_call(agent, call, setting))
    return report
