"""The SQLite trigram index of the calls' commands, built on request only.

The viewer's command search (``calls?search=``, ``sessions?search=``, ``--search``) runs
``command LIKE '%text%'`` over a run's calls.  On PostgreSQL the migration
``viewer_speed`` adds a ``pg_trgm`` GIN index the planner uses by itself.  On SQLite the
same job needs an FTS5 table (tokenizer ``trigram``) kept in step with ``tool_calls`` by
triggers, and those triggers cost every stored call about 90 us of CPU: imports ran at
4,450 instead of 7,250 calls per CPU second with it (BENCHMARKS.md).  So SQLite stores
scan by default: the migration ``search_scan`` gives the scan a narrow partial index of
``(run_id, decision, session_id, id, command)`` to read instead of the calls' wide rows
(~0.15 s of CPU over a million calls, an index entry per stored call), and
``agent-eval db upgrade --search-index`` builds the table for a store that is searched
more than it is written.  ``store.queries`` reads the table when it is there; the rows
found are the same either way.
"""

from __future__ import annotations

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from agent_eval.store.schema import SEARCH_TABLE

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


def has_sqlite_search(conn: Connection) -> bool:
    return conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = ?",
                                (SEARCH_TABLE,)).first() is not None


def build_sqlite_search(conn: Connection) -> str | None:
    """Build the table and its triggers in ``conn``'s transaction (nothing when it is
    there already); None when built or present, else why it cannot be (an SQLite without
    the FTS5 trigram tokenizer, before 3.34)."""
    if has_sqlite_search(conn):
        return None
    try:
        with conn.begin_nested():
            for statement in SQLITE_SEARCH:
                conn.exec_driver_sql(statement)
    except DBAPIError as exc:
        return f"this SQLite ({exc.orig}) has no FTS5 trigram tokenizer (3.34 or newer has it)"
    return None


def drop_sqlite_search(conn: Connection) -> None:
    for trigger in ("insert", "delete", "update"):
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {SEARCH_TABLE}_{trigger}")
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {SEARCH_TABLE}")
