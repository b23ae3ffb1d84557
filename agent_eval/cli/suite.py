"""``agent-eval init`` and ``agent-eval validate``: write a starter suite, lint a suite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from agent_eval.cli import EXIT_FAIL, main
from agent_eval.cli.options import json_option
from agent_eval.cli.terminal import escape_terminal


@main.command()
@click.argument("folder", type=click.Path(path_type=Path))
def init(folder: Path) -> None:
    """Write a starter suite into FOLDER (new or empty): a scenario, its allow-list with
    the scripts manifest, suite defaults and a README.  It validates and plays against
    `agent-eval sim-server` as written.

    Example:

    \b
        agent-eval init my-suite && agent-eval validate my-suite
    """
    from agent_eval.scenario.scaffold import scaffold_suite

    for path in scaffold_suite(folder):
        click.echo(f"wrote {path}")
    click.echo(f"next: agent-eval validate {folder}")


@main.command()
@click.argument("suite", type=click.Path(path_type=Path), default=Path("."), required=False)
@json_option("the problems as JSON")
def validate(suite: Path, as_json: bool) -> None:
    """Lint a suite folder [default: the current folder]: YAML and schema errors at
    file:line, unknown keys, reference steps denied by their own allow-list, unreachable
    goal or handshake steps, reference calls without a simulated answer.  Every `*.yaml`
    in the folder but `suite.yaml` must be a scenario; keep other YAML in a subfolder.

    Example:

    \b
        agent-eval validate scenarios/ralf

    Exit codes: 0 no problem, 1 problems found (one `file:line: field: message` each).
    """
    from agent_eval.scenario.bundled import find_suite
    from agent_eval.scenario.lint import lint_suite

    suite = find_suite(suite)
    problems = lint_suite(suite)
    count = len([p for p in suite.glob("*.yaml") if p.name != "suite.yaml"]) if suite.is_dir() else 0
    if as_json:
        click.echo(json.dumps({"suite": str(suite), "scenarios": count,
                               "problems": [p.as_dict() for p in problems]}, indent=2))
    else:
        for problem in problems:
            click.echo(escape_terminal(problem.render()))
        if problems:
            click.echo(f"{len(problems)} problem(s) in {suite}", err=True)
        else:
            click.echo(f"{suite}: {count} scenario(s), no problem")
    if problems:
        sys.exit(EXIT_FAIL)
