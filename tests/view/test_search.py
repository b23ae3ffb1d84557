"""The command search (``calls --search``, ``sessions --search``, the viewer's search box):
the rows are exactly those of ``command LIKE '%text%'`` with the text taken literally,
whether the trigram index answers (SQLite FTS5, PostgreSQL pg_trgm) or a scan does."""

from __future__ import annotations

import pytest
from alembic import command as alembic_command
from sqlalchemy import text
from support.factories import add_run
from support.view_fixtures import ALLOWED, judged, record

from agent_eval.store import database, queries
from agent_eval.store.queries import (
    CallFilter,
    SessionFilter,
    list_calls,
    list_sessions,
    neighbour_sessions,
    search_index_exists,
)
from agent_eval.store.schema import SEARCH_INDEX, SEARCH_SCAN_INDEX, SEARCH_TABLE
from agent_eval.store.search_index import build_sqlite_search
from agent_eval.transcript import CallRecord

COMMANDS = [
    "uv run scripts/db_query.py --sql \"SELECT 1\" | head -5",
    "uv run scripts/db_query.py --sql \"select 1\" | HEAD -5",
    "echo 100% done",
    "echo 100 percent done",
    "grep file_name notes.txt",
    "grep fileXname notes.txt",
    "echo 'it''s quoted' \"and double\"",
    "cat C:\\temp\\x.txt",
    "echo Élan élan",
    "printf 'a_b%c'",
    "ls",
]
SEARCHES = [
    "head -5", "HEAD", "Head -5", "100%", "%", "0% d", "file_name", "_", "e_n",
    "'it''s", "\"and double\"", "\"", "C:\\temp", "\\", "élan", "Élan", "ÉLAN", "a_b%c",
    "ls", "no such text anywhere", "sql \"select", "uv run",
]


def like_matches(dialect: str, command: str, needle: str) -> bool:
    """LIKE '%needle%' with the needle escaped: SQLite folds ASCII letters only,
    PostgreSQL folds nothing."""
    if dialect == "sqlite":
        fold = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
        return needle.translate(fold) in command.translate(fold)
    return needle in command


@pytest.fixture
def searched(store):
    run_id = add_run(store, label="search", suite="s", targets={"t": "m"})
    other = add_run(store, label="other", suite="s", targets={"t": "m"})
    sessions = {}
    for i, cmd in enumerate(COMMANDS):
        sessions[cmd] = store.record_session(run_id, record(f"t/s{i}/0", [judged(0, 0, cmd)]))
    store.record_session(other, record("t/s0/0", [judged(0, 0, COMMANDS[0])]))
    if store.engine.dialect.name == "sqlite":  # opt-in there: db upgrade --search-index
        with store.engine.begin() as conn:
            assert build_sqlite_search(conn) is None
    return store, run_id, sessions


@pytest.mark.parametrize("probe", [50_000, 1], ids=["trigram-table", "too-common-so-scan"])
@pytest.mark.parametrize("needle", SEARCHES)
def test_search_finds_exactly_what_like_finds(searched, needle, probe, monkeypatch):
    monkeypatch.setattr(queries, "TRIGRAM_PROBE", probe)
    store, run_id, sessions = searched
    dialect = store.engine.dialect.name
    expected = sorted(sessions[c] for c in COMMANDS if like_matches(dialect, c, needle))

    calls = store.list_calls(CallFilter(run_id=run_id, search=needle), sort="id")
    found = store.list_sessions(SessionFilter(run_id=run_id, search=needle), sort="id")

    assert sorted(r.session_id for r in calls.rows) == expected
    assert calls.total == len(expected)
    assert [r.id for r in found.rows] == expected


