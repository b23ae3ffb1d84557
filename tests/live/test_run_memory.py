"""A run holds nothing per session it played: its memory is flat in the sessions played.

BENCHMARKS.md ("Live runs", memory) measured the harness at 64 sessions in flight: its
peak grew with the sessions played until SQLite's statement cache was bounded
(tests/store/test_store_bulk.py pins that one).  These pin the Python side: once a session is
stored, none of its records, turns, calls or work item is kept by the recorder, the
writer, the tally or the plan, so the objects alive during a run do not grow with the
sessions played.  Counts, not timings.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from agent_eval import testhook
from agent_eval.live.client import Target
from agent_eval.live.run import WorkItem, play_run, start_run
from agent_eval.scenario import load_suite
from agent_eval.scenario.select import select_scenarios
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.transcript import SessionRecord

SUITE = Path(__file__).resolve().parents[2] / "scenarios" / "ralf"
TARGET = "memory-probe"  # no other test's sessions are counted: only this target's
CONCURRENCY = 4


def ours(o: object) -> bool:
    """A session record or work item of this module's run (other tests' may be alive)."""
    if isinstance(o, SessionRecord):
        return o.target == TARGET
    return isinstance(o, WorkItem) and o.target.name == TARGET


def alive() -> Counter[str]:
    """How many session records and work items of this module's run are alive now, with
    the turns and calls those records hold."""
    gc.collect()
    held = [o for o in gc.get_objects() if ours(o)]
    out = Counter(type(o).__name__ for o in held)
    for record in held:
        if isinstance(record, SessionRecord):
            out["TurnRecord"] += len(record.turns)
            out["CallRecord"] += len(record.calls)
    return +out


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """A run of 3 scenarios x 40 repeats (120 sessions) at concurrency 4 against the
    simulator, held (``testhook``) once exactly 110 sessions are stored: then, from
    another thread, the keys of the sessions stored and of every top-level session
    record and work item alive; after the run, what is alive."""
    suite = select_scenarios(load_suite(SUITE), include=["db-*"])
    repeats = 40
    tmp = tmp_path_factory.mktemp("mem")
    hold = tmp / "hold"
    seen: dict[str, set[str]] = {}
    with pytest.MonkeyPatch.context() as env, run_sim_in_thread("disciplined", suite=SUITE) as url:
        env.setenv(testhook.HOLD, str(hold))
        env.setenv(testhook.HOLD_AFTER, "110")
        store = open_store(str(tmp / "run.db"))
        target = Target(name=TARGET, base_url=url, model="sim-disciplined", concurrency=CONCURRENCY)
        run_id = start_run(store, suite, [target], repeats, label=None, server_models={})

        def look() -> None:  # while the run holds: the writer idle, the loop waiting
            deadline = time.monotonic() + 60
            while not hold.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            gc.collect()
            held = [o for o in gc.get_objects() if ours(o)]
            seen["stored"] = store.finished_keys(run_id)
            seen["records"] = {
                o.key for o in held if isinstance(o, SessionRecord) and o.parent_key is None
            }
            seen["items"] = {o.key for o in held if isinstance(o, WorkItem)}
            hold.unlink()

        looker = threading.Thread(target=look)
        looker.start()
        tally = play_run(store, run_id, suite, [target], repeats)
        looker.join()
        after = alive()  # the run over: nothing of it is kept
        stored = store.finished_keys(run_id)
        store.close()
    return len(suite.top_level()) * repeats, tally, seen, after, stored


def test_every_planned_session_was_played_and_stored(played):
    planned, tally, _seen, _after, stored = played
    assert planned == 120
    assert tally.done == planned
    assert len(stored) == planned


def test_nothing_of_a_played_session_is_alive_after_the_run(played):
    _planned, _tally, _seen, after, _stored = played
    assert after == Counter()


def test_no_stored_session_is_kept_while_the_run_plays(played):
    """Held after 110 of 120 sessions stored: alive are the sessions in flight or handed
    over and not yet written (at most one a slot), the plan's items not yet played, and
    of the 110 stored at most each slot's last one: not the batch the writer wrote, not
    the plan's list.  So what a run holds does not grow with the sessions it played."""
    _planned, _tally, seen, _after, _stored = played
    stored, records, items = seen["stored"], seen["records"], seen["items"]
    assert len(stored) == 110
    assert len(records & stored) <= CONCURRENCY
    assert len(items & stored) <= CONCURRENCY
    assert len(items) <= 120 - 110 + CONCURRENCY
