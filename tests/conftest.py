"""Shared fixtures.  Store and database fixtures first; others may be appended below."""

from __future__ import annotations

import os
import secrets
import signal
import socket
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

# A suite started in the background of a non-interactive shell (`bash -c '... &'`, nohup)
# inherits SIGINT ignored, and so would every agent-eval process a test starts: Python keeps
# an ignored SIGINT ignored, and the Ctrl-C tests (run, import, proxy) saw their SIGINT
# dropped and the command run to exit 0.  Children get the default back from here (a handler
# is reset to the default on exec, an ignored signal is not).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest-xdist's workers run with COLUMNS=80 in their environment (a plain pytest process
# has none), and the tables and prose honour $COLUMNS when piped: the whole session runs
# without it (module-scoped fixtures run before any function's fixture), every test starts
# without it, and a test of a width sets the one it means.
for _inherited in ("COLUMNS", "LINES"):
    os.environ.pop(_inherited, None)


@pytest.fixture(autouse=True)
def _no_inherited_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_ADMIN_URL = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test"


def _pg_reachable() -> bool:
    try:
        with socket.create_connection((PG_HOST, PG_PORT), timeout=1):
            return True
    except OSError:
        return False


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip this test with ``reason``; under CI=true fail with it instead."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A brand-new PostgreSQL database for this test session, at head, dropped at the end.

    Skips (with the reason) when no PostgreSQL answers on 127.0.0.1:5432, and fails instead
    under CI=true, as the other groups do: there a skipped store test would pass unnoticed.
    """
    if not _pg_reachable():
        skip_or_fail(f"PostgreSQL not reachable on {PG_HOST}:{PG_PORT}; start it to run these")
    import psycopg

    name = f"agent_eval_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True)
    except psycopg.OperationalError as exc:
        skip_or_fail(f"PostgreSQL at {PG_ADMIN_URL} refused the test login: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """A fresh, empty store: a new SQLite file, or the session's PostgreSQL database emptied."""
    from agent_eval.store import open_store

    if request.param == "sqlite":
        opened = open_store(str(tmp_path / "store.db"))
    else:
        opened = open_store(request.getfixturevalue("pg_url"))
        _empty_postgres(opened)
    with opened:
        yield opened


def _empty_postgres(store) -> None:
    from sqlalchemy import text

    from agent_eval.store.schema import metadata

    names = ", ".join(f'"{t.name}"' for t in metadata.sorted_tables)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture
def pg_cluster() -> Iterator:
    """A private PostgreSQL cluster (tests/support/pgcluster.py) this test may stop and start;
    removed afterwards.  Skips with the reason when it cannot start; fails under CI=true."""
    from support.pgcluster import cluster_or_skip

    cluster = cluster_or_skip()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests (tests/support/chromium.py finds it)."""
    from support.chromium import CHROMIUM, missing

    reason = missing()
    if reason:
        skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()
