"""``agent-eval schema``: print the JSON Schema of an input file format."""

from __future__ import annotations

import json

import click

from agent_eval.cli import main


@main.command()
@click.argument("kind", type=click.Choice(["allowlist", "scenario"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of an allow-list or scenario file.

    Example: agent-eval schema allowlist > allowlist.schema.json
    """
    if kind == "allowlist":
        from agent_eval.policy.allowlist import AllowList as model
    else:
        from agent_eval.scenario import Scenario as model
    click.echo(json.dumps(model.model_json_schema(), indent=2))
