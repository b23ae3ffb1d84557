"""Reading stored runs back for metrics and reports, without holding them in memory.

The row readers are generators over a streamed result (``yield_per``: a server-side
cursor on PostgreSQL, SQLite's own stepping cursor), so a million calls pass through as
small flat rows and never sit in memory twice.  The two aggregates the reports need on
every page are computed in SQL with GROUP BY over indexed columns instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import Engine, Select, func, select

from agent_eval.store.schema import sessions, targets, tool_calls, turns
from agent_eval.transcript import CallRow, SessionRow, TurnRow

STREAM_BATCH = 2000
_SESSION_ROW_COLUMNS = tuple(c for c in sessions.c if c.name != "messages")


@dataclass(frozen=True, slots=True)
class SessionCounts:
    """One target's sessions by exit state, and the messages and calls they hold.

    ``messages`` and ``calls`` leave out sessions with status ``error`` (server or harness
    faults), like every model rate, so ``calls`` equals the sum of the class breakdown.
    """

    by_status: dict[str, int] = field(default_factory=dict)
    messages: int = 0
    calls: int = 0

    @property
    def sessions(self) -> int:
        return sum(self.by_status.values())


def session_rows(engine: Engine, run_ids: Iterable[int]) -> Iterator[SessionRow]:
    """Every session of the runs, target by target (in the order targets were added, so
    report columns follow the run config), each target's sessions in storage order.
    The transcript (``messages``, the largest column) is not read: decoding it took most
    of a 10,000-session report's session rows."""
    ids = list(run_ids)
    query = (
        select(*_SESSION_ROW_COLUMNS, targets.c.name.label("target_name"))
        .join(targets, targets.c.id == sessions.c.target_id)
        .where(sessions.c.run_id.in_(ids))
        .order_by(sessions.c.target_id, sessions.c.id)  # targets in the order added
    )
    for r in _stream(engine, query):
        yield SessionRow(
            id=r.id,
            run_id=r.run_id,
            target=r.target_name,
            scenario=r.scenario,
            repeat=r.repeat,
            status=r.status,
            error=r.error,
            parent_id=r.parent_id,
            tags=tuple(r.tags),
            handshake_required=r.handshake_required,
            handshake_done=r.handshake_done,
            handshake_completed=bool(r.handshake_completed),
            handshake_missed_step=r.handshake_missed_step,
            n_turns=r.n_turns,
            n_messages=r.n_messages,
            n_calls=r.n_calls,
            started_at=r.started_at,
            finished_at=r.finished_at,
            key=r.key,
        )


def call_rows(engine: Engine, run_ids: Iterable[int]) -> Iterator[CallRow]:
    """Every tool call of the runs, session by session, in emission order."""
    ids = list(run_ids)
    c = tool_calls.c
    query = (
        select(
            c.session_id,
            c.run_id,
            targets.c.name,
            sessions.c.scenario,
            c.index,
            c.turn_index,
            c.tool,
            c.decision,
            c.primary_code,
            c.next_action,
            c.script,
            c.command,
            c.source_decision,
        )
        .join(sessions, sessions.c.id == c.session_id)
        .join(targets, targets.c.id == c.target_id)
        .where(c.run_id.in_(ids))
        .order_by(c.session_id, c.index)
    )
    for r in _stream(engine, query):
        yield CallRow(*r)


def turn_rows(engine: Engine, run_ids: Iterable[int]) -> Iterator[TurnRow]:
    """Every turn of the runs, session by session, in order."""
    ids = list(run_ids)
    t = turns.c
    query = (
        select(
            t.session_id,
            sessions.c.run_id,
            targets.c.name,
            t.index,
            t.latency_s,
            t.ttft_s,
            t.prompt_tokens,
            t.completion_tokens,
            t.reasoning_tokens,
            t.decode_tps,
            t.started_at,
        )
        .join(sessions, sessions.c.id == t.session_id)
        .join(targets, targets.c.id == sessions.c.target_id)
        .where(sessions.c.run_id.in_(ids))
        .order_by(t.session_id, t.index)
    )
    for r in _stream(engine, query):
        yield TurnRow(*r)


def class_breakdown(engine: Engine, run_ids: Iterable[int]) -> dict[str, dict[str | None, int]]:
    """Per target name: tool calls by primary code (``None`` = allowed), error sessions left out.

    Counted as all calls minus the calls of error sessions: the first is one GROUP BY on
    the ``ix_tool_calls_breakdown`` covering index, the second touches only the few
    faulted sessions, so a million calls take a fraction of a second.
    """
    ids = list(run_ids)
    c = tool_calls.c
    with engine.connect() as conn:
        names = _target_names(conn, ids)
        totals = conn.execute(
            select(c.target_id, c.primary_code, func.count())
            .where(c.run_id.in_(ids))
            .group_by(c.target_id, c.primary_code)
        ).all()
        faulted = conn.execute(
            select(c.target_id, c.primary_code, func.count())
            .select_from(sessions)
            .join(tool_calls, c.session_id == sessions.c.id)
            .where(sessions.c.run_id.in_(ids), sessions.c.status == "error")
            .group_by(c.target_id, c.primary_code)
        ).all()
    counts: dict[str, Counter] = {name: Counter() for name in names.values()}
    for target_id, code, n in totals:
        counts[names[target_id]][code] += n
    for target_id, code, n in faulted:
        counts[names[target_id]][code] -= n
    return {name: {code: n for code, n in found.items() if n > 0} for name, found in counts.items()}


def session_counts(engine: Engine, run_ids: Iterable[int]) -> dict[str, SessionCounts]:
    """Per target name: sessions by exit state, and messages and calls outside error sessions."""
    ids = list(run_ids)
    s = sessions.c
    with engine.connect() as conn:
        names = _target_names(conn, ids)
        rows = conn.execute(
            select(s.target_id, s.status, func.count(), func.sum(s.n_messages), func.sum(s.n_calls))
            .where(s.run_id.in_(ids))
            .group_by(s.target_id, s.status)
        ).all()
    by_status: dict[str, Counter] = {name: Counter() for name in names.values()}
    messages: Counter = Counter()
    calls: Counter = Counter()
    for target_id, status, n, n_messages, n_calls in rows:
        name = names[target_id]
        by_status[name][status] += n
        if status != "error":
            messages[name] += int(n_messages or 0)
            calls[name] += int(n_calls or 0)
    return {
        name: SessionCounts(dict(found), messages[name], calls[name])
        for name, found in by_status.items()
    }


def _target_names(conn, run_ids: list[int]) -> dict[int, str]:
    """Target id to name; targets of several runs that share a name are merged by it."""
    return dict(
        conn.execute(
            select(targets.c.id, targets.c.name)
            .where(targets.c.run_id.in_(run_ids))
            .order_by(targets.c.id)
        ).all()
    )


def _stream(engine: Engine, query: Select) -> Iterator:
    with engine.connect() as conn:
        conn.execution_options(yield_per=STREAM_BATCH)
        yield from conn.execute(query)
