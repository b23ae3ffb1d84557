"""The shape of a scanned bash command: words, redirections, operators, events.

Produced by ``lexer.scan_command`` (or ``lexer.split_plain`` for plain text) and read by
``commands.CommandJudge``.  Mutable while the lexer builds them; nobody changes them after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

OpKind = Literal["|", "|&", "&&", "||", ";", "&", "\n", "(", ")"]


@dataclass(slots=True)
class Word:
    """One shell word.  ``value`` has quotes and escapes removed (exact when ``literal``);
    ``bare`` means the raw text had no quotes or escapes at all."""

    value: str
    start: int
    end: int
    literal: bool = True
    bare: bool = True


@dataclass(slots=True)
class Redirect:
    """A redirection such as ``2>&1`` (fd ``2``, op ``>&``, target ``1``)."""

    op: str
    fd: str | None
    start: int
    end: int
    target: Word | None = None


@dataclass(slots=True)
class Op:
    kind: OpKind
    start: int
    end: int


@dataclass(slots=True)
class SimpleCommand:
    """Words and redirections of one simple command; ``join`` is the operator before it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    join: Op | None = None

    @property
    def end(self) -> int:
        ends = [w.end for w in self.words] + [r.end for r in self.redirects]
        return max(ends) if ends else (self.join.end if self.join else 0)


PER_RULE = 64
"""Findings of one rule kept per command: 16,000 ``;`` are one shell-chain problem
written 16,000 times, and keeping each would cost time and memory for nothing (the
primary code only needs each rule once).  The next one says more were not listed."""


def over_the_cap(counts: dict[str, int], rule: str) -> str | None:
    """Count one more finding of ``rule``; None to keep it, a message to keep instead of
    it (the first one over :data:`PER_RULE`), or ``""`` to drop it."""
    n = counts[rule] = counts.get(rule, 0) + 1
    if n <= PER_RULE:
        return None
    return f"more findings of this kind not listed (over {PER_RULE})" if n == PER_RULE + 1 else ""


@dataclass(slots=True)
class Event:
    """A construct found while lexing, named by the rule it breaks."""

    rule: str
    message: str
    start: int
    end: int


@dataclass(slots=True)
class Scan:
    """What the lexer found.  ``single_quoted`` are the spans of single-quoted text (the
    quotes excluded) and ``literal_dollars`` the indexes of each ``$`` that stands for
    itself; the bashlex confirmation uses both to tell bashlex's misreports from real
    expansions."""

    commands: list[SimpleCommand]
    events: list[Event]
    single_quoted: list[tuple[int, int]] = field(default_factory=list)
    literal_dollars: set[int] = field(default_factory=set)
