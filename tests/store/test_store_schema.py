"""The store: the schema, migrations, URLs, file modes, and `db upgrade` on what is not a store.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat

import pytest
from click.testing import CliRunner

from agent_eval.errors import ConfigError
from agent_eval.store import database as store_database
from agent_eval.store import (
    head_revision,
    open_store,
    resolve_db_url,
    upgrade,
)
from agent_eval.store.schema import (
    is_modelled,
    metadata,
)


def test_a_new_sqlite_file_is_created_at_head_in_wal_mode(tmp_path):
    path = tmp_path / "sub.db"

    with open_store(str(path)) as store:
        assert store_database.current_revision(store.engine) == head_revision()
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_migrations_build_exactly_the_tables_the_code_uses(backend, tmp_path, request):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    assert upgrade(url) == head_revision()
    engine = store_database.connect(resolve_db_url(url))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(
            conn, opts={"include_name": is_modelled}), metadata)
    engine.dispose()

    assert diff == []


@pytest.mark.postgres
def test_postgresql_keeps_the_leak_index_partial_as_its_migration_builds_it(pg_url):
    """metadata names only SQLite's predicate of ix_tool_calls_run_leak (naming
    PostgreSQL's imports that dialect in every process); PostgreSQL's index, built by
    the migrations, is partial all the same."""
    assert upgrade(pg_url) == head_revision()
    engine = store_database.connect(resolve_db_url(pg_url))
    with engine.connect() as conn:
        indexdef = conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_tool_calls_run_leak'").scalar()
    engine.dispose()
    assert "WHERE (leak IS NOT NULL)" in indexdef


def test_a_sqlite_store_never_imports_the_postgresql_dialect(tmp_path):
    """A run against a SQLite file writes sessions and request blobs without importing
    SQLAlchemy's PostgreSQL dialect (~15 ms of every process's start)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from agent_eval.store import open_store\n"
        "from agent_eval.transcript import SessionRecord, TurnRecord\n"
        f"store = open_store({str(tmp_path / 's.db')!r})\n"
        "rid = store.create_run(label=None, kind='live', suite=None, config={}, fingerprint={})\n"
        "store.add_target(rid, name='t', model='m', base_url='http://x', settings={})\n"
        "turn = TurnRecord(index=0, content='ok', request={'model': 'm', 'messages': "
        "[{'role': 'user', 'content': 'hi'}]})\n"
        "store.record_sessions(rid, [SessionRecord(key='k', target='t', scenario='s', "
        "repeat=0, status='completed', turns=[turn])])\n"
        "print(sorted(m for m in sys.modules if 'postgresql' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.fixture
