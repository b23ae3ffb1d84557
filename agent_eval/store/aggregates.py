"""Run summaries and session units computed by GROUP BY in the database (issue #13).

``metrics.summarize`` and ``metrics.clustered.session_units`` stream every call row into
Python: seconds at a million calls.  The functions here give the same results from a
handful of GROUP BY queries (SQLAlchemy Core, SQLite and PostgreSQL alike), so ``gate``,
``compare`` and ``report --format`` answer in well under a second:

* calls are counted as *all calls minus the calls of error sessions*: the first is one
  GROUP BY on the covering ``ix_tool_calls_breakdown`` index, the second touches only the
  few faulted sessions (the breakdown's method, ``reads.class_breakdown``);
* denied calls (next action, burned turns, per-session classes) are one range of
  ``ix_tool_calls_run_decision``;
* the per-session units (``power``, tag strata) get their call counts from each
  session's stored count and one GROUP BY per session (sessions themselves are read
  without their transcripts); ``gate`` and ``compare`` read sums per scenario instead
  (``store.cluster_stats``).

Floating sums (mean handshake share, mean decode speed) may differ from the Python pass
in the last bit, because the database adds in its own order; every count is identical.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from sqlalchemy import Engine, Text, and_, case, cast, func, literal, select

from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.clustered import Unit, _tally_of, _units, split_sessions
from agent_eval.metrics.summary import GroupBy, GroupSummary, _Tally
from agent_eval.store.schema import sessions, targets, tool_calls, turns

Detail = Literal["all", "actions", "rates"]
"""``all``: every figure; ``actions``: no burned turns, no missed handshake steps, and of
the sessions only their exit states, calls and handshake completion (no messages, replies,
mean handshake share or duration: ``compare`` prints none of them, and the rest is one
range of the covering ``ix_sessions_run_target_status``); ``rates``: also no next action
after a denial (``gate`` reads only the error, class and handshake rates)."""


def summarize_sql(engine: Engine, run_ids: Iterable[int], *, by: GroupBy = "target",
                  columns: bool = False, all_classes: bool = False,
                  with_turns: bool = True, detail: Detail = "all") -> dict[str, GroupSummary]:
    """What ``metrics.summarize(session_rows, call_rows, turn_rows, by=by)`` returns for the
    runs, computed by GROUP BY queries.  ``columns`` names target groups as the report's
    columns (``name · run N`` when there are several runs: ``cli.tables.summarize_runs``).
    ``with_turns=False`` leaves the replies out, as ``summarize`` without ``turn_rows``;
    ``detail`` leaves out what a caller does not print (:data:`Detail`), each a pass over
    the run's sessions or denied calls.
    ``by="tag"`` is not supported here (a session counts in each of its JSON tags)."""
    ids = list(run_ids)
    if by == "tag":
        raise ValueError("summarize_sql groups by target, scenario, run or all, not tag")
    with engine.connect() as conn:
        names = _group_namer(conn, ids, by, columns)
        skey = _session_key(by)
        tallies = _session_tallies(conn, ids, skey, names, full=detail == "all")
        for key, decision, code, action, n in _call_counts(conn, ids, by,
                                                           actions=detail != "rates"):
            tally = tallies[names(key)]
            tally.calls += n
            if decision == "deny":
                tally.denied += n
                tally.classes[code or UNCLASSIFIED] += n
                if action is not None:
                    tally.actions[action] += n
        if detail == "all":
            for key, n in _burned_turns(conn, ids, by, skey):
                tallies[names(key)].turns_burned += n
        if with_turns:
            _turn_figures(conn, ids, skey, names, tallies)
    return {key: tally.freeze(key, all_classes) for key, tally in tallies.items()}


def _burned_turns(conn, ids: list[int], by: GroupBy, skey) -> list[tuple[Any, int]]:
    """``(key, replies whose calls were all denied)`` outside error sessions: the denied
    calls grouped per reply, each group's size checked against all the reply's calls on
    ``ix_tool_calls_session_turn``; grouped by the calls' own target or run (no lookup of
    a session per reply: 90,000 of them took 1.4 s on PostgreSQL), minus the replies of
    the few error sessions, read from those sessions.  By scenario, only the session
    knows the key."""
    c, s = tool_calls.c, sessions.c
    per_turn = (select(c.session_id, c.turn_index, c.target_id, c.run_id,
                       func.count().label("n"))
                .where(c.run_id.in_(ids), c.decision == "deny", c.session_id > 0)
                .group_by(c.session_id, c.turn_index, c.target_id, c.run_id).subquery())
    every = (select(func.count()).select_from(tool_calls)
             .where(c.session_id == per_turn.c.session_id,
                    c.turn_index == per_turn.c.turn_index).scalar_subquery())
    turn_key = {"target": per_turn.c.target_id, "run": per_turn.c.run_id,
                "all": literal("all")}.get(by)
    if turn_key is None:
        return conn.execute(
            select(skey, func.count()).select_from(per_turn)
            .join(sessions, s.id == per_turn.c.session_id)
            .where(s.status != "error", per_turn.c.n == every).group_by(skey)).all()
    out: Counter = Counter(dict(conn.execute(
        select(turn_key, func.count()).select_from(per_turn)
        .where(per_turn.c.n == every).group_by(turn_key)).all()))
    faulted = (select(skey.label("key"), c.session_id, c.turn_index)
               .select_from(sessions).join(tool_calls, c.session_id == s.id)
               .where(s.run_id.in_(ids), s.status == "error")
               .group_by(skey, c.session_id, c.turn_index)
               .having(func.sum(case((c.decision == "deny", 1), else_=0)) == func.count())
               .subquery())
    for key, n in conn.execute(select(faulted.c.key, func.count()).group_by(faulted.c.key)):
        out[key] -= n
    return [(key, n) for key, n in out.items() if n > 0]


def _session_key(by: GroupBy) -> Any:
    s = sessions.c
    return {"target": s.target_id, "scenario": s.scenario, "run": s.run_id,
            "all": literal("all")}[by]


def _group_namer(conn, ids: list[int], by: GroupBy, columns: bool):
    """Key value -> group name: a target id becomes its name (with the run as a column)."""
    if by == "target":
        rows = conn.execute(select(targets.c.id, targets.c.name, targets.c.run_id)
                            .where(targets.c.run_id.in_(ids))).all()
        several = columns and len(ids) > 1
        named = {tid: f"{name} · run {run}" if several else name for tid, name, run in rows}
        return named.__getitem__
    return str


def _session_tallies(conn, ids: list[int], key, names, *, full: bool = True
                     ) -> dict[str, _Tally]:
    """Every group's session figures, groups in the order their first session comes in
    ``session_rows`` (targets in the order added, then storage order).  Without ``full``
    only what ``ix_sessions_run_target_status`` covers: no messages, replies, mean
    handshake share, duration or missed handshake steps (:data:`Detail`)."""
    s = sessions.c
    required = s.handshake_required > 0
    done = case((s.handshake_done < s.handshake_required, s.handshake_done),
                else_=s.handshake_required)
    extra = (func.sum(s.n_messages), func.sum(s.n_turns),
             func.sum(case((required, done * 1.0 / s.handshake_required), else_=0.0)),
             func.min(s.started_at), func.max(s.finished_at))
    rows = conn.execute(
        select(key, s.status, func.count(), func.min(s.target_id), func.min(s.id),
               func.sum(case((required, 1), else_=0)),
               func.sum(case((and_(required, s.handshake_completed), 1), else_=0)),
               *(extra if full else ()))
        .where(s.run_id.in_(ids)).group_by(key, s.status)).all()
    if not full:
        rows = [(*row, 0, 0, 0.0, None, None) for row in rows]
    first: dict[str, tuple[int, int]] = {}
    for key_value, _status, _n, target_id, sid, *_ in rows:
        name = names(key_value)
        first[name] = min(first.get(name, (target_id, sid)), (target_id, sid))
    tallies = {name: _Tally() for name in sorted(first, key=first.__getitem__)}
    for key_value, status, n, _t, _s, hs_n, hs_ok, messages, replies, hs_share, start, end in rows:
        tally = tallies[names(key_value)]
        tally.exit_states[status] += n
        if status == "error":
            tally.error_sessions += n
            continue
        tally.sessions += n
        tally.messages += messages or 0
        tally.replies += replies or 0
        tally.hs_sessions += hs_n or 0
        tally.hs_completed += hs_ok or 0
        tally.hs_done_share += float(hs_share or 0.0)
        if start is not None and (tally.first_start is None or start < tally.first_start):
            tally.first_start = start
        if end is not None and (tally.last_finish is None or end > tally.last_finish):
            tally.last_finish = end
    if not full:
        return tallies
    missed_steps = conn.execute(
        select(key, s.handshake_missed_step, func.count())
        .where(s.run_id.in_(ids), s.status != "error", s.handshake_required > 0,
               s.handshake_completed.is_(False), s.handshake_missed_step.is_not(None),
               s.handshake_missed_step != "")
        .group_by(key, s.handshake_missed_step)).all()
    for key_value, step, n in missed_steps:
        tallies[names(key_value)].hs_missed[step] += n
    return tallies


def _call_counts(conn, ids: list[int], by: GroupBy, *, actions: bool = True) -> list[tuple]:
    """``(key, decision, primary, next_action, calls)`` outside error sessions: all calls
    on the covering breakdown index (no next action needed for allowed calls), denied
    calls with their next action, minus the calls of the few error sessions.  Without
    ``actions`` every next action is ``None`` and the denied calls come from the
    breakdown index too."""
    c, s = tool_calls.c, sessions.c
    call_key = {"target": c.target_id, "run": c.run_id, "all": literal("all")}.get(by)
    out: Counter = Counter()
    if call_key is None:  # scenario: only the session knows it
        rows = conn.execute(
            select(s.scenario, c.decision, c.primary_code, c.next_action, func.count())
            .select_from(tool_calls).join(sessions, s.id == c.session_id)
            .where(c.run_id.in_(ids), s.status != "error")
            .group_by(s.scenario, c.decision, c.primary_code, c.next_action)).all()
        return [(*k, n) for *k, n in rows]
    allowed = conn.execute(
        select(call_key, c.decision, c.primary_code, func.count())
        .where(c.run_id.in_(ids), *(() if not actions else (c.decision != "deny",)))
        .group_by(call_key, c.decision, c.primary_code)).all()
    for key, decision, code, n in allowed:
        out[(key, decision, code, None)] += n
    denied = [] if not actions else conn.execute(
        select(call_key, c.primary_code, c.next_action, func.count())
        .where(c.run_id.in_(ids), c.decision == "deny", c.session_id > 0)
        .group_by(call_key, c.primary_code, c.next_action)).all()
    for key, code, action, n in denied:
        out[(key, "deny", code, action)] += n
    faulted = conn.execute(
        select(call_key, c.decision, c.primary_code, c.next_action, func.count())
        .select_from(sessions).join(tool_calls, c.session_id == s.id)
        .where(s.run_id.in_(ids), s.status == "error")
        .group_by(call_key, c.decision, c.primary_code, c.next_action)).all()
    for key, decision, code, action, n in faulted:
        out[(key, decision, code, action if decision == "deny" and actions else None)] -= n
    return [(*k, n) for k, n in out.items() if n > 0]


def _turn_figures(conn, ids: list[int], key, names, tallies: dict[str, _Tally]) -> None:
    """Replies' counts, token sums and mean decode speed per group; the latency and
    time-to-first-token percentiles from the two ranks around each, read in SQL order."""
    s, t = sessions.c, turns.c
    scope = (s.run_id.in_(ids), s.status != "error")
    rows = conn.execute(
        select(key, func.count(), func.sum(t.decode_tps), func.count(t.decode_tps),
               func.sum(t.prompt_tokens), func.sum(t.completion_tokens),
               func.sum(t.reasoning_tokens), func.count(t.latency_s), func.count(t.ttft_s))
        .select_from(turns).join(sessions, s.id == t.session_id)
        .where(*scope).group_by(key)).all()
    for key_value, n, tps_sum, tps_n, prompt, completion, reasoning, n_lat, n_ttft in rows:
        tally = tallies[names(key_value)]
        tally.turns += n
        tally.tps_sum += float(tps_sum or 0.0)
        tally.tps_n += tps_n
        tally.prompt_tokens += prompt or 0
        tally.completion_tokens += completion or 0
        tally.reasoning_tokens += reasoning or 0
        for column, count, values in ((t.latency_s, n_lat, tally.latency),
                                      (t.ttft_s, n_ttft, tally.ttft)):
            values.extend(_ranks(conn, key == key_value, scope, column, count))


def _ranks(conn, in_group, scope, column, count: int) -> list[float]:
    """Stand-in values with the same p50 and p95 as the group's ``count`` values: the
    sorted values at the ranks ``percentile`` interpolates between, the rest repeated.

    ``percentile`` only reads ranks ``floor(pos)`` and ``floor(pos) + 1``; a list built from
    those ranks at the same positions gives identical results without reading every turn.
    """
    if count == 0:
        return []
    needed = sorted({r for q in (50, 95) for pos in ((count - 1) * q / 100,)
                     for r in (int(pos), min(int(pos) + 1, count - 1))})
    s, t = sessions.c, turns.c
    values: dict[int, float] = {}
    for rank in needed:
        values[rank] = conn.execute(
            select(column).select_from(turns).join(sessions, s.id == t.session_id)
            .where(*scope, in_group, column.is_not(None))
            .order_by(column).limit(1).offset(rank)).scalar_one()
    out, last = [], values[needed[0]]
    for rank in range(count):  # O(turns) floats, no rows: cheap next to reading turns
        last = values.get(rank, last)
        out.append(last)
    return out


class UnitSession(NamedTuple):
    """The fields of a session that units and repeat outcomes read (``split_sessions``,
    ``metrics.clustered._units``, ``metrics.repeats._outcomes_by``)."""

    id: int
    parent_id: int | None
    status: str
    target: str
    scenario: str
    repeat: int
    tags: tuple[str, ...]
    n_calls: int


def unit_sessions(engine: Engine, run_ids: Iterable[int]) -> list[UnitSession]:
    """The runs' sessions in ``session_rows`` order with only what per-session statistics
    need; tags come back as JSON text and are decoded only when not empty, so a run of
    125,000 sessions reads in a fraction of the time full ``SessionRow``s take."""
    s = sessions.c
    query = (select(s.id, s.parent_id, s.status, targets.c.name, s.scenario, s.repeat,
                    cast(s.tags, Text), s.n_calls)
             .join(targets, targets.c.id == s.target_id)
             .where(s.run_id.in_(list(run_ids))).order_by(s.target_id, s.id))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [UnitSession(sid, parent, status, target, scenario, repeat,
                        tuple(json.loads(tags)) if tags and tags != "[]" else (), n_calls)
            for sid, parent, status, target, scenario, repeat, tags, n_calls in rows]


def units_sql(engine: Engine, run_ids: Iterable[int]) -> list[Unit]:
    """``session_units(session_rows, call_rows)`` from the sessions' stored call counts and
    one GROUP BY of denied calls per (session, class): no call row leaves the database.

    ``sessions.n_calls`` is written as ``len(record.calls)`` in the same transaction as
    those calls (``store.sessions``), so it is the per-session count a GROUP BY over the
    run's calls would give, without reading a million index entries.
    """
    ids = list(run_ids)
    c = tool_calls.c
    rows = unit_sessions(engine, ids)
    calls = [(row.id, row.n_calls) for row in rows]
    with engine.connect() as conn:
        denied = conn.execute(
            select(c.session_id, c.primary_code, func.count())
            .where(c.run_id.in_(ids), c.decision == "deny", c.session_id > 0)
            .group_by(c.session_id, c.primary_code)).all()
    parent, roots, faulted = split_sessions(rows)  # type: ignore[arg-type]
    nested = any(p is not None for p in parent.values())
    tallies: dict[int, list] = {sid: [0, 0, {}] for sid in roots}
    for sid, n in calls:
        tally = _tally_of(sid, parent, faulted, tallies) if nested else tallies.get(sid)
        if tally is not None:
            tally[0] += n
    for sid, code, n in denied:
        tally = _tally_of(sid, parent, faulted, tallies) if nested else tallies.get(sid)
        if tally is not None:
            tally[1] += n
            key = code or "unclassified"
            tally[2][key] = tally[2].get(key, 0) + n
    return _units(roots, tallies)  # type: ignore[arg-type]
