"""Writing finished sessions, and reading one back in full for the drill-down.

A batch of sessions (a parent and the children it spawned, or any set) is written in one
transaction: either every session, turn, call and finding of the batch is stored, or none
is.  Model text is capped on the way in (``caps.py``).  Rows go in with one driver-level executemany per
table and batch (``bulk.insert_rows``), so a batch of 200 sessions with 2,000 calls and 16,000
findings costs a handful of statements, not 18,000.  Everything the model wrote travels as
bound parameters.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, Engine, Table, bindparam, func, select, text, update
from sqlalchemy.exc import IntegrityError

from agent_eval.errors import ConfigError
from agent_eval.policy.schemas import canonical, tools_hash
from agent_eval.store.bulk import insert_rows
from agent_eval.store.caps import cap_session
from agent_eval.store.database import write_transaction
from agent_eval.store.requests import load_requests, save_blobs, split_request
from agent_eval.store.schema import (
    MAX_ID,
    findings,
    sessions,
    targets,
    tool_calls,
    tool_lists,
    turns,
)
from agent_eval.transcript import (
    EXIT_STATES,
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    StackFaultRecord,
    TurnRecord,
)
from agent_eval.wire.side import SIDE_REQUEST_TAG


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One stored session, rebuilt: its record as written plus the links around it.

    ``child_links`` pairs a call's index with the id of the child session it spawned.
    """

    id: int
    run_id: int
    target: str
    record: SessionRecord
    parent_id: int | None
    child_ids: tuple[int, ...]
    child_links: tuple[tuple[int, int], ...]


def record_sessions(engine: Engine, run_id: int, records: Sequence[SessionRecord]) -> list[int]:
    """Store ``records`` in one transaction; their ids, in the order given.

    Raises ConfigError, leaving the store untouched, when a record names a target not added
    to the run, repeats a key already stored (or twice in the batch), or links to a parent
    or child key found neither in the batch nor among the run's stored sessions.
    """
    if not records:
        return []
    try:
        with write_transaction(engine) as conn:
            return insert_sessions(conn, run_id, records)
    except IntegrityError:  # the unique (run_id, key) index: checked here, not before
        with engine.connect() as conn:
            stored = sorted(_ids_by_key(conn, run_id, [r.key for r in records]))
        which = f"session {stored[0]!r}" if stored else "a session of this batch"
        raise ConfigError(
            f"run {run_id} already holds {which}: a session is stored once; "
            "use --resume to skip stored sessions",
            field="key",
        ) from None


def insert_sessions(conn: Connection, run_id: int, records: Sequence[SessionRecord]) -> list[int]:
    """Insert a batch inside the caller's transaction (so a work item can be marked done
    in the same one, store/work.py); a stored key raises ``IntegrityError``."""
    capped = [cap_session(r) for r in records]  # a runaway reply never fills the disk
    _refuse_repeated_keys(capped)
    return _insert_batch(conn, run_id, capped)


def _refuse_repeated_keys(records: list[SessionRecord]) -> None:
    seen: set[str] = set()
    for record in records:
        if record.key in seen:
            raise ConfigError(f"session key {record.key!r} appears twice in one batch", field="key")
        indexes = [call.index for call in record.calls]
        if len(set(indexes)) != len(indexes):
            raise ConfigError(
                f"session {record.key!r}: two calls share an index; number calls 0, 1, 2, ...",
                field="calls.index",
            )
        if record.status not in EXIT_STATES:
            raise ConfigError(
                f"session {record.key!r}: status {record.status!r} is not one of "
                f"{', '.join(EXIT_STATES)}",
                field="status",
            )
        seen.add(record.key)