def newer_migrations(tmp_path, monkeypatch):
    """This code's migrations plus a 0002, as a later agent-eval would ship them."""
    copy = tmp_path / "migrations"
    shutil.copytree(
        store_database.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    (copy / "versions" / "0002_probe.py").write_text(
        f'revision = "0002"\ndown_revision = "{head_revision()}"\n'
        "branch_labels = depends_on = None\n\n"
        "import sqlalchemy as sa\nfrom alembic import op\n\n"
        'def upgrade():\n    op.create_table("probe", sa.Column("id", sa.Integer, primary_key=True))\n\n'
        'def downgrade():\n    op.drop_table("probe")\n'
    )

    shipped, shipped_head = store_database.MIGRATIONS_DIR, store_database.HEAD_REVISION

    def use_newer(yes: bool) -> None:
        target = copy if yes else shipped
        monkeypatch.setattr(store_database, "MIGRATIONS_DIR", target)
        monkeypatch.setattr(store_database, "HEAD_REVISION", "0002" if yes else shipped_head)

    return use_newer


def test_the_head_revision_is_alembics_head():
    from alembic.script import ScriptDirectory

    assert head_revision() == ScriptDirectory.from_config(
        store_database._alembic_config()).get_current_head()


def test_opening_a_store_at_head_reads_its_revision_without_importing_alembic(tmp_path):
    """Alembic and its migration scripts cost every command a tenth of a second of start-up;
    only an older or newer database (or a new PostgreSQL one) needs them."""
    import subprocess
    import sys

    db = tmp_path / "head.db"
    open_store(str(db)).close()
    probe = ("import sys\nfrom agent_eval.store import open_store\n"
             f"open_store({str(db)!r}).close()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_database_at_an_older_revision_is_refused_with_the_fix(tmp_path, newer_migrations):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(url).close()
    shipped = head_revision()
    newer_migrations(True)

    with pytest.raises(ConfigError, match="database at revision") as caught:
        open_store(url)

    assert f"database at revision {shipped}, this agent-eval needs 0002" in str(caught.value)
    assert f"run `agent-eval db upgrade --db {url}`" in str(caught.value)
    assert upgrade(url) == "0002"
    open_store(url).close()


def test_a_database_newer_than_the_code_is_refused(tmp_path, newer_migrations):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    newer_migrations(True)
    upgrade(url)
    newer_migrations(False)

    with pytest.raises(ConfigError, match="revision 0002, newer than this agent-eval"):
        open_store(url)
    with pytest.raises(ConfigError, match="newer than this agent-eval"):
        upgrade(url)


def test_a_foreign_database_is_not_taken_over(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")

    with pytest.raises(ConfigError, match=r"has tables \(invoices\) but no agent-eval revision"):
        open_store(str(path))


def test_db_upgrade_command_prints_the_head_revision(tmp_path):
    from agent_eval.cli import main

    db = tmp_path / "cli.db"
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", f"sqlite:///{db}"])

    assert result.exit_code == 0, result.output
    assert result.output == f"database at revision {head_revision()} (head)\n"
    assert db.exists()


def test_db_upgrade_reads_agent_eval_db_and_reports_bad_urls_in_one_line(tmp_path):
    from agent_eval.cli import main

    result = CliRunner().invoke(main, ["db", "upgrade"], env={"AGENT_EVAL_DB": "mysql://h/db"})

    assert result.exit_code == 2
    assert result.output.startswith("Error: --db: unsupported database URL 'mysql://...'")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "value, url",
    [
        pytest.param("runs.db", "sqlite:///runs.db", id="relative-path"),
        pytest.param("/tmp/x.db", "sqlite:////tmp/x.db", id="absolute-path"),
        pytest.param("sqlite:///a/b.db", "sqlite:///a/b.db", id="sqlite-url"),
        pytest.param(
            "postgresql://postgres@127.0.0.1:5432/evals",
            "postgresql+psycopg://postgres@127.0.0.1:5432/evals",
            id="postgresql-gets-psycopg",
        ),
        pytest.param(
            "postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d", id="psycopg-url-kept"
        ),
    ],
)
def test_resolve_db_url(value, url):
    assert resolve_db_url(value) == url


@pytest.mark.parametrize(
    "env, url",
    [
        pytest.param(None, "sqlite:///agent_eval.db", id="default-file"),
        pytest.param("nightly.db", "sqlite:///nightly.db", id="env-path"),
        pytest.param(
            "postgresql://ci@127.0.0.1/evals",
            "postgresql+psycopg://ci@127.0.0.1/evals",
            id="env-postgresql",
        ),
    ],
)
def test_resolve_db_url_without_a_value_uses_agent_eval_db(monkeypatch, env, url):
    if env is None:
        monkeypatch.delenv("AGENT_EVAL_DB", raising=False)
    else:
        monkeypatch.setenv("AGENT_EVAL_DB", env)

    assert resolve_db_url(None) == url


@pytest.mark.parametrize(
    "value", ["mysql://u@h/db", "postgresql+psycopg2://u@h/db", "http://127.0.0.1/x", "  "]
)
def test_resolve_db_url_refuses_what_it_cannot_open(value):
    with pytest.raises(ConfigError, match="^--db: ") as caught:
        resolve_db_url(value)

    assert caught.value.field == "--db"


def _sqlite_not_a_store(tmp_path, kind: str) -> str:
    path = tmp_path / f"{kind}.db"
    if kind == "garbage":
        path.write_bytes(bytes(range(256)) * 40)
    elif kind == "text":
        path.write_text("name,amount\ninvoice-1,12.50\n" * 200)
    else:
        with sqlite3.connect(path) as conn:
            if kind == "foreign":
                conn.execute("CREATE TABLE invoices (id INTEGER)")
            else:  # newer: an alembic revision this agent-eval never shipped
                conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
                conn.execute("INSERT INTO alembic_version VALUES ('ffee99')")
    return str(path)


NOT_A_STORE = {
    "garbage": "file is not a database",
    "text": "file is not a database",
    "foreign": "has tables (invoices) but no agent-eval revision",
    "newer": "database at revision ffee99, newer than this agent-eval",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_STORE))
def test_db_upgrade_on_what_is_not_a_store_prints_one_error_line(tmp_path, kind):
    from agent_eval.cli import main

    url = _sqlite_not_a_store(tmp_path, kind)
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", url])

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --db: ") and result.stderr.count("\n") == 1
    assert NOT_A_STORE[kind] in result.stderr
    assert "Traceback" not in result.output
    if kind in ("foreign", "newer"):  # left as it was: no agent-eval table added
        with sqlite3.connect(url) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert names == ({"invoices"} if kind == "foreign" else {"alembic_version"})


@pytest.fixture
def pg_scratch(pg_url):
    """A second, brand-new PostgreSQL database (not the shared test store), dropped after."""
    import secrets as _secrets

    import psycopg
    admin_url = pg_url.replace("+psycopg", "").rsplit("/", 1)[0] + "/test"
    name = f"agent_eval_scratch_{_secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    try:
        yield url, psycopg.connect(url.replace("+psycopg", ""), autocommit=True)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["foreign", "newer"])
