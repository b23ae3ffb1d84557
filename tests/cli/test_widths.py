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


def table_cells(output: str, header: str) -> list[str]:
    """The cells of column ``header`` in the body rows of the rich tables printed."""
    cells: list[str] = []
    index = None
    for line in output.splitlines():
        if line.startswith("┃"):
            heads = [h.strip() for h in line.strip("┃").split("┃")]
            index = heads.index(header) if header in heads else None
        elif line.startswith("│") and index is not None:
            cells.append(line.strip("│").split("│")[index].strip())
    return cells


LISTS = {  # the list commands, with the columns that say what a row is about
    "runs": (["runs"], ("status", "targets")),
    "sessions": (["sessions", "latest"], ("status", "target")),
    "calls": (["calls", "latest"], ("target",)),
    "run tables": (["report", "latest", "--out"], ("target",)),
}


@pytest.mark.parametrize("columns", [80, 100, 200])
@pytest.mark.parametrize("name", sorted(LISTS))
def test_list_tables_never_cut_the_status_or_the_target(two_demo_runs, monkeypatch, tmp_path,
                                                        name, columns):
    """At 80 and 100 columns the least useful columns go or are cut first (tags, dates,
    repeat numbers); a status (`completed with 1 denial`) and a target name stay whole."""
    monkeypatch.setenv("COLUMNS", str(columns))
    args, kept = LISTS[name]
    args = [*args, str(tmp_path)] if args[-1] == "--out" else args
    result = CliRunner().invoke(main, [*args, "--db", two_demo_runs])
    assert result.exit_code == 0, result.output
    for header in kept:
        cells = table_cells(result.stdout, header)
        assert cells, (header, result.stdout)
        assert [c for c in cells if c.endswith("…")] == [], result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith(("│", "┃"))]
    assert rows and all(len(line) <= columns for line in rows), result.stdout


@pytest.mark.parametrize("columns", [80, 100])
def test_show_wraps_the_task_once(two_demo_runs, monkeypatch, columns):
    """The task's own line breaks (a YAML block at ~90 columns) are not kept as well as
    the terminal's: every line of the task but its last runs to near the edge."""
    monkeypatch.setenv("COLUMNS", str(columns))
    result = CliRunner().invoke(main, ["show", "3", "--db", two_demo_runs])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("task: "))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    task = lines[start:end]
    assert len(task) >= 2, task
    assert [line for line in task[:-1] if len(line) < columns - 20] == [], "\n".join(task)
