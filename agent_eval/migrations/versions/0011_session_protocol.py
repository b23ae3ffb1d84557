"""session protocol: the wire protocol a proxied session was recorded in

Revision ID: session_protocol
Revises: search_scan

``agent-eval proxy`` records OpenAI Responses (Codex CLI, vLLM's ``/v1/responses``),
Anthropic Messages (Claude Code, llama-server's ``/v1/messages``) and Gemini
(Gemini CLI) besides Chat Completions, each read into the same turn records
(``agent_eval.wire``).  ``replay`` re-sends a stored turn in the protocol it was recorded
in, so the session keeps it: ``sessions.protocol``, NULL for Chat Completions and for every
session stored before (all of which were Chat Completions).  Nullable, no default, no
index: adding it rewrites nothing on either dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "session_protocol"
down_revision = "search_scan"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("protocol", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "protocol")  # SQLite drops a column in place (3.35 on)
