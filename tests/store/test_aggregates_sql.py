"""The one aggregator (``agent_eval.store.aggregates``: every figure a reader shows, by
GROUP BY) gives what the pure ``metrics`` functions give over the same rows, for every
reader, on SQLite and PostgreSQL (the ``store`` fixture runs both).

``test_every_reader_gets_the_pure_figures`` runs each reader (the report, the viewer's
pages, ``gate``, ``compare``, ``power``, the CLI tables, ``runs``) with a spy on the
aggregator's entry points, checks that the reader asked it for its figures, and holds
every answer to ``metrics.summarize`` / ``metrics.clustered.session_units`` over the
rows.  ``test_no_reader_counts_rows_itself`` keeps it the only way to a figure.

One seeded store holds what every figure has to get right: two runs and three targets,
server-fault sessions (their calls must drop out), child sessions (folded into their
root for units), handshakes met, missed and absent, turns with and without latency,
replies whose calls were all denied (burned turns), every next action, unclassified
denials, tagged and untagged sessions.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import random
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run

from agent_eval.cli import main as cli
from agent_eval.metrics import repeat_stats, summarize, units_by_target
from agent_eval.metrics.clustered import session_units
from agent_eval.metrics.repeats import repeats_from_outcomes
from agent_eval.metrics.sufficient import stats_from_units
from agent_eval.metrics.summary import session_failed
from agent_eval.report import write_report
from agent_eval.report.index import CallTally, build_index_page, read_figures
from agent_eval.store import SessionFilter, aggregates, cluster_stats, units
from agent_eval.store.aggregates import summarize_sql
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    StackFaultRecord,
    TurnRecord,
    assign_next_actions,
)
from agent_eval.view import overview

PACKAGE = Path(__file__).resolve().parents[2] / "agent_eval"
CODES = ["AE301", "AE304", "AE101", None]  # None: a denial with no primary (unclassified)
LEAKS = [None, None, None, "AE303", "AE304"]  # an allowed call an agent CLI's rules leaked
AGENTS = [None, "email", "lights"]  # whose CLI rules judged the session (None: a list)
DETAILS = ("all", "actions", "rates", "totals")
GROUPINGS = ("target", "scenario", "run", "all", "tag", "agent", ("scenario", "target"),
             ("tag", "target"), ("run", "target"), ("agent", "target"))


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
                primary=rng.choice(CODES) if denied else None, command="ls",
                leak=None if denied else rng.choice(LEAKS),
                source_decision=_source_verdict(key, len(calls))))
    assign_next_actions(calls)
    start = T0 + timedelta(seconds=rng.randint(0, 3600))
    required = rng.choice([0, 0, 3])
    done = rng.randint(0, 3) if required else 0
    return SessionRecord(
        key=key, target=target, scenario=scenario, repeat=repeat, turns=turns, calls=calls,
        # side-request: an agent CLI's side request, left out of every figure
        tags=rng.sample(["fast", "db", "web", "side-request"], rng.randint(0, 2)),
        handshake=HandshakeResult(required, done, required > 0 and done == required,
                                  rng.choice(["claim.py", "report.py"])
                                  if required and done < required else None),
        started_at=start, finished_at=start + timedelta(seconds=rng.randint(1, 900)),
        policy_agent=rng.choice(AGENTS), stack_faults=_stack_faults(key), **kw)


def _source_verdict(key: str, index: int) -> str | None:
    """The source harness's own verdict on some calls (an import's), drawn apart so the
    seeded draws above stay as they were: none, allow or deny."""
    return random.Random(f"{key}#{index}").choice([None, None, "allow", "deny"])


def _stack_faults(key: str) -> list[StackFaultRecord]:
    """Stack faults on some sessions, drawn apart (the seeded draws above stay as they
    were): none, a fault kept beside the calls, or one that ended the session."""
    rng = random.Random(key)
    return [StackFaultRecord(0, rng.choice(["AE501", "AE502", "AE506"]), "m",
                             ends=rng.random() < 0.5)
            for _ in range(rng.choice([0, 0, 0, 1, 2]))]


def _fill(store, seed: int = 3) -> list[int]:
    rng = random.Random(seed)
    run_ids = []
    for run in range(2):
        run_id = add_run(store, label=f"r{run}", suite="s",
                         targets=("alpha", "beta", "gamma")[: 3 - run], base_url="http://x/v1")
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


def _named(rows, ids: list[int], columns: bool):
    """Session rows with targets named as report columns, as ``columns=True`` names them."""
    if not (columns and len(ids) > 1):
        return list(rows)
    return [dataclasses.replace(s, target=f"{s.target} · run {s.run_id}") for s in rows]


def _pure_summaries(store, ids, *, by="target", columns=False, all_classes=False,
                    with_turns=True, detail="all"):
    return summarize(_named(store.session_rows(ids), ids, columns), store.call_rows(ids),
                     store.turn_rows(ids) if with_turns else (), by=by,
                     all_classes=all_classes)


def _shown(s, detail: str, with_turns: bool) -> dict:
    """The figures ``detail`` and ``with_turns`` promise (the rest stays at zero); floats
    to 9 digits (the database adds in its own order)."""
    def f(x):
        return None if x is None else float(f"{x:.9g}")

    hs = s.handshake
    out = {"group": s.group, "sessions": s.sessions, "error_sessions": s.error_sessions,
           "side_requests": s.side_requests, "calls": s.calls, "errors": s.errors, "exit_states": s.exit_states,
           "handshake": (hs.sessions, hs.completed),
           "stack": (s.stack_faults, s.stack_classes)}
    if detail != "totals":
        out["classes"] = s.classes
        out["leaks"] = s.leaks
    if detail in ("all", "actions"):
        out["actions"] = (s.recovery.denials, s.recovery.actions)
    if detail == "all":
        out.update(messages=s.messages, share=f(hs.mean_done_share), missed=hs.missed_steps,
                   burned=s.recovery.turns_burned, per_session=f(s.recovery.denials_per_session))
    if with_turns:
        sp = s.speed
        out["speed"] = (sp.turns, sp.latency_p50, sp.latency_p95, sp.ttft_p50, sp.ttft_p95,
                        f(sp.decode_tps_mean), sp.prompt_tokens, sp.completion_tokens,
                        sp.reasoning_tokens)
        if detail == "all":
            out["throughput"] = (f(sp.window_s), f(sp.completions_per_min),
                                 f(sp.allowed_calls_per_min), f(sp.completed_sessions_per_hour))
    return out


def _same_summaries(got, expected, detail="all", with_turns=True, by="target") -> None:
    parts = (by,) if isinstance(by, str) else by
    if {"scenario", "tag", "agent"} & set(parts):  # ordered by first target, then by name
        assert sorted(got) == sorted(expected)
    else:
        assert list(got) == list(expected)  # the same groups in the same order
    for key in expected:
        assert _shown(got[key], detail, with_turns) == _shown(expected[key], detail,
                                                              with_turns), key


def _check_summaries(store, ids, kwargs, got) -> None:
    detail, with_turns = kwargs.get("detail", "all"), kwargs.get("with_turns", True)
    _same_summaries(got, _pure_summaries(store, ids, **kwargs), detail, with_turns,
                    kwargs.get("by", "target"))


def _pure_units(store, ids, columns=False):
    return session_units(_named(store.session_rows(ids), ids, columns), store.call_rows(ids))


def _check_units(store, ids, kwargs, got) -> None:
    assert got == _pure_units(store, ids, kwargs.get("columns", False))


def _check_cluster_stats(store, ids, kwargs, got) -> None:
    units = _pure_units(store, ids, kwargs.get("columns", False))
    grouped = {"all": units} if kwargs.get("by", "target") == "all" else units_by_target(units)

    def shown(scenarios):
        return {name: dataclasses.replace(
                    s, classes=s.classes if kwargs.get("classes") else {},
                    passes=s.passes if kwargs.get("passes") else None)
                for name, s in scenarios.items()}

    assert list(got) == list(grouped)
    for name, us in grouped.items():
        expected = stats_from_units(us).scenarios
        assert list(got[name].scenarios) == list(expected), name  # first-seen order
        assert shown(got[name].scenarios) == shown(expected), name


def _check_outcomes(store, ids, kwargs, got) -> None:
    """pass^k and flips: the outcomes asked for (all, or of some scenarios) are those of
    ``metrics.repeat_stats`` over the rows."""
    pure = repeat_stats(_named(store.session_rows(ids), ids, kwargs.get("columns", False)),
                        store.call_rows(ids))
    assert set(got) <= set(pure)
    assert repeats_from_outcomes(got) == {key: pure[key] for key in got}


def _pure_agreement(store, ids, columns=False) -> dict[str, tuple[int, int, int]]:
    column = {s.id: s.target for s in _named(store.session_rows(ids), ids, columns)}
    counts: dict[str, list[int]] = {}
    for row in store.call_rows(ids):
        if row.source_decision is None:
            continue
        tally = counts.setdefault(column[row.session_id], [0, 0, 0])
        tally[0] += 1
        if row.source_decision != row.decision:
            tally[1 if row.decision == "deny" else 2] += 1
    return {name: tuple(c) for name, c in counts.items()}


def _check_agreement(store, ids, kwargs, got) -> None:
    assert {name: tuple(c) for name, c in got.items()} == _pure_agreement(
        store, ids, kwargs.get("columns", False))


ENTRY_POINTS = {  # the aggregator's entry points, the pure check of each answer
    (aggregates, "summarize_sql"): _check_summaries,
    (units, "units_sql"): _check_units,
    (cluster_stats, "cluster_stats"): _check_cluster_stats,
    (cluster_stats, "session_outcomes"): _check_outcomes,
    (aggregates, "source_agreement"): _check_agreement,
}


@pytest.fixture
def spy(monkeypatch):
    """Every call to the aggregator's entry points: ``(check, run ids, options, answer)``."""
    calls = []
    for (module, name), check in ENTRY_POINTS.items():
        real = getattr(module, name)

        def recorded(engine, run_ids, *args, real=real, check=check, **kwargs):
            ids = list(run_ids)
            answer = real(engine, ids, *args, **kwargs)
            calls.append((check, ids, kwargs, answer))
            return answer

        monkeypatch.setattr(module, name, recorded)
    return calls