def test_a_sqlite_store_scans_by_default_and_finds_the_same_rows(tmp_path):
    from agent_eval.store import open_store

    with open_store(str(tmp_path / "plain.db")) as store:
        run_id = add_run(store, label="s", suite="s", targets={"t": "m"})
        ids = {c: store.record_session(run_id, record(f"t/s{i}/0", [judged(0, 0, c)]))
               for i, c in enumerate(COMMANDS)}
        assert not search_index_exists(store.engine)  # no trigger slows the writes
        for needle in SEARCHES:
            page = store.list_sessions(SessionFilter(run_id=run_id, search=needle),
                                 sort="id")
            assert [r.id for r in page.rows] == sorted(
                ids[c] for c in COMMANDS if like_matches("sqlite", c, needle)), needle


def test_db_upgrade_search_index_builds_the_table_and_later_calls_enter_it(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.store import open_store

    db = str(tmp_path / "searched.db")
    result = CliRunner().invoke(main, ["db", "upgrade", "--search-index", "--db", db])
    assert result.exit_code == 0, result.output
    assert "command search index: ready" in result.output
    again = CliRunner().invoke(main, ["db", "upgrade", "--search-index", "--db", db])
    assert again.exit_code == 0 and "ready" in again.output  # safe to run again
    with open_store(db) as store:
        assert search_index_exists(store.engine)
        run_id = add_run(store, label="s", suite="s", targets={"t": "m"})
        sid = store.record_session(run_id, record("t/s0/0", [judged(0, 0, COMMANDS[0])]))
        with store.engine.connect() as conn:
            indexed = conn.execute(text(f"SELECT rowid FROM {SEARCH_TABLE} WHERE command "
                                        "MATCH '\"head -5\"'")).scalars().all()
        page = store.list_calls(CallFilter(run_id=run_id, search="head -5"))
    assert len(indexed) == 1 and [r.session_id for r in page.rows] == [sid]


def test_the_search_covers_every_run_without_a_run_filter(searched):
    store, _, _ = searched
    dialect = store.engine.dialect.name
    in_both = [*COMMANDS, COMMANDS[0]]  # the other run holds the first command again
    assert store.list_calls(CallFilter(search="| head -5")).total == sum(
        like_matches(dialect, c, "| head -5") for c in in_both)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # SQLite's FTS5 table only
def test_sqlite_reads_the_matches_from_the_trigram_table(searched, tmp_path):
    store, run_id, _ = searched
    assert store.engine.dialect.name == "sqlite"
    assert search_index_exists(store.engine)
    plans = []
    from sqlalchemy import event

    @event.listens_for(store.engine, "before_cursor_execute")
    def _plan(conn, cursor, statement, params, context, executemany):
        if statement.startswith("SELECT count(*)") and SEARCH_TABLE in statement:
            plans.append(" ".join(r[-1] for r in cursor.connection.execute(
                "EXPLAIN QUERY PLAN " + statement, params)))

    store.list_calls(CallFilter(run_id=run_id, search="head -5"))
    assert plans and all(f"SCAN {SEARCH_TABLE} VIRTUAL TABLE" in p for p in plans)
    assert all("ix_tool_calls_run_decision" not in p for p in plans)


def test_deleted_calls_leave_the_trigram_index(searched):
    store, run_id, _ = searched
    store.delete_run(run_id)
    assert store.list_calls(CallFilter(search="head -5")).total == 1
    if store.engine.dialect.name == "sqlite":
        with store.engine.begin() as conn:  # raises if the index disagrees with the table
            conn.execute(text(f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}, rank) "
                              "VALUES ('integrity-check', 1)"))


