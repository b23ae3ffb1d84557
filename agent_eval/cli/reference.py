"""The command reference, ``docs/cli.md``, rendered from the click commands themselves.

Each command's section is its ``--help`` as click prints it at 100 columns (the docstring,
the usage line, every option with its default), so the reference cannot drift from the
code: ``tests/test_docs.py`` fails when ``docs/cli.md`` differs from this rendering.
After changing a command, regenerate with one command::

    python -m agent_eval.cli.reference > docs/cli.md
"""

from __future__ import annotations

import copy
import sys

import click

WIDTH = 100
HEADER = """# Command reference

Generated from the click commands by `python -m agent_eval.cli.reference > docs/cli.md`;
do not edit by hand (a test compares this file with the code). The README's
[Commands](../README.md#commands) section says what each command is for and shows it at
work; this page lists every option.

{codes}
"""


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()
                  ) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, groups before their subcommands, by name."""
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if cmd.hidden:
            continue
        out.append(((*prefix, name), cmd))
        if isinstance(cmd, click.Group):
            out += command_paths(cmd, (*prefix, name))
    return out


def command_help(main: click.Group, path: tuple[str, ...], cmd: click.Command) -> str:
    """``agent-eval PATH --help`` as click prints it, at :data:`WIDTH` columns."""
    settings = {**main.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(main, info_name="agent-eval", **settings)  # -h as the CLI has it
    for name in path[:-1]:
        ctx = click.Context(ctx.command.commands[name], parent=ctx, info_name=name)  # type: ignore[attr-defined]
    # click caches a command's help option where it was first built; a command invoked on
    # its own (a test's CliRunner) caches a bare --help, so render from an uncached copy
    fresh = copy.copy(cmd)
    fresh._help_option = None
    sub = click.Context(fresh, parent=ctx, info_name=path[-1])
    return fresh.get_help(sub).rstrip()


def cli_markdown() -> str:
    """``docs/cli.md``: the header, a list of the commands, then one section each."""
    import textwrap

    from agent_eval.cli import exit_codes_text, main

    codes = textwrap.fill(f"Exit codes of every command (from `agent_eval.cli.EXIT_CODES`): "
                          f"{exit_codes_text()}; `run` exits 130 on Ctrl-C.", 90,
                          break_on_hyphens=False, break_long_words=False)
    commands = command_paths(main)
    lines = [HEADER.format(codes=codes), "## Commands", ""]
    for path, cmd in commands:
        name = " ".join(path)
        anchor = "agent-eval-" + "-".join(path)
        lines.append(f"- [`agent-eval {name}`](#{anchor}): {cmd.get_short_help_str(WIDTH)}")
    for path, cmd in commands:
        lines += ["", f"## `agent-eval {' '.join(path)}`", "", "```text",
                  command_help(main, path, cmd), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(cli_markdown())
