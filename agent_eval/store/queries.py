"""Paged, filtered lists of runs, sessions and calls: the one query layer behind
``agent-eval runs``, ``sessions``, ``calls`` and every page of ``agent-eval view``.

Promises:

- every list is one SQL query with bound parameters and a LIMIT/OFFSET page, plus one
  COUNT for the total; nothing reads a whole table into memory;
- a filter value a user typed is only ever a bound parameter (``LIKE`` patterns are
  escaped, so ``%`` and ``_`` match themselves);
- the same filter gives the same rows in the terminal, in ``--json`` and in the viewer;
- SQLite and PostgreSQL answer alike (tags are matched on the JSON text both store).

"Failed first" is the default order: a session failed when it did not complete, holds a
denied call, or left its handshake open (``metrics.session_failed``, here in SQL:
:func:`failed_sessions`); a call when it was denied.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from sqlalchemy import (
    Boolean,
    Connection,
    Engine,
    Select,
    String,
    and_,
    case,
    cast,
    delete,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    table,
)
from sqlalchemy import column as column_of
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from agent_eval.errors import ConfigError
from agent_eval.metrics.summary import SessionOutcome
from agent_eval.store.database import write_transaction
from agent_eval.store.schema import (
    SEARCH_TABLE,
    denied_calls,
    findings,
    runs,
    sessions,
    targets,
    tool_calls,
)
from agent_eval.store.search_index import has_sqlite_search
from agent_eval.transcript import run_stacks, stack_line, stack_mark, telemetry_completeness

if TYPE_CHECKING:
    from agent_eval.metrics.clustered import ClusteredRate
    from agent_eval.metrics.summary import GroupSummary

# ``agent_eval.metrics`` (and through it the policy engine and bashlex) is imported where it
# is used, not here: the Store facade imports this module, and every command opens a store.

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
SESSION_SORTS = ("failed", "id", "-id", "denials", "scenario", "handshake")
CALL_SORTS = ("failed", "id", "-id", "code", "session")


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: its rows, the total the filter matches, and where it sits."""

    rows: tuple
    total: int
    limit: int
    offset: int

    @property
    def has_next(self) -> bool:
        return self.offset + len(self.rows) < self.total


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of ``agent-eval runs``.  ``calls``/``errors`` leave out error sessions."""

    id: int
    label: str | None
    kind: str
    status: str
    targets: tuple[str, ...]
    sessions: int
    calls: int
    errors: int
    started: datetime
    finished: datetime | None
    # (target, calls, denied calls) per target: a run of several targets (models) has no
    # one errors/100, only one per target
    by_target: tuple[tuple[str, int, int], ...] = ()
    stack_faults: int = 0  # what the serving stack lost or mangled (AE5xx), never errors
    stacks: dict[str, str] | None = None  # each target's serving stack, one line each
    stack_marks: dict[str, str] | None = None  # ... and its short mark (transcript.stack_mark)
    # a run ``agent-eval collect`` stored: (telemetry events seen, calls judged, calls not
    # judgeable) over its sessions (``transcript.telemetry_completeness``); None otherwise
    telemetry: tuple[int, int, int] | None = None
    # per target (in ``by_target`` order) errors/100 with the clustered interval (sessions
    # as clusters, stratified by scenario): the one ``gate`` and ``compare`` decide on,
    # which the lists lead with; ``interval`` (Wilson on calls) is the detail
    clustered: tuple[ClusteredRate | None, ...] = ()

    @property
    def per100(self) -> float | None:
        """Errors per 100 calls of a run of one target; None when it has several (a
        figure pooled across models would describe none of them)."""
        if len(self.by_target) > 1:
            return None
        return 100 * self.errors / self.calls if self.calls else None

    def target_rates(self) -> list[tuple[str, float | None]]:
        """Errors per 100 calls of each target (None: no call judged)."""
        return [(name, 100 * errors / calls if calls else None)
                for name, calls, errors in self.by_target]

    @property
    def interval(self) -> tuple[float, float] | None:
        from agent_eval.metrics.stats import wilson_interval

        if not self.calls:
            return None
        lo, hi = wilson_interval(self.errors, self.calls)
        return 100 * lo, 100 * hi

    @property
    def clustered_rate(self) -> ClusteredRate | None:
        """The clustered rate of a run of one target (None with several, as ``per100``)."""
        return self.clustered[0] if len(self.by_target) == 1 and self.clustered else None

    @property
    def duration_s(self) -> float | None:
        return (self.finished - self.started).total_seconds() if self.finished else None

    def as_json(self) -> dict:
        """The row as JSON: ``errors_ci95`` is the clustered interval (the one gate and
        compare decide on), ``errors_ci95_wilson`` the Wilson interval on calls (calls
        taken as independent: detail), each ``[lo, hi]`` per 100 calls or null."""
        out = asdict(self)
        out.pop("clustered")
        rates = dict(zip((name for name, *_ in self.by_target), self.clustered, strict=False))

        def wilson(calls: int, errors: int) -> list[float | None] | None:
            from agent_eval.metrics.stats import wilson_interval

            if not calls:
                return None
            return [_round(100 * v) for v in wilson_interval(errors, calls)]

        out.update(targets=list(self.targets), started=self.started.isoformat(),
                   finished=self.finished.isoformat() if self.finished else None,
                   errors_per100=_round(self.per100),
                   errors_ci95=_clustered_json(self.clustered_rate),
                   errors_ci95_wilson=(wilson(self.calls, self.errors)
                                       if len(self.by_target) <= 1 else None),
                   duration_s=_round(self.duration_s),
                   by_target=[{"target": name, "calls": calls, "errors": errors,
                               "errors_per100": _round(100 * errors / calls if calls else None),
                               "errors_ci95": _clustered_json(rates.get(name)),
                               "errors_ci95_wilson": wilson(calls, errors)}
                              for name, calls, errors in self.by_target])
        return out


def _clustered_json(rate: ClusteredRate | None) -> list[float | None] | None:
    """``[lo, hi]`` of a clustered rate, or None when it has no interval."""
    if rate is None or rate.lo100 is None or rate.hi100 is None:
        return None
    return [_round(rate.lo100), _round(rate.hi100)]


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """What ``sessions`` and the viewer's session list select.  ``None`` is no filter.

    ``code``: sessions holding a denied call of that primary class; ``decision``
    ``deny``/``allow``: holding at least one such call; ``failed``: see the module doc;
    ``handshake``: only sessions that have a handshake; ``disagree``: holding a call the
    source harness judged otherwise; ``search``: a substring of a call's command.
    """

    run_id: int | None = None
    target: str | None = None
    scenario: str | None = None
    tag: str | None = None
    code: str | None = None
    status: str | None = None
    decision: str | None = None
    failed: bool = False
    handshake: bool = False
    disagree: bool = False
    search: str | None = None


@dataclass(frozen=True, slots=True)
class SessionListRow(SessionOutcome):
    id: int
    run_id: int
    target: str
    scenario: str
    repeat: int
    status: str
    calls: int
    denials: int
    handshake_required: int
    handshake_done: int
    handshake_completed: bool
    parent_id: int | None
    tags: tuple[str, ...] = field(default_factory=tuple)
    error: str | None = None

    def as_json(self) -> dict:
        out = asdict(self)
        out.update(tags=list(self.tags), failed=self.failed, status_text=self.status_text)
        return out


@dataclass(frozen=True, slots=True)
class CallFilter:
    """What ``calls`` and the viewer's call list select; as :class:`SessionFilter`, plus
    ``next_action`` (what the session did after a denial) and ``session_id``."""

    run_id: int | None = None
    target: str | None = None
    scenario: str | None = None
    tag: str | None = None
    code: str | None = None
    status: str | None = None
    decision: str | None = None
    failed: bool = False
    disagree: bool = False
    search: str | None = None
    next_action: str | None = None
    session_id: int | None = None


@dataclass(frozen=True, slots=True)
class CallListRow:
    id: int
    session_id: int
    run_id: int
    target: str
    scenario: str
    index: int
    turn_index: int
    tool: str
    command: str | None
    decision: str
    primary_code: str | None
    next_action: str | None
    source_decision: str | None
    arguments: str | None = None  # the raw arguments, only of a call with no command (AE102)

    @property
    def disagrees(self) -> bool:
        return self.source_decision is not None and self.source_decision != self.decision

    def as_json(self) -> dict:
        return asdict(self)


def filter_from(cls, values: dict):
    """A filter record from loose values (query string, CLI options): unknown keys are
    ignored, empty strings are no filter, ids are integers or a ConfigError."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        raw = values.get(f.name)
        if raw is None or raw == "":
            continue
        if f.type == "bool":
            kwargs[f.name] = raw in (True, "1", "true", "yes", "on")
        elif f.type == "int | None":
            try:
                kwargs[f.name] = int(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"{f.name} must be a whole number, not {raw!r}",
                                  field=f.name) from None
        else:
            kwargs[f.name] = str(raw)
    return cls(**kwargs)


