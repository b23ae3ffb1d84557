"""``agent-eval db``: the store's schema."""

from __future__ import annotations

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option


@main.group()
def db() -> None:
    """Manage the results database (SQLite file or PostgreSQL)."""


@db.command()
@click.option("--search-index", is_flag=True,
              help="SQLite: also build the trigram index of the calls' commands, so the "
                   "viewer's command search reads it instead of scanning (every call stored "
                   "afterwards costs ~40% more CPU). PostgreSQL builds its index anyway.")
@db_option
def upgrade(search_index: bool, db: str | None) -> None:
    """Create the database, or migrate it to the schema this agent-eval needs.

    Safe to run again.  Needed after upgrading agent-eval when a command says the database
    is at an older revision; a new SQLite file is created at head without it.

    Example: agent-eval db upgrade --db postgresql://agent@127.0.0.1:5432/evals
    """
    from agent_eval.errors import ConfigError
    from agent_eval.store import build_search_index
    from agent_eval.store import upgrade as upgrade_store

    revision = upgrade_store(db)
    click.echo(f"database at revision {revision} (head)")
    if search_index:
        why = build_search_index(db)
        if why is not None:
            raise ConfigError(f"no command search index: {why}; the search scans instead",
                              field="--search-index")
        click.echo("command search index: ready")
