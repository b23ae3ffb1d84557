"""The sufficient statistics of session clusters, summed per (target, scenario) in SQL.

``gate``, ``compare`` and the viewer's compare page judge a run from its clustered and
paired statistics (``agent_eval.metrics.sufficient``): per scenario, the number of
top-level sessions with calls and the sums ``Σk, Σn, Σk², Σkn, Σn²`` of their denied
calls ``k`` and calls ``n``, and for ``compare`` every session's outcome.  Here those are
GROUP BY queries (SQLAlchemy Core, SQLite and PostgreSQL alike), so a run of 125,000
sessions is judged from a few hundred rows:

* ``n`` and ``k`` are the session's stored ``n_calls`` and ``n_denied`` (written with its
  calls, ``store.sessions``), so the sums are one range of the covering index
  ``ix_sessions_run_target_status``, grouped in its own order: no call is read;
* per class, the denied calls grouped per (session, primary class), summed per
  (target, scenario);
* the outcomes (``passes=True``; passed = completed and no call denied) come back as
  bits: per (target, scenario) and block of 32 repeats, ``Σ passed·2^(repeat mod 32)``
  beside the same sums.  When a scenario's repeats are distinct and consecutive (what a
  run plays, faulted repeats left out) the sessions in (repeat, passed) order are the
  occupied repeats in order, squeezed together into
  :class:`~agent_eval.metrics.sufficient.Passes`; otherwise (a repeat played twice, a
  negative one, several targets pooled) the position is a ``row_number()`` window and
  the bits are summed per block of 32 positions.  Either way
  about one row per 32 sessions leaves the database, and ``compare`` pairs two runs'
  sessions by position with integer operations on those bits.

A run with child sessions (subagents) is summed the same way over its roots, each with
the calls and denials of its descendants folded in by a recursive CTE (``_clusters``):
the same figures as ``metrics.clustered.session_units``, still without a row per session
leaving the database; only its sums per class (``gate --max-class``, the viewer's run
page) are still taken from the units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any, Literal

from sqlalchemy import BigInteger, Engine, Integer, and_, case, cast, func, select, type_coerce

from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.clustered import Unit, units_by_target
from agent_eval.metrics.sufficient import (
    Passes,
    ScenarioStats,
    Sums,
    TargetStats,
    merge_stats,
    stats_from_units,
)
from agent_eval.store import memo
from agent_eval.store.schema import counted_sessions, denied_calls, sessions, targets, tool_calls
from agent_eval.store.units import units_sql

StatsBy = Literal["target", "all"]
Outcomes = dict[tuple[str, str], tuple[tuple[int, bool], ...]]
"""``(target, scenario) -> ((repeat, passed), ...)`` in repeat order: ``session_outcomes``."""

BLOCK = 32
"""Repeats (or positions) per row of outcome bits: ``count × 2^31`` never overflows a
64-bit SUM, however many sessions share a repeat."""


def cluster_stats(engine: Engine, run_ids: Iterable[int], *, by: StatsBy = "target",
                  classes: bool = False, passes: bool = False,
                  columns: bool = False) -> dict[str, TargetStats]:
    """Per target name (or ``"all"``, the run pooled) the sums of its sessions per
    scenario, scenarios in the order of their first session (as ``session_units``).
    ``classes`` also sums each primary class; ``passes`` reads each scenario's outcomes
    (``ScenarioStats.passes``), else they stay ``None``; ``columns`` names targets as the
    report's columns (``name · run N`` when there are several runs)."""
    ids = list(run_ids)
    units = cache(lambda: units_sql(engine, ids, columns=columns))
    by_name = cache(lambda: units_by_target(units()))
    with engine.connect() as conn:
        clusters = _clusters(conn, ids)
        if classes and clusters.tree is not None:
            # per class through the tree, PostgreSQL's planner (no estimate for a
            # recursive CTE) nested-looped for minutes at 125,000 sessions: units instead
            grouped = {"all": units()} if by == "all" else units_by_target(units())
            return {name: stats_from_units(us) for name, us in grouped.items()}
        names = _names(conn, ids, columns)
        # pooled groups (the run whole, or a name in several runs) sort their sessions by
        # repeat across targets: their positions are ranked, not read off the repeats
        pooled = passes and (by == "all" or len(set(names.values())) < len(names))
        cells = _cells(conn, clusters, passes and not pooled)
        per_class = _class_sums(conn, ids, clusters) if classes else {}
        ranked = None
        if pooled or (passes and any(p is None for *_, p in cells.values())):
            ranked = _ranked_passes(conn, clusters, by)
    out: dict[str, dict[str, ScenarioStats]] = {}
    for (target_id, scenario), (count, errors, found) in cells.items():
        name = names[target_id]
        kinds = {code: Sums(errors.g, k, errors.n, kk, kn, errors.nn)
                 for code, (k, kk, kn) in per_class.get((target_id, scenario), {}).items()}
        stats = ScenarioStats(count, errors, kinds, found)
        group = out.setdefault("all" if by == "all" else name, {})
        group[scenario] = merge_stats(group[scenario], stats) if scenario in group else stats
    if ranked is not None:
        out = {group: {scenario: ScenarioStats(s.sessions, s.errors, s.classes,
                                               ranked[(group, scenario)])
                       for scenario, s in scenarios.items()}
               for group, scenarios in out.items()}
    if by == "all":
        return {"all": TargetStats(out.get("all", {}), units)}

    def units_of(name: str) -> Callable[[], list[Unit]]:
        return lambda: by_name().get(name, [])

    return {name: TargetStats(scenarios, units_of(name)) for name, scenarios in out.items()}


