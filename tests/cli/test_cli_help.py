"""Every command's ``--help``: each example command is printed on a line of its own,
whole (click rewraps a paragraph unless it is marked ``\\b``: two examples ran together
on one line, and the gate's example broke ``--max-`` / ``error-rate`` across lines)."""

from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner

from agent_eval.cli import main


def commands(group: click.Group, path: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


ALL = sorted(commands(main))


def example_lines(command: click.Command) -> list[str]:
    doc = inspect.cleandoc(command.callback.__doc__ or "") if command.callback else ""
    return [line.strip() for line in doc.splitlines()
            if line.strip().startswith(("agent-eval ", "$ agent-eval "))]


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_example_is_printed_whole_on_its_own_line(path, command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    shown = [line.strip() for line in result.output.splitlines()]
    missing = [line for line in example_lines(command) if line not in shown]
    assert missing == [], result.output


def test_examples_name_targets_the_demo_stores():
    """`--target careful` named no target anyone has: the examples name the demo's."""
    from agent_eval.sim import PROFILES

    for path, command in ALL:
        for line in example_lines(command):
            if "--target " in line:
                assert line.split("--target ", 1)[1].split()[0] in PROFILES, (path, line)
