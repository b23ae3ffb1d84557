"""The sufficient statistics of session clusters, summed per (target, scenario) in SQL.

``gate``, ``compare`` and the viewer's compare page judge a run from its clustered and
paired statistics (``agent_eval.metrics.sufficient``): per scenario, the number of
top-level sessions with calls and the sums ``Σk, Σn, Σk², Σkn, Σn²`` of their denied
calls ``k`` and calls ``n``.  Here those are GROUP BY queries (SQLAlchemy Core, SQLite and
PostgreSQL alike), so a run of 125,000 sessions is judged from a few hundred rows:

* ``n`` is the session's stored ``n_calls`` (written with its calls, ``store.sessions``);
  ``k`` one GROUP BY per session over the denied range of ``ix_tool_calls_run_decision``,
  left-joined to the run's non-error sessions and summed per (target, scenario);
* per class, the same with denied calls grouped per (session, primary class);
* ``session_outcomes`` (``compare`` only: pass rates, McNemar, flipped scenarios) is one
  ordered query of plain ``(target, scenario, repeat, passed)`` tuples, no ORM rows.

A run with child sessions (subagents folded into their root) is summed from its units
(``aggregates.units_sql``) instead: the root of a session is not a GROUP BY key.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from operator import itemgetter
from typing import Literal

from sqlalchemy import Engine, and_, case, func, select

from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.clustered import Unit, units_by_target
from agent_eval.metrics.sufficient import (
    ScenarioStats,
    Sums,
    TargetStats,
    merge_stats,
    stats_from_units,
)
from agent_eval.store.overview import denied_calls
from agent_eval.store.schema import sessions, targets, tool_calls

StatsBy = Literal["target", "all"]
Outcomes = dict[tuple[str, str], tuple[tuple[int, bool], ...]]
"""``(target, scenario) -> ((repeat, passed), ...)`` in repeat order: ``session_outcomes``."""


def cluster_stats(engine: Engine, run_ids: Iterable[int], *, by: StatsBy = "target",
                  classes: bool = False, outcomes: Outcomes | None = None
                  ) -> dict[str, TargetStats]:
    """Per target name (or ``"all"``, the run pooled) the sums of its sessions per
    scenario, scenarios in the order of their first session (as ``session_units``).
    ``classes`` also sums each primary class; ``outcomes`` (``session_outcomes``) fills
    each scenario's repeat outcomes, else they stay ``None``."""
    ids = list(run_ids)
    units = cache(lambda: _units(engine, ids))
    by_name = cache(lambda: units_by_target(units()))
    with engine.connect() as conn:
        if _nested(conn, ids):
            grouped = {"all": units()} if by == "all" else units_by_target(units())
            return {name: stats_from_units(us) for name, us in grouped.items()}
        names = _names(conn, ids)
        cells = _error_sums(conn, ids)
        per_class = _class_sums(conn, ids) if classes else {}
    out: dict[str, dict[str, ScenarioStats]] = {}
    for (target_id, scenario), (count, errors) in cells.items():
        name = names[target_id]
        found = None if outcomes is None else tuple(sorted(outcomes.get((name, scenario), ())))
        kinds = {code: Sums(errors.g, k, errors.n, kk, kn, errors.nn)
                 for code, (k, kk, kn) in per_class.get((target_id, scenario), {}).items()}
        stats = ScenarioStats(count, errors, kinds, found)
        group = out.setdefault("all" if by == "all" else name, {})
        group[scenario] = merge_stats(group[scenario], stats) if scenario in group else stats
    if by == "all":
        return {"all": TargetStats(out.get("all", {}), units)}
    return {name: TargetStats(scenarios, lambda name=name: by_name().get(name, []))
            for name, scenarios in out.items()}


def _units(engine: Engine, ids: list[int]) -> list[Unit]:
    from agent_eval.store.aggregates import units_sql

    return units_sql(engine, ids)


def _nested(conn, ids: list[int]) -> bool:
    """Whether the runs hold child sessions: a range of ``ix_sessions_parent`` (``+ 0``
    keeps SQLite's planner from reading every session of the run instead)."""
    s = sessions.c
    return conn.execute(select(s.id).where(s.parent_id.is_not(None), (s.run_id + 0).in_(ids))
                        .limit(1)).first() is not None


def _per_session_denied(ids: list[int], *by):
    c = tool_calls.c
    return (select(c.session_id, *by, func.count().label("k")).where(*denied_calls(ids))
            .group_by(c.session_id, *by).subquery())