def run_cluster_stats(engine: Engine, run_ids: Iterable[int]
                      ) -> dict[tuple[int, str], TargetStats]:
    """Per (run id, target name) the sums of its sessions per scenario, for every run of
    ``run_ids`` at once: the runs list leads each rate with its clustered interval, and a
    page of 50 runs costs the same three queries as one run (child sessions, names, one
    GROUP BY over the covering index), never a query per run.  No classes, no outcomes."""
    ids = list(run_ids)
    if not ids:
        return {}
    with engine.connect() as conn:
        clusters = _clusters(conn, ids)
        names = {tid: (run, name) for tid, name, run in conn.execute(
            select(targets.c.id, targets.c.name, targets.c.run_id)
            .where(targets.c.run_id.in_(ids))).all()}
        cells = _cells(conn, clusters, False)
    out: dict[tuple[int, str], dict[str, ScenarioStats]] = {}
    for (target_id, scenario), (count, errors, found) in cells.items():
        group = out.setdefault(names[target_id], {})
        stats = ScenarioStats(count, errors, {}, found)
        group[scenario] = merge_stats(group[scenario], stats) if scenario in group else stats
    return {key: TargetStats(scenarios) for key, scenarios in out.items()}


def tag_cluster_stats(engine: Engine, run_ids: Iterable[int], *, columns: bool = False
                      ) -> dict[tuple[str, str], TargetStats]:
    """Per (tag, target name) the sums of the clusters carrying the tag, per scenario (a
    tag spans scenarios: they stay its strata), in one GROUP BY: the report's "By tag"
    table leads with the clustered interval, as its "By scenario" one.  A cluster counts
    under each tag of its top-level session (child sessions folded in, as everywhere);
    ``columns`` names targets as the report's columns.  No classes, no outcomes."""
    from agent_eval.store.aggregates import session_tags

    ids = list(run_ids)
    if not ids:
        return {}
    with engine.connect() as conn:
        clusters = _clusters(conn, ids)
        names = _names(conn, ids, columns)
        tags = session_tags(conn, ids)
        c = clusters.c
        n, k = c.n_calls, c.n_denied
        rows = conn.execute(
            select(tags.c.tag, c.target_id, c.scenario, func.count(),
                   func.sum(case((n > 0, 1), else_=0)), func.sum(k), func.sum(n),
                   func.sum(k * k), func.sum(k * n), func.sum(n * n))
            .select_from(clusters.source.join(tags, tags.c.session_id == c.id))
            .where(*clusters.where).group_by(tags.c.tag, c.target_id, c.scenario)).all()
    out: dict[tuple[str, str], dict[str, ScenarioStats]] = {}
    for tag, target_id, scenario, count, *sums in rows:
        group = out.setdefault((str(tag), names[target_id]), {})
        stats = ScenarioStats(count, Sums(*(int(v or 0) for v in sums)))
        group[scenario] = merge_stats(group[scenario], stats) if scenario in group else stats
    return {key: TargetStats(scenarios) for key, scenarios in out.items()}


