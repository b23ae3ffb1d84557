"""Reading stored runs back for metrics and reports, without holding them in memory.

The row readers are generators over a streamed result (``yield_per``: a server-side
cursor on PostgreSQL, SQLite's own stepping cursor), so a million calls pass through as
small flat rows and never sit in memory twice.  Figures are not counted from these rows:
``store.aggregates`` computes them in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlalchemy import Engine, Select, select

from agent_eval.store.schema import sessions, targets, tool_calls, turns
from agent_eval.transcript import CallRow, SessionRow, TurnRow, stack_fault_codes

STREAM_BATCH = 2000
_SESSION_ROW_COLUMNS = tuple(c for c in sessions.c if c.name != "messages")


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
            policy_agent=r.policy_agent,
            stack_faults=stack_fault_codes(r.stack_faults),
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
            c.leak,
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


def _stream(engine: Engine, query: Select) -> Iterator:
    with engine.connect() as conn:
        conn.execution_options(yield_per=STREAM_BATCH)
        yield from conn.execute(query)
