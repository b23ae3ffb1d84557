"""The one aggregator: every run figure a reader shows, by GROUP BY in the database.

The report, the viewer's pages, ``gate``, ``compare``, ``runs`` and the CLI tables read
their figures (errors per 100 calls with the Wilson interval, the class breakdown,
handshake completion, reaction to denial, exit states, speed) from :func:`summarize_sql`,
and the sums behind the clustered intervals from ``store.cluster_stats``; nothing else
in the package counts a run.  :func:`summarize_sql` returns what ``metrics.summarize``
returns over the same rows, record for record: the pure function is the definition, and
tests/store/test_aggregates_sql.py holds every reader to it on SQLite and PostgreSQL.

No row per call leaves the database (SQLAlchemy Core, both dialects alike):

* side requests (tag ``side-request``: an agent CLI's title or memory request, not a
  conversation of the stack) are left out of every figure, as error sessions are, and
  counted apart (``side_requests``), told apart by the sessions' ``side_request`` column
  (written from the tags), which the covering index holds: a ``LIKE`` on the tags read
  every session's row, and made ``gate`` 4× slower at a million calls;
* sessions: one GROUP BY per (group, target, exit state), in the covering index's order,
  side requests summed apart in the same rows; the calls and denied calls are
  the sessions' stored ``n_calls`` and ``n_denied`` (written with the calls, in their
  transaction: ``store.sessions``), so the totals are one range of the covering
  ``ix_sessions_run_target_status``;
* classes and next actions: the denied calls, one range of ``ix_tool_calls_run_decision``,
  minus those of the few error sessions (counting all, then subtracting the faulted few,
  keeps the big query a plain index range);
* burned turns: the denied calls grouped per reply, checked against all the reply's calls;
* leaks: the calls with a leak class, one range of the partial ``ix_tool_calls_run_leak``
  (only calls judged under an agent CLI's rules that leaked are in it), minus those of
  the few uncounted sessions;
* speed: the turns' sums, and the latency percentiles from the two ranks around each;
* stack faults: the JSON lists of the few sessions that hold one (``stack_faults`` is
  NULL on every other), decoded here; their calls are the sessions' ``n_calls``, error
  sessions included.

``Detail`` leaves out what a reader does not show, each a pass the reader then skips.
Groups come in the order of their first target (the order targets were added), then by
name: by target, run or all that is ``summarize``'s order; by scenario or tag a reader
that wants another order sorts them itself (``summarize`` orders those by their first
session, which would take each session's id, a column the covering index does not hold
on PostgreSQL: it made the run page read the sessions' rows).
Floating sums (mean handshake share, mean decode speed) may differ from the Python pass
in the last bit, because the database adds in its own order; every count is identical.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import Engine, and_, case, func, not_, or_, select, true

from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.summary import GROUP_BYS, NO_AGENT, GroupKeys, GroupSummary, Tally
from agent_eval.store import memo
from agent_eval.store.schema import (
    counted_sessions,
    denied_calls,
    faulted_calls,
    sessions,
    side_request,
    targets,
    tool_calls,
    turns,
    uncounted_sessions,
)
from agent_eval.transcript import stack_fault_codes

Detail = Literal["all", "actions", "rates", "totals"]
"""What a reader needs, most first.  ``all``: every figure.  ``actions``: no burned turns,
no missed handshake steps, and of the sessions only their exit states, calls and
handshake completion (no messages, replies, mean handshake share or duration: one range
of the covering ``ix_sessions_run_target_status``).  ``rates``: also no next action
after a denial (``gate`` reads only the error, class and handshake rates).  ``totals``:
also no classes (``classes`` is empty; ``errors`` and the handshake are there): the
sessions' index alone (the runs list, a trend, the by-scenario and by-tag tables)."""