def action_cluster_stats(engine: Engine, run_ids: Iterable[int], *, columns: bool = False
                         ) -> dict[str, dict[str, list[Sums]]]:
    """Per target name and next action after a denial (``transcript.NEXT_ACTIONS``), the
    sums per scenario of (denials followed by that action ``k``, denials ``n``) over the
    clusters with a denial (child sessions folded into their root): the report's
    "Reaction to denial" shares with sessions as clusters, the denials of one session
    not taken as independent.  Two GROUP BYs in one query (per cluster, then per target
    and scenario), over the denied calls' index range."""
    from agent_eval.transcript import NEXT_ACTIONS

    ids = list(run_ids)
    if not ids:
        return {}
    c = tool_calls.c
    with engine.connect() as conn:
        clusters = _clusters(conn, ids)
        names = _names(conn, ids, columns)
        member = sessions.alias("member")
        if clusters.tree is None:
            root, source = member, tool_calls.join(member, member.c.id == c.session_id)
            cluster = member.c.id
        else:
            tree = clusters.tree
            root = sessions.alias("root")
            source = (tool_calls.join(member, member.c.id == c.session_id)
                      .join(tree, tree.c.id == member.c.id)
                      .join(root, root.c.id == tree.c.root))
            cluster = tree.c.root
        per_cluster = (
            select(root.c.target_id.label("target_id"), root.c.scenario.label("scenario"),
                   func.count().label("n"),
                   *(func.sum(case((c.next_action == a, 1), else_=0)).label(f"k{i}")
                     for i, a in enumerate(NEXT_ACTIONS)))
            .select_from(source)
            .where(*denied_calls(ids), *counted_sessions(member.c),
                   *counted_sessions(root.c))
            .group_by(cluster, root.c.target_id, root.c.scenario).subquery("per_cluster"))
        p = per_cluster.c
        n = p.n
        ks = [p[f"k{i}"] for i in range(len(NEXT_ACTIONS))]
        rows = conn.execute(
            select(p.target_id, p.scenario, func.count(), func.sum(n), func.sum(n * n),
                   *(col for k in ks for col in (func.sum(k), func.sum(k * k),
                                                 func.sum(k * n))))
            .group_by(p.target_id, p.scenario)).all()
    out: dict[str, dict[str, list[Sums]]] = {}
    for target_id, _scenario, g, sn, snn, *per_action in rows:
        actions = out.setdefault(names[target_id], {a: [] for a in NEXT_ACTIONS})
        for i, a in enumerate(NEXT_ACTIONS):
            sk, skk, skn = (int(v or 0) for v in per_action[3 * i:3 * i + 3])
            actions[a].append(Sums(int(g), sk, int(sn or 0), skk, skn, int(snn or 0)))
    return out


@dataclass(frozen=True, slots=True)
class _Clusters:
    """The clusters the sums are taken over: the runs' top-level non-error sessions, each
    with its calls and denials.  ``source`` has the columns ``id, run_id, target_id,
    scenario, repeat, status, n_calls, n_denied`` (rows kept by ``where``); ``tree`` maps every
    session of a cluster (``id``) to it (``root``), or is ``None`` when each session is
    its own cluster (no child sessions: the sessions table itself)."""

    source: Any
    where: tuple
    tree: Any = None

    @property
    def c(self):
        return self.source.c


