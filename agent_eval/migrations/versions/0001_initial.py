"""Initial schema: runs, targets, sessions, turns, tool calls, findings, server logs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written out in full rather than built from ``agent_eval.store.schema`` so that later
changes to the tables never rewrite history; a test checks the two still agree at head.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UTC_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("label", sa.String(200)),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("suite", sa.String(500)),
        sa.Column("created_at", UTC_TS, nullable=False),
        sa.Column("finished_at", UTC_TS),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("fingerprint", sa.JSON, nullable=False),
        sa.Column("parent_run_id", sa.Integer, sa.ForeignKey("runs.id")),
    )
    op.create_table(
        "targets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("model", sa.String(500), nullable=False),
        sa.Column("base_url", sa.String(1000), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_id", "name", name="uq_targets_run_name"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "target_id",
            sa.Integer,
            sa.ForeignKey("targets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.String(1000), nullable=False),
        sa.Column("scenario", sa.String(500), nullable=False),
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("sessions.id", ondelete="SET NULL")),
        sa.Column("tags", sa.JSON, nullable=False),
        sa.Column("handshake_required", sa.Integer, nullable=False),
        sa.Column("handshake_done", sa.Integer, nullable=False),
        sa.Column("handshake_completed", sa.Boolean, nullable=False),
        sa.Column("handshake_missed_step", sa.String(500)),
        sa.Column("n_turns", sa.Integer, nullable=False),
        sa.Column("n_messages", sa.Integer, nullable=False),
        sa.Column("n_calls", sa.Integer, nullable=False),
        sa.Column("messages", sa.JSON, nullable=False),
        sa.Column("source", sa.String(100), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("started_at", UTC_TS),
        sa.Column("finished_at", UTC_TS),
        sa.UniqueConstraint("run_id", "key", name="uq_sessions_run_key"),
    )
    op.create_index("ix_sessions_run_target_status", "sessions", ["run_id", "target_id", "status"])
    op.create_index("ix_sessions_parent", "sessions", ["parent_id"])
    op.create_table(
        "turns",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "session_id",
            sa.Integer,
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("index", sa.Integer, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("reasoning", sa.Text, nullable=False),
        sa.Column("finish_reason", sa.Text),
        sa.Column("prompt_tokens", sa.Integer),
        sa.Column("completion_tokens", sa.Integer),
        sa.Column("reasoning_tokens", sa.Integer),
        sa.Column("cached_tokens", sa.Integer),
        sa.Column("latency_s", sa.Float),
        sa.Column("ttft_s", sa.Float),
        sa.Column("decode_tps", sa.Float),
        sa.Column("started_at", UTC_TS),
    )
    op.create_index("ix_turns_session", "turns", ["session_id", "index"])
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "session_id",
            sa.Integer,
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "target_id",
            sa.Integer,
            sa.ForeignKey("targets.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("index", sa.Integer, nullable=False),
        sa.Column("turn_index", sa.Integer, nullable=False),
        sa.Column("call_id", sa.Text),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("command", sa.Text),
        sa.Column("script", sa.String(500)),
        sa.Column("decision", sa.String(10), nullable=False),
        sa.Column("primary_code", sa.String(20)),
        sa.Column("next_action", sa.String(20)),
        sa.Column("output", sa.Text, nullable=False),
        sa.Column("source_decision", sa.String(10)),
        sa.Column("source_reason", sa.Text),
        sa.Column(
            "child_session_id", sa.Integer, sa.ForeignKey("sessions.id", ondelete="SET NULL")
        ),
    )
    op.create_index(
        "ix_tool_calls_breakdown",
        "tool_calls",
        ["run_id", "target_id", "primary_code", "decision"],
    )
    op.create_index("ix_tool_calls_session", "tool_calls", ["session_id", "index"])
    op.create_table(
        "findings",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "tool_call_id",
            sa.Integer,
            sa.ForeignKey("tool_calls.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("code", sa.String(20), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
    )
    op.create_index("ix_findings_tool_call", "findings", ["tool_call_id"])
    op.create_table(
        "server_samples",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(500), nullable=False),
        sa.Column("host", sa.String(500)),
        sa.Column("label", sa.String(200)),
        sa.Column("ts", UTC_TS, nullable=False),
        sa.Column("prompt_tps", sa.Float),
        sa.Column("generation_tps", sa.Float),
        sa.Column("running", sa.Integer),
        sa.Column("waiting", sa.Integer),
        sa.Column("swapped", sa.Integer),
        sa.Column("kv_cache_pct", sa.Float),
        sa.Column("prefix_hit_pct", sa.Float),
        sa.Column("raw", sa.Text),
    )
    op.create_index("ix_server_samples_ts", "server_samples", ["ts"])
    op.create_table(
        "server_requests",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(500), nullable=False),
        sa.Column("ts", UTC_TS, nullable=False),
        sa.Column("method", sa.String(20), nullable=False),
        sa.Column("path", sa.String(2000), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("duration_s", sa.Float),
    )
    op.create_index("ix_server_requests_ts", "server_requests", ["ts"])


def downgrade() -> None:
    for table in (
        "server_requests",
        "server_samples",
        "findings",
        "tool_calls",
        "turns",
        "sessions",
        "targets",
        "runs",
    ):
        op.drop_table(table)
