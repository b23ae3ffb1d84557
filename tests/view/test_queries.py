"""The list queries behind `runs`, `sessions`, `calls` and the viewer, on SQLite and
PostgreSQL, with the counts of support/view_fixtures.py asserted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from support.factories import add_run
from support.view_fixtures import ALLOWED, PIPED, judged, record

from agent_eval.errors import ConfigError
from agent_eval.store import CallFilter, SessionFilter, filter_from
from agent_eval.store.schema import findings, sessions, tool_calls


def test_runs_are_listed_newest_first_with_counts(filled):
    store, f = filled
    page = store.list_run_rows()
    assert [r.id for r in page.rows] == [f.run_id, f.old_run_id] and page.total == 2
    run = page.rows[0]
    assert run.targets == ("careful", "sloppy")
    assert (run.sessions, run.calls, run.errors) == (5, 6, 3)  # the fault holds no call
    assert run.per100 is None  # two targets: no one figure pooled across models
    assert run.by_target == (("careful", 4, 1), ("sloppy", 2, 2))
    assert run.target_rates() == [("careful", 25.0), ("sloppy", 100.0)]
    assert run.duration_s is not None and run.duration_s >= 0
    assert run.as_json()["errors_per100"] is None


def test_runs_filter_by_status_and_label(filled):
    store, f = filled
    assert [r.id for r in store.list_run_rows(status="failed").rows] == [f.old_run_id]
    assert store.list_run_rows(label="other").total == 0
    assert [r.id for r in store.list_run_rows(limit=1, offset=1).rows] == [f.old_run_id]


def test_sessions_come_failed_first(filled):
    store, f = filled
    page = store.list_sessions(SessionFilter(run_id=f.run_id))
    ids = f.ids
    assert [r.id for r in page.rows] == [ids["careful/pipe/0"], ids["sloppy/pipe/0"],
                                         ids["sloppy/fault/0"], ids["careful/pipe/0/child"],
                                         ids["careful/clean/0"]]
    first = page.rows[0]
    assert (first.denials, first.status_text, first.failed) == (
        1, "completed with 1 denial", True)
    assert page.rows[1].status_text == "abandoned with 2 denials"


@pytest.mark.parametrize(("filters", "keys"), [
    ({"failed": True}, ["careful/pipe/0", "sloppy/pipe/0", "sloppy/fault/0"]),
    ({"code": "AE301", "target": "sloppy"}, ["sloppy/pipe/0"]),
    ({"code": "AE304"}, ["sloppy/pipe/0"]),
    ({"scenario": "evaluator-step"}, ["careful/pipe/0/child"]),
    ({"tag": "db"}, ["sloppy/pipe/0"]),
    ({"tag": "ral"}, []),  # a tag matches whole, not as a substring
    ({"status": "error"}, ["sloppy/fault/0"]),
    ({"handshake": True}, ["careful/pipe/0", "sloppy/pipe/0"]),
    ({"search": "&& ls"}, ["sloppy/pipe/0"]),
    ({"search": "%"}, []),  # LIKE wildcards match themselves
    ({"decision": "deny", "target": "careful"}, ["careful/pipe/0"]),
    ({"failed": True, "code": "AE301"}, ["careful/pipe/0", "sloppy/pipe/0"]),
    ({"failed": True, "decision": "deny"}, ["careful/pipe/0", "sloppy/pipe/0"]),
    ({"failed": True, "decision": "allow"}, ["careful/pipe/0"]),
], ids=lambda v: str(v))
def test_session_filters(filled, filters, keys):
    store, f = filled
    page = store.list_sessions(SessionFilter(run_id=f.run_id, **filters), sort="id")
    assert [r.id for r in page.rows] == sorted(f.ids[k] for k in keys)
    assert page.total == len(keys)


@pytest.mark.parametrize("extra", [{}, {"code": "AE301"}, {"decision": "deny"}], ids=str)
def test_failed_sessions_in_failed_first_order_are_in_id_order(filled, extra):
    store, f = filled
    failed_first = store.list_sessions(SessionFilter(run_id=f.run_id, failed=True,
                                                             **extra))
    by_id = store.list_sessions(SessionFilter(run_id=f.run_id, failed=True, **extra),
                          sort="id")
    assert [r.id for r in failed_first.rows] == [r.id for r in by_id.rows]
    assert len(by_id.rows) == (3 if not extra else 2)


def test_handshake_sort_puts_incomplete_first(filled):
    store, f = filled
    page = store.list_sessions(SessionFilter(run_id=f.run_id, handshake=True),
                         sort="handshake")
    assert [r.id for r in page.rows] == [f.ids["sloppy/pipe/0"], f.ids["careful/pipe/0"]]


def test_sessions_paginate(filled):
    store, f = filled
    first = store.list_sessions(SessionFilter(run_id=f.run_id), limit=2)
    second = store.list_sessions(SessionFilter(run_id=f.run_id), limit=2, offset=2)
    assert first.total == second.total == 5 and first.has_next
    assert not {r.id for r in first.rows} & {r.id for r in second.rows}


def test_calls_come_denied_first_and_filter(filled):
    store, f = filled
    page = store.list_calls(CallFilter(run_id=f.run_id))
    assert [r.decision for r in page.rows] == ["deny"] * 3 + ["allow"] * 3
    assert [r.primary_code for r in page.rows[:3]] == ["AE301", "AE301", "AE304"]
    ae301 = store.list_calls(CallFilter(run_id=f.run_id, code="AE301",
                                                target="careful"))
    assert [(r.session_id, r.index) for r in ae301.rows] == [(f.ids["careful/pipe/0"], 0)]
    assert ae301.rows[0].next_action == "pivot"
    nxt = store.list_calls(CallFilter(run_id=f.run_id, next_action="retry-denied"))
    assert [r.primary_code for r in nxt.rows] == ["AE301"]
    assert store.list_calls(CallFilter(run_id=f.run_id, search="head -5")).total == 2


def test_neighbours_are_failed_sessions_of_the_same_filter(filled):
    store, f = filled
    ids = f.ids
    everything = SessionFilter(run_id=f.run_id)
    assert store.neighbour_sessions(everything, ids["careful/pipe/0"]) == (
        None, ids["sloppy/pipe/0"])
    assert store.neighbour_sessions(everything, ids["sloppy/pipe/0"]) == (
        ids["careful/pipe/0"], ids["sloppy/fault/0"])
    only_ae301 = SessionFilter(run_id=f.run_id, code="AE301")
    assert store.neighbour_sessions(only_ae301, ids["sloppy/pipe/0"]) == (
        ids["careful/pipe/0"], None)


def test_filter_from_loose_values():
    f = filter_from(SessionFilter, {"run_id": "3", "failed": "1", "target": "", "x": "y"})
    assert f == SessionFilter(run_id=3, failed=True)
    with pytest.raises(ConfigError, match="run_id must be a whole number"):
        filter_from(SessionFilter, {"run_id": "1; DROP TABLE runs"})


def test_delete_run_removes_everything_under_it(filled):
    store, f = filled
    assert store.delete_run(f.run_id) == 5
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(sessions)).scalar() == 1
        assert conn.execute(select(func.count()).select_from(tool_calls)).scalar() == 1
        assert conn.execute(select(func.count()).select_from(findings)).scalar() == 0
    with pytest.raises(ConfigError, match="no run with id"):
        store.delete_run(f.run_id)


def test_prune_keeps_newer_and_running_runs(filled):
    store, f = filled
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    assert store.prune_runs(tomorrow, dry_run=True) == [f.old_run_id, f.run_id]
    assert store.prune_runs(datetime.now(UTC) - timedelta(days=1)) == []
    store.set_run_status(f.run_id, "running")
    assert store.prune_runs(tomorrow) == [f.old_run_id]
    assert [r.id for r in store.list_run_rows().rows] == [f.run_id]


def test_failed_first_calls_page_across_the_denied_allowed_boundary(filled):
    store, f = filled
    everything = store.list_calls(CallFilter(run_id=f.run_id), limit=10).rows
    pages = [store.list_calls(CallFilter(run_id=f.run_id), limit=2, offset=o).rows
             for o in (0, 2, 4)]
    assert [r.id for p in pages for r in p] == [r.id for r in everything]
    assert [r.decision for r in pages[1]] == ["deny", "allow"]
    assert [r.id for r in everything[:3]] == sorted(r.id for r in everything[:3])


def test_a_scenario_tally_sums_its_sessions_of_every_status(store):
    """The run page's per-scenario row adds up sessions that ended differently (they come
    from the index grouped by status as well)."""
    run_id = add_run(store, label="s", suite="s", targets={"t": "m"})
    store.record_session(run_id, record("t/pipe/0", [judged(0, 0, PIPED),
                                                      judged(1, 1, ALLOWED)]))
    store.record_session(run_id, record("t/pipe/1", [judged(0, 0, PIPED)],
                                        status="abandoned"))
    store.record_session(run_id, record("t/pipe/2", [judged(0, 0, PIPED)], status="error"))
    store.record_session(run_id, record("t/clean/0", [judged(0, 0, ALLOWED)]))

    cell = store.summarize([run_id], ("scenario", "target"), with_turns=False,
                           detail="totals")[("pipe", "t")]
    assert (cell.sessions, cell.exit_states["completed"], cell.calls, cell.errors.k) == (
        2, 1, 3, 2)
