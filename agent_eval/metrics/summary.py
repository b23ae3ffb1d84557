"""Per-group summaries of stored rows: error rates, classes, exit states, handshake,
recovery after denial and speed, in one pass over each input.

Definitions (docs/design.md "Metrics", docs/design.md) as implemented here:

* Sessions with status ``error`` (server or harness faults) are counted in
  ``error_sessions`` and ``exit_states`` only.  Their calls and turns are left out of every
  other figure, so a crashing server never shows up as model errors.
* ``errors`` is denied calls per 100 tool calls.  A denied call counts once, under its
  primary code, so the ``classes`` rates add up to ``errors``.
* ``leaks`` counts, per strict class, the calls an agent CLI's rules let through that
  the strict reading of the same rules refuses (``CallRow.leak``; docs/policies.md).
  They are allowed calls: not in ``errors``.
* ``by="agent"`` groups by whose rules judged the session (an agent CLI's agent;
  :data:`NO_AGENT` for sessions judged under an agent-eval allow-list).
* ``stack_faults`` is stack faults (rules AE5xx: what the serving stack lost or mangled,
  ``policy/stack.py``) per 100 calls the stack handled: the calls of every session, error
  sessions included (a cut call ends its session ``error``), plus one per fault that
  ended a session (the call it lost); never the model's errors.  ``stack_classes`` counts
  them by code.  When one reply holds more faults than calls, the denominator is the
  faults, so the rate never passes 100.
* ``messages`` is the sum of ``SessionRow.n_messages`` (docs/design.md's "messages" column).
* A session belongs to one group per key, except ``by="tag"``: it counts once in each of
  its tags (so tag columns may add up to more than the whole), and an untagged session is
  in no tag group.  ``by="all"`` puts everything in one group named ``"all"``.  A tuple
  of keys groups by each combination (``("scenario", "target")``: one group per scenario
  and target, keyed ``(scenario, target)``).
* A session **failed** (:func:`session_failed`) when it did not complete, holds a denied
  call, or left a required handshake open; the lists, the report and junit.xml all
  judge it so.
* Calls and turns whose session is not among ``sessions`` are ignored, so a caller can
  narrow a report by filtering the sessions alone.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import product
from typing import Literal, Protocol

from agent_eval.metrics.classes import PRECEDENCE, UNCLASSIFIED, order_classes
from agent_eval.metrics.stats import Rate, percentile
from agent_eval.transcript import (
    EXIT_STATES,
    NEXT_ACTIONS,
    CallRow,
    ExitState,
    NextAction,
    SessionRow,
    TurnRow,
)
from agent_eval.wire.side import SIDE_REQUEST_TAG

GroupBy = Literal["all", "target", "scenario", "tag", "run", "agent"]
GROUP_BYS: tuple[GroupBy, ...] = ("all", "target", "scenario", "tag", "run", "agent")
NO_AGENT = "(allow-list)"
"""The agent group of sessions judged under an agent-eval allow-list, not a CLI's rules."""
GroupKeys = GroupBy | tuple[GroupBy, ...]
"""One key (groups named by a string) or several (groups keyed by a tuple of names)."""


def session_failed(status: str, denials: int, handshake_open: bool) -> bool:
    """The one definition of a failed session: it did not complete (a fault included),
    holds a denied call, or left a required handshake open (``handshake_open``: required
    and not completed).  The store's lists filter by the same condition in SQL
    (``store.queries.failed_sessions``), which the tests hold to this."""
    return status != "completed" or denials > 0 or handshake_open


class SessionOutcome:
    """What a stored session row says of its outcome (the store's list rows and the
    report's session pages are these): failed, and its status as text and colour."""

    __slots__ = ()
    status: str
    denials: int
    handshake_required: int
    handshake_completed: bool

    @property
    def failed(self) -> bool:
        return session_failed(self.status, self.denials,
                              self.handshake_required > 0 and not self.handshake_completed)

    @property
    def status_text(self) -> str:
        return status_text(self.status, self.denials)

    @property
    def status_class(self) -> str:
        return status_class(self.status, self.failed)


