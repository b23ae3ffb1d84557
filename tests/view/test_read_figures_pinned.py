"""The figures ``compare``, ``gate`` and the viewer's runs, run and compare pages read, pinned.

The queries behind them were reshaped for speed at a million calls (the clustered sums of
several runs grouped by run too, the per-class sums read from the sessions with a denial,
the by-agent figures grouped without a sort when no session names an agent); these values
were taken from the code before that, on this store, and every figure must stay as it was,
on SQLite and PostgreSQL.  Two runs of one label (the trend shows), two targets, scenarios
of one to five repeats, every class and an unclassified denial, server faults, a side
request, sessions without calls; in the second store some sessions are judged under an
agent CLI's rules.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest
from sqlalchemy import event

from agent_eval.store.cluster_stats import cluster_stats, run_cluster_stats
from agent_eval.transcript import CallRecord, SessionRecord
from agent_eval.view.overview import build_compare_page, build_run_page, build_runs_page

PINNED = Path(__file__).parents[1] / "fixtures" / "read_figures_pinned.json"
STAMP = re.compile(r"\d{4}-\d\d-\d\d")  # when the run started: not a figure
CODES = ["AE301", "AE304", "AE101", "AE311", None, ""]  # None and "": both unclassified


def _fill(store, seed: int, *, agents: bool) -> int:
    rng = random.Random(seed)
    run_id = store.create_run(label="nightly", kind="live", suite="s", config={},
                              fingerprint={})
    for name in ("alpha", "beta"):
        store.add_target(run_id, name=name, model=name, base_url="http://x/v1", settings={})
    records = []
    for target in ("alpha", "beta"):
        for s in range(5):
            scenario = f"s{s}"
            for repeat in range(1 if s == 0 else rng.randint(2, 5)):
                calls = []
                for i in range(rng.choice([0, 1, 3, 6])):
                    denied = rng.random() < rng.choice([0.0, 0.3, 0.7])
                    calls.append(CallRecord(index=i, turn_index=i, tool="bash",
                                            arguments="{}",
                                            decision="deny" if denied else "allow",
                                            primary=rng.choice(CODES) if denied else None,
                                            command="ls"))
                status = "completed" if s == 0 else rng.choice(
                    ["completed"] * 5 + ["abandoned", "error"])
                tags = ["side-request"] if rng.random() < 0.05 else []
                agent = rng.choice(["claude", "codex", None]) if agents else None
                records.append(SessionRecord(key=f"{target}/{scenario}/{repeat}",
                                             target=target, scenario=scenario, repeat=repeat,
                                             status=status, tags=tags, calls=calls,
                                             policy_agent=agent))
    store.record_sessions(run_id, records)
    return run_id


def _sums(s) -> tuple[int, ...]:
    return (s.g, s.k, s.n, s.kk, s.kn, s.nn)


def _stats(stats) -> dict:
    out = {}
    for name, target in stats.items():
        for scenario, s in target.scenarios.items():
            out[f"{name}/{scenario}"] = (
                s.sessions, _sums(s.errors),
                {code: _sums(v) for code, v in sorted(s.classes.items())},
                None if s.passes is None else (s.passes.n, s.passes.bits))
    return out


def _rate(r) -> list | None:
    if r is None:
        return None
    return [r.k, r.n, r.clusters, r.strata, r.by,
            *(None if x is None else round(x, 9) for x in (r.per100, r.lo100, r.hi100, r.deff))]


def _texts(rows) -> list[list[str]]:
    return [[cell.text for cell in row] for row in rows]


def _snapshot(store, a: int, b: int) -> dict:
    runs = build_runs_page(store, {})
    run = build_run_page(store, b)
    compare = build_compare_page(store, a, b, analysis=True)
    return {
        "compare sums": _stats(cluster_stats(store.engine, [b], passes=True, classes=True)),
        "gate sums": _stats(cluster_stats(store.engine, [b], classes=True)),
        "trend sums": _stats(cluster_stats(store.engine, [a, b], columns=True)),
        "runs sums": {f"{key[0] == b}/{key[1]}": _stats({"": v})
                      for key, v in run_cluster_stats(store.engine, [a, b]).items()},
        "runs page": [[t for t in row[1:] if not STAMP.match(t)] for row in _texts(runs.rows)],
        "runs clustered": [[_rate(r) for r in row.clustered]
                           for row in store.list_run_rows().rows],
        "run targets": _texts(run.target_rows),
        "run clustered": _texts(run.clustered.rows) + _texts(run.clustered.class_rows),
        "run agents": _texts(run.agent_rows),
        "run scenarios": _texts(run.scenario_rows),
        "run classes": _texts(run.class_rows),
        "compare rows": _texts(compare.rows),
        "compare analysis": [list(t.lines) for t in compare.analysis],
    }


def _dump(pinned: dict) -> str:
    """One line per figure, to read in a diff."""
    return "{\n" + ",\n".join(
        f" {json.dumps(mode)}: {{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}"
                                                  for k, v in figures.items()) + "\n }"
        for mode, figures in pinned.items()) + "\n}\n"


def _plain(value):
    """JSON's shapes: tuples as lists, keys as strings."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("store", ["sqlite", "postgresql"], indirect=True)
def test_a_big_run_page_takes_its_intervals_from_the_trend_read(store, monkeypatch):
    """Above the inline limit the run page reads its clustered sums with the label's
    trend (one GROUP BY for both): its per-target rows are those of the pinned page."""
    import agent_eval.view.overview as overview

    a, b = _fill(store, 11, agents=False), _fill(store, 12, agents=False)
    assert a != b
    monkeypatch.setattr(overview, "INLINE_SESSIONS", 0)
    seen: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: seen.append(statement))
    page = build_run_page(store, b)
    assert len([s for s in seen if "min(sessions.id)" in s]) == 1  # the clustered sums
    assert page.clustered is None and page.trend is not None
    expected = json.loads(PINNED.read_text())["allow-lists"]["run targets"]
    assert _plain(_texts(page.target_rows)) == expected


@pytest.mark.parametrize("agents", [False, True], ids=["allow-lists", "agent-rules"])
def test_figures_are_those_of_the_code_before(store, agents):
    ids = "agent-rules" if agents else "allow-lists"
    a, b = _fill(store, 11, agents=agents), _fill(store, 12, agents=agents)
    figures = store.summarize([a, b], "run", with_turns=False).values()
    assert all(f.side_requests and f.error_sessions and f.classes["unclassified"].k
               for f in figures)  # the store holds what the figures leave out
    snapshot = _plain(_snapshot(store, a, b))
    if os.environ.get("AGENT_EVAL_PIN_WRITE"):  # how the file was written, once
        pinned = json.loads(PINNED.read_text()) if PINNED.exists() else {}
        PINNED.write_text(_dump(pinned | {ids: snapshot}))
    expected = json.loads(PINNED.read_text())[ids]
    for key, value in expected.items():
        assert snapshot[key] == value, key
    assert snapshot.keys() == expected.keys()