# runs


def list_runs(engine: Engine, *, label: str | None = None, kind: str | None = None,
              status: str | None = None, limit: int = PAGE_SIZE, offset: int = 0) -> Page:
    """Runs newest first, with their targets, sessions, calls and denied calls (the
    aggregator's ``totals`` per run: the sessions' covering index alone)."""
    limit, offset = _page(limit, offset)
    r = runs.c
    where = [cond for cond in (
        r.label == label if label else None,
        r.kind == kind if kind else None,
        r.status == status if status else None,
    ) if cond is not None]
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(runs).where(*where)).scalar_one()
        rows = conn.execute(
            select(runs).where(*where).order_by(r.id.desc()).limit(limit).offset(offset)
        ).all()
        ids = [row.id for row in rows]
        names = _grouped(conn.execute(
            select(targets.c.run_id, targets.c.name).where(targets.c.run_id.in_(ids))
            .order_by(targets.c.id)).all())
        telemetry = _telemetry(conn, [row.id for row in rows if row.suite == "otlp"])
    from agent_eval.metrics.clustered import units_rate
    from agent_eval.store import aggregates
    from agent_eval.store.cluster_stats import run_cluster_stats

    figures = aggregates.summarize_sql(engine, ids, by=("run", "target"), with_turns=False,
                                       detail="totals")
    by_run: dict[str, list[tuple[str, GroupSummary]]] = {}
    for (run_key, target), summary in figures.items():
        by_run.setdefault(run_key, []).append((target, summary))
    # the clustered sums of every listed run in one GROUP BY (not a query per run)
    sums = run_cluster_stats(engine, ids)

    def row_of(row) -> RunRow:
        counts = _run_counts(by_run.get(str(row.id), []), names.get(row.id, ()))
        clustered = tuple(units_rate(sums[key]) if (key := (row.id, name)) in sums else None
                          for name, *_ in counts["by_target"])
        return RunRow(
            id=row.id, label=row.label, kind=row.kind, status=row.status,
            targets=tuple(names.get(row.id, ())), **counts, clustered=clustered,
            started=row.created_at, finished=row.finished_at,
            stacks={name: stack_line(stack)
                    for name, stack in run_stacks(row.fingerprint).items()} or None,
            telemetry=telemetry.get(row.id),
            stack_marks={name: stack_mark(stack)
                         for name, stack in run_stacks(row.fingerprint).items()} or None)

    return Page(tuple(row_of(row) for row in rows), total, limit, offset)


