"""The scenario file format: pydantic records validated from YAML (``agent-eval schema
scenario`` prints their JSON Schema)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_eval.policy.verdict import Invocation
from agent_eval.transcript import HandshakeResult


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CallMatch(_Model):
    """Matches an allowed script call: script name, optional subcommand path, and the
    flag values / positionals that must be present (a subset: other flags may be there).
    ``args`` values of ``null`` mean "flag present, any value"."""

    script: str
    subcommand: list[str] = Field(default_factory=list)
    args: dict[str, str | None] = Field(default_factory=dict)
    positionals: list[str] = Field(default_factory=list)

    def matches(self, inv: Invocation | None) -> bool:
        if inv is None or inv.script != self.script:
            return False
        if self.subcommand and list(inv.subcommand) != self.subcommand:
            return False
        for flag, want in self.args.items():
            got = inv.flag(flag)
            if got is None or (want is not None and got != want):
                return False
        return all(p in inv.positionals for p in self.positionals)

    def label(self) -> str:
        parts = [self.script, *self.subcommand, *self.positionals]
        parts += [f"{k} {v}" if v is not None else k for k, v in self.args.items()]
        return " ".join(parts)



@dataclass
class HandshakeCount:
    """A handshake's steps done so far, counted in order: a call advances the count only
    when it matches the next step, so steps done out of order are not counted.  The one
    count of the handshake for live sessions (``live/orchestrator.py``, call by call) and
    for protocols read from a file (``protocols.py``, imports and the proxy)."""

    steps: Sequence[CallMatch]
    done: int = 0

    def advance(self, inv: Invocation | None) -> None:
        if self.done < len(self.steps) and self.steps[self.done].matches(inv):
            self.done += 1

    def count(self, invocations: Iterable[Invocation | None]) -> HandshakeCount:
        for inv in invocations:
            self.advance(inv)
        return self

    @property
    def completed(self) -> bool:
        """Every step done (a handshake of no step is never completed)."""
        return bool(self.steps) and self.done == len(self.steps)

    def result(self) -> HandshakeResult:
        return HandshakeResult(
            required=len(self.steps), done=self.done, completed=self.completed,
            missed_step=self.steps[self.done].label() if self.done < len(self.steps) else None,
        )

class CannedOutput(_Model):
    """What a matching allowed script call prints, and the state it changes."""

    match: CallMatch
    output: str
    effects: dict[str, str] = Field(
        default_factory=dict, description="State keys set when this output is served."
    )


class Environment(_Model):
    """The simulated world the tools act on.  Nothing here touches the real machine."""

    outputs: list[CannedOutput] = Field(default_factory=list)
    default_output: str = Field('{"ok": true}', description="Output of unmatched allowed calls.")
    files: dict[str, str] = Field(
        default_factory=dict, description="Virtual files the read tool can open."
    )
    state: dict[str, str] = Field(default_factory=dict, description="Initial state.")


class Limits(_Model):
    turns: int = Field(12, ge=1, description="Model replies before the session stalls.")
    tool_calls: int = Field(24, ge=1, description="Tool calls before the session stalls.")


PLACEHOLDER = re.compile(r"\$\{([a-z][a-z0-9_]*)\}")
"""``${stage}``: a lowercase name in ``${...}``.  JSON and YAML braces in canned outputs
never follow a ``$``, and reference commands may not contain ``$`` at all, so a placeholder
cannot be mistaken for either."""

TEMPLATED_FIELDS = ("task", "system_prompt", "environment", "goal", "handshake", "reference")
"""Fields whose strings (mapping keys too: file paths, flags) may hold placeholders; the
``description`` documents the template and keeps its ``${name}`` as written."""


class ChildSpawn(_Model):
    """A call that spawns a child session (the nested-orchestrator case).

    ``bind`` passes values of the spawning call into the child's placeholders: a flag
    (``{stage: --stage}``) or a 0-based positional index (``{role: 0}``)."""

    on: CallMatch
    scenario: str = Field(description="Name of the child scenario in the same suite.")
    bind: dict[str, str | int] = Field(
        default_factory=dict,
        description="Placeholder name -> flag (`--stage`) or positional index of the "
        "spawning call whose value fills `${name}` in the child scenario.",
    )

    @model_validator(mode="after")
    def _bind_sources(self) -> ChildSpawn:
        for name, source in self.bind.items():
            if not PLACEHOLDER.fullmatch("${" + name + "}"):
                raise ValueError(f"placeholder name {name!r} must be lowercase [a-z0-9_]")
            if not (isinstance(source, int) and source >= 0) and not (
                isinstance(source, str) and source.startswith("-")
            ):
                raise ValueError(f"bind.{name}: give a flag ('--stage') or a positional "
                                 f"index (0, 1, ...), not {source!r}")
        return self

    def values(self, inv: Invocation | None) -> dict[str, str]:
        """The bound values the spawning call carries.  A flag it did not pass (or a
        positional past its end) gives no value, so that placeholder stays as written."""
        out: dict[str, str] = {}
        if inv is None:
            return out
        for name, source in self.bind.items():
            if isinstance(source, int):
                if source < len(inv.positionals):
                    out[name] = inv.positionals[source]
            elif (value := inv.flag(source)) is not None:
                out[name] = value
        return out

    @model_validator(mode="before")
    @classmethod
    def _yaml_on_key(cls, data: Any) -> Any:
        """YAML 1.1 (PyYAML) reads a bare ``on:`` key as the boolean ``True``; take it back."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data


