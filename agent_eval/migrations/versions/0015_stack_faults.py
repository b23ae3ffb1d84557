"""stack faults: what the serving stack lost or mangled, kept on the session

Revision ID: stack_faults
Revises: policy_emulation

A session keeps the stack faults seen on its replies (``sessions.stack_faults``: a JSON
list of ``{turn, code, message, raw, ends}``, rules AE5xx in ``policy/rules.py``), counted
apart from model errors and never in errors/100.  Nullable, no default: NULL for every
session stored before and for every session with no fault (the aggregator reads only
those that hold one), and adding it rewrites nothing on either dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "stack_faults"
down_revision = "policy_emulation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("stack_faults", sa.JSON(none_as_null=True), nullable=True))
    # the few sessions that hold one, so the aggregator never reads every session row
    op.create_index("ix_sessions_run_stack_faults", "sessions", ["run_id"],
                    sqlite_where=sa.text("stack_faults IS NOT NULL"),
                    postgresql_where=sa.text("stack_faults IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_sessions_run_stack_faults", table_name="sessions")
    op.drop_column("sessions", "stack_faults")
