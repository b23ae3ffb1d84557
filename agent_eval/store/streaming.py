"""Streaming every session of a run back in full (``Store.iter_sessions``).

``Store.load_session`` costs five queries per session: fine for ``agent-eval show``, far
too slow for a report of 10,000 sessions.  Here a hundred sessions at a time are read
with four queries (sessions, turns, calls, findings) over their id range, each served in
order by an index, so each session is rebuilt once, handed on and dropped: memory stays
flat and the database sees four statements per hundred sessions.  Both paths rebuild
through ``rebuild_session``, so a session read either way is the same record.

The report's session files need less than a whole record: ``stream_transcripts`` runs
the same queries over only the columns a transcript page shows, as rows
(``Store.iter_transcripts``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Select, Text, cast, select

from agent_eval.store.schema import findings, sessions, targets, tool_calls, turns
from agent_eval.store.sessions import StoredSession, rebuild_session
from agent_eval.transcript import ExitState, FindingRecord

CHUNK = 100  # sessions read per four queries


def stream_sessions(engine: Engine, run_ids: Iterable[int],
                    id_range: tuple[int, int] | None = None) -> Iterator[StoredSession]:
    """Every session of the runs, in id order, rebuilt in full (turns, calls, findings,
    messages, parent and child links), each exactly once; only ids ``first..last``
    (inclusive) when ``id_range`` is given."""
    ids = list(run_ids)
    keys = _keys(engine, ids)
    merged = _merged(engine, ids, id_range, (*sessions.c, targets.c.name.label("target_name")),
                     tuple(turns.c), tuple(tool_calls.c),
                     (*findings.c, tool_calls.c.session_id))
    for row, turn_rows, call_rows, finding_rows, child_ids in merged:
        found: dict[int, list[FindingRecord]] = defaultdict(list)
        for f in finding_rows:
            found[f.tool_call_id].append(FindingRecord(f.code, f.message, f.start, f.end))
        yield rebuild_session(
            row, turn_rows, call_rows, found, child_ids,
            parent_key=keys.get(row.parent_id),
            child_key=lambda c: keys.get(c.child_session_id),
        )


class TranscriptHead(NamedTuple):
    """A session's own columns, as its drill-down shows them."""

    id: int
    run_id: int
    target_name: str
    key: str
    scenario: str
    repeat: int
    status: ExitState
    error: str | None
    tags: list[str]
    source: str
    handshake_required: int
    handshake_done: int
    handshake_completed: bool
    handshake_missed_step: str | None
    parent_id: int | None
    messages: str  # the stored JSON array, as text
    policy_agent: str | None = None  # whose agent CLI rules judged it, and how chosen
    policy_agent_via: str | None = None
    stack_faults: Any = None  # the stored JSON list of stack faults (AE5xx), or None


class TranscriptTurn(NamedTuple):
    session_id: int
    # named as the column and the record field; shadowing tuple.index (never called on a
    # row) is allowed at runtime, mypy flags any field of that name
    index: int  # type: ignore[assignment]
    content: str
    reasoning: str
    finish_reason: str | None
    latency_s: float | None
    ttft_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None


class TranscriptCall(NamedTuple):
    session_id: int
    id: int
    index: int  # type: ignore[assignment]  # as TranscriptTurn.index
    turn_index: int
    tool: str
    arguments: str
    command: str | None
    decision: str
    primary: str | None
    next_action: str | None
    output: str
    source_decision: str | None
    source_reason: str | None
    child_session_id: int | None
    leak: str | None = None


class TranscriptFinding(NamedTuple):
    session_id: int
    tool_call_id: int
    code: str
    message: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class SessionTranscript:
    """One session as its drill-down shows it, as rows (``Store.iter_transcripts``).

    Only the columns a transcript page shows are read, as plain named tuples (a
    SQLAlchemy row's attribute lookup costs ten times a tuple's), and of the stored
    ``messages`` only the leading ones up to the first system and the first user message
    (the page's system prompt and task): rebuilding whole records (``iter_sessions``)
    cost a 10,000-session report three times as much.  ``findings`` maps a call's id to
    its findings, in order.
    """

    session: TranscriptHead
    messages: list[Any]
    turns: list[TranscriptTurn]
    calls: list[TranscriptCall]
    findings: dict[int, list[TranscriptFinding]]
    child_ids: tuple[int, ...]


TRANSCRIPT_ROLES = ("system", "user")


