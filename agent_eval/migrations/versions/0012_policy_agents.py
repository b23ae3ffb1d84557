"""policy agents: which agent CLI rules judged a session, and the calls they leak

Revision ID: policy_agents
Revises: session_protocol

A run, proxy or import may judge its calls under an agent CLI's own rules
(``policy.sources``: opencode.json, Claude Code settings, Codex .rules), per agent.  The
session keeps whose rules judged it and how that agent was chosen
(``sessions.policy_agent``, ``sessions.policy_agent_via``: a client header, the system
prompt, the default agent, a scenario's ``agent:`` or ``--agent``); a call the CLI's
matcher let through that the strict reading of the same rules refuses keeps that reading's
class (``tool_calls.leak``).  All nullable, no default: NULL for every session and call
stored before, and adding them rewrites nothing on either dialect.  The partial index
``ix_tool_calls_run_leak`` holds the leaked calls alone (none in a store from before), so
the aggregator's leak counts read only those.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "policy_agents"
down_revision = "session_protocol"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("policy_agent", sa.String(200), nullable=True))
    op.add_column("sessions", sa.Column("policy_agent_via", sa.String(16), nullable=True))
    op.add_column("tool_calls", sa.Column("leak", sa.String(20), nullable=True))
    op.create_index("ix_tool_calls_run_leak", "tool_calls", ["run_id", "leak"],
                    sqlite_where=sa.text("leak IS NOT NULL"),
                    postgresql_where=sa.text("leak IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_tool_calls_run_leak", table_name="tool_calls")
    op.drop_column("tool_calls", "leak")  # SQLite drops a column in place (3.35 on)
    op.drop_column("sessions", "policy_agent_via")
    op.drop_column("sessions", "policy_agent")