def _clusters(conn, ids: list[int]) -> _Clusters:
    """The sessions themselves; or, when the runs hold child sessions (subagents), each
    root with the calls and denials of its descendants that did not fault folded in (as
    ``metrics.clustered.session_units``): the descendants by a recursive CTE from the
    roots down, so a child whose parent is missing or in a cycle reaches no root."""
    s = sessions.c
    if not _nested(conn, ids):
        return _Clusters(sessions, (s.run_id.in_(ids), *counted_sessions()))
    tree = (select(s.id.label("id"), s.id.label("root"))
            .where(s.run_id.in_(ids), s.parent_id.is_(None), *counted_sessions())
            .cte("tree", recursive=True))
    child = sessions.alias("child")
    tree = tree.union_all(select(child.c.id, tree.c.root)
                          .where(child.c.parent_id == tree.c.id, child.c.run_id.in_(ids)))
    member = sessions.alias("member")
    folded = (select(tree.c.root.label("id"), func.sum(member.c.n_calls).label("n_calls"),
                     func.sum(member.c.n_denied).label("n_denied"))
              .select_from(tree).join(member, member.c.id == tree.c.id)
              .where(*counted_sessions(member.c)).group_by(tree.c.root).subquery())
    root = sessions.alias("root")
    units = (select(root.c.id, root.c.run_id, root.c.target_id, root.c.scenario,
                    root.c.repeat, root.c.status, folded.c.n_calls, folded.c.n_denied)
             .select_from(root).join(folded, folded.c.id == root.c.id).subquery("units"))
    return _Clusters(units, (), tree)


def _nested(conn, ids: list[int]) -> bool:
    """Whether the runs hold child sessions: a range of ``ix_sessions_parent`` (``+ 0``
    keeps SQLite's planner from reading every session of the run instead).  The range is
    ``parent_id > 0`` (session ids start at 1): on ``IS NOT NULL`` SQLite scanned the
    whole sessions table, every run's, 40 ms a call at a million calls, and the runs and
    run pages ask twice."""
    s = sessions.c
    return conn.execute(select(s.id).where(s.parent_id > 0, (s.run_id + 0).in_(ids))
                        .limit(1)).first() is not None


def _passed(c):
    """A cluster's outcome as 0/1 (``metrics.repeats``): completed, no call denied."""
    return case((and_(c.status == "completed", c.n_denied == 0), 1), else_=0)


def _bit(value, position):
    """``value · 2^(position mod BLOCK)`` as a 64-bit integer; a negative position (a
    negative repeat: such a scenario is ranked instead) counts as bit 0."""
    shift = cast(case((position >= 0, position % BLOCK), else_=0), Integer)
    return cast(value, BigInteger).op("<<")(shift)


def _cells(conn, clusters: _Clusters, passes: bool
           ) -> dict[tuple[int, str], tuple[int, Sums, Passes | None]]:
    """(target id, scenario) -> (sessions, sums over the sessions with calls, outcomes or
    ``None``), in the order of each pair's first session.

    Without ``passes`` (and without child sessions), one range of
    ``ix_sessions_run_target_status`` grouped in its order (by run and status too, summed
    here: no sort; without the run, the runs and run pages' several runs were sorted, 3×
    the time of the read).  With them, grouped per block of repeats; a scenario whose repeats are not
    distinct gets ``None`` (the caller ranks it: ``_ranked_passes``)."""
    s = clusters.c
    n, k = s.n_calls, s.n_denied
    sums = (func.min(s.id), func.count(), func.sum(case((n > 0, 1), else_=0)), func.sum(n),
            func.sum(n * n), func.sum(k), func.sum(k * k), func.sum(k * n))
    query = select(s.target_id, s.scenario, *sums).select_from(clusters.source)
    if passes:
        block = s.repeat // BLOCK
        rows = conn.execute(
            query.add_columns(func.min(s.repeat), func.max(s.repeat),
                              func.sum(_bit(1, s.repeat)), func.sum(_bit(_passed(s), s.repeat)),
                              block)
            .where(*clusters.where).group_by(s.target_id, s.scenario, block)).all()
    else:
        rows = memo.rows(conn, query.where(*clusters.where)
                         .group_by(s.run_id, s.target_id, s.status, s.scenario))
    acc: dict[tuple[int, str], list] = {}
    for target, scenario, first, count, *totals in rows:
        cell = acc.setdefault((target, scenario), [first, 0, [0] * 6, []])
        cell[0] = min(cell[0], first)
        cell[1] += count
        for i in range(6):
            cell[2][i] += int(totals[i] or 0)
        if passes:
            cell[3].append((count, *totals[6:]))
    out = {}
    for key, (_first, count, (g, sn, snn, sk, skk, skn), blocks) in sorted(
            acc.items(), key=lambda item: (item[0][0], item[1][0])):
        out[key] = (count, Sums(g, sk, sn, skk, skn, snn), _block_passes(blocks) if passes
                    else None)
    return out