def _insert_batch(conn: Connection, run_id: int, records: list[SessionRecord]) -> list[int]:
    target_ids = dict(
        conn.execute(select(targets.c.name, targets.c.id).where(targets.c.run_id == run_id)).all()
    )
    for record in records:
        if record.target not in target_ids:
            raise ConfigError(
                f"session {record.key!r}: target {record.target!r} was not added to run "
                f"{run_id}: call add_target first",
                field="target",
            )
    batch_keys = [r.key for r in records]
    # ids taken before the rows go in (allocate_ids), so parents, children and findings
    # link in the rows themselves instead of being read back and updated after
    session_ids = allocate_ids(conn, sessions, len(records))
    id_by_key = dict(zip(batch_keys, session_ids, strict=True))
    linked = {r.parent_key for r in records if r.parent_key} | {
        c.child_key for r in records for c in r.calls if c.child_key
    }
    if missing := sorted(linked - id_by_key.keys()):
        id_by_key |= _ids_by_key(conn, run_id, missing)
    parents, later = _parent_ids(run_id, records, id_by_key)
    # a key stored before is refused by the unique (run_id, key) index: IntegrityError
    lists = _tool_lists(records)
    save_tool_lists(conn, lists)
    insert_rows(conn, sessions, [
        _session_values(run_id, target_ids[r.target], r, sid, pid)
        | {"tools_hash": lists[id(r)][0] if id(r) in lists else None}
        for r, sid, pid in zip(records, session_ids, parents, strict=True)
    ])
    if later:
        conn.execute(update(sessions).where(sessions.c.id == bindparam("sid"))
                     .values(parent_id=bindparam("pid")), later)

    blobs: dict[str, str] = {}
    seen: dict[int, tuple[str, bool]] = {}  # each message object serialised once a batch
    turn_rows = [
        _turn_values(sid, turn, blobs, seen)
        for sid, r in zip(session_ids, records, strict=True)
        for turn in r.turns
    ]
    save_blobs(conn, blobs)
    insert_rows(conn, turns, turn_rows)
    calls = [(sid, record, call) for sid, record in zip(session_ids, records, strict=True)
             for call in record.calls]
    call_ids = allocate_ids(conn, tool_calls, len(calls))
    call_rows = [
        _call_values(sid, run_id, target_ids[record.target], call, _resolve(
            id_by_key, call.child_key, run_id, f"{record.key} call {call.index}", "child_key"),
            cid)
        for cid, (sid, record, call) in zip(call_ids, calls, strict=True)
    ]
    insert_rows(conn, tool_calls, call_rows)
    insert_rows(conn, findings, [
        {"tool_call_id": cid, "code": f.code, "message": f.message, "start": f.start,
         "end": f.end}
        for cid, (_sid, _record, call) in zip(call_ids, calls, strict=True)
        for f in call.findings
    ])
    return list(session_ids)


def _tool_lists(records: list[SessionRecord]) -> dict[int, tuple[str, str]]:
    """``id(record)`` -> (hash, canonical JSON) of each record's offered tool list."""
    out: dict[int, tuple[str, str]] = {}
    for r in records:
        if r.offered_tools:
            text = canonical(r.offered_tools)
            out[id(r)] = (tools_hash(r.offered_tools), text)
    return out


def save_tool_lists(conn: Connection, lists: dict[int, tuple[str, str]]) -> None:
    """Insert the offered tool lists not stored yet (a hash already there is not an
    error: two writers may store the same list at once)."""
    rows = {h: text for h, text in lists.values()}
    if not rows:
        return
    have = set(conn.execute(select(tool_lists.c.hash).where(tool_lists.c.hash.in_(list(rows))))
               .scalars())
    fresh = [{"hash": h, "tools": text} for h, text in rows.items() if h not in have]
    if fresh:
        insert_rows(conn, tool_lists, fresh, _tool_list_insert)


def _tool_list_insert(dialect: Any) -> Any:
    """``INSERT ... ON CONFLICT (hash) DO NOTHING`` (SQLite and PostgreSQL share it)."""
    if dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(tool_lists).on_conflict_do_nothing(index_elements=["hash"])
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(tool_lists).on_conflict_do_nothing(index_elements=["hash"])


def offered_tool_lists(engine: Engine, run_id: int) -> list[tuple[str, dict[str, Any], int]]:
    """The tool lists a run's sessions were offered: ``(hash, {name: schema}, sessions)``,
    the most offered first.  More than one list in a run is schema drift between its
    sessions (``policy.schemas.tool_drift`` names the tools that changed)."""
    with engine.connect() as conn:
        counts = conn.execute(
            select(sessions.c.tools_hash, func.count())
            .where(sessions.c.run_id == run_id, sessions.c.tools_hash.is_not(None))
            .group_by(sessions.c.tools_hash)).all()
        if not counts:
            return []
        texts = dict(conn.execute(select(tool_lists.c.hash, tool_lists.c.tools)
                                  .where(tool_lists.c.hash.in_([h for h, _ in counts]))).all())
    out = [(h, json.loads(texts[h]) if h in texts else {}, n) for h, n in counts]
    return sorted(out, key=lambda item: (-item[2], item[0]))


