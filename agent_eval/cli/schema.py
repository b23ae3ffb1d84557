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
    from pydantic import BaseModel

    model: type[BaseModel]
    if kind == "allowlist":
        from agent_eval.policy.allowlist import AllowList

        model = AllowList
    else:
        from agent_eval.scenario import Scenario

        model = Scenario
    click.echo(json.dumps(model.model_json_schema(), indent=2))