def test_db_upgrade_on_a_postgresql_database_that_is_not_a_store_is_one_error(pg_scratch, kind):
    from agent_eval.cli import main

    url, conn = pg_scratch
    with conn:
        if kind == "foreign":
            conn.execute("CREATE TABLE invoices (id INTEGER)")
        else:
            conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
            conn.execute("INSERT INTO alembic_version VALUES ('ffee99')")
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", url])

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --db: ") and result.stderr.count("\n") == 1
    assert NOT_A_STORE[kind] in result.stderr


def _sqlite_schema(path) -> dict:
    """Every table's columns (type, not null, default, key), foreign keys, indexes (unique,
    partial, columns, WHERE) and CHECKs, and the stamped revision, as SQLite reports them."""
    import re

    with sqlite3.connect(path) as conn:
        out: dict = {"revision": conn.execute("SELECT * FROM alembic_version").fetchall()}
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        for name in tables:
            columns = sorted(tuple(r[1:7]) for r in conn.execute(f"PRAGMA table_xinfo('{name}')"))
            keys = sorted(tuple(r[2:]) for r in conn.execute(f"PRAGMA foreign_key_list('{name}')"))
            indexes = []
            for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list('{name}')"):
                cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info('{index}')"))
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                   (index,)).fetchone()
                where = (" ".join(sql[0].split(" WHERE ", 1)[1].split())
                         if sql and sql[0] and " WHERE " in sql[0] else None)
                indexes.append((index if origin == "c" else origin, unique, partial, cols, where))
            table_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                     (name,)).fetchone()[0]
            checks = sorted(" ".join(c.split()) for c in re.findall(r"CHECK\s*\((.*?)\)",
                                                                    table_sql))
            out[name] = (columns, keys, sorted(indexes), checks)
    return out


def test_a_new_sqlite_store_built_at_head_is_the_schema_the_migrations_build(tmp_path):
    """A new SQLite file is built from ``metadata`` and stamped (no Alembic run); the
    twelve migrations from empty give exactly the same tables, columns, keys, indexes
    (the partial one built outside ``metadata`` too) and revision."""
    import subprocess
    import sys

    from alembic import command

    fast, migrated = tmp_path / "fast.db", tmp_path / "migrated.db"
    probe = ("import sys\nfrom agent_eval.store import open_store\n"
             f"open_store({str(fast)!r}).close()\n"
             "print('alembic' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"  # no migration ran
    engine = store_database.connect(resolve_db_url(str(migrated)))
    with engine.connect() as conn, conn.begin():
        command.upgrade(store_database._alembic_config(conn), "head")
    engine.dispose()
    built, expected = _sqlite_schema(fast), _sqlite_schema(migrated)
    assert built == expected
    assert expected["revision"] == [(head_revision(),)]
    assert len(expected) > 8  # the tables were read


def test_a_new_sqlite_store_is_readable_by_its_owner_only(tmp_path):
    """Transcripts are private: a store the tool creates is 0600 (SQLite's own default is
    0644), and so are the WAL files SQLite makes beside it, whatever the umask lets by."""
    from agent_eval.store import open_store

    old = os.umask(0o022)
    try:
        with open_store(str(tmp_path / "new.db")) as store:
            run_id = store.create_run(label="l", kind="live", suite="s", config={},
                                      fingerprint={})
            assert run_id
            made = sorted(p.name for p in tmp_path.iterdir())
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        os.umask(old)
    assert "new.db" in made and "new.db-wal" in made
    assert modes == dict.fromkeys(made, 0o600)


def test_an_existing_store_keeps_the_mode_its_owner_gave_it(tmp_path):
    path = tmp_path / "shared.db"
    open_store(str(path)).close()
    path.chmod(0o640)
    open_store(str(path)).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