def _telemetry(conn, run_ids: list[int]) -> dict[int, tuple[int, int, int]]:
    """Per run ``agent-eval collect`` stored: events seen, calls judged and calls not
    judgeable, summed over its sessions' tags (only those runs' sessions are read)."""
    out: dict[int, tuple[int, int, int]] = {}
    if not run_ids:
        return out
    s = sessions.c
    for run_id, tags, n_calls in conn.execute(
            select(s.run_id, s.tags, s.n_calls).where(s.run_id.in_(run_ids))):
        figures = telemetry_completeness(tags or (), n_calls or 0)
        if figures is not None:
            have = out.get(run_id, (0, 0, 0))
            out[run_id] = (have[0] + figures[0], have[1] + figures[1], have[2] + figures[2])
    return out


@dataclass(frozen=True, slots=True)
class McpServerRow:
    """The calls of one MCP server's tools (``policy.schemas.mcp_server`` reads the server
    from the tool name as the clients write it): how many, denied, and how many broke the
    schema the client offered for the tool (AE108)."""

    server: str
    tools: int
    calls: int
    denied: int
    schema_mismatches: int


def mcp_servers(engine: Engine, run_ids: list[int]) -> list[McpServerRow]:
    """Per MCP server, the runs' calls of its tools, the most called first (only calls whose
    tool name has ``__`` in it are read)."""
    from agent_eval.policy.schemas import mcp_server

    c = tool_calls.c
    named = c.tool.like("%\\_\\_%", escape="\\")
    with engine.connect() as conn:
        counts = conn.execute(
            select(c.tool, c.decision, func.count()).where(c.run_id.in_(run_ids), named)
            .group_by(c.tool, c.decision)).all()
        broke: dict[str, int] = dict(conn.execute(
            select(c.tool, func.count(func.distinct(c.id)))
            .join(findings, findings.c.tool_call_id == c.id)
            .where(c.run_id.in_(run_ids), named, findings.c.code == "AE108")
            .group_by(c.tool)).all())
    per: dict[str, list[Any]] = {}
    for tool, decision, n in counts:
        server = mcp_server(tool)
        if server is None:
            continue
        row = per.setdefault(server, [set(), 0, 0, 0])
        row[0].add(tool)
        row[1] += n
        row[2] += n if decision == "deny" else 0
    for tool, n in broke.items():
        server = mcp_server(tool)
        if server in per:
            per[server][3] += n
    out = [McpServerRow(server, len(v[0]), v[1], v[2], v[3]) for server, v in per.items()]
    return sorted(out, key=lambda r: (-r.calls, r.server))


