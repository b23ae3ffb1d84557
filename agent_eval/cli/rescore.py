"""``agent-eval rescore``: judge a stored run again under another allow-list."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import allowlist_option, db_option


@main.command()
@click.argument("run")
@allowlist_option("Allow-list YAML to judge every stored call against", required=True)
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: judge every session as agent NAME (default: "
                   "the agent that judged it before, else from its system prompt).")
@click.option("--label", default=None, help="Label of the new run.")
@db_option
def rescore(run: str, allowlist_path: Path, agent: str | None, label: str | None,
            db: str | None) -> None:
    """Judge run RUN again under another allow-list (or engine version), calling no model.

    Writes a new run linked to RUN; the outputs the model saw are kept, verdicts and next
    actions are recomputed.  Prints the new run id and errors per 100 calls before and
    after; `agent-eval compare RUN NEW` shows what moved.

    Under an agent CLI's rules (docs/policies.md) each call gets that CLI's verdict and
    the calls its strict reading refuses are counted as leaks.

    Example: agent-eval rescore 12 --allowlist loose.yaml
    """
    from agent_eval.importers.rescore import rescore as rescore_stored
    from agent_eval.scenario.bundled import find_allowlist, load_policy
    from agent_eval.store import open_store

    policy = load_policy(allowlist_path, agent)
    allowlist = policy.allowlist
    allowlist_path = find_allowlist(allowlist_path)
    with open_store(db, create=False) as store:
        old = store.resolve_run(run)
        result = rescore_stored(store, old.id, policy, label=label,
                                allowlist_path=str(allowlist_path))
    before, after = result.before.errors_per_100, result.after.errors_per_100
    click.echo(f"run {result.run_id}: rescored run {result.parent_run_id} under "
               f"{allowlist.name}: {result.after.calls} calls, {result.changed} changed verdict")
    click.echo(f"  errors/100 calls: {_rate(before)} -> {_rate(after)}")


def _rate(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "n/a"