def summarize_sql(engine: Engine, run_ids: Iterable[int], *, by: GroupKeys = "target",
                  columns: bool = False, all_classes: bool = False,
                  with_turns: bool = True, detail: Detail = "all") -> dict[Any, GroupSummary]:
    """What ``metrics.summarize(session_rows, call_rows, turn_rows, by=by)`` returns for
    the runs, by GROUP BY queries.  ``by`` is a key or a tuple of keys (groups keyed by a
    tuple of names, e.g. ``("scenario", "target")``).  ``columns`` names targets as the
    report's columns (``name · run N`` when there are several runs); ``with_turns=False``
    leaves the replies out, as ``summarize`` without ``turn_rows``; ``detail``: what to
    leave out (:data:`Detail`).  Figures ``detail`` leaves out stay at zero."""
    ids = list(run_ids)
    with engine.connect() as conn:
        g = _Grouping.of(conn, ids, by, columns)
        full = detail == "all"
        tallies = _session_tallies(conn, ids, g, full=full, denied=detail == "totals")
        if detail != "totals":
            for raw, code, action, n in _denied_counts(conn, ids, g,
                                                       actions=detail in ("all", "actions")):
                tally = tallies[g.name(raw)]
                tally.denied += n
                tally.classes[code or UNCLASSIFIED] += n
                if action is not None:
                    tally.actions[action] += n
        if detail != "totals":
            for raw, code, n in _leak_counts(conn, ids, g):
                tallies[g.name(raw)].leaks[code] += n
        for raw, n_calls, faults in _stack_faults(conn, ids, g):
            tallies[g.name(raw)].add_stack(n_calls, faults)
        if full:
            for raw, n in _burned_turns(conn, ids, g):
                tallies[g.name(raw)].turns_burned += n
        if with_turns:
            _turn_figures(conn, ids, g, tallies)
    return {key: tally.freeze(key, all_classes) for key, tally in tallies.items()}


@dataclass(frozen=True, slots=True)
class _Grouping:
    """How ``by`` reads in SQL: the key columns over sessions (and the sessions' tags),
    the same over tool calls when the call's own columns hold them (target, run), and
    how a row's key values become the group's key."""

    parts: tuple[str, ...]
    session_cols: tuple  # over ``sessions`` (and ``tags``)
    call_cols: tuple | None  # over ``tool_calls`` alone; None: the session holds the key
    tags: Any  # the (session, tag, position) subquery, when a part is "tag"
    names: dict[int, str]  # target id -> name (as a column when asked)
    no_agent: bool = False  # by agent, and no session of the runs names one: not a column

    @classmethod
    def of(cls, conn, ids: list[int], by: GroupKeys, columns: bool) -> _Grouping:
        parts = (by,) if isinstance(by, str) else tuple(by)
        unknown = [p for p in parts if p not in GROUP_BYS]
        if unknown or not parts:
            raise ValueError(f"unknown grouping {by!r}; expected one of {', '.join(GROUP_BYS)}"
                             " or a tuple of them")
        s, c = sessions.c, tool_calls.c
        tags = session_tags(conn, ids) if "tag" in parts else None
        on_session = {"target": s.target_id, "scenario": s.scenario, "run": s.run_id,
                      "tag": tags.c.tag if tags is not None else None,
                      "agent": s.policy_agent}
        on_call = {"target": c.target_id, "run": c.run_id}
        # by agent when no session names one (runs judged under allow-lists): the key is
        # the same for every session, so not grouped by: grouped by it, SQLite sorted the
        # run's sessions (the column is last in the covering index), a fifth of the run
        # page.  PostgreSQL hashes the groups, where the check would be one more scan.
        no_agent = ("agent" in parts and conn.dialect.name == "sqlite"
                    and not _any_agent(conn, ids))
        keyed = [p for p in parts if p != "all" and not (p == "agent" and no_agent)]
        rows = conn.execute(select(targets.c.id, targets.c.name, targets.c.run_id)
                            .where(targets.c.run_id.in_(ids))).all()
        several = columns and len(ids) > 1
        names = {tid: f"{name} · run {run}" if several else name for tid, name, run in rows}
        return cls(parts, tuple(on_session[p] for p in keyed),
                   tuple(on_call[p] for p in keyed) if all(p in on_call for p in keyed)
                   else None, tags, names, no_agent)

    def sessions(self):
        """``sessions``, joined to each of its tags when grouping by tag."""
        if self.tags is None:
            return sessions
        return sessions.join(self.tags, self.tags.c.session_id == sessions.c.id)

    def name(self, raw: tuple) -> Any:
        """The group's key from a row's key values (in ``session_cols`` order)."""
        values = iter(raw)
        out = []
        for part in self.parts:
            if part == "all":
                out.append("all")
            elif part == "target":
                out.append(self.names[next(values)])
            elif part == "agent" and self.no_agent:
                out.append(NO_AGENT)
            elif part == "agent":  # NULL: judged under an agent-eval allow-list
                value = next(values)
                out.append(NO_AGENT if value is None else str(value))
            else:
                out.append(str(next(values)))
        return out[0] if len(out) == 1 else tuple(out)


