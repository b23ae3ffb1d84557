"""policy emulation: which release and mode of an agent CLI judged a session

Revision ID: policy_emulation
Revises: side_request

A session judged under an agent CLI's own rules keeps the release and mode its emulation
assumed (``sessions.policy_emulation``, e.g. ``codex 0.169.0, mode never/workspace-write``),
taken from the client's ``User-Agent``, the transcript, a flag or the pinned default
(``policy.sources.emulation``).  Nullable, no default: NULL for every session stored
before, and adding it rewrites nothing on either dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "policy_emulation"
down_revision = "side_request"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("policy_emulation", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "policy_emulation")  # SQLite drops a column in place (3.35 on)
