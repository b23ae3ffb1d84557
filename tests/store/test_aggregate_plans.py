"""How the aggregator reads a run: the indexes its queries use, not how fast they run.

At a million calls two reads decide whether ``gate`` and ``compare`` take half a second or
two: the session sums must stay one range of the covering ``ix_sessions_run_target_status``
(side requests told apart by a column it holds, not by a ``LIKE`` on the tags, which read
every session's row), and the leak counts must read the partial ``ix_tool_calls_run_leak``
(SQLite's planner took ``ix_tool_calls_breakdown`` for one run and read every call).  The
plans are SQLite's ``EXPLAIN QUERY PLAN``; on PostgreSQL, with sequential scans off (a
tiny table is cheaper to scan), that the partial index can answer the leak counts.
"""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import event, select, text
from support.factories import add_run

from agent_eval.store import database
from agent_eval.store.schema import sessions
from agent_eval.transcript import CallRecord, HandshakeResult, SessionRecord

GATE_DETAIL = "rates"  # what gate and compare ask the aggregator for


def _record(key: str, tags: tuple[str, ...] = (), status: str = "completed",
            leak: str | None = None) -> SessionRecord:
    calls = [CallRecord(index=0, turn_index=0, tool="bash", arguments="{}", decision="allow",
                        command="uv run scripts/db_query.py", leak=leak),
             CallRecord(index=1, turn_index=0, tool="bash", arguments="{}", decision="deny",
                        primary="AE301", command="ls | head")]
    return SessionRecord(key=key, scenario="s1", repeat=0, target="t", status=status,
                         calls=calls, turns=[], messages=[], tags=list(tags),
                         handshake=HandshakeResult(required=0, done=0, completed=False))


@pytest.fixture
def run(store):
    run_id = add_run(store, label="r", kind="proxy", suite="s", targets={"t": "m"})
    store.record_session(run_id, _record("t/a/0", leak="AE304"))
    store.record_session(run_id, _record("t/b/0", tags=("side-request", "side:title"),
                                         leak="AE303"))
    store.record_session(run_id, _record("t/c/0", status="error", leak="AE303"))
    return store, run_id


def _statements(store, fn) -> list[tuple[str, object]]:
    seen: list[tuple[str, object]] = []

    def spy(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, params))

    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        fn()
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    return seen


def _sqlite_plan(store, statement: str, params) -> str:
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        return " | ".join(r[-1] for r in raw.execute("EXPLAIN QUERY PLAN " + statement,
                                                      params))


def test_side_requests_and_error_sessions_stay_out_of_the_figures(run):
    store, run_id = run
    summary = store.summarize([run_id], with_turns=False, detail=GATE_DETAIL)["t"]
    assert (summary.sessions, summary.side_requests, summary.error_sessions) == (1, 1, 1)
    assert summary.calls == 2 and dict(summary.leaks) == {"AE304": 1}