class ExtraTool(_Model):
    """An extra function tool offered beside bash/read, with its simulated output.  The
    allow-list must list it (kind ``other``, with the argument keys it takes): a tool the
    allow-list does not list is never allowed."""

    name: str
    description: str = Field("", description="Default: the allow-list entry's.")
    parameters: dict[str, Any] | None = Field(
        None, description="JSON Schema offered to the model; default: the keys the "
                          "allow-list declares.  Its properties must be declared there.")
    output: str = '{"ok": true}'


class ReferenceStep(_Model):
    """One step of the ideal plan: exactly one of ``bash`` or ``read``."""

    bash: str | None = None
    read: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> ReferenceStep:
        if (self.bash is None) == (self.read is None):
            raise ValueError("give exactly one of `bash` or `read`")
        return self


Temptation = Literal[
    "big-output", "web-search", "flags", "read-path", "handshake", "chain", "script-tool"
]


class Scenario(_Model):
    name: str
    description: str = ""
    allowlist: str = Field(description="Allow-list file, relative to the scenario file.")
    agent: str = Field("subagent", description="The subagent's name, shown in the prompt.")
    task: str = Field(description="The user message that starts the session.")
    system_prompt: str = Field("", description="Extra text after the rendered rules.")
    tools: list[str] = Field(default_factory=lambda: ["bash", "read"])
    extra_tools: list[ExtraTool] = Field(default_factory=list)
    environment: Environment = Field(default_factory=Environment)
    goal: list[CallMatch] = Field(
        default_factory=list, description="Allowed calls the task needs, in any order."
    )
    handshake: list[CallMatch] = Field(
        default_factory=list, description="Ordered closing calls; the last one closes."
    )
    limits: Limits = Field(default_factory=Limits)
    children: list[ChildSpawn] = Field(default_factory=list)
    reference: list[ReferenceStep] = Field(default_factory=list)
    temptations: list[Temptation] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    child_only: bool = Field(False, description="Runs only when spawned by a parent.")

    @field_validator("tags")
    @classmethod
    def _no_reserved_tag(cls, tags: list[str]) -> list[str]:
        """``side-request`` marks an agent CLI's side request, which every figure leaves
        out: a scenario carrying it would vanish from its own run's numbers."""
        from agent_eval.wire.side import SIDE_REQUEST_TAG

        if SIDE_REQUEST_TAG in tags:
            raise ValueError(f"the tag {SIDE_REQUEST_TAG!r} is reserved for an agent CLI's "
                             "side requests, which every figure leaves out; name the tag "
                             "otherwise")
        return tags
