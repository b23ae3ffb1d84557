"""Each turn's exact request is stored (for ``replay``), with repeated messages kept once.

Runs against SQLite and PostgreSQL (the ``store`` fixture).  The end-to-end check that a
live run stores the request it really sent is in tests/live/test_run_e2e.py.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import func, select
from support.factories import add_run

from agent_eval.live.replay import SKIPS, plan_replay
from agent_eval.store.caps import STORED_TEXT_CHARS
from agent_eval.store.requests import (
    join_request,
    load_requests,
    prune_blobs,
    save_blobs,
    split_request,
)
from agent_eval.store.schema import request_blobs
from agent_eval.transcript import CallRecord, SessionRecord, TurnRecord

SYSTEM = {"role": "system", "content": "You are a RALF worker. " * 2000}  # ~46 kB, shared
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def request(*user_turns: str, **extra) -> dict:
    messages = [SYSTEM] + [{"role": "user", "content": u} for u in user_turns]
    return {"model": "qwen-27b", "messages": messages, "temperature": 0.2, "tools": TOOLS,
            "tool_choice": "auto", "max_tokens": 512, **extra}


def session(key: str, *requests: dict) -> SessionRecord:
    return SessionRecord(key=key, target="qwen-27b", scenario="sc",
                         turns=[TurnRecord(index=i, request=r) for i, r in enumerate(requests)])


@pytest.fixture
def run_id(store) -> int:
    return add_run(store, label=None, targets=("qwen-27b",), base_url="http://x")


def blob_count(store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(request_blobs)).scalar_one()


def test_split_then_join_gives_back_the_exact_request_in_its_key_order():
    sent = request("first", "second", stream=True, extra={"top_k": 20, "nested": [1, None]})
    ref, blobs = split_request(sent)
    back = join_request(ref, blobs)
    assert back == sent
    assert set(back) == set(sent)
    assert len(ref["messages"]) == 3 and "tools" in ref and "capped" not in ref
    assert ref["fields"]["temperature"] == 0.2


def test_a_stored_request_reads_back_exactly_and_shared_messages_are_stored_once(store, run_id):
    turns = [request("task"), request("task", "more"), request("task", "more", "again")]
    other = [request("task")]  # a second session: same system prompt, same first message
    sid, _ = store.record_sessions(run_id, [session("a", *turns), session("b", *other)])
    loaded = store.load_session(sid).record.turns
    assert [t.request for t in loaded] == turns
    # distinct blobs: the system prompt, three user messages, the tool list
    assert blob_count(store) == 5


def test_a_turn_without_a_request_stays_without_one(store, run_id):
    sid, = store.record_sessions(run_id, [session("a", None, request("x"))])
    loaded = store.load_session(sid).record.turns
    assert loaded[0].request is None and loaded[1].request == request("x")
    with store.engine.connect() as conn:
        assert set(load_requests(conn, sid)) == {1}


def test_a_request_over_the_cap_is_stored_capped_and_marked_not_exact(store, run_id):
    huge = request("y" * (2 * STORED_TEXT_CHARS))
    sid, = store.record_sessions(run_id, [session("a", huge)])
    with store.engine.connect() as conn:
        kept = load_requests(conn, sid)[0]
    assert kept.capped is True
    text = kept.request["messages"][1]["content"]
    assert text.endswith(f"stored {STORED_TEXT_CHARS} of {2 * STORED_TEXT_CHARS} characters; "
                         "the rest was cut]")
    assert store.load_session(sid).record.turns[0].request is None  # not the exact context


def test_two_writers_storing_the_same_prompt_do_not_collide(store, run_id):
    store.record_sessions(run_id, [session("a", request("x"))])
    store.record_sessions(run_id, [session("b", request("x"))])
    assert blob_count(store) == 3  # system, user, tools: the second write skipped them


# retention: each blob keeps the last day it was used; prune_blobs deletes the unseen ones

def seen_on(store) -> dict[str, date]:
    with store.engine.connect() as conn:
        return dict(conn.execute(select(request_blobs.c.hash, request_blobs.c.seen_on)).all())


def save(store, blobs: dict[str, str], day: date) -> None:
    with store.engine.begin() as conn:
        save_blobs(conn, blobs, today=day)


def test_a_blob_used_again_on_a_later_day_is_marked_seen_that_day_and_not_before(store):
    day = date(2026, 11, 1)
    save(store, {"a" * 64: "system", "b" * 64: "task"}, day)
    save(store, {"a" * 64: "system"}, day + timedelta(days=3))
    save(store, {"a" * 64: "system"}, day + timedelta(days=2))  # a late writer: no step back
    assert seen_on(store) == {"a" * 64: day + timedelta(days=3), "b" * 64: day}


def test_pruning_deletes_only_the_texts_unseen_for_the_kept_days(store):
    day = date(2026, 11, 20)
    save(store, {"o" * 64: "old"}, day - timedelta(days=7))
    save(store, {"e" * 64: "edge"}, day - timedelta(days=6))
    save(store, {"n" * 64: "new"}, day)
    with store.engine.begin() as conn:
        assert prune_blobs(conn, 7, today=day) == 1  # today and the six days before are kept
    assert set(seen_on(store)) == {"e" * 64, "n" * 64}
    with store.engine.begin() as conn, pytest.raises(ValueError, match="at least 1"):
        prune_blobs(conn, 0, today=day)


def test_a_turn_whose_texts_were_pruned_reads_as_without_a_request_and_replay_names_why(
        store, run_id):
    shared, alone = request("task"), request("task", "an old detail")
    record = session("a", shared, alone)
    record.calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}",
                               decision="allow") for i in (0, 1)]
    sid, = store.record_sessions(run_id, [record])
    with store.engine.begin() as conn:  # the old detail was last used long ago
        conn.execute(request_blobs.update()
                     .where(request_blobs.c.body.contains("an old detail"))
                     .values(seen_on=date(2020, 1, 1)))
    assert store.prune_requests(30) == 1
    loaded = store.load_session(sid).record.turns
    assert loaded[0].request == shared and loaded[1].request is None
    refs = store.request_refs(run_id)[sid]
    assert "pruned" not in refs[0] and refs[1]["pruned"] is True
    plan = plan_replay(store.session_rows([run_id]), store.call_rows([run_id]),
                       store.request_refs(run_id))
    assert [c.turn for c in plan.contexts] == [0]
    assert plan.skipped == {"pruned": 1}
    assert "retention" in SKIPS["pruned"]


def test_many_blobs_in_one_save_are_stored_and_upserted_in_statements_of_bounded_size(store):
    """A batch bigger than one statement may bind: on SQLite the rows go in multi-row
    statements cut to the connection's parameter limit (lowered here to 40: 13 rows a
    statement), on PostgreSQL in one executemany; every row stored once, and a later
    day's save of half of them marks just those seen, the rest untouched."""
    import sqlite3

    day = date(2026, 11, 1)
    blobs = {f"{i:064x}": f"text {i}" for i in range(1_234)}
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.connection.dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 40)
        save_blobs(conn, blobs, today=day)
        later = {h: t for n, (h, t) in enumerate(blobs.items()) if n % 2}
        save_blobs(conn, later, today=day + timedelta(days=1))
    with store.engine.connect() as conn:
        stored = dict(conn.execute(select(request_blobs.c.hash, request_blobs.c.body)).all())
    assert stored == blobs
    marks = seen_on(store)
    assert [marks[h] for h in blobs] == [day + timedelta(days=n % 2) for n in range(1_234)]
