"""The SQL store: every run, session, turn, tool call and finding, in SQLite or PostgreSQL.

Live runs, transcript imports and server-log parsers all write here; metrics, reports,
the gate and the drill-down all read from here, so they work the same on every source.

    >>> with open_store("runs.db") as store:                      # doctest: +SKIP
    ...     run_id = store.create_run(label="nightly", kind="live", suite="suite.yaml",
    ...                               config={...}, fingerprint={...})
    ...     store.add_target(run_id, name="qwen", model="Qwen3.5-27B",
    ...                      base_url="http://127.0.0.1:8000/v1", settings={...})
    ...     store.record_sessions(run_id, [parent_record, *child_records])
    ...     store.summarize([run_id])["qwen"].errors
    Rate(k=9, n=161, ...)

Promises:

- each ``record_sessions`` batch is one transaction: all of it is stored or none;
- nothing the model wrote is put into SQL text: bound parameters only;
- no credentials: settings, config and fingerprint are scrubbed before they are stored;
- readers stream, so memory does not grow with the size of a run;
- the schema is checked on open: a new database is created at the head revision, an
  older one is refused with the ``agent-eval db upgrade`` command to run.

Layout: ``schema`` (the SQL tables), ``database`` (URLs, engines, migrations), ``runs``,
``sessions`` (write and load), ``reads`` (streaming rows), ``streaming`` (whole sessions
read back in bulk), ``aggregates`` (the one aggregator: every run figure, by GROUP BY),
``cluster_stats`` (the sums behind the clustered intervals) and ``units`` (per-session
units), ``queries`` (the paged
lists), ``work`` and ``leases`` (runs shared by workers), ``requests``, ``server_logs``.

:class:`Store` is the store's API, and the only one: each method is one unit of work in
its own transaction, forwarded to one function of one module with the engine, so
callers hold one object and never an engine or a connection (the engine's pool, its
read-only mode and the URL's password stay in here).  Outside ``store/`` nothing imports
a module of this package or takes ``Store.engine`` (tests/test_layers.py); the records the
methods take and return are imported from ``agent_eval.store`` itself.  To add a query,
write it as a function of the module that owns its tables, then add a method here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import URL, Engine

from agent_eval.store import queries, reads, runs, server_logs, sessions, work
from agent_eval.store.caps import STORED_TEXT_CHARS
from agent_eval.store.database import (
    build_search_index,
    check_schema,
    connect,
    head_revision,
    refuse_missing_sqlite,
    refuse_writes,
    resolve_db_url,
    upgrade,
)
from agent_eval.store.queries import (
    CALL_SORTS,
    SESSION_SORTS,
    CallFilter,
    CallListRow,
    Page,
    RunRow,
    SessionFilter,
    SessionListRow,
    filter_from,
)
from agent_eval.store.runs import RunInfo, RunKind, RunStatus, TargetInfo, scrub_secrets
from agent_eval.store.schema import MAX_ID, server_requests, server_samples
from agent_eval.store.sessions import StoredSession
from agent_eval.store.streaming import SessionTranscript, TranscriptHead
from agent_eval.store.work import ClaimedItem, Outcome, WorkProgress
from agent_eval.transcript import CallRow, SessionRecord, SessionRow, TurnRow

if TYPE_CHECKING:
    from agent_eval.metrics.sufficient import TargetStats
    from agent_eval.metrics.summary import GroupKeys, GroupSummary
    from agent_eval.store.aggregates import AgreementCounts, Detail
    from agent_eval.store.cluster_stats import StatsBy

__all__ = [
    "CALL_SORTS",
    "MAX_ID",
    "SESSION_SORTS",
    "STORED_TEXT_CHARS",
    "CallFilter",
    "CallListRow",
    "ClaimedItem",
    "Outcome",
    "Page",
    "RunInfo",
    "RunKind",
    "RunRow",
    "RunStatus",
    "SessionFilter",
    "SessionListRow",
    "SessionTranscript",
    "Store",
    "StoredSession",
    "TargetInfo",
    "TranscriptHead",
    "WorkProgress",
    "build_search_index",
    "filter_from",
    "head_revision",
    "open_store",
    "refuse_missing_sqlite",
    "resolve_db_url",
    "scrub_secrets",
    "upgrade",
]


def open_store(url: str | URL | None = None, *, create: bool = True) -> Store:
    """Open the store at ``url`` (a ``--db`` value; None: ``$AGENT_EVAL_DB`` or
    ``agent_eval.db``; or another store's :attr:`Store.address`), creating a new database
    at head and refusing one at another revision with a ConfigError that says what to
    run.  With ``create=False`` (the commands that only read or add to stored runs) a
    SQLite file that does not exist is refused, naming the path, instead of created: a
    typo'd ``--db`` must not leave an empty database behind."""
    resolved = url if isinstance(url, URL) else resolve_db_url(url)
    if not create:
        refuse_missing_sqlite(resolved)
    engine = connect(resolved)
    try:
        check_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine)


