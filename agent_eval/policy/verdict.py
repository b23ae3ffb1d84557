"""What the engine answers: a verdict with findings, and the invocation it proved allowed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["allow", "deny"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule: its AE code, a message for humans, the character span it points at.

    ``start``/``end`` index into the checked text (the command, or the read path);
    ``0, 0`` when the finding concerns the call as a whole.
    """

    code: str
    message: str
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class Invocation:
    """An allowed runner call, taken apart: ``uv run scripts/x.py sub --flag v pos``.

    ``flags`` maps each flag as written in the spec (aliases resolved) to its values in
    order (``[]`` for a flag without a value, one entry per repeat).
    """

    script: str
    subcommand: tuple[str, ...] = ()
    flags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    positionals: tuple[str, ...] = ()

    def flag(self, name: str) -> str | None:
        """The last value given for ``name``, ``""`` for a bare flag, None if absent."""
        for key, values in reversed(self.flags):
            if key == name:
                return values[-1] if values else ""
        return None


@dataclass(frozen=True, slots=True)
class Verdict:
    """Allow or deny.  A deny always has at least one finding and a primary code chosen by
    the registry's precedence; an allow has none.  ``invocation`` is set on allowed bash
    calls of a script (None for allowed plain programs); ``path`` on allowed reads."""

    decision: Decision
    primary: str | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)
    invocation: Invocation | None = None
    path: str | None = None

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"