def stream_transcripts(engine: Engine, run_ids: Iterable[int],
                       id_range: tuple[int, int] | None = None) -> Iterator[SessionTranscript]:
    """Every session of the runs as a :class:`SessionTranscript`, in id order, streamed
    like :func:`stream_sessions` (and ``id_range`` the same)."""
    s, t, c, f = sessions.c, turns.c, tool_calls.c, findings.c
    merged = _merged(
        engine, list(run_ids), id_range,
        (s.id, s.run_id, targets.c.name, s.key, s.scenario, s.repeat, s.status, s.error,
         s.tags, s.source, s.handshake_required, s.handshake_done, s.handshake_completed,
         s.handshake_missed_step, s.parent_id, cast(s.messages, Text), s.policy_agent,
         s.policy_agent_via, s.stack_faults),
        (t.session_id, t.index, t.content, t.reasoning, t.finish_reason, t.latency_s,
         t.ttft_s, t.prompt_tokens, t.completion_tokens),
        (c.session_id, c.id, c.index, c.turn_index, c.tool, c.arguments, c.command,
         c.decision, c.primary_code, c.next_action, c.output, c.source_decision,
         c.source_reason, c.child_session_id, c.leak),
        (c.session_id, f.tool_call_id, f.code, f.message, f.start, f.end),
        (TranscriptHead, TranscriptTurn, TranscriptCall, TranscriptFinding),
    )
    for head, turn_rows, call_rows, finding_rows, child_ids in merged:
        found: dict[int, list] = defaultdict(list)
        for finding in finding_rows:
            found[finding.tool_call_id].append(finding)
        yield SessionTranscript(head, leading_messages(head.messages, TRANSCRIPT_ROLES),
                                turn_rows, call_rows, found, tuple(child_ids))


def leading_messages(text: str, roles: Iterable[str]) -> list[Any]:
    """The stored messages (a JSON array, as text) up to the first one of every role in
    ``roles``: the whole list when a role never appears.  Elements are decoded one by one
    with the standard decoder and decoding stops there, so a long transcript's tail is
    never parsed; anything but an array is decoded whole."""
    wanted = set(roles)
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = _skip_space(text, 0)
    if not text.startswith("[", pos):
        found = json.loads(text)
        return found if isinstance(found, list) else [found]
    pos = _skip_space(text, pos + 1)
    while wanted and not text.startswith("]", pos):
        message, pos = decoder.raw_decode(text, pos)
        out.append(message)
        if isinstance(message, dict):
            wanted.discard(message.get("role"))
        pos = _skip_space(text, pos)
        if text.startswith(",", pos):
            pos = _skip_space(text, pos + 1)
    return out


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _merged(engine: Engine, ids: list[int], id_range: tuple[int, int] | None,
            session_cols: tuple, turn_cols: tuple, call_cols: tuple, finding_cols: tuple,
            row_types: tuple | None = None
            ) -> Iterator[tuple[Any, list, list, list, list[int]]]:
    """``(session row, its turn rows, call rows, finding rows, child ids)`` per session of
    the runs, in id order.  The runs' session ids are read first, then ``CHUNK`` sessions
    at a time four queries (the columns given, a ``session_id`` among each of the last
    three) over that id range, each served in order by an index: sorting a whole run's
    calls and turns (SQLite's temporary B-tree) cost more than reading them.  Rows of
    another run inside a range are read but never handed out.  ``row_types``: a named
    tuple class per query to hand rows out as, instead of SQLAlchemy rows."""
    children = _child_ids(engine, ids)
    own = select(sessions.c.id).where(sessions.c.run_id.in_(ids)).order_by(sessions.c.id)
    if id_range is not None:
        own = own.where(sessions.c.id.between(int(id_range[0]), int(id_range[1])))
    session_q = (
        select(*session_cols)
        .join(targets, targets.c.id == sessions.c.target_id)
        .order_by(sessions.c.id)
    )
    turn_q = select(*turn_cols).order_by(turns.c.session_id, turns.c.index)
    call_q = select(*call_cols).order_by(tool_calls.c.session_id, tool_calls.c.index)
    finding_q = (
        select(*finding_cols)
        .join(tool_calls, tool_calls.c.id == findings.c.tool_call_id)
        .order_by(tool_calls.c.session_id, findings.c.id)
    )
    head_t, turn_t, call_t, finding_t = row_types or (None,) * 4
    with engine.connect() as conn:
        session_ids = list(conn.execute(own).scalars())
        for n in range(0, len(session_ids), CHUNK):
            chunk = session_ids[n:n + CHUNK]
            heads = _rows(conn, session_q.where(sessions.c.id.in_(chunk)), head_t)
            first, last = chunk[0], chunk[-1]
            turn_rows = _by_session(
                conn, turn_q.where(turns.c.session_id.between(first, last)), turn_t)
            call_rows = _by_session(
                conn, call_q.where(tool_calls.c.session_id.between(first, last)), call_t)
            finding_rows = _by_session(
                conn, finding_q.where(tool_calls.c.session_id.between(first, last)), finding_t)
            for row in heads:
                yield (row, turn_rows.get(row.id, []), call_rows.get(row.id, []),
                       finding_rows.get(row.id, []), children.get(row.id, []))


def _rows(conn: Connection, query: Select, row_type) -> Sequence[Any]:
    rows = conn.execute(query).all()
    return rows if row_type is None else list(map(row_type._make, rows))


def _by_session(conn: Connection, query: Select, row_type) -> dict[int, list]:
    """The rows of ``query`` (which has a ``session_id`` column) by session, in order."""
    grouped: dict[int, list] = defaultdict(list)
    for row in _rows(conn, query, row_type):
        grouped[row.session_id].append(row)
    return grouped


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
