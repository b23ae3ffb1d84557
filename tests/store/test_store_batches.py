"""The store: batches of sessions: parents and children, ids, transactions, keys.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from sqlalchemy import func, select
from support.factories import T0, add_run, allowed, denied, session

from agent_eval.errors import ConfigError
from agent_eval.store.schema import (
    findings,
    sessions,
    tool_calls,
    turns,
)


def test_a_parent_and_its_children_link_up_in_one_batch(store, run_id):
    spawn = replace(
        allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"), child_key="p/child-0"
    )
    parent = session("p", calls=[allowed(0, "uv run scripts/db_query.py --sql q"), spawn])
    child = session("p/child-0", parent_key="p", scenario="step-evaluator")

    child_id, parent_id = store.record_sessions(run_id, [child, parent])

    loaded_parent = store.load_session(parent_id)
    assert loaded_parent.child_ids == (child_id,)
    assert loaded_parent.child_links == ((1, child_id),)
    assert loaded_parent.record.calls[1].child_key == "p/child-0"
    loaded_child = store.load_session(child_id)
    assert loaded_child.parent_id == parent_id
    assert loaded_child.record.parent_key == "p"


def test_streamed_sessions_equal_sessions_loaded_one_by_one(store, run_id):
    spawn = replace(
        allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"), child_key="p/child-0"
    )
    parent = session("p", calls=[denied(0, "ls | head", "AE301", start=3), spawn])
    child = session("p/child-0", parent_key="p", scenario="step-evaluator")
    other = session("q", target="qwen-35b-moe")
    ids = store.record_sessions(run_id, [child, parent, other])

    streamed = list(store.iter_sessions([run_id]))

    assert [s.id for s in streamed] == sorted(ids)
    assert streamed == [store.load_session(i) for i in sorted(ids)]


def test_streamed_transcripts_hold_the_rows_of_the_sessions(store, run_id):
    parent = session("p", calls=[denied(0, "ls | head", "AE301", start=3)])
    other = session("q", target="qwen-35b-moe")
    ids = store.record_sessions(run_id, [parent, other])

    rows = list(store.iter_transcripts([run_id]))
    ranged = list(store.iter_transcripts([run_id], (max(ids), max(ids))))

    assert [r.session.id for r in rows] == sorted(ids)
    assert [r.session.id for r in ranged] == [max(ids)]
    first = rows[0]
    assert (first.session.key, first.session.target_name) == ("p", "qwen-27b")
    assert [(c.index, c.decision, c.primary, c.command) for c in first.calls] == [
        (0, "deny", "AE301", "ls | head")]
    assert [(f.code, f.start) for f in first.findings[first.calls[0].id]] == [("AE301", 3)]
    assert [m["role"] for m in first.messages] == [
        m["role"] for m in parent.messages[:2]]


def test_streams_of_a_run_leave_out_another_runs_sessions_between_its_own(store, run_id):
    other = add_run(store, label="other", suite="s", targets={"qwen-27b": "m"},
                    base_url="http://127.0.0.1:8000/v1")
    mine, theirs = [], []
    for n in range(3):  # ids interleave: mine, theirs, mine, theirs, ...
        mine += store.record_sessions(run_id, [session(f"m{n}", calls=[
            denied(0, f"ls {n} | head", "AE301", start=5)])])
        theirs += store.record_sessions(other, [session(f"t{n}", calls=[
            allowed(0, f"uv run scripts/db_query.py --sql {n}")])])

    rows = list(store.iter_transcripts([run_id]))
    whole = list(store.iter_sessions([run_id]))

    assert [r.session.id for r in rows] == [s.id for s in whole] == mine
    assert [c.command for r in rows for c in r.calls] == ["ls 0 | head", "ls 1 | head",
                                                           "ls 2 | head"]
    assert [c.command for s in whole for c in s.record.calls] == ["ls 0 | head",
                                                                  "ls 1 | head", "ls 2 | head"]
    assert all(len(r.findings) == 1 for r in rows)


@pytest.mark.parametrize(
    ("text", "roles"),
    [
        ('[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, '
         '{"role": "assistant", "content": "a"}]', ["system", "user"]),
        ('[ {"role":"user","content":"u"} ,\n{"role":"system","content":[1]},{"x":1}]',
         ["user", "system"]),
        ('[{"role": "user", "content": "u"}, {"role": "tool", "content": "t"}]',
         ["user", "tool"]),
        ("[]", []),
        ('{"role": "user"}', ["user"]),
    ],
    ids=["stops-after-both", "spaced-any-order", "no-system-whole-list", "empty", "not-a-list"],
)
def test_leading_messages_decodes_up_to_the_first_of_each_role(text, roles):
    import json

    from agent_eval.store.streaming import leading_messages

    found = leading_messages(text, ("system", "user"))
    assert [m.get("role") for m in found] == roles
    whole = json.loads(text)
    assert found == (whole[: len(found)] if isinstance(whole, list) else [whole])


def test_ids_are_taken_before_the_rows_go_in_and_every_link_holds(store, run_id):
    """A session's, call's and finding's ids are allocated before the insert (SQLite: after
    the largest, under the write lock; PostgreSQL: from the table's sequence), so links go
    in the rows: a parent before its child in the batch, a grandchild, findings on the
    right calls; a later batch continues after them, and a row the database numbers
    itself afterwards does not collide."""
    from sqlalchemy import func, insert, select

    from agent_eval.store.schema import targets

    def family(tag: str) -> list:
        parent = session(f"{tag}", calls=[
            denied(0, "ls | head", "AE301", start=3),
            replace(allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"),
                    child_key=f"{tag}/child")])
        child = session(f"{tag}/child", parent_key=tag, calls=[
            denied(0, "cat x | grep y", "AE302", start=6),
            replace(allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"),
                    child_key=f"{tag}/child/grand")])
        grand = session(f"{tag}/child/grand", parent_key=f"{tag}/child",
                        calls=[denied(0, "rm -rf /", "AE303", start=0)])
        return [parent, child, grand]

    first = store.record_sessions(run_id, family("a"))
    second = store.record_sessions(run_id, family("b"))
    assert first == sorted(first) and min(second) > max(first)
    for ids in (first, second):
        parent, child, grand = (store.load_session(i) for i in ids)
        assert (child.parent_id, grand.parent_id) == (ids[0], ids[1])
        assert parent.child_links == ((1, ids[1]),) and child.child_links == ((1, ids[2]),)
        assert [(c.findings[0].code if c.findings else None) for c in parent.record.calls] == [
            "AE301", None]
        assert grand.record.calls[0].findings[0].code == "AE303"
    with store.engine.begin() as conn:  # the database numbers a row itself after them
        target_id = conn.execute(select(targets.c.id).where(targets.c.run_id == run_id)).scalar()
        new_id = conn.execute(insert(sessions).values(
            run_id=run_id, target_id=target_id, key="direct", scenario="s", repeat=0,
            status="completed", tags=[], handshake_required=0, handshake_done=0,
            handshake_completed=False, n_turns=0, n_messages=0, n_calls=0, n_denied=0,
            messages=[], source="live", schema_version=1, started_at=T0,
            finished_at=T0).returning(sessions.c.id)).scalar()
        assert new_id > max(second)
        assert conn.execute(select(func.count()).select_from(sessions)).scalar() == 7


def test_a_child_may_link_to_a_parent_stored_earlier(store, run_id):
    parent_id = store.record_session(run_id, session("p"))

    child_id = store.record_session(run_id, session("p/child-0", parent_key="p"))

    assert store.load_session(child_id).parent_id == parent_id


@pytest.mark.parametrize(
    "bad_record, field",
    [
        pytest.param(session("b", target="llama-70b"), "target", id="unknown-target"),
        pytest.param(session("b", parent_key="nowhere"), "parent_key", id="unknown-parent"),
        pytest.param(
            session("b", calls=[replace(allowed(0, "uv run scripts/a.py"), child_key="gone")]),
            "child_key",
            id="unknown-child",
        ),
    ],
)
def test_a_batch_that_fails_midway_leaves_nothing_behind(store, run_id, bad_record, field):
    good = session("a", calls=[denied(0, "cd /path && uv run scripts/a.py", "AE304")])

    with pytest.raises(ConfigError, match=re.escape(field)) as caught:
        store.record_sessions(run_id, [good, bad_record])

    assert caught.value.field == field
    assert store.finished_keys(run_id) == set()
    with store.engine.connect() as conn:
        for table in (sessions, turns, tool_calls, findings):
            assert conn.execute(select(func.count()).select_from(table)).scalar() == 0


def test_a_session_key_is_stored_only_once(store, run_id):
    store.record_session(run_id, session("qwen-27b/email-search/0"))

    with pytest.raises(ConfigError, match="already holds session 'qwen-27b/email-search/0'"):
        store.record_session(run_id, session("qwen-27b/email-search/0"))


def test_a_batch_repeating_a_key_is_refused(store, run_id):
    with pytest.raises(ConfigError, match="appears twice"):
        store.record_sessions(run_id, [session("k"), session("k")])


def test_finished_keys_lists_every_stored_session_of_the_run_only(store, run_id):
    other = add_run(store, label=None, targets={"qwen-27b": "m"}, base_url="http://127.0.0.1")
    store.record_sessions(run_id, [session("a"), session("b", status="error", error="500")])
    store.record_session(other, session("c"))

    assert store.finished_keys(run_id) == {"a", "b"}
    assert store.find_session(run_id, "c") is None