def status_text(status: str, denials: int) -> str:
    """A session's status as the lists and pages print it: ``completed with 3 denials``
    rather than a bare ``completed`` (a fault's denials are not its story)."""
    if denials and status != "error":
        return f"{status} with {denials} denial{'s' if denials > 1 else ''}"
    return status


def status_class(status: str, failed: bool) -> str:
    """The status's colour class (``st-…``): a failed session is never drawn green, so
    ``completed with 2 denials`` is ``st-failed``."""
    return "st-failed" if failed and status == "completed" else f"st-{status}"


@dataclass(frozen=True, slots=True)
class HandshakeStats:
    """Closing-protocol completion over non-error sessions that required a handshake.

    ``completed`` is the share of those sessions that emitted every step in order as
    allowed calls; ``mean_done_share`` the mean of ``done / required``; ``missed_steps``
    counts the first step not reached in incomplete sessions, most missed first.
    """

    sessions: int
    completed: Rate
    mean_done_share: float | None
    missed_steps: dict[str, int]

    @property
    def most_missed(self) -> str | None:
        """The step most often missed (ties: the alphabetically first), or None."""
        return next(iter(self.missed_steps), None)


@dataclass(frozen=True, slots=True)
class RecoveryStats:
    """What sessions did right after a denied call.

    ``actions`` holds every ``NextAction`` as a share of all denials (a denial stored
    without a next action counts in ``denials`` but in no action).  ``turns_burned`` is
    the number of model replies whose tool calls were all denied.
    """

    denials: int
    actions: dict[NextAction, Rate]
    denials_per_session: float | None
    turns_burned: int

    @property
    def pivot(self) -> Rate:
        return self.actions["pivot"]


@dataclass(frozen=True, slots=True)
class SpeedStats:
    """Latency and throughput.  Seconds; percentiles by linear interpolation.

    Per-reply figures come from ``TurnRow`` (``None`` when no turn reported them).
    Throughput divides work by the group's wall window, first session start to last
    session finish: ``completions_per_min`` counts model replies (``SessionRow.n_turns``),
    ``allowed_calls_per_min`` allowed tool calls, ``completed_sessions_per_hour`` sessions
    that ended ``completed`` — useful work, not raw token speed (docs/design.md "Speed").
    """

    turns: int
    latency_p50: float | None
    latency_p95: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    decode_tps_mean: float | None
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    window_s: float | None
    completions_per_min: float | None
    allowed_calls_per_min: float | None
    completed_sessions_per_hour: float | None


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """Everything reports show about one group (a target, scenario, tag, run, or all)."""

    group: str
    sessions: int  # non-error sessions
    error_sessions: int
    messages: int
    calls: int
    errors: Rate
    classes: dict[str, Rate]  # primary code -> rate per 100 calls, precedence order
    leaks: dict[str, int]  # strict class -> calls the CLI's rules let through, precedence order
    exit_states: dict[ExitState, int]  # every state, ``error`` included
    handshake: HandshakeStats
    recovery: RecoveryStats
    speed: SpeedStats
    side_requests: int = 0  # sessions tagged side-request: in no other figure
    # stack faults (AE5xx) per 100 calls the stack handled, never in ``errors``
    stack_faults: Rate = field(default_factory=lambda: Rate.of(0, 0))
    stack_classes: dict[str, int] = field(default_factory=dict)  # code -> faults, by code