def _block_passes(blocks: list[tuple]) -> Passes | None:
    """A scenario's outcomes from its blocks ``(sessions, lowest repeat, highest, Σ 2^bit,
    Σ passed·2^bit, block)`` when its repeats are distinct (each block's bits then add
    without a carry) and not negative: the sessions in repeat order are the set bits of
    the occupied repeats, squeezed together over the repeats missing (faults, a run still
    going); else ``None``."""
    if min(b[1] for b in blocks) < 0 or any(int(b[3]).bit_count() != b[0] for b in blocks):
        return None
    occupied = sum(int(b[3]) << (BLOCK * int(b[5])) for b in blocks)
    passed = sum(int(b[4]) << (BLOCK * int(b[5])) for b in blocks)
    return Passes(occupied.bit_count(), _squeeze(passed, occupied))


def _squeeze(bits: int, occupied: int) -> int:
    """The bits of ``bits`` at the set positions of ``occupied``, packed from bit 0 (one
    step per run of consecutive repeats, not per session)."""
    out = width = 0
    while occupied:
        low = (occupied & -occupied).bit_length() - 1
        rest = occupied >> low
        run = (~rest & (rest + 1)).bit_length() - 1  # the run of ones starting at ``low``
        out |= (bits >> low & ((1 << run) - 1)) << width
        width += run
        occupied &= ~(((1 << run) - 1) << low)
    return out


def _ranked_passes(conn, clusters: _Clusters, by: StatsBy) -> dict[tuple[str, str], Passes]:
    """(group, scenario) -> outcomes, each session's position its ``row_number()`` in
    (repeat, passed) order within the group (a target name, or ``"all"``) and scenario;
    bits summed per block of positions."""
    s, t = clusters.c, targets.c
    group = [t.name] if by == "target" else []
    passed = _passed(s)
    position = (func.row_number().over(partition_by=[*group, s.scenario],
                                       order_by=[s.repeat, passed]) - 1)
    ranked = (select(*(c.label("g") for c in group), s.scenario, passed.label("p"),
                     position.label("pos"))
              .select_from(clusters.source).join(targets, t.id == s.target_id)
              .where(*clusters.where).subquery())
    r = ranked.c
    keys = [r.g] if by == "target" else []
    pos = type_coerce(r.pos, Integer)
    block = pos // BLOCK
    rows = conn.execute(select(*keys, r.scenario, func.count(), func.sum(_bit(r.p, pos)),
                               block).group_by(*keys, r.scenario, block)).all()
    acc: dict[tuple[str, str], list[int]] = {}
    for *key, scenario, count, bits, index in rows:
        cell = acc.setdefault((key[0] if key else "all", scenario), [0, 0])
        cell[0] += count
        cell[1] += int(bits) << (BLOCK * int(index))
    return {key: Passes(n, bits) for key, (n, bits) in acc.items()}


def _per_session_denied(ids: list[int], *by):
    c = tool_calls.c
    return (select(c.session_id, *by, func.count().label("k")).where(*denied_calls(ids))
            .group_by(c.session_id, *by).subquery())