def _error_sums(conn, ids: list[int]) -> dict[tuple[int, str], tuple[int, Sums]]:
    """(target id, scenario) -> (sessions, sums over the sessions with calls), in the order
    of each pair's first session.  The sessions' counts and the sums of their denied
    calls are two GROUP BYs: a session without a denied call adds nothing to the second,
    which so reads only the few sessions that hold one."""
    s = sessions.c
    n = s.n_calls
    live = (s.status != "error", s.parent_id.is_(None))
    rows = conn.execute(
        select(s.target_id, s.scenario, func.min(s.id), func.count(),
               func.sum(case((n > 0, 1), else_=0)), func.sum(n), func.sum(n * n))
        .where(s.run_id.in_(ids), *live).group_by(s.target_id, s.scenario)).all()
    d = _per_session_denied(ids)
    k = d.c.k
    denied = {(target, scenario): (int(sk), int(skk), int(skn)) for target, scenario, sk, skk, skn
              in conn.execute(
                  select(s.target_id, s.scenario, func.sum(k), func.sum(k * k), func.sum(k * n))
                  .select_from(d).join(sessions, s.id == d.c.session_id).where(*live, n > 0)
                  .group_by(s.target_id, s.scenario)).all()}
    rows.sort(key=lambda r: (r[0], r[2]))
    out = {}
    for target, scenario, _first, count, g, sn, snn in rows:
        sk, skk, skn = denied.get((target, scenario), (0, 0, 0))
        out[(target, scenario)] = (count, Sums(int(g), sk, int(sn or 0), skk, skn, int(snn or 0)))
    return out


def _class_sums(conn, ids: list[int]) -> dict[tuple[int, str], dict[str, tuple[int, int, int]]]:
    """(target id, scenario) -> class -> ``(Σk, Σk², Σkn)``, ``k`` the session's calls
    denied in the class (sessions without any add nothing)."""
    s, c = sessions.c, tool_calls.c
    code = func.coalesce(func.nullif(c.primary_code, ""), UNCLASSIFIED).label("code")
    d = _per_session_denied(ids, code)
    k, n = d.c.k, s.n_calls
    rows = conn.execute(
        select(s.target_id, s.scenario, d.c.code, func.sum(k), func.sum(k * k),
               func.sum(k * n))
        .select_from(d).join(sessions, s.id == d.c.session_id)
        .where(s.status != "error", s.parent_id.is_(None), n > 0)
        .group_by(s.target_id, s.scenario, d.c.code)).all()
    out: dict[tuple[int, str], dict[str, tuple[int, int, int]]] = {}
    for target, scenario, name, sk, skk, skn in rows:
        out.setdefault((target, scenario), {})[name] = (int(sk), int(skk), int(skn))
    return out


def session_outcomes(engine: Engine, run_ids: Iterable[int]) -> Outcomes:
    """``(target, scenario) -> ((repeat, passed), ...)`` over the top-level, non-error
    sessions, in repeat order (ties in storage order), keys by target then scenario:
    passed = completed and no call denied (``metrics.repeats``).  One query of plain
    tuples in storage order (an integer sort: the database sorting by scenario names
    spilled to disk on PostgreSQL), grouped and put in repeat order here."""
    ids = list(run_ids)
    s = sessions.c
    d = _per_session_denied(ids)
    with engine.connect() as conn:
        if _nested(conn, ids):
            out: dict[tuple[str, str], list[tuple[int, bool]]] = {}
            for u in _units(engine, ids):
                out.setdefault((u.target, u.scenario), []).append((u.repeat, bool(u.passed)))
            return {key: tuple(sorted(v, key=itemgetter(0))) for key, v in out.items()}
        names = _names(conn, ids)
        rows = conn.execute(
            select(s.target_id, s.scenario, s.repeat,
                   case((and_(s.status == "completed", d.c.k.is_(None)), 1), else_=0))
            .select_from(sessions).outerjoin(d, d.c.session_id == s.id)
            .where(s.run_id.in_(ids), s.status != "error", s.parent_id.is_(None))
            .order_by(s.id)).all()
    grouped: dict[tuple[int, str], list[tuple[int, bool]]] = {}
    for target, scenario, repeat, passed in rows:  # sorting by id only: no string sort
        grouped.setdefault((target, scenario), []).append((repeat, passed == 1))
    return {(names[target], scenario): tuple(sorted(v, key=itemgetter(0)))
            for (target, scenario), v in sorted(grouped.items(), key=itemgetter(0))}


def _names(conn, ids: list[int]) -> dict[int, str]:
    return dict(conn.execute(select(targets.c.id, targets.c.name)
                             .where(targets.c.run_id.in_(ids))).all())
