"""The records of a policy source: the rules an agent CLI enforces, per agent, as written.

A :class:`PolicySource` is one configuration (``opencode.json``, Claude Code's
``settings.json``, a Codex ``.rules`` file) with the agents it names; an
:class:`AgentPolicy` is one agent's rules resolved the way the CLI merges them (defaults,
then the global rules, then the agent's own).  A :class:`HarnessVerdict` is what the
CLI's own matcher decides for a call; a :class:`DualVerdict` pairs it with agent-eval's
strict verdict under the same rules.  Pure records; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent_eval.policy.verdict import Verdict

Harness = Literal["opencode", "claude-code", "codex", "gemini-cli", "qwen-code"]
"""Which agent CLI wrote the configuration (and whose matcher is emulated)."""

Action = Literal["allow", "ask", "deny"]
"""A rule's decision as the CLI names it (Codex's ``prompt`` is ``ask`` and its
``forbidden`` is ``deny``).  In an unattended stack nobody answers, so ``ask`` blocks."""

HarnessDecision = Literal["allow", "sandboxed", "ask", "deny"]
"""What the CLI did with a call: ran it (``allow``), ran it only inside its sandbox
(``sandboxed``: Codex under approval ``never``/``on-request`` with a sandbox on, for a
command no rule matches), asked (blocks an unattended stack) or refused it."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule as written: the permission (tool) it governs, its pattern, its action.

    ``permission`` is the CLI's own name (OpenCode ``bash``/``read``/
    ``external_directory``/``*``; Claude Code ``Bash``/``Read``; Codex ``exec``).
    ``pattern`` is the rule's pattern text; for Codex it is the prefix's tokens joined
    by blanks, with alternatives written ``[a|b]``; ``tokens`` then holds them as a list
    of alternatives each.  ``origin`` says where it was read (file and field), shown next
    to every leak the rule lets through."""

    permission: str
    pattern: str
    action: Action
    origin: str = ""
    tokens: tuple[tuple[str, ...], ...] = ()

    def label(self) -> str:
        """The rule as a user would recognise it in their own file."""
        if self.permission == "exec":
            return f"prefix_rule({self.pattern!r}, {self.action})"
        if self.permission == "run_shell_command" or (self.tokens and self.tokens[0][0] in (
                "prefix", "regex", "any")):  # Gemini CLI
            inner = f"({self.pattern})" if self.pattern else ""
            return f"{self.permission}{inner}: {self.action}"
        if self.permission in ("Bash", "Read", "Edit", "WebFetch"):
            inner = "" if self.pattern in ("", "*") and self.permission != "Bash" else self.pattern
            return f"{self.permission}({inner}): {self.action}" if inner else \
                f"{self.permission}: {self.action}"
        return f"{self.permission} {self.pattern!r}: {self.action}"


@dataclass(frozen=True, slots=True)
class AgentPolicy:
    """One agent's effective rules, in the order the CLI evaluates them.

    ``tools`` are the tool names the agent is offered when the configuration restricts
    them (Claude Code's agent ``tools``), else None (every tool of the harness).
    ``prompt`` is the agent's own system prompt when the configuration holds one (for
    matching a recorded session to its agent).  ``directories`` are extra readable roots
    (Claude Code's ``additionalDirectories``)."""

    harness: Harness
    name: str
    rules: tuple[Rule, ...]
    description: str = ""
    prompt: str | None = None
    tools: tuple[str, ...] | None = None
    directories: tuple[str, ...] = ()
    source: str = ""
    mode: str = "default"


@dataclass(frozen=True, slots=True)
class PolicySource:
    """A whole configuration: its agents by name and the agent used when none is named."""

    harness: Harness
    path: str
    agents: dict[str, AgentPolicy]
    default_agent: str
    notes: tuple[str, ...] = ()

    def agent(self, name: str | None) -> AgentPolicy:
        """The named agent (or the default one); a ``KeyError`` names the agents there are."""
        key = self.default_agent if name is None else name
        if key not in self.agents:
            raise KeyError(key)
        return self.agents[key]


@dataclass(frozen=True, slots=True)
class HarnessVerdict:
    """The CLI's own decision for one call under an agent's rules.

    ``rules`` are the rules that decided it (the allow rules that let each part through,
    or the rule that blocked it); ``quirk`` names the documented matcher behaviour that
    produced the decision when it differs from the CLI's documented semantics (see
    docs/policies.md); ``reason`` says in words what happened."""

    decision: HarnessDecision
    rules: tuple[Rule, ...] = ()
    quirk: str | None = None
    reason: str = ""

    @property
    def allowed(self) -> bool:
        """Whether the command ran (in the sandbox or not): the model saw its output."""
        return self.decision in ("allow", "sandboxed")


@dataclass(frozen=True, slots=True)
class DualVerdict:
    """A call judged twice: by the harness's matcher and by agent-eval's strict reading.

    A **leak** is a call the harness allowed that the strict reading denies; its class is
    the strict verdict's primary AE code."""

    harness: HarnessVerdict
    strict: Verdict
    kind: Literal["bash", "read", "other"] = "bash"
    text: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def leak(self) -> bool:
        return self.harness.allowed and not self.strict.allowed

    @property
    def leak_class(self) -> str | None:
        return self.strict.primary if self.leak else None