def test_the_migration_indexes_calls_and_counts_denials_stored_before_it(searched):
    store, run_id, _ = searched
    engine = store.engine
    for target in ("aggregate_indexes", "head"):
        with engine.connect() as conn:
            with conn.begin():
                config = database._alembic_config(conn)
                if target == "head":
                    alembic_command.upgrade(config, target)
                else:
                    alembic_command.downgrade(config, target)
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                present = conn.execute(text("SELECT count(*) FROM sqlite_master WHERE name = "
                                            ":n"), {"n": SEARCH_TABLE}).scalar()
            else:
                present = conn.execute(text("SELECT count(*) FROM pg_indexes WHERE indexname "
                                            "= :n"), {"n": SEARCH_INDEX}).scalar()
        # PostgreSQL's index comes with the revision; SQLite's table only on request
        # (the downgrade dropped the one the fixture built)
        assert present == (target == "head" and engine.dialect.name == "postgresql")
        assert not search_index_exists(engine)
        page = list_calls(engine, CallFilter(run_id=run_id, search="head -5"), sort="id")
        assert page.total == (1 if engine.dialect.name == "postgresql" else 2)
    # sessions stored before the migration get their denied calls counted by it
    denied = list_calls(engine, CallFilter(run_id=run_id, decision="deny"), limit=500)
    by_session = {}
    for call in denied.rows:
        by_session[call.session_id] = by_session.get(call.session_id, 0) + 1
    listed = list_sessions(engine, SessionFilter(run_id=run_id), sort="id", limit=500)
    assert {r.id: r.denials for r in listed.rows if r.denials} == by_session
    assert len(by_session) >= 5



@pytest.mark.postgres
def test_postgresql_without_pg_trgm_rights_upgrades_with_a_warning_and_scans(pg_url, capsys):
    """A role that may create tables but not extensions: the upgrade reaches head, says why
    the index is missing and how to add it, and the search still finds the right rows."""
    import secrets

    import psycopg
    from sqlalchemy import make_url

    from agent_eval.store import open_store

    server = make_url(pg_url)
    admin_url = f"postgresql://postgres@{server.host}:{server.port}/test"
    name = f"agent_eval_nopriv_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(admin_url.rsplit("/", 1)[0] + f"/{name}",
                             autocommit=True) as owner:
            owner.execute(f'GRANT CREATE ON SCHEMA public TO "{name}"')
        url = f"postgresql+psycopg://{name}@{server.host}:{server.port}/{name}"
        assert database.upgrade(url) == database.head_revision()
        warning = capsys.readouterr().err
        assert warning.startswith("Warning: cannot create the pg_trgm index (permission denied")
        assert f"CREATE INDEX {SEARCH_INDEX} ON tool_calls USING gin" in warning
        with open_store(url) as store:
            run_id = add_run(store, label="s", suite="s", targets={"t": "m"})
            for i, cmd in enumerate(COMMANDS):
                store.record_session(run_id, record(f"t/s{i}/0", [judged(0, 0, cmd)]))
            page = store.list_calls(CallFilter(run_id=run_id, search="100%"))
            assert [r.command for r in page.rows] == ["echo 100% done"]
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


# --- the search with and without its fast structure ------------------

FAST_STRUCTURE = {"sqlite": SEARCH_SCAN_INDEX, "postgresql": SEARCH_INDEX}


@pytest.fixture(params=["built", "dropped"])
def paired(request, store):
    """A run whose sessions hold two or three calls each (pairs of COMMANDS, allowed
    ``uv run`` calls, a call with no command), so denied and allowed calls match alike, with the backend's default search
    structure as the migrations leave it (SQLite: the covering index the scan reads;
    PostgreSQL: the pg_trgm index), or with it dropped: the search must find the same."""
    run_id = add_run(store, label="paired", suite="s", targets={"t": "m"})
    n = len(COMMANDS)
    for i, cmd in enumerate(COMMANDS):
        calls = [judged(0, 0, cmd), judged(1, 1, COMMANDS[(i + 3) % n])]
        if i == 2:
            calls.append(CallRecord(index=2, turn_index=2, tool="fetch", arguments="{}",
                                    decision="allow", command=None))
        if i in (4, 7):  # allowed by ralf.yaml, unlike the other `uv run`s here
            calls.append(judged(2, 2, ALLOWED))
        store.record_session(run_id, record(f"t/s{i}/0", calls))
    name = FAST_STRUCTURE[store.engine.dialect.name]
    with store.engine.connect() as conn:
        assert _index_exists(conn, name)  # the migrations built it
    if request.param == "dropped":
        with store.engine.begin() as conn:
            conn.execute(text(f"DROP INDEX {name}"))
    yield store, run_id
    if request.param == "dropped" and store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:  # the session's database outlives the test
            conn.execute(text(f"CREATE INDEX {name} ON tool_calls "
                              "USING gin (command gin_trgm_ops)"))