class Store:
    """One open database.  Thin: each method is one unit of work in its own transaction.

    Methods by group (the module that does the work in brackets):

    - runs [runs, queries]: ``create_run``, ``add_target``, ``set_run_status``,
      ``resolve_run`` (an id, ``latest`` or ``label:NAME``), ``get_run``, ``list_runs``,
      ``run_targets``, ``session_coverage`` (planned / played / judged / lost),
      ``previous_run_id``, ``lease``; the paged list ``list_run_rows``,
      ``delete_run``, ``prune_runs``;
    - sessions [sessions, requests]: ``record_sessions`` (one transaction per batch),
      ``record_session``, ``finished_keys`` (for ``--resume``), ``find_session``,
      ``load_session`` (the full transcript), ``request_refs``, ``load_requests``,
      ``prune_requests``;
    - rows, streamed [reads, streaming]: ``session_rows``, ``call_rows``, ``turn_rows``,
      ``iter_sessions``, ``iter_transcripts``;
    - figures [aggregates, cluster_stats]: ``summarize`` (the one aggregator: every figure
      a report, page, gate or table shows), ``cluster_stats`` (the sums behind the
      clustered intervals; per tag: ``tag_cluster_stats``; per next action after a
      denial: ``action_cluster_stats``), ``session_units``, ``session_outcomes``,
      ``source_agreement``;
    - lists [queries]: ``list_sessions``, ``list_calls``, ``neighbour_sessions``;
    - planned runs [work]: ``add_work_items``, ``has_work_items``, ``work_progress``,
      ``claim_work_item``, ``renew_work_leases``, ``release_work_item``,
      ``complete_work_item``, ``finish_run_if_done``;
    - server logs [server_logs]: ``add_server_samples``, ``server_samples``,
      ``add_server_requests``, ``server_requests``;
    - the database: ``url`` (printable), ``address`` (for another process),
      ``read_only``, ``one_read`` (a page's repeated statements read once), ``close``.

    ``engine`` is for the store's own modules and for white-box tests; the package never
    takes it (tests/test_layers.py).

    Example::

        with open_store("runs.db") as store:
            run = store.resolve_run("latest")
            rows = list(store.call_rows([run.id]))
    """

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def url(self) -> str:
        """The database URL, password hidden: safe to print."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def address(self) -> URL | None:
        """What another process opens this database with (``open_store(address)``): the
        URL, password included, so pass it on and never print it.  None for an in-memory
        SQLite database, which no other process can see."""
        url = self.engine.url
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            return None
        return url

    def one_read(self) -> AbstractContextManager[None]:
        """A context in which a statement the aggregator runs twice is read once (one
        viewer page: store/memo.py); nothing is kept after it."""
        from agent_eval.store.memo import one_read

        return one_read()

    def read_only(self) -> Store:
        """This store, refusing writes from now on (SQLite ``query_only``, PostgreSQL
        read-only transactions; connections already open are dropped): the viewer's."""
        refuse_writes(self.engine)
        return self

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # runs and targets

    def create_run(
        self,
        *,
        label: str | None,
        kind: str,
        suite: str | None,
        config: dict,
        fingerprint: dict,
        parent_run_id: int | None = None,
    ) -> int:
        """A new run with status ``running``; its id."""
        return runs.create_run(
            self.engine,
            label=label,
            kind=kind,
            suite=suite,
            config=config,
            fingerprint=fingerprint,
            parent_run_id=parent_run_id,
        )

    def add_target(
        self, run_id: int, *, name: str, model: str, base_url: str, settings: dict
    ) -> int:
        """The target's id; adding a name the run already has returns the existing id."""
        return runs.add_target(
            self.engine, run_id, name=name, model=model, base_url=base_url, settings=settings
        )

    def set_run_status(self, run_id: int, status: str) -> None:
        runs.set_run_status(self.engine, run_id, status)

    def update_run_config(self, run_id: int, changes: dict) -> dict:
        """Merge ``changes`` into the run's stored config (a sequential run's next batch
        and looks, ``run --until-decided``); the config as stored now."""
        return runs.update_run_config(self.engine, run_id, changes)

    def resolve_run(self, ref: str | int) -> RunInfo:
        """The run an id, ``latest`` or ``label:NAME`` names; ConfigError when none does."""
        return runs.resolve_run(self.engine, ref)

    def get_run(self, run_id: int) -> RunInfo:
        return runs.get_run(self.engine, run_id)

    def list_runs(self, limit: int = 20, label: str | None = None) -> list[RunInfo]:
        """The newest runs first (with ``label`` only, when given)."""
        return runs.list_runs(self.engine, limit, label)

    def run_targets(self, run_id: int) -> list[TargetInfo]:
        return runs.run_targets(self.engine, run_id)

    def session_coverage(self, run_id: int):
        """Per target, sessions planned / played / judged / lost by cause
        (``metrics.coverage.Coverage``)."""
        return runs.session_coverage(self.engine, run_id)

    def run_scenarios(self, run_id: int) -> list[str]:
        """The scenarios the run has sessions of, by name."""
        return runs.run_scenarios(self.engine, run_id)

    def previous_run_id(self, run: RunInfo) -> int | None:
        """The newest run older than ``run`` with the same label, if any."""
        return runs.previous_run_id(self.engine, run)

    def lease(self, run_id: int):
        """``with store.lease(run_id):`` hold the run for this process (store/leases.py);
        ``RunLeased`` names the process that holds it already."""
        from agent_eval.store.leases import holding_lease

        return holding_lease(self.engine, run_id)

    def run_is_played(self, run_id: int) -> bool:
        """Whether a process is playing the run now: a live holder of its lease, or a
        worker holding one of its work items (a run left ``running`` by a killed runner
        is not)."""
        from agent_eval.store.leases import lease_held

        if lease_held(self.engine, run_id):
            return True
        return self.has_work_items(run_id) and self.work_progress(run_id).leased > 0

    def list_run_rows(self, *, label: str | None = None, kind: str | None = None,
                      status: str | None = None, limit: int = queries.PAGE_SIZE,
                      offset: int = 0) -> Page:
        """A page of ``RunRow``s, newest first, with their figures (``agent-eval runs``,
        the viewer's runs page)."""
        return queries.list_runs(self.engine, label=label, kind=kind, status=status,
                                 limit=limit, offset=offset)

    def delete_run(self, run_id: int) -> int:
        """Delete one run and everything stored under it; the number of sessions it held."""
        return queries.delete_run(self.engine, run_id)

    def prune_runs(self, before: datetime, *, dry_run: bool = False) -> list[int]:
        """Delete (or with ``dry_run`` only list) the runs started before ``before`` that
        are not running; their ids."""
        return queries.prune_runs(self.engine, before, dry_run=dry_run)

    # sessions

    def record_sessions(self, run_id: int, records: Sequence[SessionRecord]) -> list[int]:
        """Store a batch (a parent and its children) in one transaction; ids in order."""
        return sessions.record_sessions(self.engine, run_id, records)

    def record_session(self, run_id: int, record: SessionRecord) -> int:
        return self.record_sessions(run_id, [record])[0]

    def finished_keys(self, run_id: int) -> set[str]:
        return sessions.finished_keys(self.engine, run_id)

    def find_session(self, run_id: int, key: str) -> int | None:
        return sessions.find_session(self.engine, run_id, key)

    def load_session(self, session_id: int) -> StoredSession:
        return sessions.load_session(self.engine, session_id)

    def mcp_servers(self, run_ids: list[int]) -> list[queries.McpServerRow]:
        """Per MCP server named in the runs' tool names: calls, denied, schema breaks."""
        return queries.mcp_servers(self.engine, list(run_ids))

    def run_telemetry(self, run_id: int) -> tuple[int, int, int] | None:
        """A run ``collect`` stored: (events seen, calls judged, calls not judgeable);
        None for a run of any other source."""
        return queries.run_telemetry(self.engine, run_id)

    def offered_tool_lists(self, run_id: int) -> list[tuple[str, dict, int]]:
        """The tool lists a run's sessions were offered, each once: ``(hash, {name:
        schema}, sessions)``, the most offered first (``sessions.offered_tool_lists``)."""
        return sessions.offered_tool_lists(self.engine, run_id)

    def request_refs(self, run_id: int) -> dict[int, dict[int, dict]]:
        """Session id → turn index → stored request reference (no blobs): store/requests.py."""
        from agent_eval.store.requests import run_request_refs

        with self.engine.connect() as conn:
            return run_request_refs(conn, run_id)

    def prune_requests(self, keep_days: int) -> int:
        """Delete the stored request texts no turn used in the last ``keep_days`` days;
        how many were deleted (store/requests.py: ``prune_blobs``)."""
        from agent_eval.store.requests import prune_blobs

        with self.engine.begin() as conn:
            return prune_blobs(conn, keep_days)

    def load_requests(self, session_id: int) -> dict:
        """Turn index → ``StoredRequest`` (the exact body, and whether it was capped)."""
        from agent_eval.store.requests import load_requests

        with self.engine.connect() as conn:
            return load_requests(conn, session_id)

    # rows, streamed

    def iter_sessions(self, run_ids: Iterable[int], id_range: tuple[int, int] | None = None
                      ) -> Iterator[StoredSession]:
        """Every session of the runs rebuilt in full, in id order, streamed (four queries
        per hundred sessions); for bulk reads of big runs.  ``id_range``: only session ids
        ``first..last`` (inclusive), for a report split between processes."""
        from agent_eval.store.streaming import stream_sessions

        return stream_sessions(self.engine, run_ids, id_range)

    def iter_transcripts(self, run_ids: Iterable[int], id_range: tuple[int, int] | None = None
                         ) -> Iterator[SessionTranscript]:
        """Like ``iter_sessions``, but each session as the rows its drill-down shows
        (``store/streaming.py: SessionTranscript``): the report's session files."""
        from agent_eval.store.streaming import stream_transcripts

        return stream_transcripts(self.engine, run_ids, id_range)

    def session_rows(self, run_ids: Iterable[int]) -> Iterator[SessionRow]:
        return reads.session_rows(self.engine, run_ids)

    def call_rows(self, run_ids: Iterable[int]) -> Iterator[CallRow]:
        return reads.call_rows(self.engine, run_ids)

    def turn_rows(self, run_ids: Iterable[int]) -> Iterator[TurnRow]:
        return reads.turn_rows(self.engine, run_ids)

    # figures: the one aggregator

    def summarize(self, run_ids: Iterable[int], by: GroupKeys = "target", *,
                  columns: bool = False, with_turns: bool = True, detail: Detail = "all"
                  ) -> dict[Any, GroupSummary]:
        """``metrics.summarize`` of the runs (every figure a reader shows) by GROUP BY in
        the database (store/aggregates.py).  ``by``: a key or a tuple of keys;
        ``columns``: targets named as report columns; ``detail``: what to leave out."""
        from agent_eval.store.aggregates import summarize_sql

        return summarize_sql(self.engine, run_ids, by=by, columns=columns,
                             with_turns=with_turns, detail=detail)

    def session_units(self, run_ids: Iterable[int]):
        """``metrics.clustered.session_units`` of the runs from per-session GROUP BYs (the
        per-session statistics: power planning, tag strata)."""
        from agent_eval.store.units import units_sql

        return units_sql(self.engine, run_ids)

    def cluster_stats(self, run_ids: Iterable[int], *, by: StatsBy = "target",
                      classes: bool = False, passes: bool = False,
                      columns: bool = False) -> dict[str, TargetStats]:
        """Per target (or ``"all"``) the sums behind every clustered and paired statistic
        (``metrics.sufficient.TargetStats``), by GROUP BY per (target, scenario);
        ``passes``: with each scenario's outcomes (pass rates, McNemar); ``columns``:
        targets named as report columns."""
        from agent_eval.store.cluster_stats import cluster_stats

        return cluster_stats(self.engine, run_ids, by=by, classes=classes, passes=passes,
                             columns=columns)

    def action_cluster_stats(self, run_ids: Iterable[int], *, columns: bool = False
                             ) -> dict[str, dict[str, list]]:
        """Per target and next action after a denial, the per-scenario sums of (denials
        followed by it, denials) over the clusters (the report's reaction table)."""
        from agent_eval.store.cluster_stats import action_cluster_stats

        return action_cluster_stats(self.engine, run_ids, columns=columns)

    def tag_cluster_stats(self, run_ids: Iterable[int], *, columns: bool = False
                          ) -> dict[tuple[str, str], TargetStats]:
        """Per (tag, target) the sums of the clusters carrying the tag, per scenario (the
        report's "By tag" table), in one GROUP BY."""
        from agent_eval.store.cluster_stats import tag_cluster_stats

        return tag_cluster_stats(self.engine, run_ids, columns=columns)

    def session_outcomes(self, run_ids: Iterable[int], scenarios: Iterable[str] | None = None,
                         *, columns: bool = False):
        """``(target, scenario) -> ((repeat, passed), ...)`` of the top-level, non-error
        sessions (of ``scenarios`` only, when given); ``columns``: targets named as
        report columns (``name · run N`` when there are several runs)."""
        from agent_eval.store.cluster_stats import session_outcomes

        return session_outcomes(self.engine, run_ids, scenarios, columns=columns)

    def source_agreement(self, run_ids: Iterable[int], *,
                         columns: bool = False) -> dict[str, AgreementCounts]:
        """Per target (or report column), the calls carrying the source harness's own
        verdict and how many disagree with ours, each way."""
        from agent_eval.store.aggregates import source_agreement

        return source_agreement(self.engine, run_ids, columns=columns)

    # paged lists (agent-eval sessions / calls, the viewer)

    def list_sessions(self, f: SessionFilter, *, sort: str = "failed",
                      limit: int = queries.PAGE_SIZE, offset: int = 0) -> Page:
        """A page of ``SessionListRow``s matching ``f``, failed first by default."""
        return queries.list_sessions(self.engine, f, sort=sort, limit=limit, offset=offset)

    def list_calls(self, f: CallFilter, *, sort: str = "failed",
                   limit: int = queries.PAGE_SIZE, offset: int = 0) -> Page:
        """A page of ``CallListRow``s matching ``f``, denied first by default."""
        return queries.list_calls(self.engine, f, sort=sort, limit=limit, offset=offset)

    def primary_spans(self, rows) -> dict[int, tuple[int, int]]:
        """Where in its command each denied call of ``rows`` (a list page) went wrong."""
        return queries.primary_spans(self.engine, rows)

    def neighbour_sessions(self, f: SessionFilter, session_id: int
                           ) -> tuple[int | None, int | None]:
        """The failed sessions just before and after ``session_id`` under ``f``."""
        return queries.neighbour_sessions(self.engine, f, session_id)

    # server logs

    def add_server_samples(self, rows: Iterable[dict]) -> int:
        return server_logs.add_rows(self.engine, server_samples, rows)

    def server_samples(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        source: str | None = None,
    ) -> list[dict]:
        return server_logs.read_rows(self.engine, server_samples, since, until, source)

    def add_server_requests(self, rows: Iterable[dict]) -> int:
        return server_logs.add_rows(self.engine, server_requests, rows)

    def server_requests(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        source: str | None = None,
    ) -> list[dict]:
        return server_logs.read_rows(self.engine, server_requests, since, until, source)

    # work items of a run planned for workers [work]

    def add_work_items(self, run_id: int, items) -> int:
        """Store a run's plan, one row per (target, scenario, repeat) (store/work.py)."""
        return work.add_work_items(self.engine, run_id, items)

    def work_progress(self, run_id: int) -> WorkProgress:
        """Planned, done, leased and duplicate counts of a planned run (store/work.py)."""
        return work.work_progress(self.engine, run_id)

    def has_work_items(self, run_id: int) -> bool:
        """Whether the run was planned for workers (``run --plan-only``)."""
        return work.has_work_items(self.engine, run_id)

    def claim_work_item(self, run_id: int, token: str, worker: str, lease_s: float
                        ) -> ClaimedItem | None:
        """The lowest open item nobody holds, leased to ``token``; None when none is left."""
        return work.claim_work_item(self.engine, run_id, token, worker, lease_s)

    def renew_work_leases(self, token: str, item_ids: Sequence[int], lease_s: float) -> int:
        """Move the leases of the items ``token`` still holds forward."""
        return work.renew_work_leases(self.engine, token, item_ids, lease_s)

    def release_work_item(self, item_id: int, token: str) -> None:
        """Give an item back unplayed (its lease ends now)."""
        work.release_work_item(self.engine, item_id, token)

    def complete_work_item(self, run_id: int, item_id: int, token: str,
                           records: Sequence[SessionRecord]) -> Outcome:
        """Store the item's session records and mark it done, in one transaction."""
        return work.complete_work_item(self.engine, run_id, item_id, token, records)

    def finish_run_if_done(self, run_id: int) -> bool:
        """Mark the run finished when no item is open; whether this call did."""
        return work.finish_run_if_done(self.engine, run_id)