@dataclass(slots=True)
class Tally:
    """Running counts of one group, turned into a frozen GroupSummary by :meth:`freeze`.

    :func:`summarize` adds rows to it; the store's SQL aggregator
    (``agent_eval.store.aggregates``) adds the sums of its GROUP BYs to the same fields, so
    both share every step from counts to figures."""

    exit_states: Counter = field(default_factory=Counter)
    sessions: int = 0
    error_sessions: int = 0
    side_requests: int = 0
    messages: int = 0
    replies: int = 0
    calls: int = 0
    denied: int = 0
    classes: Counter = field(default_factory=Counter)
    leaks: Counter = field(default_factory=Counter)
    actions: Counter = field(default_factory=Counter)
    turns_burned: int = 0
    hs_sessions: int = 0
    hs_completed: int = 0
    hs_done_share: float = 0.0
    hs_missed: Counter = field(default_factory=Counter)
    first_start: datetime | None = None
    last_finish: datetime | None = None
    turns: int = 0
    latency: array = field(default_factory=lambda: array("d"))
    ttft: array = field(default_factory=lambda: array("d"))
    tps_sum: float = 0.0
    tps_n: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    stack: Counter = field(default_factory=Counter)  # stack fault code -> faults
    stack_calls: int = 0  # calls of every session plus the calls session-ending faults lost

    def add_stack(self, calls: int, faults: Iterable[tuple[str, bool]]) -> None:
        """One session's calls and stack faults ``(code, ended the session)``."""
        self.stack_calls += calls
        for code, ended in faults:
            self.stack[code] += 1
            self.stack_calls += bool(ended)

    def add_session(self, s: SessionRow) -> None:
        if is_side_request(s):
            self.side_requests += 1
            return
        self.add_stack(s.n_calls, s.stack_faults)
        self.exit_states[s.status] += 1
        if s.status == "error":
            self.error_sessions += 1
            return
        self.sessions += 1
        self.messages += s.n_messages
        self.replies += s.n_turns
        if s.handshake_required > 0:
            self.hs_sessions += 1
            self.hs_completed += bool(s.handshake_completed)
            self.hs_done_share += min(s.handshake_done, s.handshake_required) / s.handshake_required
            if not s.handshake_completed and s.handshake_missed_step:
                self.hs_missed[s.handshake_missed_step] += 1
        started, finished = _as_utc(s.started_at), _as_utc(s.finished_at)
        if started is not None and (self.first_start is None or started < self.first_start):
            self.first_start = started
        if finished is not None and (self.last_finish is None or finished > self.last_finish):
            self.last_finish = finished

    def add_turn(self, t: TurnRow) -> None:
        self.turns += 1
        if t.latency_s is not None:
            self.latency.append(t.latency_s)
        if t.ttft_s is not None:
            self.ttft.append(t.ttft_s)
        if t.decode_tps is not None:
            self.tps_sum += t.decode_tps
            self.tps_n += 1
        self.prompt_tokens += t.prompt_tokens or 0
        self.completion_tokens += t.completion_tokens or 0
        self.reasoning_tokens += t.reasoning_tokens or 0

    def freeze(self, group: str | tuple[str, ...], all_classes: bool) -> GroupSummary:
        """The group's figures; a tuple key is named by its parts joined with `` · ``."""
        group = group if isinstance(group, str) else " · ".join(group)
        codes = order_classes([*self.classes, *(PRECEDENCE if all_classes else ())])
        missed = sorted(self.hs_missed.items(), key=lambda item: (-item[1], item[0]))
        return GroupSummary(
            group=group,
            sessions=self.sessions,
            error_sessions=self.error_sessions,
            messages=self.messages,
            calls=self.calls,
            errors=Rate.of(self.denied, self.calls),
            classes={code: Rate.of(self.classes[code], self.calls) for code in codes},
            leaks={code: self.leaks[code] for code in order_classes(self.leaks)
                   if self.leaks[code]},
            exit_states={state: self.exit_states[state] for state in EXIT_STATES},
            handshake=HandshakeStats(
                sessions=self.hs_sessions,
                completed=Rate.of(self.hs_completed, self.hs_sessions),
                mean_done_share=self.hs_done_share / self.hs_sessions if self.hs_sessions else None,
                missed_steps=dict(missed),
            ),
            recovery=RecoveryStats(
                denials=self.denied,
                actions={a: Rate.of(self.actions[a], self.denied) for a in NEXT_ACTIONS},
                denials_per_session=self.denied / self.sessions if self.sessions else None,
                turns_burned=self.turns_burned,
            ),
            speed=self._speed(),
            side_requests=self.side_requests,
            stack_faults=Rate.of(sum(self.stack.values()),
                                 max(self.stack_calls, sum(self.stack.values()))),
            stack_classes={code: self.stack[code] for code in sorted(self.stack)},
        )

    def _speed(self) -> SpeedStats:
        window = None
        if self.first_start is not None and self.last_finish is not None:
            seconds = (self.last_finish - self.first_start).total_seconds()
            window = seconds if seconds > 0 else None
        allowed = self.calls - self.denied

        def per(count: int, unit_s: float) -> float | None:
            return count / (window / unit_s) if window else None

        return SpeedStats(
            turns=self.turns,
            latency_p50=percentile(self.latency, 50),
            latency_p95=percentile(self.latency, 95),
            ttft_p50=percentile(self.ttft, 50),
            ttft_p95=percentile(self.ttft, 95),
            decode_tps_mean=self.tps_sum / self.tps_n if self.tps_n else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=self.reasoning_tokens,
            window_s=window,
            completions_per_min=per(self.replies, 60),
            allowed_calls_per_min=per(allowed, 60),
            completed_sessions_per_hour=per(self.exit_states["completed"], 3600),
        )