def _index_exists(conn, name: str) -> bool:
    if conn.dialect.name == "sqlite":
        query = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = :n"
    else:
        query = "SELECT count(*) FROM pg_indexes WHERE indexname = :n"
    return conn.execute(text(query), {"n": name}).scalar() == 1


def _pages(lister, engine, f, sort: str, size: int):
    """Every row of ``f`` page by page, checking each page's total, and the page past the
    end (empty, still with the total)."""
    rows, offset, totals = [], 0, set()
    while True:
        page = lister(engine, f, sort=sort, limit=size, offset=offset)
        totals.add(page.total)
        if not page.rows:
            break
        rows += page.rows
        offset += size
    assert totals == {len(rows)}, totals
    return rows


@pytest.mark.parametrize("sort", ["failed", "id", "-id", "session"])
@pytest.mark.parametrize("needle", ["head -5", "HEAD", "100%", "_", "uv run", "ls", "e",
                                    "no such text anywhere", "sql \"select"])
def test_the_search_pages_are_the_unsearched_lists_filtered(paired, needle, sort):
    """Paging through a search (2 rows a page, every order, the failed-first split, the
    page past the end) gives exactly the rows, in the order, of the list without the search
    filtered by LIKE's rule; with the fast structure built or not."""
    store, run_id = paired
    engine, dialect = store.engine, store.engine.dialect.name
    every_call = list_calls(engine, CallFilter(run_id=run_id), sort=sort, limit=500).rows
    expected_calls = [r.id for r in every_call
                      if r.command is not None and like_matches(dialect, r.command, needle)]
    found = _pages(list_calls, engine, CallFilter(run_id=run_id, search=needle), sort, 2)
    assert [r.id for r in found] == expected_calls

    session_sort = {"session": "denials"}.get(sort, sort)
    every_session = list_sessions(engine, SessionFilter(run_id=run_id), sort=session_sort,
                                  limit=500).rows
    holding = {r.session_id for r in every_call if r.id in set(expected_calls)}
    found = _pages(list_sessions, engine, SessionFilter(run_id=run_id, search=needle),
                   session_sort, 2)
    assert [r.id for r in found] == [r.id for r in every_session if r.id in holding]


def test_the_paired_store_mixes_denied_and_allowed_matches(paired):
    """The test above means something: a text matches denied and allowed calls alike."""
    store, run_id = paired
    rows = store.list_calls(CallFilter(run_id=run_id, search="uv run"), limit=500).rows
    assert {r.decision for r in rows} == {"allow", "deny"}
    assert [r.decision for r in rows] == sorted(r.decision for r in rows)[::-1]  # deny first


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # the SQLite covering index
def test_sqlite_search_scans_the_covering_index_and_other_lists_do_not(store):
    """Without the FTS5 table the search reads ix_tool_calls_run_command alone (not the
    calls' rows); a list without a search keeps ix_tool_calls_run_decision."""
    from sqlalchemy import event

    run_id = add_run(store, label="p", suite="s", targets={"t": "m"})
    for i, cmd in enumerate(COMMANDS):
        store.record_session(run_id, record(f"t/s{i}/0", [judged(0, 0, cmd)]))
    assert not search_index_exists(store.engine)
    plans = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _plan(conn, cursor, statement, params, context, executemany):
        if "FROM tool_calls" in statement:
            plans.append((statement, " ".join(r[-1] for r in cursor.connection.execute(
                "EXPLAIN QUERY PLAN " + statement, params))))

    page = store.list_calls(CallFilter(run_id=run_id, search="head -5"))
    assert sorted(r.command for r in page.rows) == sorted(COMMANDS[:2])  # LIKE folds ASCII
    searched = [p for s, p in plans if "LIKE" in s]
    assert searched and all(f"COVERING INDEX {SEARCH_SCAN_INDEX}" in p for p in searched)
    plans.clear()
    store.list_calls(CallFilter(run_id=run_id))
    assert plans and all(SEARCH_SCAN_INDEX not in p for _, p in plans)


