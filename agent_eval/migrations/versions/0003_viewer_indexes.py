"""viewer indexes: a run's calls by verdict, for the viewer's failed-first lists

Revision ID: viewer_indexes
Revises: 0001

``agent-eval view`` lists a run's calls denied first and finds the sessions holding a
denied call; over a million calls both are a range of this index instead of a sort of
the whole run.
"""

from __future__ import annotations

from alembic import op

revision = "viewer_indexes"
down_revision = "run_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_tool_calls_run_decision", "tool_calls",
                    ["run_id", "decision", "session_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_tool_calls_run_decision", table_name="tool_calls")
