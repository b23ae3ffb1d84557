"""Closing protocols for sessions that have no scenario: imported and proxied traffic.

A bundled scenario lists its handshake (the ordered closing calls a subagent must make).
Traffic from a real agent stack has no scenario, so a protocols file declares the
required sequences and when each applies::

    protocols:
      - name: close-attempt
        when:                                  # every condition given must hold
          calls: {script: update_attempt_outcome.py}   # the session made this call, or
          system_prompt: "RALF (worker|executor)"      # a regex found in its system prompt
        steps:                                 # required, in this order, as allowed calls
          - {script: update_attempt_outcome.py}
          - {script: update_stage_status.py, args: {--status: awaiting_eval}}
          - {script: ralf_spawn.py, positionals: [step_evaluator]}

Steps and the ``calls`` condition are the scenario format's call matches (script,
subcommand, ``args`` flags, positionals: ``agent-eval schema scenario``).  A session's
protocol is the first in the file whose conditions hold; its steps are counted in order
over the session's allowed calls, exactly as a live scenario's handshake is (a denied
call never advances it).  The result is the session's handshake (required, done,
completed, first missed step), so reports, the gate's ``--min-handshake`` and ``view``
show it for imports as for live runs.  A session no protocol applies to requires none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from agent_eval.errors import ConfigError
from agent_eval.policy.allowlist import read_yaml_mapping
from agent_eval.policy.verdict import Invocation
from agent_eval.scenario.spec import CallMatch, HandshakeCount, _Model
from agent_eval.transcript import HandshakeResult


class Trigger(_Model):
    """When a protocol applies; every condition given must hold, at least one is."""

    calls: CallMatch | None = Field(None, description="The session made this (allowed) call.")
    system_prompt: str | None = Field(
        None, description="A regular expression searched in the session's system prompt.")

    @field_validator("system_prompt")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_condition(self) -> Trigger:
        if self.calls is None and self.system_prompt is None:
            raise ValueError("give `calls` or `system_prompt` (or both)")
        return self

    def holds(self, invocations: Sequence[Invocation], system_prompt: str) -> bool:
        if self.calls is not None and not any(self.calls.matches(i) for i in invocations):
            return False
        return self.system_prompt is None or re.search(self.system_prompt, system_prompt) is not None


class Protocol(_Model):
    name: str = Field(min_length=1)
    when: Trigger
    steps: list[CallMatch] = Field(min_length=1)

    def result(self, invocations: Sequence[Invocation]) -> HandshakeResult:
        return HandshakeCount(self.steps).count(invocations).result()


class Protocols(_Model):
    protocols: list[Protocol] = Field(min_length=1)

    def handshake(self, invocations: Sequence[Invocation | None], system_prompt: str
                  ) -> HandshakeResult:
        """The handshake of a session whose allowed calls parsed to ``invocations`` (in
        order; ``None`` for calls that are not script invocations, skipped)."""
        parsed = [i for i in invocations if i is not None]
        for protocol in self.protocols:
            if protocol.when.holds(parsed, system_prompt):
                return protocol.result(parsed)
        return HandshakeResult()


def load_protocols(path: str | Path) -> Protocols:
    """The protocols file at ``path``; every problem is one ``ConfigError`` naming the file
    and the field."""
    raw = read_yaml_mapping(path, what="protocols YAML with a `protocols:` list")
    try:
        return TypeAdapter(Protocols).validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field; a protocol has name, when (calls, system_prompt) and steps"
        elif err["type"] == "missing":
            msg = "required field is missing; add it"
        raise ConfigError(msg, path=str(path), field=loc) from None


def system_prompt_of(messages: Sequence[dict]) -> str:
    """The text of the first system (or developer) message, parts joined; ``""`` if none."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(p.get("text", "") for p in content
                                 if isinstance(p, dict) and isinstance(p.get("text"), str))
            return ""
    return ""
