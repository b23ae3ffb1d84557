"""viewer speed: covering indexes for the run pages, a trigram index for the command search

Revision ID: viewer_speed
Revises: aggregate_indexes

Issue 15: every ``agent-eval view`` page under 300 ms over a million calls.

* ``sessions.n_denied``: the session's denied calls, written with them (so right for a
  run still going: a session and its calls are stored in one transaction), filled here
  for the sessions already stored.  The run pages sum it per target and scenario, and
  the failed-first lists test it, instead of counting a million calls per page.
* ``ix_tool_calls_run_decision`` also holds ``target_id``, ``primary_code`` and
  ``next_action``, and ``ix_sessions_run_target_status`` also the scenario, handshake
  and call count, so the run, runs and failed-sessions pages read index ranges only
  instead of a million-call table's rows.
* The command search (``calls?search=``, ``sessions?search=``) finds its candidates in a
  trigram index and keeps its exact ``LIKE`` test on them: on SQLite an FTS5 table
  ``tool_calls_search`` (tokenizer ``trigram``) kept in step with ``tool_calls`` by
  triggers; on PostgreSQL a ``pg_trgm`` GIN index, which the planner uses for ``LIKE``
  by itself.  Where neither can be built (SQLite without FTS5 trigram, a PostgreSQL
  server without the ``pg_trgm`` extension or the right to create it) the upgrade goes
  on without it, says so on stderr, and the search scans as before: the same rows, only
  slower.
"""

from __future__ import annotations

import sys

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import DBAPIError

from agent_eval.store.schema import SEARCH_INDEX, SEARCH_TABLE

revision = "viewer_speed"
down_revision = "aggregate_indexes"
branch_labels = None
depends_on = None

CALLS_BEFORE = ["run_id", "decision", "session_id", "id"]
CALLS_AFTER = [*CALLS_BEFORE, "target_id", "primary_code", "next_action"]
SESSIONS_BEFORE = ["run_id", "target_id", "status"]
SESSIONS_AFTER = [*SESSIONS_BEFORE, "scenario", "handshake_required", "handshake_completed",
                  "n_calls", "n_denied"]

SQLITE_SEARCH = (
    f"CREATE VIRTUAL TABLE {SEARCH_TABLE} USING fts5(command, content='tool_calls', "
    "content_rowid='id', tokenize='trigram')",
    f"CREATE TRIGGER {SEARCH_TABLE}_insert AFTER INSERT ON tool_calls "
    f"WHEN new.command IS NOT NULL BEGIN "
    f"INSERT INTO {SEARCH_TABLE}(rowid, command) VALUES (new.id, new.command); END",
    f"CREATE TRIGGER {SEARCH_TABLE}_delete AFTER DELETE ON tool_calls "
    f"WHEN old.command IS NOT NULL BEGIN "
    f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}, rowid, command) "
    f"VALUES ('delete', old.id, old.command); END",
    f"CREATE TRIGGER {SEARCH_TABLE}_update AFTER UPDATE OF command ON tool_calls BEGIN "
    f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}, rowid, command) "
    f"SELECT 'delete', old.id, old.command WHERE old.command IS NOT NULL; "
    f"INSERT INTO {SEARCH_TABLE}(rowid, command) "
    f"SELECT new.id, new.command WHERE new.command IS NOT NULL; END",
    f"INSERT INTO {SEARCH_TABLE}(rowid, command) "
    "SELECT id, command FROM tool_calls WHERE command IS NOT NULL",
)
SEARCH_FALLBACK = ("the command search will scan a run's commands (the same results, "
                   "slower over a million calls)")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("n_denied", sa.Integer, nullable=False,
                                        server_default="0"))
    op.execute("UPDATE sessions SET n_denied = (SELECT count(*) FROM tool_calls "
               "WHERE tool_calls.session_id = sessions.id AND tool_calls.decision = 'deny') "
               "WHERE id IN (SELECT session_id FROM tool_calls WHERE decision = 'deny')")
    _replace_indexes(CALLS_AFTER, SESSIONS_AFTER)
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_search()
    else:
        _postgresql_search()


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS {SEARCH_TABLE}_{trigger}")
        op.execute(f"DROP TABLE IF EXISTS {SEARCH_TABLE}")
    else:
        op.execute(f"DROP INDEX IF EXISTS {SEARCH_INDEX}")
    _replace_indexes(CALLS_BEFORE, SESSIONS_BEFORE)
    op.drop_column("sessions", "n_denied")


def _replace_indexes(calls: list[str], sessions: list[str]) -> None:
    op.drop_index("ix_tool_calls_run_decision", table_name="tool_calls")
    op.create_index("ix_tool_calls_run_decision", "tool_calls", calls)
    op.drop_index("ix_sessions_run_target_status", table_name="sessions")
    op.create_index("ix_sessions_run_target_status", "sessions", sessions)


def _sqlite_search() -> None:
    bind = op.get_bind()
    try:
        with bind.begin_nested():
            for statement in SQLITE_SEARCH:
                bind.exec_driver_sql(statement)
    except DBAPIError as exc:
        _warn(f"this SQLite ({exc.orig}) has no FTS5 trigram tokenizer (SQLite 3.34 or "
              f"newer has it): {SEARCH_FALLBACK}")


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