def allocate_ids(conn: Connection, table: Table, n: int) -> list[int]:
    """``n`` primary keys for rows about to be inserted into ``table``, taken before the
    insert.  SQLite: the ones after the largest id, as SQLite itself would give them
    (every write here runs under ``BEGIN IMMEDIATE``, so no other writer can take them
    meanwhile); PostgreSQL: from the table's own sequence, as the server would."""
    if n == 0:
        return []
    if conn.dialect.name == "postgresql":
        taken = conn.execute(
            text("SELECT nextval(pg_get_serial_sequence(:table, 'id')) "
                 "FROM generate_series(1, :n)"), {"table": table.name, "n": n})
        return [row[0] for row in taken]
    first = (conn.execute(select(func.max(table.c.id))).scalar() or 0) + 1
    if first + n - 1 > MAX_ID:
        raise ConfigError(f"the store's {table.name} table is out of ids (over {MAX_ID:,})",
                          field="--db")
    return list(range(first, first + n))


def _parent_ids(run_id: int, records: list[SessionRecord], id_by_key: dict[str, int]
                ) -> tuple[list[int | None], list[dict[str, int]]]:
    """Each record's parent id as its row can carry it, and the links set after the
    insert: a parent stored before or earlier in the batch is in the row (its row is
    there when the foreign key is checked); one later in the batch, or the session
    itself, is linked by an UPDATE once every row is in."""
    position = {r.key: i for i, r in enumerate(records)}
    now: list[int | None] = []
    later: list[dict[str, int]] = []
    for i, r in enumerate(records):
        pid = _resolve(id_by_key, r.parent_key, run_id, r.key, "parent_key")
        if r.parent_key is not None and pid is not None and position.get(r.parent_key, -1) >= i:
            later.append({"sid": id_by_key[r.key], "pid": pid})
            pid = None
        now.append(pid)
    return now, later


def _resolve(
    id_by_key: dict[str, int], key: str | None, run_id: int, where: str, field: str
) -> int | None:
    if key is None:
        return None
    if key not in id_by_key:
        raise ConfigError(
            f"session {where}: links to session {key!r}, which is neither in this batch nor "
            f"stored in run {run_id}: record a parent together with its children",
            field=field,
        )
    return id_by_key[key]