def _any_agent(conn, ids: list[int]) -> bool:
    """Whether a session of the runs was judged under an agent CLI's rules."""
    s = sessions.c
    return conn.execute(select(s.id).where(s.run_id.in_(ids), s.policy_agent.is_not(None))
                        .limit(1)).first() is not None


def session_tags(conn, ids: list[int]):
    """``(session_id, tag, pos)``: each distinct tag of the runs' sessions with its first
    position in the session's list (``json_each`` on SQLite, ``json_array_elements_text``
    on PostgreSQL: a function in FROM may read the sessions before it on both)."""
    s = sessions.c
    if conn.dialect.name == "sqlite":
        each = func.json_each(s.tags).table_valued("value", "key")
        position = each.c.key
    else:
        each = func.json_array_elements_text(s.tags).table_valued(
            "value", with_ordinality="ordinality")
        position = each.c.ordinality
    return (select(s.id.label("session_id"), each.c.value.label("tag"),
                   func.min(position).label("pos"))
            .select_from(sessions).join(each, true()).where(s.run_id.in_(ids))
            .group_by(s.id, each.c.value).subquery("tags"))


def _session_tallies(conn, ids: list[int], g: _Grouping, *, full: bool, denied: bool
                     ) -> dict[Any, Tally]:
    """Every group's session figures, groups in the order of their first target, then
    by name.
    ``denied``: take the denied calls from the sessions' ``n_denied`` (the ``totals``
    detail; otherwise the denied calls themselves are counted, by class).  Without
    ``full`` only what ``ix_sessions_run_target_status`` covers (:data:`Detail`)."""
    s = sessions.c
    side = side_request()

    def counted(value):  # side requests are counted apart, in the same rows
        return case((side, None), else_=value)

    required = and_(s.handshake_required > 0, not_(side))
    done = case((s.handshake_done < s.handshake_required, s.handshake_done),
                else_=s.handshake_required)
    extra = (func.sum(counted(s.n_messages)), func.sum(counted(s.n_turns)),
             func.sum(case((required, done * 1.0 / s.handshake_required), else_=0.0)),
             func.min(counted(s.started_at)), func.max(counted(s.finished_at)))
    keys = g.session_cols
    rows = memo.rows(conn, (
        select(*keys, s.target_id, s.status, func.sum(case((side, 1), else_=0)),
               func.sum(case((side, 0), else_=1)),
               func.sum(counted(s.n_calls)), func.sum(counted(s.n_denied)),
               func.sum(case((required, 1), else_=0)),
               func.sum(case((and_(required, s.handshake_completed), 1), else_=0)),
               *(extra if full else ()))
        .select_from(g.sessions()).where(s.run_id.in_(ids))
        .group_by(*_in_index_order(keys, s.target_id, s.status))))
    if not full:
        rows = [(*row, 0, 0, 0.0, None, None) for row in rows]
    width = len(keys)
    first: dict[Any, int] = {}  # group -> its first target
    for row in rows:
        name = g.name(row[:width])
        first[name] = min(first.get(name, row[width]), row[width])
    tallies = {name: Tally() for name in sorted(first, key=lambda k: (first[k], k))}
    for row in rows:
        tally = tallies[g.name(row[:width])]
        (_t, status, n_side, n, n_calls, n_denied, hs_n, hs_ok, messages, replies, hs_share,
         start, end) = row[width:]
        tally.side_requests += n_side
        if not n:
            continue
        tally.exit_states[status] += n
        tally.stack_calls += int(n_calls or 0)
        if status == "error":
            tally.error_sessions += n
            continue
        tally.sessions += n
        tally.calls += int(n_calls or 0)
        if denied:
            tally.denied += int(n_denied or 0)
        tally.messages += messages or 0
        tally.replies += replies or 0
        tally.hs_sessions += hs_n or 0
        tally.hs_completed += hs_ok or 0
        tally.hs_done_share += float(hs_share or 0.0)
        if start is not None and (tally.first_start is None or start < tally.first_start):
            tally.first_start = start
        if end is not None and (tally.last_finish is None or end > tally.last_finish):
            tally.last_finish = end
    if full:
        missed_steps = conn.execute(
            select(*keys, s.handshake_missed_step, func.count())
            .select_from(g.sessions())
            .where(s.run_id.in_(ids), *counted_sessions(), s.handshake_required > 0,
                   s.handshake_completed.is_(False), s.handshake_missed_step.is_not(None),
                   s.handshake_missed_step != "")
            .group_by(*keys, s.handshake_missed_step)).all()
        for *raw, step, n in missed_steps:
            tallies[g.name(raw)].hs_missed[step] += n
    return tallies