def run_telemetry(engine: Engine, run_id: int) -> tuple[int, int, int] | None:
    """One run's telemetry completeness (:func:`_telemetry`), None for another source."""
    with engine.connect() as conn:
        return _telemetry(conn, [run_id]).get(run_id)


def _run_counts(per_target: list[tuple[str, GroupSummary]], order) -> dict[str, Any]:
    """Sessions (faulted ones too), calls and denied calls outside error sessions, and
    stack faults, in all and per target (in the run's order of targets)."""
    rank = {name: i for i, name in enumerate(order)}
    per_target = sorted(per_target, key=lambda item: rank.get(item[0], len(rank)))
    return {"sessions": sum(s.sessions + s.error_sessions for _, s in per_target),
            "calls": sum(s.calls for _, s in per_target),
            "errors": sum(s.errors.k for _, s in per_target),
            "stack_faults": sum(s.stack_faults.k for _, s in per_target),
            "by_target": tuple((name, s.calls, s.errors.k) for name, s in per_target)}


def delete_run(engine: Engine, run_id: int) -> int:
    """Delete one run and everything stored under it; the number of sessions it held."""
    with write_transaction(engine) as conn:
        if conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is None:
            raise ConfigError(f"no run with id {run_id} in this store: see `agent-eval runs`",
                              field="RUN")
        return _delete_runs(conn, [run_id])


def prune_runs(engine: Engine, before: datetime, *, dry_run: bool = False) -> list[int]:
    """Delete every run started before ``before`` that is not running; their ids."""
    query = select(runs.c.id).where(runs.c.created_at < before, runs.c.status != "running")
    with write_transaction(engine) as conn:
        ids = list(conn.execute(query.order_by(runs.c.id)).scalars())
        if ids and not dry_run:
            _delete_runs(conn, ids)
    return ids


def _delete_runs(conn, ids: list[int]) -> int:
    """Children first, so it works without ON DELETE CASCADE (SQLite's foreign keys off)."""
    call_ids = select(tool_calls.c.id).where(tool_calls.c.run_id.in_(ids))
    session_ids = select(sessions.c.id).where(sessions.c.run_id.in_(ids))
    from agent_eval.store.schema import turns

    conn.execute(delete(findings).where(findings.c.tool_call_id.in_(call_ids)))
    conn.execute(delete(tool_calls).where(tool_calls.c.run_id.in_(ids)))
    conn.execute(delete(turns).where(turns.c.session_id.in_(session_ids)))
    # children of sessions in other runs would dangle: unlink them first
    conn.execute(sessions.update().where(sessions.c.parent_id.in_(session_ids),
                                         sessions.c.run_id.not_in(ids)).values(parent_id=None))
    conn.execute(tool_calls.update().where(tool_calls.c.child_session_id.in_(session_ids))
                 .values(child_session_id=None))
    conn.execute(sessions.update().where(sessions.c.run_id.in_(ids)).values(parent_id=None))
    n = conn.execute(delete(sessions).where(sessions.c.run_id.in_(ids))).rowcount
    conn.execute(delete(targets).where(targets.c.run_id.in_(ids)))
    conn.execute(runs.update().where(runs.c.parent_run_id.in_(ids)).values(parent_run_id=None))
    conn.execute(delete(runs).where(runs.c.id.in_(ids)))
    return n


