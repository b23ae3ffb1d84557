"""Alembic environment for agent-eval, driven programmatically.

``agent_eval.store.database`` builds the Alembic ``Config`` in code and hands the open
connection over in ``config.attributes["connection"]``; no ``alembic.ini`` is read at
run time.  Migrations run online only, inside that connection's transaction.
"""

from __future__ import annotations

from alembic import context

from agent_eval.store.schema import is_modelled, metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("agent-eval migrations run through agent_eval.store.upgrade(url)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transactional_ddl=True,
    include_name=is_modelled,
)
with context.begin_transaction():
    context.run_migrations()