def test_a_session_tagged_side_request_is_stored_as_one(run):
    store, run_id = run
    with store.engine.connect() as conn:
        flags = dict(conn.execute(select(sessions.c.key, sessions.c.side_request)
                                  .where(sessions.c.run_id == run_id)).all())
    assert flags == {"t/a/0": False, "t/b/0": True, "t/c/0": False}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_gate_reads_sessions_from_the_covering_index_and_leaks_from_their_own(run):
    store, run_id = run

    def gate_reads():
        store.summarize([run_id], with_turns=False, detail=GATE_DETAIL)
        store.cluster_stats([run_id])
        store.cluster_stats([run_id], passes=True)

    plans = {statement: _sqlite_plan(store, statement, params)
             for statement, params in _statements(store, gate_reads)}
    on_sessions = [p for s, p in plans.items() if "FROM sessions" in s.split("WHERE")[0]
                   and "JOIN" not in s and "sessions.parent_id >" not in s
                   and "stack_faults IS NOT NULL" not in s]
    assert on_sessions
    assert all("COVERING INDEX ix_sessions_run_target_status" in p for p in on_sessions), plans
    # whether the run holds child sessions: a range of the parents' index, not every
    # session of every run (``IS NOT NULL`` scanned the table)
    nested = [p for s, p in plans.items() if "sessions.parent_id >" in s]
    assert nested and all("USING INDEX ix_sessions_parent" in p for p in nested), nested
    # the few sessions holding stack faults: their own partial index, not every session row
    stack = [p for s, p in plans.items() if "stack_faults IS NOT NULL" in s]
    assert len(stack) == 1 and "ix_sessions_run_stack_faults" in stack[0], stack
    leaks = [p for s, p in plans.items() if "tool_calls.leak IS NOT NULL" in s]
    assert len(leaks) == 2  # the run's leaks, minus those of its uncounted sessions
    assert all("ix_tool_calls_run_leak" in p for p in leaks), leaks


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_clustered_sums_of_several_runs_need_no_sort(store):
    """The runs page and the label's trend read several runs' clustered sums at once:
    grouped by run too, they stay in the covering index's order."""
    ids = []
    for label in ("a", "b"):
        run_id = store.create_run(label=label, kind="proxy", suite="s", config={},
                                  fingerprint={})
        store.add_target(run_id, name="t", model="m", base_url="http://127.0.0.1:1/v1",
                         settings={})
        store.record_session(run_id, _record(f"t/{label}/0"))
        ids.append(run_id)
    found = [(s, p) for s, p in _statements(store, lambda: store.cluster_stats(ids))
             if "GROUP BY" in s]
    assert len(found) == 1
    plan = _sqlite_plan(store, *found[0])
    assert "TEMP B-TREE" not in plan and "ix_sessions_run_target_status" in plan, plan


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_class_sums_look_each_session_up_by_id(run):
    """``compare``'s per-class sums: each (session, class) group of the denied calls finds
    its session by id, not through an index SQLite builds per query over every session."""
    store, run_id = run
    found = [(s, p) for s, p in _statements(store, lambda: store.cluster_stats(
        [run_id], classes=True)) if "k * anon_1.k" in s]
    assert len(found) == 1
    plan = _sqlite_plan(store, *found[0])
    assert "INTEGER PRIMARY KEY" in plan and "AUTOMATIC" not in plan, plan


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_postgresql_gives_the_class_sums_room_for_their_transaction(run):
    """With the default 4 MB the per-class sums' hash and sort spilled to disk at a million
    calls; ``SET LOCAL`` gives them room until their transaction ends, and no longer."""
    store, run_id = run
    seen: list[str] = []

    def spy(conn, cursor, statement, params, context, executemany):
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        store.cluster_stats([run_id], classes=True)
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    sets = [i for i, s in enumerate(seen) if s.startswith("SET LOCAL work_mem")]
    assert len(sets) == 1 and "k * anon_1.k" in seen[sets[0] + 1], seen
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW work_mem").scalar_one() != "64MB"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_by_agent_without_agents_needs_no_sort(run):
    """The run page's errors by agent, when no session was judged under an agent CLI's
    rules: one key for all, so the sessions are not grouped (nor sorted) by it."""
    store, run_id = run
    found = _statements(store, lambda: store.summarize([run_id], ("agent", "target"),
                                                       with_turns=False, detail="totals"))
    tally = [(s, p) for s, p in found if "sum(CASE WHEN sessions.side_request" in s]
    assert len(tally) == 1 and "policy_agent" not in tally[0][0].split("FROM")[0]
    assert "TEMP B-TREE" not in _sqlite_plan(store, *tally[0])
    figures = store.summarize([run_id], ("agent", "target"), with_turns=False,
                              detail="totals")
    assert list(figures) == [("(allow-list)", "t")] and figures[("(allow-list)", "t")].calls == 2


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_session_sums_need_no_sort(run):
    """Side requests counted apart in the same rows: grouped in the index's order."""
    store, run_id = run
    found = _statements(store, lambda: store.summarize([run_id], with_turns=False,
                                                       detail=GATE_DETAIL))
    tally = [(s, p) for s, p in found if "sum(CASE WHEN sessions.side_request" in s]
    assert len(tally) == 1
    assert "TEMP B-TREE" not in _sqlite_plan(store, *tally[0])


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
def test_postgresql_can_answer_the_leak_counts_from_the_partial_index(run):
    store, run_id = run
    found = [(s, p) for s, p in _statements(
        store, lambda: store.summarize([run_id], with_turns=False, detail=GATE_DETAIL))
             if "tool_calls.leak IS NOT NULL" in s]
    assert found
    with store.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, params in found:
            plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement,
                                                                params))
            assert "ix_tool_calls_run_leak" in plan, plan


def test_the_migration_marks_the_side_requests_stored_before_it(store):
    run_id = add_run(store, label="r", kind="proxy", suite="s", targets={"t": "m"})
    store.record_session(run_id, _record("t/a/0"))
    store.record_session(run_id, _record("t/b/0", tags=("side-request",)))
    engine = store.engine
    for target in ("policy_agents", "head"):
        with engine.connect() as conn, conn.begin():
            config = database._alembic_config(conn)
            if target == "head":
                command.upgrade(config, target)
            else:
                command.downgrade(config, target)
                conn.execute(text("UPDATE sessions SET tags = :tags WHERE key = 't/b/0'"),
                             {"tags": '["db", "side-request"]'})
    summary = store.summarize([run_id], with_turns=False, detail=GATE_DETAIL)["t"]
    assert (summary.sessions, summary.side_requests) == (1, 1)