# sessions


def _denied_sessions(f):
    """Ids of the sessions holding a denied call (of class ``code`` when given): a range of
    ``ix_tool_calls_run_decision`` when the run is known."""
    c = tool_calls.c
    where = [c.decision == "deny"]
    if f.run_id is not None:
        where = denied_calls([f.run_id])
    if getattr(f, "code", None):
        where.append(c.primary_code == f.code)
    return select(c.session_id).where(*where)


def failed_sessions():
    """``metrics.session_failed`` in SQL: did not complete, holds a denied call, or left a
    required handshake open (tests/store/test_aggregates_sql.py holds the two together)."""
    s = sessions.c
    return or_(s.status != "completed", s.n_denied > 0,
               and_(s.handshake_required > 0, not_(s.handshake_completed)))


def _target_ids(name: str, run_id: int | None):
    where = [targets.c.name == name]
    if run_id is not None:
        where.append(targets.c.run_id == run_id)
    return select(targets.c.id).where(*where)


def _session_where(f: SessionFilter, search_index: bool = False) -> list:
    s = sessions.c
    c = tool_calls.c
    where: list = []
    if f.run_id is not None:
        where.append(s.run_id == f.run_id)
    if f.target:
        where.append(s.target_id.in_(_target_ids(f.target, f.run_id)))
    if f.scenario:
        where.append(s.scenario == f.scenario)
    if f.tag:
        where.append(_tag_match(s.tags, f.tag))
    if f.status:
        where.append(s.status == f.status)
    if f.handshake:
        where.append(s.handshake_required > 0)
    if f.code:
        where.append(s.id.in_(_denied_sessions(f)))
    if f.decision == "deny":
        where.append(s.n_denied > 0)
    elif f.decision:
        where.append(exists().where(c.session_id == s.id, c.decision == f.decision))
    if f.disagree:
        where.append(exists().where(c.session_id == s.id, c.source_decision.is_not(None),
                                    c.source_decision != c.decision))
    if f.search:
        found = [_contains(c.command, f.search, search_index)]
        if f.run_id is not None:
            found.append(_run_of(_trigram_search(f.search, search_index)) == f.run_id)
        where.append(s.id.in_(select(c.session_id).where(*found)))
    return where


def list_sessions(engine: Engine, f: SessionFilter, *, sort: str = "failed",
                  limit: int = PAGE_SIZE, offset: int = 0) -> Page:
    """Sessions matching ``f``, failed first by default (then by id).

    Two steps, so a page costs the same at any size: the page's ids (one ordered query),
    then those sessions' rows and denial counts.
    """
    limit, offset = _page(limit, offset)
    if sort not in SESSION_SORTS:
        raise ConfigError(f"unknown sort {sort!r}: use one of {', '.join(SESSION_SORTS)}",
                          field="sort")
    s = sessions.c
    where = _session_where(f, _searches_index(engine, f))
    failed = failed_sessions()
    if f.failed and not (f.code or f.decision == "deny"):  # those sessions all failed
        where.append(failed)
    denials = s.n_denied
    order = {
        "failed": (s.id,) if f.failed else (case((failed, 0), else_=1), s.id),
        "id": (s.id,),
        "-id": (s.id.desc(),),
        "denials": (denials.desc(), s.id),
        "scenario": (s.scenario, s.id),
        "handshake": (case((s.handshake_completed, 1), else_=0), s.id),
    }[sort]
    count_of = select(func.count()).select_from(sessions).where(*where)
    ids_of = select(s.id).where(*where).order_by(*order)
    with engine.connect() as conn:
        if _counts_with_page(engine, f):
            ids, total = _counted_page(conn, ids_of, count_of, limit, offset)
        else:
            total = conn.execute(count_of).scalar_one()
            ids = list(conn.execute(ids_of.limit(limit).offset(offset)).scalars())
        rows = {r.id: r for r in conn.execute(
            select(s.id, s.run_id, targets.c.name, s.scenario, s.repeat, s.status, s.n_calls,
                   s.n_denied, s.handshake_required, s.handshake_done, s.handshake_completed,
                   s.parent_id, s.tags, s.error)
            .join(targets, targets.c.id == s.target_id).where(s.id.in_(ids))).all()}
    return Page(tuple(
        SessionListRow(id=r.id, run_id=r.run_id, target=r.name, scenario=r.scenario,
                       repeat=r.repeat, status=r.status, calls=r.n_calls,
                       denials=r.n_denied, handshake_required=r.handshake_required,
                       handshake_done=r.handshake_done,
                       handshake_completed=bool(r.handshake_completed), parent_id=r.parent_id,
                       tags=tuple(r.tags or ()), error=r.error)
        for r in (rows[i] for i in ids)), total, limit, offset)


