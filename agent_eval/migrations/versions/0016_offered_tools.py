"""offered tools: the tool list each session's client offered, stored once per list

Revision ID: offered_tools
Revises: stack_faults

The proxy, imports and ``collect`` see the tools a client offered with their argument
schemas; calls are judged against them (AE108, ``policy/schemas.py``).  Each distinct
list ({name: schema}) is stored once in ``tool_lists`` by the SHA-256 of its canonical
JSON, and ``sessions.tools_hash`` points at it, so the same list costs one row however
many sessions offered it, and a schema that changed between sessions shows as a second
hash.  Nullable, no default: NULL for every session stored before and for sources that
show no offered tools; adding it rewrites nothing on either dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "offered_tools"
down_revision = "stack_faults"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_lists",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("tools", sa.Text, nullable=False),
    )
    op.add_column("sessions", sa.Column("tools_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "tools_hash")
    op.drop_table("tool_lists")
