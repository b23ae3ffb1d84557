"""Where the store lives and which schema revision it is at.

``resolve_db_url`` turns the operator's ``--db`` value (or ``$AGENT_EVAL_DB``) into a
SQLAlchemy URL; ``connect`` opens an engine tuned per backend; ``check_schema`` makes sure
the database is at the revision this code was written for, creating a brand-new empty
database at head and refusing an older or newer one with the fix in the message;
``upgrade`` runs the Alembic migrations in ``agent_eval/migrations`` to head.

SQLite runs in WAL mode with foreign keys on and a busy timeout, so one writer and any
number of readers (a report while a run is going) can share a file.  Write transactions
start with ``BEGIN IMMEDIATE`` so a writer takes the lock up front instead of failing
half-way when it upgrades a read lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import URL, Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, SQLAlchemyError

from agent_eval.errors import ConfigError

if TYPE_CHECKING:
    from alembic.config import Config

DEFAULT_DB_URL = "sqlite:///agent_eval.db"
ENV_VAR = "AGENT_EVAL_DB"
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# The newest migration's revision (agent_eval/migrations/versions/), so that opening a store
# already at head reads one row and never imports Alembic (a tenth of a second of every
# command's start); tests/store/test_store_schema.py holds it to Alembic's own head.
HEAD_REVISION = "offered_tools"
SQLITE_BUSY_TIMEOUT_MS = 30_000

_URL_FIX = (
    "give a file path (runs.db), sqlite:///PATH or postgresql://USER@HOST:PORT/DB "
    f"with --db or ${ENV_VAR}"
)


def resolve_db_url(value: str | None) -> str:
    """The SQLAlchemy URL for an operator's ``--db`` value.

    None means ``$AGENT_EVAL_DB``, else ``agent_eval.db`` in the current directory.  A
    plain path becomes a SQLite file; ``postgresql://`` gets the psycopg 3 driver.
    Anything else with a scheme is refused with a ConfigError naming the value.
    """
    if value is None:
        value = os.environ.get(ENV_VAR) or DEFAULT_DB_URL
    value = value.strip()
    if not value:
        raise ConfigError(f"empty database URL: {_URL_FIX}", field="--db")
    if value.startswith("sqlite://"):
        return value
    for scheme in ("postgresql://", "postgres://"):
        if value.startswith(scheme):
            return "postgresql+psycopg://" + value[len(scheme) :]
    if value.startswith("postgresql+psycopg://"):
        return value
    if "://" in value or value.startswith("postgresql+"):
        shown = value.split("://", 1)[0] + "://..."
        raise ConfigError(f"unsupported database URL {shown!r}: {_URL_FIX}", field="--db")
    return "sqlite:///" + str(Path(value).expanduser())


def refuse_missing_sqlite(url: str | URL) -> None:
    """ConfigError when ``url`` names a SQLite file that does not exist, with the nearest
    ``*.db`` file beside it as a did-you-mean."""
    import difflib

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database \
            or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return
    path = Path(parsed.database)
    if path.exists():
        return
    folder = path.parent if str(path.parent) else Path(".")
    near = []
    if folder.is_dir():
        names = [p.name for p in folder.iterdir() if p.suffix in (".db", ".sqlite", ".sqlite3")]
        near = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    hint = f"did you mean {str(path.with_name(near[0]))!r}? " if near else ""
    raise ConfigError(f"no database at {str(path)!r}: {hint}check --db; only run, demo, "
                      "import and proxy create one", field="--db")


def describe_url(url: str | URL) -> str:
    """The URL as safe to print: any password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable URL>"


def connect(url: str | URL) -> Engine:
    """An engine for ``url`` (already resolved), with the SQLite pragmas in place."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            _create_private(parsed.database)
            engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
            _tune_sqlite(engine)
        else:
            engine = create_engine(parsed, pool_pre_ping=True)
    except ImportError:
        raise ConfigError(
            f"{describe_url(url)} needs the PostgreSQL driver: "
            "pip install 'agent-eval[postgres]'", field="--db",
        ) from None
    except (ArgumentError, NoSuchModuleError) as exc:
        raise ConfigError(
            f"cannot use database URL {describe_url(url)}: {exc}", field="--db"
        ) from None
    return engine


def _create_private(database: str | None) -> None:
    """Create a SQLite file that does not exist yet as an empty file of mode 0600, before
    SQLite does (it would make it 0644): transcripts are private.  SQLite gives the WAL
    and shared-memory files beside it the database's mode.  An existing file keeps the
    mode its owner chose; a path that cannot be created is left for SQLite to report."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        pass


