"""A run's headline numbers as SQL aggregates, for the viewer's run, runs and compare pages.

Every figure is a GROUP BY over indexed columns (no row is read into Python one by one),
so a run page answers in the same few queries for 100 calls as for a million.  Calls
and sessions that ended in a server or harness fault (status ``error``) are left out of
every count here, as from every model rate.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import astuple, dataclass, field
from datetime import datetime

from sqlalchemy import Engine, and_, case, func, select

from agent_eval.store.schema import runs, sessions, targets, tool_calls


@dataclass(frozen=True, slots=True)
class TargetTally:
    """One target of one run (error sessions left out unless said)."""

    sessions: int = 0
    error_sessions: int = 0
    calls: int = 0
    errors: int = 0
    handshake_sessions: int = 0  # sessions that have a handshake
    handshake_completed: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_code: dict[str, int] = field(default_factory=dict)  # denied calls by primary class
    by_next: dict[str, int] = field(default_factory=dict)  # denied calls by next action


@dataclass(frozen=True, slots=True)
class ScenarioTally:
    sessions: int = 0
    completed: int = 0
    failed: int = 0  # not completed or handshake left open
    calls: int = 0
    errors: int = 0


@dataclass(frozen=True, slots=True)
class RunOverview:
    targets: tuple[str, ...]
    tallies: dict[str, TargetTally]
    scenarios: dict[str, dict[str, ScenarioTally]]  # scenario -> target -> tally


def run_overview(engine: Engine, run_id: int, *, scenarios: bool = True) -> RunOverview:
    """The run's tallies per target; per scenario too unless ``scenarios`` is False."""
    s, c = sessions.c, tool_calls.c
    ok = s.status != "error"
    with engine.connect() as conn:
        names = dict(conn.execute(select(targets.c.id, targets.c.name)
                                  .where(targets.c.run_id == run_id).order_by(targets.c.id)).all())
        status_rows = conn.execute(
            select(s.target_id, s.status, func.count(),
                   func.sum(case((s.handshake_required > 0, 1), else_=0)),
                   func.sum(case((and_(s.handshake_required > 0, s.handshake_completed), 1),
                                 else_=0)),
                   func.sum(s.n_calls))
            .where(s.run_id == run_id).group_by(s.target_id, s.status)).all()
        denied = denied_calls([run_id])
        code_rows = _minus_faulted(
            conn.execute(select(c.target_id, c.primary_code, c.next_action, func.count())
                         .where(*denied)
                         .group_by(c.target_id, c.primary_code, c.next_action)).all(),
            conn.execute(select(c.target_id, c.primary_code, c.next_action, func.count())
                         .where(*faulted_calls([run_id]))
                         .group_by(c.target_id, c.primary_code, c.next_action)).all())
        failed = case((s.status != "completed", 1),
                      (and_(s.handshake_required > 0, ~s.handshake_completed), 1), else_=0)
        # grouped in ix_sessions_run_target_status's order (status too, summed below):
        # no sort of the run's sessions
        scenario_rows = [] if not scenarios else conn.execute(
            select(s.target_id, s.scenario, func.count(),
                   func.sum(case((s.status == "completed", 1), else_=0)), func.sum(failed),
                   func.sum(s.n_calls), func.sum(s.n_denied))
            .where(s.run_id == run_id, ok).group_by(s.target_id, s.status, s.scenario)).all()
    tallies = {name: _Tally() for name in names.values()}
    for target_id, status, n, hs_n, hs_k, n_calls in status_rows:
        t = tallies[names[target_id]]
        t.by_status[status] = n
        if status == "error":
            t.error_sessions += n
            continue
        t.sessions += n
        t.calls += int(n_calls or 0)
        t.handshake_sessions += int(hs_n or 0)
        t.handshake_completed += int(hs_k or 0)
    for target_id, code, next_action, n in code_rows:
        t = tallies[names[target_id]]
        t.errors += n
        t.by_code[code] = t.by_code.get(code, 0) + n
        if next_action:
            t.by_next[next_action] = t.by_next.get(next_action, 0) + n
    scenarios: dict[str, dict[str, ScenarioTally]] = defaultdict(dict)
    for target_id, scenario, *sums in sorted(scenario_rows, key=lambda r: (r[1], r[0])):
        tally = scenarios[scenario].get(names[target_id], ScenarioTally())
        scenarios[scenario][names[target_id]] = ScenarioTally(
            *(a + int(b or 0) for a, b in zip(astuple(tally), sums, strict=True)))
    return RunOverview(tuple(names.values()), {k: v.freeze() for k, v in tallies.items()},
                       dict(scenarios))


