"""Every command's terminal output keeps to the terminal's width: at 80, 100 and 200
columns (``$COLUMNS`` through a pipe, as in CI logs) no line is longer, except a line that
is a command to copy (``power``'s ready ``run`` line, a rule's examples), which stays whole.
Tables fit by dropping or cutting columns; prose wraps between words."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from agent_eval.cli import main


@pytest.fixture(scope="module")
def two_demo_runs(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("widths") / "demo.db")
    for _ in range(2):
        result = CliRunner().invoke(main, ["demo", "--profiles", "piper,disciplined",
                                           "--repeats", "2", "--limit", "5", "--no-report",
                                           "--db", db])
        assert result.exit_code == 0, result.output
    return db


COMMANDS = {
    "runs": ["runs"],
    "sessions": ["sessions", "latest"],
    "calls": ["calls", "latest"],
    "show": ["show", "3"],
    "compare": ["compare", "1", "2"],
    "gate": ["gate", "--baseline", "1", "--max-regression", "2", "--max-error-rate", "8",
             "--max-class", "AE301=3", "--min-handshake", "0.8"],
    "power": ["power", "--baseline", "1"],
    "rules": ["rules"],
    "rule": ["rule", "AE301"],
    "policy profiles": ["policy", "profiles"],
}
TAKES_DB = {"runs", "sessions", "calls", "show", "compare", "gate", "power"}
WHOLE = ("Ready: agent-eval run", "  $ ", "  call ")  # commands to copy stay one line


@pytest.mark.parametrize("columns", [80, 100, 200])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_line_is_wider_than_the_terminal(two_demo_runs, monkeypatch, name, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    args = COMMANDS[name] + (["--db", two_demo_runs] if name in TAKES_DB else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (0, 1, 4), result.output  # gate: 1 failed, 4 inconclusive
    lines = result.stdout.splitlines()
    assert len(lines) > 2
    wide = [line for line in lines if len(line) > columns and not line.startswith(WHOLE)]
    assert wide == [], "\n".join(wide)
