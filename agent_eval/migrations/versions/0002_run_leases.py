"""Run leases: which process is playing a run, so two ``--resume`` never play it twice.

Revision ID: run_leases
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "run_leases"
down_revision = "0001"
branch_labels = None
depends_on = None

UTC_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_leases",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("acquired_at", UTC_TS, nullable=False),
        sa.Column("heartbeat_at", UTC_TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_leases")
