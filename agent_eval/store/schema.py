"""The SQL tables, as SQLAlchemy Core ``Table`` objects.

This is the shape the code reads and writes.  The migrations in ``agent_eval/migrations``
build the same shape step by step; ``tests/store/test_store_schema.py`` compares the two so they
cannot drift apart.

``tool_calls`` repeats ``run_id`` and ``target_id`` from its session on purpose: the
per-target class breakdown over a million calls is one GROUP BY on one covering index,
with no join.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    not_,
    or_,
    select,
    text,
)
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator):
    """A timestamp stored in UTC and always read back timezone-aware.

    SQLite keeps no zone, so a naive value read from it would silently lose its meaning;
    this type attaches UTC on the way out.  Naive values written in are taken as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class ModelText(TypeDecorator):
    """Text a model or a server wrote: any length, any characters.

    PostgreSQL refuses NUL in text, and a model may emit one (the policy flags it as
    AE202), so on PostgreSQL each NUL is stored as U+2400 SYMBOL FOR NULL rather than
    failing the whole session.  SQLite keeps it as is.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect):
        if value is not None and dialect.name == "postgresql" and "\x00" in value:
            return value.replace("\x00", NUL_STAND_IN)
        return value

    def bind_processor(self, dialect):
        """None off PostgreSQL: the text goes in as it is, so no per-value call (an import
        binds ~200,000 model texts)."""
        if dialect.name != "postgresql":
            return None
        return super().bind_processor(dialect)


NUL_STAND_IN = "\u2400"

MAX_ID = 2**31 - 1
"""The largest id a row can have: ids are SQL ``INTEGER``, 32 bits on PostgreSQL.  A
larger one (a typo, a hostile URL) names no row, and is said so before any query, which
would overflow (SQLite) or fail (PostgreSQL ``integer out of range``)."""

metadata = MetaData()

SEARCH_TABLE = "tool_calls_search"
"""SQLite: the FTS5 trigram index of ``tool_calls.command`` (migration ``viewer_speed``),
kept by triggers and read only by ``store.queries``; no Core table, as no code writes it."""
SEARCH_INDEX = "ix_tool_calls_command_trgm"
"""PostgreSQL: the ``pg_trgm`` GIN index of ``tool_calls.command``, used by ``LIKE``."""
SEARCH_SCAN_INDEX = "ix_tool_calls_run_command"
SEARCH_SCAN_COLUMNS = ("run_id", "decision", "session_id", "id", "command")
"""SQLite: the covering index the command search scans instead of the calls' wide rows
(migration ``search_scan``); not in ``metadata``, as PostgreSQL does not have it."""


def is_modelled(name: str | None, type_: str, _parent_names=None) -> bool:
    """False for the search index objects above (and FTS5's shadow tables), which the
    migrations build outside ``metadata``: Alembic's ``include_name`` hook."""
    return not (name or "").startswith((SEARCH_TABLE, SEARCH_INDEX, SEARCH_SCAN_INDEX))

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("label", String(200)),
    Column("kind", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("suite", String(500)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("finished_at", UtcDateTime),
    Column("config", JSON, nullable=False),
    Column("fingerprint", JSON, nullable=False),
    Column("parent_run_id", Integer, ForeignKey("runs.id")),
)

targets = Table(
    "targets",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("model", String(500), nullable=False),
    Column("base_url", String(1000), nullable=False),
    Column("settings", JSON, nullable=False),
    UniqueConstraint("run_id", "name", name="uq_targets_run_name"),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("target_id", Integer, ForeignKey("targets.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(1000), nullable=False),
    Column("scenario", String(500), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("error", ModelText),
    Column("parent_id", Integer, ForeignKey("sessions.id", ondelete="SET NULL")),
    Column("tags", JSON, nullable=False),
    Column("handshake_required", Integer, nullable=False),
    Column("handshake_done", Integer, nullable=False),
    Column("handshake_completed", Boolean, nullable=False),
    Column("handshake_missed_step", String(500)),
    Column("n_turns", Integer, nullable=False),
    Column("n_messages", Integer, nullable=False),
    Column("n_calls", Integer, nullable=False),
    # its denied calls, written with them (migration viewer_speed): the run pages' error
    # counts per scenario and the failed-first lists read it instead of the calls
    Column("n_denied", Integer, nullable=False, server_default="0"),
    Column("messages", JSON, nullable=False),
    Column("source", String(100), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("started_at", UtcDateTime),
    Column("finished_at", UtcDateTime),
    # the wire protocol a proxied session's requests came in (migration session_protocol):
    # replay re-sends its turns in it; NULL for Chat Completions and every other source
    Column("protocol", String(16)),
    # judged under an agent CLI's rules (migration policy_agents): whose rules judged it
    # and how that agent was chosen (policy.sources.Via); NULL under an allow-list
    Column("policy_agent", String(200)),
    Column("policy_agent_via", String(16)),
    # an agent CLI's side request (tag side-request, wire/side.py), written from the tags
    # (migration side_request): in the covering index, so every figure leaves side requests
    # out without reading a session's row
    Column("side_request", Boolean, nullable=False, server_default=false()),
    # the agent CLI's release and mode emulated (migration policy_emulation), e.g.
    # "claude-code 2.1.332, mode default"; NULL under an allow-list and before
    Column("policy_emulation", String(200)),
    # the stack faults seen on its replies (migration stack_faults): a JSON list of
    # {turn, code, message, raw, ends}, AE5xx; NULL when there was none
    Column("stack_faults", JSON(none_as_null=True)),
    # the SHA-256 of the tool list its client offered (migration offered_tools), the list
    # itself in tool_lists once; NULL when the source shows no offered tools
    Column("tools_hash", String(64)),
    UniqueConstraint("run_id", "key", name="uq_sessions_run_key"),
    # covering the run pages' GROUP BYs (migration viewer_speed), the repeat outcomes
    # compare pairs (migration session_repeats), the side requests every figure leaves
    # out and the agents the run page groups by (migration side_request)
    Index("ix_sessions_run_target_status", "run_id", "target_id", "status", "scenario",
          "handshake_required", "handshake_completed", "n_calls", "n_denied", "repeat",
          "side_request", "policy_agent"),
    Index("ix_sessions_parent", "parent_id"),
    # the few sessions holding stack faults (migration stack_faults): the aggregator reads
    # their JSON lists through this range alone, never a run's every session row.  Partial
    # on PostgreSQL too (the migration builds it); only SQLite's predicate is named here, as
    # for ix_tool_calls_run_leak below.
    Index("ix_sessions_run_stack_faults", "run_id",
          sqlite_where=text("stack_faults IS NOT NULL")),
)

turns = Table(
    "turns",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("index", Integer, nullable=False),
    Column("content", ModelText, nullable=False),
    Column("reasoning", ModelText, nullable=False),
    Column("finish_reason", ModelText),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("reasoning_tokens", Integer),
    Column("cached_tokens", Integer),
    Column("latency_s", Float),
    Column("ttft_s", Float),
    Column("decode_tps", Float),
    Column("started_at", UtcDateTime),
    # the exact request of the turn, as a reference into request_blobs (store/requests.py);
    # NULL for imports and for sessions stored before requests were kept
    Column("request", JSON),
    Index("ix_turns_session", "session_id", "index"),
)

request_blobs = Table(
    "request_blobs",
    metadata,
    # one message (or tool list) of a request, stored once by the SHA-256 of its JSON text
    Column("hash", String(64), primary_key=True),
    Column("body", ModelText, nullable=False),
    # the last day a turn stored or used this text again (retention: prune_blobs)
    Column("seen_on", Date),
    Index("ix_request_blobs_seen_on", "seen_on"),
)

tool_lists = Table(
    "tool_lists",
    metadata,
    # one offered tool list ({name: argument schema}), stored once by the SHA-256 of its
    # canonical JSON (policy.schemas.tools_hash); sessions point at it by tools_hash, so a
    # schema that drifts between sessions shows as a second list (migration offered_tools)
    Column("hash", String(64), primary_key=True),
    Column("tools", ModelText, nullable=False),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("session_id", Integer, ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("target_id", Integer, ForeignKey("targets.id", ondelete="CASCADE"), nullable=False),
    Column("index", Integer, nullable=False),
    Column("turn_index", Integer, nullable=False),
    Column("call_id", ModelText),
    Column("tool", ModelText, nullable=False),
    Column("arguments", ModelText, nullable=False),
    Column("command", ModelText),
    Column("script", String(500)),
    Column("decision", String(10), nullable=False),
    Column("primary_code", String(20)),
    Column("next_action", String(20)),
    Column("output", ModelText, nullable=False),
    Column("source_decision", String(10)),
    Column("source_reason", ModelText),
    Column("child_session_id", Integer, ForeignKey("sessions.id", ondelete="SET NULL")),
    # the strict class of a call an agent CLI's rules let through that their strict
    # reading refuses (migration policy_agents); NULL for every other call
    Column("leak", String(20)),
    Index("ix_tool_calls_breakdown", "run_id", "target_id", "primary_code", "decision"),
    Index("ix_tool_calls_session", "session_id", "index"),
    Index("ix_tool_calls_run_decision", "run_id", "decision", "session_id", "id", "target_id",
          "primary_code", "next_action"),  # a run's denied calls, read from the index alone
    Index("ix_tool_calls_session_turn", "session_id", "turn_index"),  # burned turns (aggregates)
    # the leaked calls alone (migration policy_agents): the aggregator's leak counts.  Partial
    # on PostgreSQL too, as that migration builds it; only SQLite's predicate is named here,
    # the one store built from this metadata (database._create_at_head): naming
    # PostgreSQL's makes SQLAlchemy import that dialect (~15 ms) in every process, SQLite
    # runs included.  tests/store/test_store_schema.py reads the index PostgreSQL has.
    Index("ix_tool_calls_run_leak", "run_id", "leak", sqlite_where=text("leak IS NOT NULL")),
)

findings = Table(
    "findings",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "tool_call_id", Integer, ForeignKey("tool_calls.id", ondelete="CASCADE"), nullable=False
    ),
    Column("code", String(20), nullable=False),
    Column("message", ModelText, nullable=False),
    Column("start", Integer, nullable=False),
    Column("end", Integer, nullable=False),
    Index("ix_findings_tool_call", "tool_call_id"),
)

run_leases = Table(
    "run_leases",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("token", String(64), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("acquired_at", UtcDateTime, nullable=False),
    Column("heartbeat_at", UtcDateTime, nullable=False),
)
"""One row while a process plays a run (``run`` or ``run --resume``); see store/leases.py."""

work_items = Table(
    "work_items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(1000), nullable=False),
    Column("target", String(200), nullable=False),
    Column("scenario", String(500), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("claimed_by", String(64)),
    Column("worker", String(300)),
    Column("lease_until", UtcDateTime),
    Column("attempts", Integer, nullable=False),
    Column("duplicates", Integer, nullable=False),
    Column("done_at", UtcDateTime),
    Column("done_by", String(64)),
    UniqueConstraint("run_id", "key", name="uq_work_items_run_key"),
    Index("ix_work_items_open", "run_id", "done_at", "id"),
)
"""A planned run's sessions to play, one row per top-level session (``run --plan-only``);
``agent-eval worker`` processes claim them under a lease; see store/work.py."""

server_samples = Table(
    "server_samples",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("source", String(500), nullable=False),
    Column("host", String(500)),
    Column("label", String(200)),
    Column("ts", UtcDateTime, nullable=False),
    Column("prompt_tps", Float),
    Column("generation_tps", Float),
    Column("running", Integer),
    Column("waiting", Integer),
    Column("swapped", Integer),
    Column("kv_cache_pct", Float),
    Column("prefix_hit_pct", Float),
    Column("raw", ModelText),
    Index("ix_server_samples_ts", "ts"),
)

server_requests = Table(
    "server_requests",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("source", String(500), nullable=False),
    Column("ts", UtcDateTime, nullable=False),
    Column("method", String(20), nullable=False),
    Column("path", String(2000), nullable=False),
    Column("status", Integer, nullable=False),
    Column("duration_s", Float),
    Index("ix_server_requests_ts", "ts"),
)


# ranges of the indexes above, shared by the aggregator and the lists


def denied_calls(run_ids: list[int]) -> list:
    """The denied calls of the runs, as a range of ``ix_tool_calls_run_decision``.  The
    ``session_id > 0`` bound (always true) makes that index the tightest match for
    SQLite's planner, which has no statistics in a store nobody ANALYZEd."""
    c = tool_calls.c
    return [c.run_id.in_(run_ids), c.decision == "deny", c.session_id > 0]


def faulted_calls(run_ids: list[int]) -> list:
    """The denied calls of the runs' uncounted sessions (error sessions and side
    requests), reached from those few sessions."""
    c, s = tool_calls.c, sessions.c
    return [c.session_id.in_(select(s.id).where(s.run_id.in_(run_ids), uncounted_sessions(s),
                                                s.n_denied > 0)),
            c.decision == "deny"]


def side_request(s=sessions.c):
    """The session is an agent CLI's side request (tag ``side-request``, ``wire/side.py``):
    its ``side_request`` column, written from the tags, in the covering index (a ``LIKE``
    on the tags read every session's row)."""
    return s.side_request


def uncounted_sessions(s=sessions.c):
    """Sessions the run's figures leave out: error sessions (a fault of the server or
    harness, not the model's) and side requests (not conversations of the stack)."""
    return or_(s.status == "error", side_request(s))


def counted_sessions(s=sessions.c) -> list:
    """Sessions the run's figures count: the negation of :func:`uncounted_sessions`."""
    return [s.status != "error", not_(s.side_request)]
