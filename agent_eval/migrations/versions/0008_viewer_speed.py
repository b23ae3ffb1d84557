"""viewer speed: covering indexes for the run pages, a trigram index for the command search

Revision ID: viewer_speed
Revises: request_blob_seen

Why: every ``agent-eval view`` page under 300 ms over a million calls.

* ``sessions.n_denied``: the session's denied calls, written with them (so right for a
  run still going: a session and its calls are stored in one transaction), filled here
  for the sessions already stored.  The run pages sum it per target and scenario, and
  the failed-first lists test it, instead of counting a million calls per page.
* ``ix_tool_calls_run_decision`` also holds ``target_id``, ``primary_code`` and
  ``next_action``, and ``ix_sessions_run_target_status`` also the scenario, handshake
  and call count, so the run, runs and failed-sessions pages read index ranges only
  instead of a million-call table's rows.
* The command search (``calls?search=``, ``sessions?search=``) finds its candidates in a
  trigram index and keeps its exact ``LIKE`` test on them.  On PostgreSQL this revision
  adds a ``pg_trgm`` GIN index, which the planner uses for ``LIKE`` by itself; where it
  cannot be built (no ``pg_trgm`` extension, or no right to create it) the upgrade goes
  on without it, says so on stderr, and the search scans: the same rows, only slower.
  On SQLite the FTS5 trigram table is not built here: its triggers would slow every
  import by ~40%; ``agent-eval db upgrade --search-index`` builds it on request
  (``store/search_index.py``), and this revision's downgrade drops it.
"""

from __future__ import annotations

import sys

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import DBAPIError

from agent_eval.store.schema import SEARCH_INDEX
from agent_eval.store.search_index import drop_sqlite_search

revision = "viewer_speed"
down_revision = "request_blob_seen"
branch_labels = None
depends_on = None

CALLS_BEFORE = ["run_id", "decision", "session_id", "id"]
CALLS_AFTER = [*CALLS_BEFORE, "target_id", "primary_code", "next_action"]
SESSIONS_BEFORE = ["run_id", "target_id", "status"]
SESSIONS_AFTER = [*SESSIONS_BEFORE, "scenario", "handshake_required", "handshake_completed",
                  "n_calls", "n_denied"]

SEARCH_FALLBACK = ("the command search will scan a run's commands (the same results, "
                   "slower over a million calls)")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("n_denied", sa.Integer, nullable=False,
                                        server_default="0"))
    op.execute("UPDATE sessions SET n_denied = (SELECT count(*) FROM tool_calls "
               "WHERE tool_calls.session_id = sessions.id AND tool_calls.decision = 'deny') "
               "WHERE id IN (SELECT session_id FROM tool_calls WHERE decision = 'deny')")
    _replace_indexes(CALLS_AFTER, SESSIONS_AFTER)
    if op.get_bind().dialect.name == "postgresql":
        _postgresql_search()


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        drop_sqlite_search(bind)  # built by `db upgrade --search-index`, if it was
    else:
        op.execute(f"DROP INDEX IF EXISTS {SEARCH_INDEX}")
    _replace_indexes(CALLS_BEFORE, SESSIONS_BEFORE)
    op.drop_column("sessions", "n_denied")


def _replace_indexes(calls: list[str], sessions: list[str]) -> None:
    op.drop_index("ix_tool_calls_run_decision", table_name="tool_calls")
    op.create_index("ix_tool_calls_run_decision", "tool_calls", calls)
    op.drop_index("ix_sessions_run_target_status", table_name="sessions")
    op.create_index("ix_sessions_run_target_status", "sessions", sessions)


def _postgresql_search() -> None:
    bind = op.get_bind()
    available = bind.exec_driver_sql(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").first()
    if available is None:
        _warn("this PostgreSQL server has no pg_trgm extension (package postgresql-contrib): "
              f"{SEARCH_FALLBACK}; once it is installed, run `CREATE EXTENSION pg_trgm; "
              f"CREATE INDEX {SEARCH_INDEX} ON tool_calls USING gin (command gin_trgm_ops)`")
        return
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            bind.exec_driver_sql(
                f"CREATE INDEX {SEARCH_INDEX} ON tool_calls USING gin (command gin_trgm_ops)")
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0]
        _warn(f"cannot create the pg_trgm index ({reason}): {SEARCH_FALLBACK}; a database "
              f"owner can run `CREATE EXTENSION pg_trgm; CREATE INDEX {SEARCH_INDEX} ON "
              "tool_calls USING gin (command gin_trgm_ops)`")


def _warn(message: str) -> None:
    print(f"Warning: {message}", file=sys.stderr)
