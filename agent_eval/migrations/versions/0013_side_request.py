"""side requests as a column: the sessions' covering index tells them apart

Revision ID: side_request
Revises: policy_agents

Why: every run figure leaves out an agent CLI's side requests (sessions tagged
``side-request``, ``wire/side.py``).  Told apart by a ``LIKE`` on the sessions' JSON tags,
the filter pushed every session aggregate off the covering ``ix_sessions_run_target_status``
(a read of each session's row: ``gate`` 0.5 -> 2.2 s and ``compare`` 0.9 -> 2.6 s at a
million calls on SQLite).  ``sessions.side_request`` holds the same fact, written with the
session from its tags; the covering index holds it too, so the run's sums are again one
range of the index.  Sessions stored before get it from their tags here.  The index also
holds ``policy_agent`` (whose agent CLI rules judged the session): the viewer's run page
and the report group by it, and read every session's row without it (2.4 s at a
million calls).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "side_request"
down_revision = "policy_agents"
branch_labels = None
depends_on = None

BEFORE = ["run_id", "target_id", "status", "scenario", "handshake_required",
          "handshake_completed", "n_calls", "n_denied", "repeat"]
AFTER = [*BEFORE, "side_request", "policy_agent"]


def upgrade() -> None:
    op.add_column("sessions", sa.Column("side_request", sa.Boolean(), nullable=False,
                                        server_default=sa.false()))
    # the tags as both dialects store the JSON list: '["side-request", ...]'
    op.execute(sa.text("UPDATE sessions SET side_request = :yes "
                       "WHERE CAST(tags AS VARCHAR) LIKE '%\"side-request\"%'")
               .bindparams(sa.bindparam("yes", True, sa.Boolean())))
    _replace(AFTER)


def downgrade() -> None:
    _replace(BEFORE)
    op.drop_column("sessions", "side_request")  # SQLite drops a column in place (3.35 on)


def _replace(columns: list[str]) -> None:
    op.drop_index("ix_sessions_run_target_status", table_name="sessions")
    op.create_index("ix_sessions_run_target_status", "sessions", columns)