def neighbour_sessions(engine: Engine, f: SessionFilter, session_id: int
                       ) -> tuple[int | None, int | None]:
    """The failed sessions just before and after ``session_id`` under ``f`` (id order).
    Two index walks that stop at the first session found; under a search, whose text
    match scans the run however soon a session is found, one pass for both."""
    s = sessions.c
    where = [*_session_where(f, _searches_index(engine, f)),
             failed_sessions()]
    base = select(s.id)
    with engine.connect() as conn:
        if f.search:
            return tuple(conn.execute(
                select(func.max(case((s.id < session_id, s.id))),
                       func.min(case((s.id > session_id, s.id)))).where(*where)).one())
        prev = conn.execute(base.where(*where, s.id < session_id).order_by(s.id.desc())
                            .limit(1)).scalar()
        nxt = conn.execute(base.where(*where, s.id > session_id).order_by(s.id)
                           .limit(1)).scalar()
    return prev, nxt


# calls


def _call_where(f: CallFilter, search_index: bool = False) -> tuple[list, bool]:
    """The conditions, and whether they need the sessions table joined.  ``search_index``:
    the SQLite trigram table exists (see :func:`_contains`)."""
    c = tool_calls.c
    s = sessions.c
    where: list = []
    indexed = _trigram_search(f.search, search_index) if f.search else False
    for column, value in ((_run_of(indexed), f.run_id), (c.session_id, f.session_id),
                          (c.primary_code, f.code), (c.decision, f.decision),
                          (c.next_action, f.next_action)):
        if value is not None:
            where.append(column == value)
    if f.target:
        where.append(c.target_id.in_(_target_ids(f.target, f.run_id)))
    if f.failed:
        where.append(c.decision == "deny")
    if f.disagree:
        where.append(and_(c.source_decision.is_not(None), c.source_decision != c.decision))
    if f.search:
        where.append(_contains(c.command, f.search, search_index))
    joined = False
    for column, value in ((s.scenario, f.scenario), (s.status, f.status)):
        if value is not None:
            where.append(column == value)
            joined = True
    if f.tag:
        where.append(_tag_match(s.tags, f.tag))
        joined = True
    return where, joined


def list_calls(engine: Engine, f: CallFilter, *, sort: str = "failed",
               limit: int = PAGE_SIZE, offset: int = 0) -> Page:
    """Tool calls matching ``f``, denied first by default (each part oldest first).

    Two steps, as for sessions: the page's ids in ``ix_tool_calls_run_decision`` order,
    then their rows.
    """
    limit, offset = _page(limit, offset)
    if sort not in CALL_SORTS:
        raise ConfigError(f"unknown sort {sort!r}: use one of {', '.join(CALL_SORTS)}",
                          field="sort")
    c = tool_calls.c
    where, joined = _call_where(f, _searches_index(engine, f))
    order = {
        "failed": (c.session_id, c.id),  # within each verdict, see _failed_first
        "id": (c.id,),
        "-id": (c.id.desc(),),
        "code": (c.primary_code, c.id),
        "session": (c.session_id, c.index),
    }[sort]
    source = tool_calls.join(sessions, sessions.c.id == c.session_id) if joined else tool_calls
    ids_of = select(c.id).select_from(source).where(*where).order_by(*order)
    count_of = select(func.count()).select_from(source).where(*where)
    with engine.connect() as conn:
        if sort == "failed":
            ids, total = _failed_first(conn, ids_of, count_of, limit, offset,
                                       _counts_with_page(engine, f))
        elif _counts_with_page(engine, f):
            ids, total = _counted_page(conn, ids_of, count_of, limit, offset)
        else:
            total = conn.execute(count_of).scalar_one()
            ids = list(conn.execute(ids_of.limit(limit).offset(offset)).scalars())
        rows = {r.id: r for r in conn.execute(
            select(c.id, c.session_id, c.run_id, targets.c.name, sessions.c.scenario,
                   c.index, c.turn_index, c.tool, c.command, c.decision, c.primary_code,
                   c.next_action, c.source_decision,
                   case((c.command.is_(None), c.arguments), else_=None))
            .select_from(tool_calls.join(sessions, sessions.c.id == c.session_id)
                         .join(targets, targets.c.id == c.target_id))
            .where(c.id.in_(ids))).all()}
    return Page(tuple(CallListRow(*tuple(rows[i])) for i in ids), total, limit, offset)