def _cli(store, *args: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--db", store.url])
    assert result.exit_code in (0, 1), result.output  # gate exits 1 when a threshold fails


READERS = {
    "report": lambda store, ids, out: write_report(store, ids[:1], out, workers=0),
    "report of two runs": lambda store, ids, out: write_report(store, ids, out, workers=0),
    "report tables (CLI)": lambda store, ids, out: _cli(store, "report", str(ids[0]),
                                                       "--json", "--out", str(out)),
    "viewer: runs page": lambda store, ids, out: overview.build_runs_page(store, {}),
    "viewer: run page": lambda store, ids, out: overview.build_run_page(store, ids[0], True),
    "viewer: compare page": lambda store, ids, out: overview.build_compare_page(
        store, ids[0], ids[1], analysis=True),
    "gate": lambda store, ids, out: _cli(
        store, "gate", "--run", str(ids[0]), "--baseline", str(ids[1]), "--max-error-rate",
        "50", "--max-class", "AE301=20", "--min-handshake", "0.1", "--json"),
    "compare": lambda store, ids, out: _cli(store, "compare", str(ids[0]), str(ids[1]),
                                            "--json"),
    "compare, pooled": lambda store, ids, out: _cli(store, "compare", str(ids[0]),
                                                    str(ids[1]), "--by", "all", "--json"),
    "power": lambda store, ids, out: _cli(store, "power", "--baseline", str(ids[0])),
    "runs": lambda store, ids, out: _cli(store, "runs", "--json"),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_gets_the_pure_figures(store, spy, tmp_path, reader):
    ids = _fill(store)
    READERS[reader](store, ids, tmp_path)
    assert spy, f"{reader} read no figure from the aggregator"
    for check, run_ids, kwargs, answer in spy:
        check(store, run_ids, kwargs, answer)


def test_the_report_reads_pass_k_and_the_agreement_table_from_the_aggregator(
        store, spy, tmp_path):
    """The report counted both from the rows it streamed (``repeat_stats`` over the
    sessions and denied calls, an agreement tally per call)."""
    ids = _fill(store)
    index = write_report(store, ids, tmp_path, workers=0)
    asked = {check for check, *_ in spy}
    assert {_check_outcomes, _check_agreement} <= asked
    summary = json.loads((index.parent / "summary.json").read_text())
    pure = _pure_agreement(store, ids, columns=True)
    assert {column: entry["calls_with_source_verdict"]
            for column, entry in summary["source_agreement"].items()} == {
        column: counts[0] for column, counts in pure.items()}


def test_the_seeded_store_covers_every_figure(store):
    ids = _fill(store)
    pure = _pure_summaries(store, ids, columns=True)
    assert sum(s.error_sessions for s in pure.values()) > 0  # faults,
    assert sum(s.recovery.turns_burned for s in pure.values()) > 0  # burned turns,
    assert sum(s.handshake.sessions for s in pure.values()) > 0  # handshakes,
    assert any("unclassified" in s.classes for s in pure.values())  # unclassified denials,
    assert any(s.parent_id for s in store.session_rows(ids))  # child sessions,
    assert {len(s.tags) for s in store.session_rows(ids)} >= {0, 1, 2}  # tags,
    assert {c for s in pure.values() for c in s.leaks} == {"AE303", "AE304"}  # leaks,
    assert {s.policy_agent for s in store.session_rows(ids)} == set(AGENTS)  # agents,
    assert sum(s.side_requests for s in pure.values()) > 0  # side requests,
    assert all(n > 0 for c in _pure_agreement(store, ids, True).values() for n in c)  # both
    # ways of disagreeing with the source harness, and repeats that pass and fail
    repeated = [r for r in repeat_stats(store.session_rows(ids), store.call_rows(ids)).values()
                if r.n > 1]
    assert any(0 < r.passes < r.n for r in repeated)


@pytest.mark.parametrize("by", GROUPINGS, ids=str)
@pytest.mark.parametrize("detail", DETAILS)
def test_every_grouping_and_detail_matches_the_python_pass(store, by, detail):
    ids = _fill(store, seed=4)
    for run_ids in ([ids[0]], ids):
        for columns in (False, True):
            _same_summaries(summarize_sql(store.engine, run_ids, by=by, columns=columns,
                                          detail=detail),
                            _pure_summaries(store, run_ids, by=by, columns=columns), detail,
                            by=by)


def test_units_and_repeats_match_the_python_pass(store):
    ids = _fill(store, seed=8)
    for run_id in ids:
        expected = session_units(store.session_rows([run_id]), store.call_rows([run_id]))
        assert store.session_units([run_id]) == expected
        assert any(u.errors for u in expected)
        assert (repeats_from_outcomes(store.session_outcomes([run_id]))
                == repeat_stats(store.session_rows([run_id]), store.call_rows([run_id])))


def test_an_unknown_grouping_is_refused(store):
    with pytest.raises(ValueError, match="unknown grouping"):
        summarize_sql(store.engine, [1], by="model")


def _readers_of_rows() -> list[str]:
    """Package modules outside metrics/ and store/ that call a pure pass over every row."""
    passes = {"summarize", "session_units", "units_from_counts", "units_from_class_counts",
              "repeat_stats"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in ("metrics", "store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "agent_eval.metrics"):
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {a.name}"
                          for a in node.names if a.name in passes]
    return found


def test_no_reader_counts_rows_itself():
    """Figures come from the store's aggregator: no reader imports the pure passes
    (they are its definition and its test oracle)."""
    assert _readers_of_rows() == []


# --- one definition of a failed session ------------------------------------------------


def _failed_fill(store) -> int:
    allowed = CallRecord(index=0, turn_index=0, tool="bash", arguments="{}",
                         decision="allow", command="uv run scripts/db_query.py --sql q")
    denied = dataclasses.replace(allowed, index=1, decision="deny", primary="AE301",
                                 command="uv run scripts/db_query.py --sql q | head")
    run_id = add_run(store, label="failed", suite="s", targets={"t": "m"}, base_url="http://x/v1")
    open_handshake = HandshakeResult(3, 1, False, "claim.py")

    def record(key, status="completed", calls=(allowed,), handshake=None, **kw):
        return SessionRecord(key=key, target="t", scenario=key, status=status,
                             calls=list(calls), handshake=handshake or HandshakeResult(),
                             **kw)

    store.record_sessions(run_id, [
        record("clean"),
        record("denied", calls=[allowed, denied]),  # completed, holding a denied call
        record("stalled", status="stalled"),  # limits hit: no denial, no handshake
        record("abandoned", status="abandoned"),
        record("open-handshake", handshake=open_handshake),
        record("fault", status="error", error="server answered 500"),
    ])
    return run_id


def test_one_definition_of_a_failed_session(store, tmp_path):
    """The lists (CLI and viewer), the report's failed list, junit.xml and summary.json
    judge a session failed alike: ``metrics.session_failed``.  The viewer's run page
    once counted a completed session holding a denied call as passed, and junit.xml a
    stalled one."""
    run_id = _failed_fill(store)
    rows = {s.key: s for s in store.session_rows([run_id])}
    denials = {}
    for c in store.call_rows([run_id]):
        denials[c.session_id] = denials.get(c.session_id, 0) + (c.decision == "deny")
    failed = {key for key, s in rows.items()
              if session_failed(s.status, denials.get(s.id, 0),
                                s.handshake_required > 0 and not s.handshake_completed)}
    assert failed == {"denied", "stalled", "abandoned", "open-handshake", "fault"}

    listed = store.list_sessions(SessionFilter(run_id=run_id, failed=True), limit=50)
    assert {r.scenario for r in listed.rows} == failed
    assert {r.scenario for r in store.list_sessions(SessionFilter(run_id=run_id),
                                                    limit=50).rows if r.failed} == failed

    tally = CallTally()
    page = build_index_page([store.get_run(run_id)], list(rows.values()),
                            store.call_rows([run_id]), read_figures(store, [run_id]), tally)
    assert {i.link.scenario for i in page.failed} == failed

    index = write_report(store, [run_id], tmp_path, workers=0)
    junit = (index.parent / "junit.xml").read_text(encoding="utf-8")
    assert {name.split(" #")[0] for name, case in _junit_cases(junit).items()
            if "<failure" in case or "<error" in case} == failed
    counts = json.loads((index.parent / "summary.json").read_text())["sessions"]
    assert counts["failed"] + counts["errored"] == len(failed)


def _junit_cases(xml: str) -> dict[str, str]:
    return {case.get("name"): ET.tostring(case, encoding="unicode")
            for case in ET.fromstring(xml).iter("testcase")}
