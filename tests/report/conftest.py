"""Fixtures for the report tests; the store they read is built in support/report_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_fixtures import Fixture, fill_store

from agent_eval.store import open_store


@pytest.fixture(scope="session")
def hostile_store(tmp_path_factory) -> Fixture:
    return fill_store(str(tmp_path_factory.mktemp("report") / "store.db"))


@pytest.fixture(scope="session")
def hostile_report(hostile_store, tmp_path_factory) -> Path:
    """The written report folder of the fixture run."""
    from agent_eval.report import write_report

    out = tmp_path_factory.mktemp("reports")
    with open_store(hostile_store.db) as store:
        return write_report(store, [hostile_store.run_id], out).parent


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> str:
    """A real demo run: the bundled suite against every simulator profile, over HTTP."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    db = str(tmp_path_factory.mktemp("demo") / "demo.db")
    result = CliRunner().invoke(main, ["demo", "--db", db, "--no-report"])
    assert result.exit_code == 0, result.output
    return db
