"""Commands that read stored runs never create a database: a typo'd ``--db`` gets one
``Error:`` line naming the path (with the nearest store beside it) and leaves no empty
file behind; only run, demo, import and proxy create one."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from agent_eval.cli import EXIT_USAGE, main
from agent_eval.store import open_store

READ_COMMANDS = {
    "runs": ["runs"],
    "runs delete": ["runs", "delete", "1"],
    "sessions": ["sessions", "1"],
    "calls": ["calls", "1"],
    "show": ["show", "1"],
    "compare": ["compare", "1", "2"],
    "gate": ["gate", "--baseline", "1", "--max-error-rate", "5"],
    "report": ["report"],
    "export": ["export", "calls"],
    "perf": ["perf"],
    "power": ["power", "--baseline", "1"],
    "view": ["view"],
    "rescore": ["rescore", "1", "--allowlist", "ralf"],
    "worker": ["worker", "1"],
}


@pytest.mark.parametrize("args", READ_COMMANDS.values(), ids=READ_COMMANDS.keys())
def test_a_read_command_at_a_typod_db_path_creates_nothing(tmp_path, args):
    typo = tmp_path / "agent_evl.db"
    result = CliRunner().invoke(main, [*args, "--db", str(typo)])
    assert result.exit_code == EXIT_USAGE, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: --db: no database at {str(typo)!r}: check --db; only run, "
                      "demo, import and proxy create one"]
    assert not typo.exists()


def test_the_nearest_store_beside_it_is_named(tmp_path):
    open_store(str(tmp_path / "agent_eval.db")).close()
    result = CliRunner().invoke(main, ["runs", "--db", str(tmp_path / "agent_evl.db")])
    assert result.exit_code == EXIT_USAGE
    assert f"did you mean {str(tmp_path / 'agent_eval.db')!r}?" in result.stderr
    assert not (tmp_path / "agent_evl.db").exists()


def test_an_existing_store_still_opens_for_reading(tmp_path):
    open_store(str(tmp_path / "s.db")).close()
    result = CliRunner().invoke(main, ["runs", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
