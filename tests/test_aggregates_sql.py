"""The GROUP BY aggregates (``agent_eval.store.aggregates``) give what the Python pass over
every row gives, on SQLite and PostgreSQL (the ``store`` fixture runs both).

One seeded store holds what every figure has to get right: two runs and three targets,
server-fault sessions (their calls must drop out), child sessions (folded into their
root for units), handshakes met, missed and absent, turns with and without latency,
replies whose calls were all denied (burned turns), every next action and unclassified
denials.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest

from agent_eval.metrics import repeat_stats, summarize
from agent_eval.metrics.clustered import session_units
from agent_eval.metrics.repeats import repeats_from_outcomes
from agent_eval.report.index import column_namer
from agent_eval.store.aggregates import summarize_sql
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
    assign_next_actions,
)

T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
CODES = ["AE301", "AE304", "AE101", None]  # None: a denial with no primary (unclassified)


def _session(rng: random.Random, key: str, target: str, scenario: str, repeat: int,
             **kw) -> SessionRecord:
    calls, turns = [], []
    for turn in range(rng.randint(0, 4)):
        turns.append(TurnRecord(
            index=turn, content="", reasoning="",
            latency_s=rng.choice([None, round(rng.uniform(0.1, 3), 3)]),
            ttft_s=rng.choice([None, round(rng.uniform(0.01, 0.5), 3)]),
            decode_tps=rng.choice([None, 40.0, 55.5]),
            prompt_tokens=rng.choice([None, 100, 250]), completion_tokens=rng.randint(0, 50),
            reasoning_tokens=rng.choice([None, 7])))
        for _ in range(rng.randint(0, 3)):
            denied = rng.random() < 0.4
            calls.append(CallRecord(
                index=len(calls), turn_index=turn, tool="bash", arguments="{}",
                decision="deny" if denied else "allow",
                primary=rng.choice(CODES) if denied else None, command="ls"))
    assign_next_actions(calls)
    start = T0 + timedelta(seconds=rng.randint(0, 3600))
    required = rng.choice([0, 0, 3])
    done = rng.randint(0, 3) if required else 0
    return SessionRecord(
        key=key, target=target, scenario=scenario, repeat=repeat, turns=turns, calls=calls,
        tags=rng.sample(["fast", "db", "web"], rng.randint(0, 2)),
        handshake=HandshakeResult(required, done, required > 0 and done == required,
                                  rng.choice(["claim.py", "report.py"])
                                  if required and done < required else None),
        started_at=start, finished_at=start + timedelta(seconds=rng.randint(1, 900)), **kw)


def _fill(store, seed: int = 3) -> list[int]:
    rng = random.Random(seed)
    run_ids = []
    for run in range(2):
        run_id = store.create_run(label=f"r{run}", kind="live", suite="s", config={},
                                  fingerprint={})
        for name in ("alpha", "beta", "gamma")[: 3 - run]:
            store.add_target(run_id, name=name, model=name, base_url="http://x/v1", settings={})
        records = []
        for target in ("alpha", "beta", "gamma")[: 3 - run]:
            for scenario in ("s1", "s2", "s3", "s4"):
                for repeat in range(3):
                    key = f"{target}/{scenario}/{repeat}"
                    status = rng.choice(["completed"] * 5 + ["abandoned", "error"])
                    records.append(_session(rng, key, target, scenario, repeat, status=status))
                    if rng.random() < 0.2:
                        records.append(_session(rng, key + "/child", target, "child", 0,
                                                parent_key=key))
        store.record_sessions(run_id, records)
        run_ids.append(run_id)
    return run_ids


def _python(store, ids, by, *, columns=False, turns=True):
    rows = store.session_rows(ids)
    if columns:
        name_of = column_namer(ids)
        rows = (dataclasses.replace(s, target=name_of(s)) for s in rows)
    return summarize(rows, store.call_rows(ids), store.turn_rows(ids) if turns else (), by=by)


def _same(sql, py) -> None:
    assert list(sql) == list(py)  # the same groups in the same order
    for name in py:
        a, b = sql[name], py[name]
        assert a.handshake.mean_done_share == pytest.approx(b.handshake.mean_done_share)
        assert a.speed.decode_tps_mean == pytest.approx(b.speed.decode_tps_mean)
        fixed = {"handshake": dataclasses.replace(a.handshake,
                                                  mean_done_share=b.handshake.mean_done_share),
                 "speed": dataclasses.replace(a.speed, decode_tps_mean=b.speed.decode_tps_mean)}
        assert dataclasses.replace(a, **fixed) == b, name


def test_summaries_match_the_python_pass(store):
    ids = _fill(store)
    py_all = _python(store, ids, "target", columns=True)
    assert sum(s.error_sessions for s in py_all.values()) > 0  # the store covers faults,
    assert sum(s.recovery.turns_burned for s in py_all.values()) > 0  # burned turns,
    assert sum(s.handshake.sessions for s in py_all.values()) > 0  # and handshakes
    assert any("unclassified" in s.classes for s in py_all.values())
    _same(summarize_sql(store.engine, ids, columns=True), py_all)
    for run_id in ids:
        for by in ("target", "scenario", "run", "all"):
            _same(summarize_sql(store.engine, [run_id], by=by), _python(store, [run_id], by))
    _same(summarize_sql(store.engine, ids, by="scenario", with_turns=False),
          _python(store, ids, "scenario", turns=False))


def test_units_and_repeats_match_the_python_pass(store):
    ids = _fill(store, seed=8)
    for run_id in ids:
        expected = session_units(store.session_rows([run_id]), store.call_rows([run_id]))
        assert store.session_units([run_id]) == expected
        assert any(u.errors for u in expected)
        assert (repeats_from_outcomes(store.session_outcomes([run_id]))
                == repeat_stats(store.session_rows([run_id]), store.call_rows([run_id])))


def test_tag_grouping_is_refused(store):
    with pytest.raises(ValueError, match="not tag"):
        summarize_sql(store.engine, [1], by="tag")


@pytest.mark.parametrize("detail", ["actions", "rates"])
def test_less_detail_keeps_every_rate(store, detail):
    """``gate`` (``rates``) and ``compare`` (``actions``) skip the passes for figures they
    do not print; every rate they do print is the full summary's."""
    ids = _fill(store, seed=4)
    full = summarize_sql(store.engine, ids, columns=True, with_turns=False)
    less = summarize_sql(store.engine, ids, columns=True, with_turns=False, detail=detail)
    assert list(less) == list(full)
    for name, a in full.items():
        b = less[name]
        assert (b.errors, b.classes, b.calls, b.sessions, b.error_sessions,
                b.handshake.completed) == (a.errors, a.classes, a.calls, a.sessions,
                                           a.error_sessions, a.handshake.completed)
        if detail == "actions":
            assert b.recovery.actions == a.recovery.actions
            assert b.recovery.denials == a.recovery.denials
