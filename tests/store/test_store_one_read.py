"""``Store.one_read``: inside it a statement the aggregator runs twice is run once, with the
same rows; outside it, and after it, every read goes to the database."""

from __future__ import annotations

from sqlalchemy import event

from agent_eval.transcript import CallRecord, SessionRecord


def _run(store) -> int:
    run_id = store.create_run(label="r", kind="proxy", suite="s", config={}, fingerprint={})
    store.add_target(run_id, name="t", model="m", base_url="http://127.0.0.1:1/v1", settings={})
    calls = [CallRecord(index=0, turn_index=0, tool="bash", arguments="{}", decision="deny",
                        primary="AE301", command="ls | head")]
    store.record_session(run_id, SessionRecord(key="t/a/0", scenario="a", repeat=0, target="t",
                                               status="completed", calls=calls))
    return run_id


def _counting(store):
    seen: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: seen.append(statement))
    return seen


def test_one_read_runs_a_repeated_statement_once(store):
    run_id = _run(store)
    seen = _counting(store)
    with store.one_read():
        first = store.summarize([run_id], with_turns=False, detail="totals")
        tallies = len(seen)
        again = store.summarize([run_id], with_turns=False, detail="totals")
        sums = store.cluster_stats([run_id]), store.cluster_stats([run_id])
    assert first == again and first["t"].calls == 1 and first["t"].errors.k == 1
    assert sums[0]["t"].scenarios == sums[1]["t"].scenarios
    session_sums = [s for s in seen if "sum(CASE WHEN sessions.side_request" in s]
    cells = [s for s in seen if "min(sessions.id)" in s]
    assert len(session_sums) == 1 and len(cells) == 1, seen
    assert len(seen) > tallies  # the cheap statements still ran
    seen.clear()
    store.summarize([run_id], with_turns=False, detail="totals")  # after it: read again
    assert any("sum(CASE WHEN sessions.side_request" in s for s in seen)


def test_outside_one_read_nothing_is_kept(store):
    run_id = _run(store)
    seen = _counting(store)
    store.summarize([run_id], with_turns=False, detail="totals")
    store.summarize([run_id], with_turns=False, detail="totals")
    assert len([s for s in seen if "sum(CASE WHEN sessions.side_request" in s]) == 2
