"""search scan: on SQLite, a narrow covering index the command search scans

Revision ID: search_scan
Revises: session_repeats

Why: the command search (``calls?search=``, ``sessions?search=``, ``--search``) under
300 ms over a million calls on a SQLite store without the opt-in FTS5 table.  Its
``command LIKE '%text%'`` cannot use an index range, so it scans the run's calls; without
this index that scan reads every wide call row (arguments, output: ~0.5 KB each) through
``ix_tool_calls_run_decision``.  ``ix_tool_calls_run_command`` holds only
``(run_id, decision, session_id, id, command)``: every query of the search (the count, the
denied calls' range and page, the rest of the page, the sessions holding a match) reads
it alone, about a quarter of the pages.  Calls are appended at the end of their run's
range, so a stored call costs one more index entry, no trigger.  The index is partial
(``WHERE command IS NOT NULL``): calls without a command (function tools) stay out of it,
and SQLite's planner takes it only for a query that says ``command IS NOT NULL``, as the
search does, so the run pages keep reading the narrower ``ix_tool_calls_run_decision``.

PostgreSQL gets nothing here: its ``pg_trgm`` GIN index (``viewer_speed``) already finds
the matches, and a B-tree entry there is limited to ~2.7 KB, less than a long heredoc.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agent_eval.store.schema import SEARCH_SCAN_COLUMNS, SEARCH_SCAN_INDEX

revision = "search_scan"
down_revision = "session_repeats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index(SEARCH_SCAN_INDEX, "tool_calls", list(SEARCH_SCAN_COLUMNS),
                        sqlite_where=sa.text("command IS NOT NULL"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP INDEX IF EXISTS {SEARCH_SCAN_INDEX}")