def _class_sums(conn, ids: list[int], clusters: _Clusters
                ) -> dict[tuple[int, str], dict[str, tuple[int, int, int]]]:
    """(target id, scenario) -> class -> ``(Σk, Σk², Σkn)``, ``k`` the session's calls
    denied in the class (sessions without any add nothing; no child sessions).

    Each (session, class) group of the denied calls looks its session up by id (on SQLite
    the sessions' ``run_id + 0`` keeps the planner from reading every session of the run
    from the covering index and probing the groups through an index built per query), and only
    sessions with a denial are read (``n_denied > 0``: on PostgreSQL the hash of the run's
    sessions halves).  On PostgreSQL the statement gets the memory to hash and sort its
    84,000 groups at a million calls (``_room``): with the default 4 MB both spilled to
    disk, 0.7 s of ``compare``'s 0.8 s."""
    c = tool_calls.c
    code = func.coalesce(func.nullif(c.primary_code, ""), UNCLASSIFIED).label("code")
    d = _per_session_denied(ids, code)
    s = clusters.c
    k, n = d.c.k, s.n_calls
    # ``+ 0`` on SQLite only: PostgreSQL then guessed 167 sessions, and sorted the groups
    run = s.run_id + 0 if conn.dialect.name == "sqlite" else s.run_id
    _room(conn)
    rows = conn.execute(
        select(s.target_id, s.scenario, d.c.code, func.sum(k), func.sum(k * k),
               func.sum(k * n))
        .select_from(d).join(clusters.source, s.id == d.c.session_id)
        .where(run.in_(ids), *counted_sessions(s), n > 0, s.n_denied > 0)
        .group_by(s.target_id, s.scenario, d.c.code)).all()
    out: dict[tuple[int, str], dict[str, tuple[int, int, int]]] = {}
    for target, scenario, name, sk, skk, skn in rows:
        out.setdefault((target, scenario), {})[name] = (int(sk), int(skk), int(skn))
    return out


WORK_MEM = "64MB"
"""Memory per sort or hash of the few PostgreSQL statements that group tens of thousands of
rows (the per-class sums), for their transaction only (``SET LOCAL``)."""


def _room(conn) -> None:
    """On PostgreSQL, :data:`WORK_MEM` for the rest of this connection's transaction."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL work_mem = '{WORK_MEM}'")


def session_outcomes(engine: Engine, run_ids: Iterable[int],
                     scenarios: Iterable[str] | None = None, *,
                     columns: bool = False) -> Outcomes:
    """``(target, scenario) -> ((repeat, passed), ...)`` over the top-level, non-error
    sessions (of ``scenarios`` only, when given), in repeat order (ties in storage
    order), keys by target then scenario: passed = completed and no call denied
    (``metrics.repeats``).  One query of plain tuples in storage order (an integer sort:
    the database sorting by scenario names spilled to disk on PostgreSQL), grouped and
    put in repeat order here.  ``compare`` reads it for the flipped scenarios only."""
    ids = list(run_ids)
    wanted = None if scenarios is None else sorted(set(scenarios))
    if wanted == []:
        return {}
    with engine.connect() as conn:
        clusters = _clusters(conn, ids)
        s = clusters.c
        names = _names(conn, ids, columns)
        rows = conn.execute(
            select(s.target_id, s.scenario, s.repeat, _passed(s))
            .select_from(clusters.source)
            .where(*clusters.where, *(() if wanted is None else (s.scenario.in_(wanted),)))
            .order_by(s.id)).all()
    grouped: dict[tuple[int, str], list[tuple[int, bool]]] = {}
    for target, scenario, repeat, passed in rows:  # sorting by id only: no string sort
        grouped.setdefault((target, scenario), []).append((repeat, passed == 1))
    return {(names[target], scenario): tuple(sorted(v, key=itemgetter(0)))
            for (target, scenario), v in sorted(grouped.items(), key=itemgetter(0))}


def _names(conn, ids: list[int], columns: bool = False) -> dict[int, str]:
    several = columns and len(ids) > 1
    return {tid: f"{name} · run {run}" if several else name
            for tid, name, run in conn.execute(select(targets.c.id, targets.c.name,
                                                      targets.c.run_id)
                                               .where(targets.c.run_id.in_(ids))).all()}