def primary_spans(engine: Engine, rows: tuple[CallListRow, ...]) -> dict[int, tuple[int, int]]:
    """The span (start, end) in its command of each denied call's primary finding, by call
    id (the first finding of that code; calls whose finding concerns the whole call are
    left out)."""
    wanted = {r.id: r.primary_code for r in rows if r.primary_code}
    if not wanted:
        return {}
    spans: dict[int, tuple[int, int]] = {}
    with engine.connect() as conn:
        for call_id, code, start, end in conn.execute(
                select(findings.c.tool_call_id, findings.c.code, findings.c.start,
                       findings.c.end)
                .where(findings.c.tool_call_id.in_(list(wanted)))
                .order_by(findings.c.tool_call_id, findings.c.id)):
            if code == wanted[call_id] and end > start and call_id not in spans:
                spans[call_id] = (start, end)
    return spans


def _failed_first(conn, ids_of, count_of, limit: int, offset: int, counted: bool
                  ) -> tuple[list[int], int]:
    """The page of denied-then-allowed calls, each part in (session, id) order, and the
    total.  Two ordered ranges of ``ix_tool_calls_run_decision`` rather than one sort of
    the run.  ``counted`` (:func:`_counts_with_page`): the rest of the page, when needed,
    brings its own count: the total is the denied calls plus the rest, one scan."""
    c = tool_calls.c
    denied = ids_of.where(c.decision == "deny", c.session_id > 0)
    n_denied = conn.execute(select(func.count()).select_from(denied.subquery())).scalar_one()
    ids: list[int] = []
    if offset < n_denied:
        ids = list(conn.execute(denied.limit(limit).offset(offset)).scalars())
    if len(ids) < limit:
        rest = ids_of.where(c.decision != "deny", c.session_id > 0)
        rest_limit, rest_offset = limit - len(ids), max(0, offset - n_denied)
        if not counted:
            ids += conn.execute(rest.limit(rest_limit).offset(rest_offset)).scalars()
        else:
            more, n_rest = _counted_page(conn, rest, None, rest_limit, rest_offset)
            ids += more
            if n_rest is not None:  # every call is denied or not: the total is both
                return ids, n_denied + n_rest
    return ids, conn.execute(count_of).scalar_one()


def _counts_with_page(engine: Engine, f) -> bool:
    """Whether a list brings its total with its page (:func:`_counted_page`): under a
    search on SQLite, where matching the text scans the run's commands whatever the page
    (a separate count would scan them again).  PostgreSQL's trigram index finds the
    matches without a scan; there a window over them made the planner probe every
    session of the run for a match instead (0.6 s against 0.18 s at a million calls)."""
    return bool(f.search) and engine.dialect.name == "sqlite"


@overload
def _counted_page(conn: Connection, ids_of: Select, count_of: Select, limit: int, offset: int
                  ) -> tuple[list[int], int]: ...
@overload
def _counted_page(conn: Connection, ids_of: Select, count_of: None, limit: int, offset: int
                  ) -> tuple[list[int], int | None]: ...
def _counted_page(conn: Connection, ids_of: Select, count_of: Select | None, limit: int,
                  offset: int) -> tuple[list[int], int | None]:
    """A page of ``ids_of`` and the number of rows it pages through, in one statement
    (``count(*) OVER ()``).  For a search: the text match is a scan of the run either way,
    and a page and a separate count would be two.  ``count_of`` answers only for a page
    past the end (no row to carry the count); without it (``None``) the total is then
    unknown (``None``)."""
    rows = conn.execute(ids_of.add_columns(func.count().over()).limit(limit)
                        .offset(offset)).all()
    if rows:
        return [row[0] for row in rows], rows[0][1]
    if offset == 0:
        return [], 0
    return [], None if count_of is None else conn.execute(count_of).scalar_one()


# helpers