def _in_index_order(*columns) -> list:
    """``columns`` once each, those of ``ix_sessions_run_target_status`` first in its order
    (run, target, status, scenario): SQLite then groups the run's range of that covering
    index as it reads it, with no sort (a column named twice, or out of order, made it
    sort 125,000 entries: twice the time of the run page)."""
    flat = [c for group in columns for c in (group if isinstance(group, tuple) else (group,))]
    s = sessions.c
    indexed = [c for c in (s.run_id, s.target_id, s.status, s.scenario)
               if any(c is f for f in flat)]
    rest = [c for i, c in enumerate(flat)
            if not any(c is x for x in indexed) and not any(c is x for x in flat[:i])]
    return [*indexed, *rest]


def _denied_counts(conn, ids: list[int], g: _Grouping, *, actions: bool) -> list[tuple]:
    """``(key values, primary, next action, calls)`` of the denied calls outside error
    sessions; without ``actions`` every next action is ``None``."""
    c, s = tool_calls.c, sessions.c
    counted = (c.primary_code, c.next_action) if actions else (c.primary_code,)
    if g.call_cols is not None:
        keys = g.call_cols
        out = minus_faulted(
            conn.execute(select(*keys, *counted, func.count()).where(*denied_calls(ids))
                         .group_by(*keys, *counted)).all(),
            conn.execute(select(*keys, *counted, func.count()).where(*faulted_calls(ids))
                         .group_by(*keys, *counted)).all())
    else:  # by scenario or tag: only the session knows the key
        keys = g.session_cols
        out = conn.execute(
            select(*keys, *counted, func.count())
            .select_from(tool_calls.join(g.sessions(), s.id == c.session_id))
            .where(*denied_calls(ids), *counted_sessions())
            .group_by(*keys, *counted)).all()
    width = len(keys)
    if actions:
        return [(tuple(row[:width]), *row[width:]) for row in out]
    return [(tuple(row[:width]), row[width], None, row[width + 1]) for row in out]


def _stack_faults(conn, ids: list[int], g: _Grouping) -> list[tuple]:
    """``(key values, 0, faults)`` of each session holding stack faults, side requests
    left out: ``faults`` as ``(code, ended)`` pairs.  The sessions' calls are in the
    session tallies already (``stack_calls``), hence the 0."""
    s = sessions.c
    rows = conn.execute(
        select(*g.session_cols, s.stack_faults).select_from(g.sessions())
        .where(s.run_id.in_(ids), s.stack_faults.is_not(None), not_(side_request())))
    width = len(g.session_cols)
    return [(tuple(row[:width]), 0, stack_fault_codes(row[width])) for row in rows]


def _leak_counts(conn, ids: list[int], g: _Grouping) -> list[tuple]:
    """``(key values, leak class, calls)`` of the leaked calls outside error sessions and
    side requests: one range of the partial ``ix_tool_calls_run_leak`` (the leaked calls
    alone).  By target or run, grouped by the calls' own columns, minus the leaks of the
    few uncounted sessions, as the denied calls are; by scenario, tag or agent, each
    leaked call's session looked up from the leaked calls (never a session per call of
    the run).  Grouped by the class first: grouped by target first, SQLite's planner took
    ``ix_tool_calls_breakdown`` for one run (its order is the GROUP BY's) and read every
    call of the run, 4 s at a million calls, twice per ``gate``."""
    c, s = tool_calls.c, sessions.c

    def leaked(*columns):
        return select(*columns).where(c.run_id.in_(ids), c.leak.is_not(None))

    if g.call_cols is not None:
        keys = g.call_cols
        uncounted = select(s.id).where(s.run_id.in_(ids), uncounted_sessions())
        out = minus_faulted(
            conn.execute(leaked(*keys, c.leak, func.count()).group_by(c.leak, *keys)).all(),
            conn.execute(leaked(*keys, c.leak, func.count())
                         .where(c.session_id.in_(uncounted)).group_by(c.leak, *keys)).all())
    else:
        keys = g.session_cols
        calls = (leaked(c.session_id, c.leak, func.count().label("n"))
                 .group_by(c.leak, c.session_id).subquery("leaked"))
        out = conn.execute(
            select(*keys, calls.c.leak, func.sum(calls.c.n))
            .select_from(calls.join(g.sessions(), s.id == calls.c.session_id))
            .where(*counted_sessions()).group_by(*keys, calls.c.leak)).all()
    width = len(keys)
    return [(tuple(row[:width]), row[width], int(row[width + 1])) for row in out]