def refuse_writes(engine: Engine) -> Engine:
    """Every new connection of ``engine`` refuses writes (SQLite ``query_only``,
    PostgreSQL read-only transactions); open ones are dropped."""
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _sqlite_read_only(dbapi_conn, _record) -> None:
            dbapi_conn.execute("PRAGMA query_only=ON")
    else:
        @event.listens_for(engine, "connect")
        def _pg_read_only(dbapi_conn, _record) -> None:
            dbapi_conn.read_only = True
    engine.dispose()
    return engine


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself, see _on_begin
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        writing = conn.get_execution_options().get("agent_eval_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction: committed on success, rolled back entirely on any error."""
    with engine.connect() as conn:
        conn.execution_options(agent_eval_write=True)
        with conn.begin():
            yield conn


def _alembic_config(conn: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if conn is not None:
        config.attributes["connection"] = conn
    return config


def head_revision() -> str:
    """The newest migration this code ships."""
    return HEAD_REVISION


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (the row Alembic keeps in ``alembic_version``); None
    for a database Alembic never touched."""
    with _opened(engine) as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(url: str | None) -> str:
    """Bring the database at ``url`` (or the default) to the head revision; return it.

    Creates a SQLite file that does not exist yet.  Safe to run again at head.
    """
    engine = connect(resolve_db_url(url))
    try:
        _upgrade_engine(engine)
    finally:
        engine.dispose()
    return head_revision()


def build_search_index(url: str | None) -> str | None:
    """Build SQLite's trigram table of the calls' commands (``store/search_index.py``);
    None when it is ready, else why not.  PostgreSQL's index comes with the migrations."""
    engine = connect(resolve_db_url(url))
    try:
        if engine.dialect.name != "sqlite":
            return None
        from agent_eval.store.search_index import build_sqlite_search

        with engine.begin() as conn:
            return build_sqlite_search(conn)
    finally:
        engine.dispose()


def _upgrade_engine(engine: Engine) -> None:
    """Migrate to head, after refusing a database that is not an agent-eval store (a
    foreign one, garbage, or one from a newer agent-eval).  Any database error on the way
    is one ConfigError line, never a traceback."""
    _refuse_newer(engine)
    fresh = current_revision(engine) is None
    if fresh:
        _refuse_foreign(engine)
    try:
        with _opened(engine) as conn:
            conn.execution_options(agent_eval_write=True)
            with conn.begin():
                if fresh and engine.dialect.name == "sqlite":
                    _create_at_head(conn)
                else:
                    _migrate(conn)
    except (SQLAlchemyError, _MigrationError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise ConfigError(
            f"cannot upgrade database {_where(engine)}: {reason}: is it an agent-eval store? "
            "point --db at an agent-eval store or an empty database",
            field="--db",
        ) from None


class _MigrationError(Exception):
    """Alembic's CommandError, re-raised without importing Alembic where it never runs."""


def _migrate(conn: Connection) -> None:
    from alembic import command
    from alembic.util.exc import CommandError

    try:
        command.upgrade(_alembic_config(conn), "head")
    except CommandError as exc:
        raise _MigrationError(str(exc)) from exc


def _create_at_head(conn: Connection) -> None:
    """A new, empty SQLite store built at head in one step, as Alembic's cookbook has it
    ("building an up-to-date database from scratch"): the tables and indexes of
    ``metadata``, the one index the migrations build outside it, and the head revision
    stamped.  Running the twelve migrations instead cost every new file (each test's,
    each run's) about 0.1 CPU-s; ``tests/store/test_store_schema.py`` holds the two schemas equal."""
    from agent_eval.store.schema import SEARCH_SCAN_COLUMNS, SEARCH_SCAN_INDEX, metadata

    metadata.create_all(conn)
    conn.execute(text(f"CREATE INDEX {SEARCH_SCAN_INDEX} ON tool_calls "
                      f"({', '.join(SEARCH_SCAN_COLUMNS)}) WHERE command IS NOT NULL"))
    conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                      "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"))
    conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"),
                 {"head": HEAD_REVISION})


def _where(engine: Engine) -> str:
    return describe_url(engine.url.render_as_string(hide_password=False))


def _refuse_foreign(engine: Engine) -> None:
    """A database with tables but no agent-eval revision belongs to someone else."""
    with _opened(engine) as conn:
        tables = set(inspect(conn).get_table_names()) - {"alembic_version"}
    if tables:
        raise ConfigError(
            f"database {_where(engine)} has tables ({', '.join(sorted(tables)[:5])}) but no "
            "agent-eval revision: point --db at an empty database or an agent-eval store",
            field="--db",
        )


def check_schema(engine: Engine) -> None:
    """Make sure the database matches this code, creating an empty one at head.

    Raises ConfigError for a database at an older revision (the fix: ``agent-eval db
    upgrade``), a newer one (the fix: a newer agent-eval), or one with foreign tables.
    """
    head = head_revision()
    current = current_revision(engine)
    if current == head:
        return
    where = _where(engine)
    if current is None:
        _upgrade_engine(engine)  # refuses a foreign database first
        return
    _refuse_newer(engine)
    raise ConfigError(
        f"database at revision {current}, this agent-eval needs {head}: "
        f"run `agent-eval db upgrade --db {where}`",
        field="--db",
    )


def _refuse_newer(engine: Engine) -> None:
    current = current_revision(engine)
    if current is None:
        return
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        known = ScriptDirectory.from_config(_alembic_config()).get_revision(current)
    except CommandError:
        known = None
    if known is None:
        raise ConfigError(
            f"database at revision {current}, newer than this agent-eval "
            f"(which knows up to {head_revision()}), or not an agent-eval store: "
            "upgrade agent-eval to read it, or point --db at an agent-eval store",
            field="--db",
        )


@contextmanager
def _opened(engine: Engine) -> Iterator[Connection]:
    """A connection, with 'cannot open the database' turned into a ConfigError."""
    try:
        conn = engine.connect()  # a file that is not SQLite fails in the connect pragmas
    except DatabaseError as exc:  # OperationalError (cannot open) or not a database
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise ConfigError(
            f"cannot open database {describe_url(engine.url.render_as_string(False))}: "
            f"{reason}: check the path or server, {_URL_FIX}",
            field="--db",
        ) from None
    with conn:
        yield conn