def test_the_search_scan_migration_adds_and_removes_the_sqlite_index(store):
    """Revision search_scan builds ix_tool_calls_run_command on SQLite only; its
    downgrade removes it; upgrading again rebuilds it over the calls already stored."""
    run_id = add_run(store, label="m", suite="s", targets={"t": "m"})
    store.record_session(run_id, record("t/s0/0", [judged(0, 0, COMMANDS[0])]))
    sqlite = store.engine.dialect.name == "sqlite"
    for target, present in (("session_repeats", False), ("head", sqlite)):
        with store.engine.connect() as conn, conn.begin():
            config = database._alembic_config(conn)
            if target == "head":
                alembic_command.upgrade(config, target)
            else:
                alembic_command.downgrade(config, target)
        with store.engine.connect() as conn:
            assert _index_exists(conn, SEARCH_SCAN_INDEX) == present
        page = store.list_calls(CallFilter(run_id=run_id, search="| head"))
        assert [r.command for r in page.rows] == [COMMANDS[0]]


@pytest.mark.parametrize("needle", ["uv run", "e", "no such text anywhere"])
def test_next_and_previous_failed_session_under_a_search(paired, needle):
    """The session page's prev/next failed session under a search (one pass over the
    matches) are the failed matching sessions just before and after, as without one."""
    store, run_id = paired
    engine = store.engine
    searched = SessionFilter(run_id=run_id, search=needle)
    failed = [r.id for r in list_sessions(engine, searched, sort="id", limit=500).rows
              if r.failed]
    every = [r.id for r in list_sessions(engine, SessionFilter(run_id=run_id), sort="id",
                                         limit=500).rows]
    assert needle == "no such text anywhere" or failed
    for sid in every:
        before = [i for i in failed if i < sid]
        after = [i for i in failed if i > sid]
        assert neighbour_sessions(engine, searched, sid) == (
            before[-1] if before else None, after[0] if after else None)


NUL_COMMANDS = ["uv run scripts/x.py\x00--all", "UV RUN A\x00B", "uv run a\x00b", "ls -la",
                "echo ok"]


@pytest.mark.parametrize("needle", ["\x00", "a\x00b", "\x00--all", "x.py\x00", "\x00\x00"],
                         ids=["nul", "a-nul-b", "nul-flag", "name-nul", "two-nuls"])
def test_a_nul_in_the_search_matches_only_commands_holding_it(store, needle):
    """SQLite's LIKE reads its pattern up to the first NUL, so ``%\\x00%`` was ``%``: a
    search for a NUL matched every command.  It matches those that hold the text."""
    run_id = add_run(store, label="nul", suite="s", targets={"t": "m"})
    ids = {c: store.record_session(run_id, record(f"t/s{i}/0", [judged(0, 0, c)]))
           for i, c in enumerate(NUL_COMMANDS)}
    dialect = store.engine.dialect.name
    expected = sorted(ids[c] for c in NUL_COMMANDS if like_matches(dialect, c, needle))

    calls = store.list_calls(CallFilter(run_id=run_id, search=needle), sort="id")
    found = store.list_sessions(SessionFilter(run_id=run_id, search=needle), sort="id")

    assert len(expected) < len(NUL_COMMANDS)
    assert sorted(r.session_id for r in calls.rows) == expected
    assert calls.total == len(expected)
    assert [r.id for r in found.rows] == expected