def _burned_turns(conn, ids: list[int], g: _Grouping) -> list[tuple[tuple, int]]:
    """``(key values, replies whose calls were all denied)`` outside error sessions: the
    denied calls grouped per reply, each group's size checked against all the reply's
    calls on ``ix_tool_calls_session_turn``.  By target or run, grouped by the calls' own
    columns (no lookup of a session per reply: 90,000 of them took 1.4 s on PostgreSQL),
    minus the replies of the few error sessions, read from those sessions; by scenario or
    tag, only the session knows the key."""
    c, s = tool_calls.c, sessions.c
    per_turn = (select(c.session_id, c.turn_index, c.target_id, c.run_id,
                       func.count().label("n"))
                .where(*denied_calls(ids))
                .group_by(c.session_id, c.turn_index, c.target_id, c.run_id).subquery())
    every = (select(func.count()).select_from(tool_calls)
             .where(c.session_id == per_turn.c.session_id,
                    c.turn_index == per_turn.c.turn_index).scalar_subquery())
    if g.call_cols is None:
        keys = g.session_cols
        rows = conn.execute(
            select(*keys, func.count()).select_from(per_turn)
            .join(g.sessions(), s.id == per_turn.c.session_id)
            .where(*counted_sessions(), per_turn.c.n == every).group_by(*keys)).all()
        return [(tuple(raw), n) for *raw, n in rows]
    turn_keys = [per_turn.c[col.name] for col in g.call_cols]
    out: Counter = Counter({tuple(raw): n for *raw, n in conn.execute(
        select(*turn_keys, func.count()).select_from(per_turn)
        .where(per_turn.c.n == every).group_by(*turn_keys)).all()})
    faulted = (select(*(s[col.name] for col in g.call_cols), c.session_id, c.turn_index)
               .select_from(sessions).join(tool_calls, c.session_id == s.id)
               .where(s.run_id.in_(ids), uncounted_sessions())
               .group_by(*(s[col.name] for col in g.call_cols), c.session_id, c.turn_index)
               .having(func.sum(case((c.decision == "deny", 1), else_=0)) == func.count())
               .subquery())
    fault_keys = [faulted.c[col.name] for col in g.call_cols]
    for *raw, n in conn.execute(select(*fault_keys, func.count()).select_from(faulted)
                                .group_by(*fault_keys)):
        out[tuple(raw)] -= n
    return [(raw, n) for raw, n in out.items() if n > 0]


def _turn_figures(conn, ids: list[int], g: _Grouping, tallies: dict[Any, Tally]) -> None:
    """Replies' counts, token sums and mean decode speed per group; the latency and
    time-to-first-token percentiles from the two ranks around each, read in SQL order."""
    s, t = sessions.c, turns.c
    keys = g.session_cols
    scope = (s.run_id.in_(ids), *counted_sessions())
    source = turns.join(g.sessions(), s.id == t.session_id)
    rows = conn.execute(
        select(*keys, func.count(), func.sum(t.decode_tps), func.count(t.decode_tps),
               func.sum(t.prompt_tokens), func.sum(t.completion_tokens),
               func.sum(t.reasoning_tokens), func.count(t.latency_s), func.count(t.ttft_s))
        .select_from(source).where(*scope).group_by(*keys)).all()
    width = len(keys)
    members: dict[Any, list[tuple]] = {}  # a group's key values (a name in several runs)
    counts: dict[Any, list[int]] = {}
    for row in rows:
        raw = tuple(row[:width])
        n, tps_sum, tps_n, prompt, completion, reasoning, n_lat, n_ttft = row[width:]
        name = g.name(raw)
        tally = tallies[name]
        tally.turns += n
        tally.tps_sum += float(tps_sum or 0.0)
        tally.tps_n += tps_n
        tally.prompt_tokens += prompt or 0
        tally.completion_tokens += completion or 0
        tally.reasoning_tokens += reasoning or 0
        members.setdefault(name, []).append(raw)
        total = counts.setdefault(name, [0, 0])
        total[0] += n_lat
        total[1] += n_ttft
    for name, raws in members.items():
        in_group = or_(*(and_(true(), *(col == v for col, v in zip(keys, raw, strict=True)))
                         for raw in raws))
        tally = tallies[name]
        for column, count, values in ((t.latency_s, counts[name][0], tally.latency),
                                      (t.ttft_s, counts[name][1], tally.ttft)):
            values.extend(_ranks(conn, source, in_group, scope, column, count))