class Counted(Protocol):
    """What :func:`is_counted` reads of a session (a ``SessionRow`` or a store row)."""

    @property
    def status(self) -> str: ...
    @property
    def tags(self) -> Sequence[str]: ...


def is_side_request(s: Counted) -> bool:
    """An agent CLI's side request (tag ``side-request``, ``wire/side.py``): not a
    conversation of the stack, so in no figure but ``side_requests``."""
    return SIDE_REQUEST_TAG in s.tags


def is_counted(s: Counted) -> bool:
    """Whether the session's calls, turns and time count: not an error session (the
    server's or harness's fault) and not a side request."""
    return s.status != "error" and not is_side_request(s)


def _as_utc(moment: datetime | None) -> datetime | None:
    """Naive timestamps (some imports) are read as UTC, so they compare with the store's."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment


def group_keys(by: GroupKeys) -> Callable[[SessionRow], tuple]:
    """The group names a session belongs to under ``by`` (tuples of names for a tuple)."""
    if isinstance(by, tuple):
        parts = [group_keys(b) for b in by]
        return lambda s: tuple(product(*(part(s) for part in parts)))
    if by == "all":
        return lambda s: ("all",)
    if by == "target":
        return lambda s: (s.target,)
    if by == "scenario":
        return lambda s: (s.scenario,)
    if by == "run":
        return lambda s: (str(s.run_id),)
    if by == "tag":
        return lambda s: tuple(dict.fromkeys(s.tags))
    if by == "agent":
        return lambda s: (s.policy_agent or NO_AGENT,)
    raise ValueError(f"unknown grouping {by!r}; expected one of {', '.join(GROUP_BYS)}")


def summarize(
    sessions: Iterable[SessionRow],
    calls: Iterable[CallRow],
    turns: Iterable[TurnRow] = (),
    *,
    by: GroupKeys = "target",
    all_classes: bool = False,
) -> dict:
    """Summarise stored rows per group, groups in the order their first session came.

    Each input is read once and no row is kept: memory grows with sessions, groups and
    distinct (session, turn) pairs, not with calls.  ``all_classes`` lists every registry
    class in ``classes`` (zeros included) instead of only the classes seen.
    """
    key_of = group_keys(by)
    tallies: dict[str | tuple[str, ...], Tally] = {}
    live: dict[int, tuple[Tally, ...]] = {}  # non-error session id -> its groups' tallies
    for s in sessions:
        mine = tuple(tallies.setdefault(key, Tally()) for key in key_of(s))
        for tally in mine:
            tally.add_session(s)
        if is_counted(s):
            live[s.id] = mine

    all_denied: dict[tuple[int, int], bool] = {}  # (session, turn) -> every call denied so far
    for c in calls:
        groups = live.get(c.session_id)
        if groups is None:
            continue
        denied = c.decision == "deny"
        turn = (c.session_id, c.turn_index)
        all_denied[turn] = all_denied.get(turn, True) and denied
        for tally in groups:
            tally.calls += 1
            if c.leak is not None:
                tally.leaks[c.leak] += 1
            if denied:
                tally.denied += 1
                tally.classes[c.primary or UNCLASSIFIED] += 1
                if c.next_action is not None:
                    tally.actions[c.next_action] += 1
    for (session_id, _), burned in all_denied.items():
        if burned:
            for tally in live[session_id]:
                tally.turns_burned += 1
    del all_denied

    for t in turns:
        for tally in live.get(t.session_id, ()):
            tally.add_turn(t)
    return {key: tally.freeze(key, all_classes) for key, tally in tallies.items()}
