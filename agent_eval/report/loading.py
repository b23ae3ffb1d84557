"""Streaming every session of a run back in full, for the session pages.

``Store.load_session`` costs five queries per session: fine for ``agent-eval show``, far
too slow for a report of 10,000 sessions.  Here four streamed queries (sessions, turns,
calls, findings), each ordered by session id, are merged like a zip, so each session is
rebuilt once, handed to the page writer and dropped: memory stays flat and the database
sees four statements whatever the size of the run.

This reads the store's tables directly (``agent_eval.store.tables``) and yields the
store's own :class:`StoredSession` records, so a page built from here and one built from
``load_session`` are the same page.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from sqlalchemy import Engine, Select, select

from agent_eval.store import StoredSession
from agent_eval.store.tables import findings, sessions, targets, tool_calls, turns
from agent_eval.transcript import (
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
)

STREAM_BATCH = 500

_TURN_FIELDS = (
    "index content reasoning finish_reason prompt_tokens completion_tokens reasoning_tokens "
    "cached_tokens latency_s ttft_s decode_tps started_at"
).split()
_CALL_FIELDS = (
    "index turn_index call_id tool arguments command script decision next_action output "
    "source_decision source_reason"
).split()


def stream_sessions(engine: Engine, run_ids: Iterable[int]) -> Iterator[StoredSession]:
    """Every session of the runs, in id order, rebuilt in full (turns, calls, findings,
    messages, parent and child links), each exactly once."""
    ids = list(run_ids)
    children = _child_ids(engine, ids)
    keys = _keys(engine, ids)
    session_q = (
        select(sessions, targets.c.name.label("target_name"))
        .join(targets, targets.c.id == sessions.c.target_id)
        .where(sessions.c.run_id.in_(ids))
        .order_by(sessions.c.id)
    )
    turn_q = (
        select(turns)
        .join(sessions, sessions.c.id == turns.c.session_id)
        .where(sessions.c.run_id.in_(ids))
        .order_by(turns.c.session_id, turns.c.index)
    )
    call_q = (
        select(tool_calls)
        .where(tool_calls.c.run_id.in_(ids))
        .order_by(tool_calls.c.session_id, tool_calls.c.index)
    )
    finding_q = (
        select(findings, tool_calls.c.session_id)
        .join(tool_calls, tool_calls.c.id == findings.c.tool_call_id)
        .where(tool_calls.c.run_id.in_(ids))
        .order_by(tool_calls.c.session_id, findings.c.id)
    )
    turn_groups = _grouped(_stream(engine, turn_q))
    call_groups = _grouped(_stream(engine, call_q))
    finding_groups = _grouped(_stream(engine, finding_q))
    for row in _stream(engine, session_q):
        turn_rows = turn_groups.take(row.id)
        call_rows = call_groups.take(row.id)
        found: dict[int, list[FindingRecord]] = defaultdict(list)
        for f in finding_groups.take(row.id):
            found[f.tool_call_id].append(FindingRecord(f.code, f.message, f.start, f.end))
        yield _rebuild(row, turn_rows, call_rows, found, children.get(row.id, ()), keys)


def _rebuild(row, turn_rows, call_rows, found, child_ids, keys) -> StoredSession:
    record = SessionRecord(
        key=row.key,
        target=row.target_name,
        scenario=row.scenario,
        repeat=row.repeat,
        status=row.status,
        error=row.error,
        parent_key=keys.get(row.parent_id),
        tags=list(row.tags),
        handshake=HandshakeResult(
            row.handshake_required,
            row.handshake_done,
            bool(row.handshake_completed),
            row.handshake_missed_step,
        ),
        messages=row.messages,
        turns=[TurnRecord(**{f: getattr(t, f) for f in _TURN_FIELDS}) for t in turn_rows],
        calls=[
            CallRecord(
                primary=c.primary_code,
                findings=found.get(c.id, []),
                child_key=keys.get(c.child_session_id),
                **{f: getattr(c, f) for f in _CALL_FIELDS},
            )
            for c in call_rows
        ],
        started_at=row.started_at,
        finished_at=row.finished_at,
        source=row.source,
        schema_version=row.schema_version,
    )
    return StoredSession(
        id=row.id,
        run_id=row.run_id,
        target=row.target_name,
        record=record,
        parent_id=row.parent_id,
        child_ids=tuple(child_ids),
        child_links=tuple(
            (c.index, c.child_session_id) for c in call_rows if c.child_session_id is not None
        ),
    )


class _grouped:
    """Rows ordered by ``session_id``, handed out one session at a time (a merge join)."""

    def __init__(self, rows: Iterator):
        self._rows = rows
        self._head = next(rows, None)

    def take(self, session_id: int) -> list:
        out = []
        while self._head is not None and self._head.session_id <= session_id:
            if self._head.session_id == session_id:
                out.append(self._head)
            self._head = next(self._rows, None)
        return out


def _child_ids(engine: Engine, run_ids: list[int]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    with engine.connect() as conn:
        for sid, pid in conn.execute(
            select(sessions.c.id, sessions.c.parent_id)
            .where(sessions.c.run_id.in_(run_ids), sessions.c.parent_id.is_not(None))
            .order_by(sessions.c.id)
        ):
            children[pid].append(sid)
    return children


def _keys(engine: Engine, run_ids: list[int]) -> dict[int, str]:
    """Session id to key, for sessions that are linked as a parent or a child."""
    with engine.connect() as conn:
        linked = select(sessions.c.parent_id).where(
            sessions.c.run_id.in_(run_ids), sessions.c.parent_id.is_not(None)
        ).union(
            select(tool_calls.c.child_session_id).where(
                tool_calls.c.run_id.in_(run_ids), tool_calls.c.child_session_id.is_not(None)
            )
        )
        rows = conn.execute(select(sessions.c.id, sessions.c.key).where(sessions.c.id.in_(linked)))
        return {sid: key for sid, key in rows}


def _stream(engine: Engine, query: Select) -> Iterator:
    with engine.connect() as conn:
        conn.execution_options(yield_per=STREAM_BATCH)
        yield from conn.execute(query)