@dataclass(frozen=True, slots=True)
class TrendPoint:
    run_id: int
    started: datetime
    by_target: dict[str, tuple[int, int, int, int]]  # calls, errors, handshake n, completed


def label_trend(engine: Engine, label: str, limit: int = 20) -> list[TrendPoint]:
    """The last ``limit`` runs with ``label``, oldest first, per target: calls, denied
    calls, sessions with a handshake and those that completed it."""
    s = sessions.c
    with engine.connect() as conn:
        recent = conn.execute(select(runs.c.id, runs.c.created_at).where(runs.c.label == label)
                              .order_by(runs.c.id.desc()).limit(limit)).all()
        ids = [r.id for r in recent]
        names = dict(conn.execute(select(targets.c.id, targets.c.name)
                                  .where(targets.c.run_id.in_(ids))).all())
        hs = conn.execute(
            select(s.run_id, s.target_id, func.sum(s.n_calls), func.sum(s.n_denied),
                   func.sum(case((s.handshake_required > 0, 1), else_=0)),
                   func.sum(case((and_(s.handshake_required > 0, s.handshake_completed), 1),
                                 else_=0)))
            .where(s.run_id.in_(ids), s.status != "error").group_by(s.run_id, s.target_id)).all()
    per_run: dict[int, dict[str, tuple[int, int, int, int]]] = defaultdict(dict)
    for run_id, target_id, n_calls, n_denied, hs_n, hs_k in hs:
        per_run[run_id][names[target_id]] = (int(n_calls or 0), int(n_denied or 0),
                                             int(hs_n or 0), int(hs_k or 0))
    return [TrendPoint(r.id, r.created_at, per_run.get(r.id, {})) for r in reversed(recent)]


def denied_calls(run_ids: list[int]) -> list:
    """The denied calls of the runs, as a range of ``ix_tool_calls_run_decision``.  The
    ``session_id > 0`` bound (always true) makes that index the tightest match for
    SQLite's planner, which has no statistics in a store nobody ANALYZEd."""
    c = tool_calls.c
    return [c.run_id.in_(run_ids), c.decision == "deny", c.session_id > 0]


def faulted_calls(run_ids: list[int]) -> list:
    """The denied calls of the runs' error sessions, reached from those few sessions."""
    c, s = tool_calls.c, sessions.c
    return [c.session_id.in_(select(s.id).where(s.run_id.in_(run_ids), s.status == "error",
                                                s.n_denied > 0)),
            c.decision == "deny"]


def _minus_faulted(rows, faulted, *, keep_key: bool = False) -> list[tuple]:
    """Counts ``(*key, n)`` minus the same keys' counts in error sessions; zeros dropped.
    Counting all then subtracting the few faulted sessions keeps the big query a plain
    range of one index."""
    counts: dict[tuple, int] = {}
    for *key, n in rows:
        counts[tuple(key)] = counts.get(tuple(key), 0) + n
    for *key, n in faulted:
        counts[tuple(key)] -= n
    return [(*key, n, None) if keep_key else (*key, n) for key, n in counts.items() if n > 0]


class _Tally:
    """A mutable TargetTally while the rows are summed."""

    def __init__(self):
        self.sessions = self.error_sessions = self.calls = self.errors = 0
        self.handshake_sessions = self.handshake_completed = 0
        self.by_status: dict[str, int] = {}
        self.by_code: dict[str, int] = {}
        self.by_next: dict[str, int] = {}

    def freeze(self) -> TargetTally:
        return TargetTally(**vars(self))