def _ids_by_key(conn: Connection, run_id: int, keys: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        found |= dict(
            conn.execute(
                select(sessions.c.key, sessions.c.id).where(
                    sessions.c.run_id == run_id, sessions.c.key.in_(chunk)
                )
            ).all()
        )
    return found


def _session_values(run_id: int, target_id: int, r: SessionRecord, session_id: int,
                    parent_id: int | None) -> dict:
    return {
        "id": session_id,
        "run_id": run_id,
        "target_id": target_id,
        "key": r.key,
        "scenario": r.scenario,
        "repeat": r.repeat,
        "status": r.status,
        "error": r.error,
        "parent_id": parent_id,
        "tags": list(r.tags),
        "handshake_required": r.handshake.required,
        "handshake_done": r.handshake.done,
        "handshake_completed": r.handshake.completed,
        "handshake_missed_step": r.handshake.missed_step,
        "n_turns": len(r.turns),
        # model messages, as docs/design.md counts them: replies, not prompts or tool results
        "n_messages": sum(1 for m in r.messages if m.get("role") == "assistant"),
        "n_calls": len(r.calls),
        "n_denied": sum(1 for c in r.calls if c.decision == "deny"),
        "messages": r.messages,
        "source": r.source,
        "schema_version": r.schema_version,
        "protocol": r.protocol,
        "policy_agent": r.policy_agent,
        "policy_agent_via": r.policy_agent_via,
        "side_request": SIDE_REQUEST_TAG in r.tags,
        "policy_emulation": r.policy_emulation,
        "stack_faults": [f.as_dict() for f in r.stack_faults] or None,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
    }


_TURN_FIELDS = (
    "index content reasoning finish_reason prompt_tokens completion_tokens reasoning_tokens "
    "cached_tokens latency_s ttft_s decode_tps started_at"
).split()
_CALL_FIELDS = (
    "index turn_index call_id tool arguments command script decision next_action output "
    "source_decision source_reason leak"
).split()
# one C-level getter per row kind: rebuilding 10,000 sessions for a report reads ~1M fields
_turn_row_fields = attrgetter(*_TURN_FIELDS)
_call_row_fields = attrgetter(*_CALL_FIELDS)


def _turn_values(session_id: int, turn: TurnRecord, blobs: dict[str, str],
                 seen: dict[int, tuple[str, bool]]) -> dict:
    """The turn's row; its request's messages and tools go into ``blobs`` (hash → text)."""
    ref = None
    if turn.request is not None:
        ref, new = split_request(turn.request, seen=seen)
        blobs.update(new)
    return {"session_id": session_id, "request": ref} | {
        f: getattr(turn, f) for f in _TURN_FIELDS
    }


def _call_values(
    session_id: int, run_id: int, target_id: int, call: CallRecord, child_id: int | None,
    call_id: int,
) -> dict:
    return {
        "id": call_id,
        "session_id": session_id,
        "run_id": run_id,
        "target_id": target_id,
        "primary_code": call.primary,
        "child_session_id": child_id,
    } | {f: getattr(call, f) for f in _CALL_FIELDS}


def finished_keys(engine: Engine, run_id: int) -> set[str]:
    """Keys of every session stored for the run, whatever its status (for ``--resume``)."""
    with engine.connect() as conn:
        return set(
            conn.execute(select(sessions.c.key).where(sessions.c.run_id == run_id)).scalars()
        )


def find_session(engine: Engine, run_id: int, key: str) -> int | None:
    with engine.connect() as conn:
        return _ids_by_key(conn, run_id, [key]).get(key)


def load_session(engine: Engine, session_id: int) -> StoredSession:
    """The session rebuilt in full: turns, calls with findings, messages and links."""
    if not 0 <= session_id <= MAX_ID:
        raise ConfigError(f"no session with id {session_id} in this store", field="session")
    parent = sessions.alias("parent")
    child = sessions.alias("child")
    with engine.connect() as conn:
        row = conn.execute(
            select(sessions, targets.c.name.label("target_name"), parent.c.key.label("parent_key"))
            .join(targets, targets.c.id == sessions.c.target_id)
            .outerjoin(parent, parent.c.id == sessions.c.parent_id)
            .where(sessions.c.id == session_id)
        ).first()
        if row is None:
            raise ConfigError(f"no session with id {session_id} in this store", field="session")
        turn_rows = conn.execute(
            select(turns).where(turns.c.session_id == session_id).order_by(turns.c.index)
        ).all()
        call_rows = conn.execute(
            select(tool_calls, child.c.key.label("child_key"))
            .outerjoin(child, child.c.id == tool_calls.c.child_session_id)
            .where(tool_calls.c.session_id == session_id)
            .order_by(tool_calls.c.index)
        ).all()
        found = defaultdict(list)
        for f in conn.execute(
            select(findings)
            .join(tool_calls, tool_calls.c.id == findings.c.tool_call_id)
            .where(tool_calls.c.session_id == session_id)
            .order_by(findings.c.id)
        ):
            found[f.tool_call_id].append(FindingRecord(f.code, f.message, f.start, f.end))
        child_ids = (
            conn.execute(
                select(sessions.c.id)
                .where(sessions.c.parent_id == session_id)
                .order_by(sessions.c.id)
            )
            .scalars()
            .all()
        )
        stored_requests = load_requests(conn, session_id)
        offered = (conn.execute(select(tool_lists.c.tools)
                                .where(tool_lists.c.hash == row.tools_hash)).scalar()
                   if row.tools_hash else None)
    stored = rebuild_session(
        row, turn_rows, call_rows, found, child_ids,
        parent_key=row.parent_key, child_key=lambda c: c.child_key,
    )
    stored.record.offered_tools = json.loads(offered) if offered else None
    for turn in stored.record.turns:  # a capped request is no longer the exact context
        kept = stored_requests.get(turn.index)
        turn.request = kept.request if kept is not None and not kept.capped else None
    return stored


def rebuild_session(row, turn_rows, call_rows, found, child_ids, *, parent_key, child_key
                    ) -> StoredSession:
    """A stored session from its rows; ``child_key(call_row)`` names a call's child."""
    record = SessionRecord(
        key=row.key,
        target=row.target_name,
        scenario=row.scenario,
        repeat=row.repeat,
        status=row.status,
        error=row.error,
        parent_key=parent_key,
        tags=list(row.tags),
        handshake=HandshakeResult(
            row.handshake_required,
            row.handshake_done,
            bool(row.handshake_completed),
            row.handshake_missed_step,
        ),
        messages=row.messages,
        turns=[TurnRecord(**dict(zip(_TURN_FIELDS, _turn_row_fields(t), strict=True)))
               for t in turn_rows],
        calls=[
            CallRecord(
                primary=c.primary_code,
                findings=found.get(c.id, []),
                child_key=child_key(c),
                **dict(zip(_CALL_FIELDS, _call_row_fields(c), strict=True)),
            )
            for c in call_rows
        ],
        started_at=row.started_at,
        finished_at=row.finished_at,
        source=row.source,
        schema_version=row.schema_version,
        protocol=row.protocol,
        policy_agent=row.policy_agent,
        policy_agent_via=row.policy_agent_via,
        policy_emulation=row.policy_emulation,
        stack_faults=[StackFaultRecord.from_dict(f) for f in row.stack_faults or ()
                      if isinstance(f, dict)],
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