def _tag_match(column, tag: str):
    """The tag as a JSON string element inside the stored list's text (both dialects keep
    ``json.dumps`` output), LIKE-escaped."""
    return cast(column, String).like(f"%{_escape_like(json.dumps(tag))}%", escape="\\")


def _contains(column, text: str, search_index: bool = False):
    """``column LIKE '%text%'`` with the text escaped.  With the SQLite trigram table
    (``search_index``) the calls whose command holds ``text`` as a phrase of trigrams come
    from that table first: FTS5 folds case at least as widely as SQLite's ASCII-only LIKE,
    so they are a superset, and the LIKE kept on them makes the rows exactly LIKE's.
    Under 3 characters (no trigram) or with a NUL the LIKE scans alone."""
    if not text:
        return false()
    if "\x00" in text:  # SQLite's LIKE reads its pattern up to the first NUL: "%\0%" is "%"
        return and_(column.is_not(None), _Holds(column, literal(text, column.type)))
    # implied by the LIKE; said so that SQLite may scan the partial index
    # ix_tool_calls_run_command (migration search_scan) instead of the calls' rows
    like = and_(column.is_not(None), column.like(f"%{_escape_like(text)}%", escape="\\"))
    if not _trigram_search(text, search_index):
        return like
    return and_(tool_calls.c.id.in_(_trigram_matches(text)), like)


class _Holds(FunctionElement):
    """``a`` holds the text ``b``, exactly as ``a LIKE '%b%'`` would (case folded as
    SQLite's LIKE folds, ASCII only; PostgreSQL's LIKE folds nothing), for a text with a
    NUL in it, which SQLite's LIKE cuts short.  On PostgreSQL the bound text goes
    through ``ModelText``, so a NUL is looked for as the U+2400 it is stored as."""

    type = Boolean()
    name = "holds"
    inherit_cache = True


@compiles(_Holds, "sqlite")
def _holds_sqlite(element, compiler, **kw) -> str:
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"instr(lower({a}), lower({b})) > 0"


@compiles(_Holds)
def _holds(element, compiler, **kw) -> str:
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"strpos({a}, {b}) > 0"


def _trigram_matches(text: str):
    """The ids of the calls whose command holds ``text``, case folded, from the FTS5 table."""
    phrase = '"' + text.replace('"', '""') + '"'
    index = table(SEARCH_TABLE, column_of("rowid"), column_of("command"))
    return select(index.c.rowid).where(index.c.command.op("MATCH")(phrase))


def _trigram_search(text: str, search_index: bool) -> bool:
    return search_index and len(text) >= 3 and "\x00" not in text


def _run_of(trigram_search: bool):
    """The calls' run column to filter on.  Under a trigram search it is ``run_id + 0``,
    which no index serves: SQLite, with no statistics, would otherwise walk the whole
    run in ``ix_tool_calls_run_decision`` and probe the matches, rather than read the few
    matches and check their run."""
    c = tool_calls.c
    return c.run_id + 0 if trigram_search else c.run_id


TRIGRAM_PROBE = 50_000
"""A text the trigram table finds in this many commands or more (``uv run``) is searched
by the scan instead: reading that many matches (1.2 s for 750,000 at a million calls)
costs more than scanning a run's commands (0.3 s).  Counting up to here costs ~20 ms."""


def _searches_index(engine: Engine, f) -> bool:
    """Whether ``f``'s search reads the trigram table: it exists, the text has a trigram,
    and fewer than :data:`TRIGRAM_PROBE` commands hold it."""
    if not (f.search and _trigram_search(f.search, True) and search_index_exists(engine)):
        return False
    with engine.connect() as conn:
        found = conn.execute(select(func.count()).select_from(
            _trigram_matches(f.search).limit(TRIGRAM_PROBE).subquery())).scalar_one()
    return found < TRIGRAM_PROBE


def search_index_exists(engine: Engine) -> bool:
    """Whether the store has the SQLite trigram table (PostgreSQL's ``pg_trgm`` index
    needs no word: its planner uses it for the same LIKE)."""
    if engine.dialect.name != "sqlite":
        return False
    with engine.connect() as conn:
        return has_sqlite_search(conn)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _page(limit: int, offset: int) -> tuple[int, int]:
    return max(1, min(int(limit), MAX_PAGE_SIZE)), max(0, int(offset))


def _grouped(pairs) -> dict:
    out: dict = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
