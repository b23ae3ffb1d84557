"""Repeats: pass^k, flip rate, and scenarios that flipped between two runs or targets.

Repeated agentic runs flip (docs/design.md "Noise"), so the same scenario is run k times and
its outcomes are compared.  **A repeat passes** when its top-level session ended
``completed`` and no call in it, or in any child session it spawned, was denied.  This is
the one definition used everywhere below.  Repeats that ended ``error`` (a server or
harness fault) say nothing about the model and are left out; child sessions are part of
their parent's repeat, not repeats of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import comb
from operator import itemgetter
from typing import Literal, Protocol, TypeVar

from agent_eval.metrics.stats import Rate
from agent_eval.metrics.summary import is_counted
from agent_eval.transcript import CallRow, SessionRow

K = TypeVar("K")


class SessionFields(Protocol):
    """What the per-session metrics read of a session: a
    :class:`~agent_eval.transcript.SessionRow`, or a row holding only these fields (the
    store's ``UnitSession``)."""

    @property
    def id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def status(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def tags(self) -> tuple[str, ...]: ...


S = TypeVar("S", bound=SessionFields)
FlipDirection = Literal["fixed", "broke"]  # b passes where a failed / b fails where a passed


@dataclass(frozen=True, slots=True)
class RepeatStats:
    """Outcomes of one (target, scenario) over its repeats, in repeat order."""

    target: str
    scenario: str
    outcomes: tuple[bool, ...]

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def passes(self) -> int:
        return sum(self.outcomes)

    @property
    def all_passed(self) -> bool:
        return self.n > 0 and all(self.outcomes)

    @property
    def flipped(self) -> bool:
        """At least two repeats, and not all with the same outcome."""
        return self.n >= 2 and 0 < self.passes < self.n

    def pass_hat(self, k: int) -> float | None:
        """Unbiased chance that ``k`` repeats drawn from these all pass: C(c,k) / C(n,k)
        (tau-bench's pass^k).  ``None`` when there are fewer than ``k`` repeats."""
        if k < 1:
            raise ValueError(f"pass^k needs k >= 1, got {k}")
        return comb(self.passes, k) / comb(self.n, k) if self.n >= k else None


@dataclass(frozen=True, slots=True)
class RepeatSummary:
    """One target's repeat figures over its scenarios.

    ``pass_all``: scenarios whose every repeat passed (pass^k when each has k repeats).
    ``pass_hat``: mean of C(c,k)/C(n,k) over scenarios with at least ``k`` repeats.
    ``flips``: scenarios with at least two repeats whose outcomes are not all equal.
    """

    target: str
    scenarios: int
    k: int
    pass_all: Rate
    pass_hat: float | None
    flips: Rate


@dataclass(frozen=True, slots=True)
class ScenarioFlip:
    """A scenario whose outcome (all repeats passed, or not) differs between sides a and b."""

    scenario: str
    a: tuple[bool, ...]
    b: tuple[bool, ...]
    direction: FlipDirection


def repeat_stats(
    sessions: Iterable[SessionRow], calls: Iterable[CallRow]
) -> dict[tuple[str, str], RepeatStats]:
    """Outcomes per (target, scenario), keys in the order their first repeat came."""
    return {
        (target, scenario): RepeatStats(target, scenario, outcomes)
        for (target, scenario), outcomes in _outcomes_by(
            sessions, calls, lambda s: (s.target, s.scenario)
        ).items()
    }


def summarize_repeats(
    stats: Iterable[RepeatStats], *, k: int | None = None
) -> dict[str, RepeatSummary]:
    """Per-target pass^k and flip rate.  ``k`` defaults to the target's smallest repeat
    count, so every scenario contributes to ``pass_hat``."""
    per_target: dict[str, list[RepeatStats]] = {}
    for stat in stats:
        if stat.n:
            per_target.setdefault(stat.target, []).append(stat)
    summaries = {}
    for target, items in per_target.items():
        k_used = k if k is not None else min(stat.n for stat in items)
        hats = [h for stat in items if (h := stat.pass_hat(k_used)) is not None]
        repeated = [stat for stat in items if stat.n >= 2]
        summaries[target] = RepeatSummary(
            target=target,
            scenarios=len(items),
            k=k_used,
            pass_all=Rate.of(sum(stat.all_passed for stat in items), len(items)),
            pass_hat=sum(hats) / len(hats) if hats else None,
            flips=Rate.of(sum(stat.flipped for stat in repeated), len(repeated)),
        )
    return summaries


def flipped_scenarios(
    sessions_a: Iterable[SessionRow],
    calls_a: Iterable[CallRow],
    sessions_b: Iterable[SessionRow],
    calls_b: Iterable[CallRow],
) -> list[ScenarioFlip]:
    """Scenarios run on both sides whose outcome differs, by scenario name.

    A side's outcome for a scenario is "every repeat passed"; all targets on one side are
    pooled (pass one target, or one run, per side for a clean comparison).
    """
    side_a = _outcomes_by(sessions_a, calls_a, _scenario_of)
    side_b = _outcomes_by(sessions_b, calls_b, _scenario_of)
    flips = []
    for scenario in sorted(side_a.keys() & side_b.keys()):
        a, b = side_a[scenario], side_b[scenario]
        if all(a) != all(b):
            flips.append(ScenarioFlip(scenario, a, b, "fixed" if all(b) else "broke"))
    return flips


def _scenario_of(s: SessionRow) -> str:
    return s.scenario


def _outcomes_by(
    sessions: Iterable[S], calls: Iterable[CallRow], key: Callable[[S], K]
) -> dict[K, tuple[bool, ...]]:
    """Pass/fail of every non-error top-level session, grouped by ``key(session)`` and
    ordered by repeat.  Holds sessions, never calls."""
    parent, roots, faulted = split_sessions(sessions)
    denied_roots: set[int] = set()
    for c in calls:
        if c.decision == "deny" and c.session_id in parent and c.session_id not in faulted:
            denied_roots.add(_root_of(c.session_id, parent))
    grouped: dict[K, list[tuple[int, bool]]] = {}
    for sid, s in roots.items():
        passed = s.status == "completed" and sid not in denied_roots
        grouped.setdefault(key(s), []).append((s.repeat, passed))
    return {k: _in_repeat_order(v) for k, v in grouped.items()}


def _in_repeat_order(outcomes: list[tuple[int, bool]]) -> tuple[bool, ...]:
    return tuple(p for _, p in sorted(outcomes, key=lambda item: item[0]))


def repeats_from_outcomes(
    outcomes: Mapping[tuple[str, str], Sequence[tuple[int, bool]]],
) -> dict[tuple[str, str], RepeatStats]:
    """``repeat_stats`` from each (target, scenario)'s ``(repeat, passed)`` in repeat order
    (``store.session_outcomes``: passed computed in SQL)."""
    return {key: RepeatStats(*key, tuple(map(itemgetter(1), v))) for key, v in outcomes.items()}


def _root_of(session_id: int, parent: dict[int, int | None]) -> int:
    seen = set()
    while (up := parent.get(session_id)) is not None and session_id not in seen:
        seen.add(session_id)
        session_id = up
    return session_id


def split_sessions(
    sessions: Iterable[S],
) -> tuple[dict[int, int | None], dict[int, S], set[int]]:
    """``(parent of every session, non-error top-level sessions by id, error session ids)``:
    the one pass that every per-session metric starts from."""
    parent: dict[int, int | None] = {}
    roots: dict[int, S] = {}
    faulted: set[int] = set()
    for s in sessions:
        parent[s.id] = s.parent_id
        if not is_counted(s):  # an error session or a side request
            faulted.add(s.id)
        elif s.parent_id is None:
            roots[s.id] = s
    return parent, roots, faulted