def _ranks(conn, source, in_group, scope, column, count: int) -> list[float]:
    """Stand-in values with the same p50 and p95 as the group's ``count`` values: the
    sorted values at the ranks ``percentile`` interpolates between, the rest repeated.

    ``percentile`` only reads ranks ``floor(pos)`` and ``floor(pos) + 1``; a list built from
    those ranks at the same positions gives identical results without reading every turn.
    """
    if count == 0:
        return []
    needed = sorted({r for q in (50, 95) for pos in ((count - 1) * q / 100,)
                     for r in (int(pos), min(int(pos) + 1, count - 1))})
    values: dict[int, float] = {}
    for rank in needed:
        values[rank] = conn.execute(
            select(column).select_from(source)
            .where(*scope, in_group, column.is_not(None))
            .order_by(column).limit(1).offset(rank)).scalar_one()
    out, last = [], values[needed[0]]
    for rank in range(count):  # O(turns) floats, no rows: cheap next to reading turns
        last = values.get(rank, last)
        out.append(last)
    return out


def minus_faulted(rows, faulted) -> list[tuple]:
    """Counts ``(*key, n)`` minus the same keys' counts in error sessions; zeros dropped."""
    counts: Counter = Counter()
    for *key, n in rows:
        counts[tuple(key)] += n
    for *key, n in faulted:
        counts[tuple(key)] -= n
    return [(*key, n) for key, n in counts.items() if n > 0]


class AgreementCounts(NamedTuple):
    """One column's calls that carry the source harness's own verdict: how many, and the
    disagreements by direction (``deny_allow``: ours deny, the source allowed; else
    ``allow_deny``)."""

    calls: int
    deny_allow: int
    allow_deny: int


def source_agreement(engine: Engine, run_ids: Iterable[int], *,
                     columns: bool = False) -> dict[str, AgreementCounts]:
    """Per target name (``name · run N`` with ``columns`` and several runs), the calls
    with a source verdict and how they disagree with ours, over every call of the runs
    (children and server-fault sessions included: agreement is about verdicts, not
    outcomes).  Targets with no such call are absent; keys in target id order."""
    ids = list(run_ids)
    c = tool_calls.c
    disagree = c.source_decision != c.decision
    with engine.connect() as conn:
        rows = conn.execute(
            select(c.target_id, func.count(),
                   func.sum(case((and_(disagree, c.decision == "deny"), 1), else_=0)),
                   func.sum(case((and_(disagree, c.decision != "deny"), 1), else_=0)))
            .where(c.run_id.in_(ids), c.source_decision.is_not(None))
            .group_by(c.target_id).order_by(c.target_id)).all()
        several = columns and len(ids) > 1
        names = {tid: f"{name} · run {run}" if several else name
                 for tid, name, run in conn.execute(
                     select(targets.c.id, targets.c.name, targets.c.run_id)
                     .where(targets.c.run_id.in_(ids))).all()}
    out: dict[str, AgreementCounts] = {}
    for target_id, calls, deny_allow, allow_deny in rows:
        before = out.get(names[target_id], AgreementCounts(0, 0, 0))
        out[names[target_id]] = AgreementCounts(before.calls + calls,
                                                before.deny_allow + int(deny_allow or 0),
                                                before.allow_deny + int(allow_deny or 0))
    return out
