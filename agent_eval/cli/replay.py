"""``agent-eval replay``: a stored run's real contexts sent to a candidate model, paired."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.cli.options import allowlist_option, db_option, run_argument, sampling_options


@main.command()
@run_argument()
@click.option("--base-url", required=True, help="The candidate's OpenAI-compatible endpoint.")
@click.option("--model", required=True, help="The candidate model, as its server names it.")
@click.option("--name", "target_name", help="Target name in reports [default: the model].")
@click.option("--target", "targets", multiple=True, metavar="NAME",
              help="Replay only the sessions of this target of RUN (repeatable) [default: all].")
@click.option("--sample", type=click.IntRange(1), default=None, metavar="N",
              help="Replay N contexts drawn at random (seeded by --seed) [default: all].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=4, show_default=True,
              help="Sessions replayed at once (each session's turns go in order).")
@click.option("--repeats", type=click.IntRange(1), default=1, show_default=True,
              help="Replies per context, to see the candidate's own noise.")
@allowlist_option("Allow-list YAML to judge under", default="the original run's")
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: judge every reply as agent NAME (default: "
                   "each session's agent, from its system prompt).")
@click.option("--label", help="Label for the replay run.")
@sampling_options(override=True)
@db_option
def replay(run_ref, base_url, model, target_name, targets, sample, seed, concurrency, repeats,
           allowlist_path, agent, label, db, **knobs) -> None:
    """Send a stored run's contexts to a candidate model and pair each reply with the
    original call.

    Example:

    \b
        agent-eval replay label:nightly --base-url http://127.0.0.1:8001/v1 \\
            --model Qwen/Qwen3.5-27B --sample 500 --seed 1 --concurrency 16
        agent-eval compare label:nightly latest

    For every stored turn of RUN (or of its --target NAME sessions) that ended in a tool
    call and kept its exact request
    (live runs and proxy runs do; most imports do not), sends that context (messages
    before the reply, tools, tool_choice, sampling; only the model is replaced, and any
    knob given here) to the candidate and judges its reply under the original run's
    allow-list.  Single step: the candidate's call is judged, not simulated.  Stored as
    a run of kind `replay` (its parent is RUN); each reply is a session keyed
    ORIGINAL_KEY@turnN, so `compare RUN REPLAY` pairs it with the original call: both
    allowed, fixed, broken, both denied, per class, exact McNemar, and the calls that
    moved.  A reply with no tool call or another tool is counted, not an error.

    Exit codes: 0 done, 2 nothing to replay (no request kept, no tools, capped, no
    tool-call turn: nothing is stored) or bad option, 3 server unreachable or gone
    mid-replay (run left `interrupted`), 130 Ctrl-C.
    """
    from agent_eval.cli.run import _target_from_options
    from agent_eval.live.replay import allowlist_source, plan_replay, refusal, start_replay
    from agent_eval.live.run import probe_targets
    from agent_eval.store import open_store

    with open_store(db, create=False) as store:
        info = store.resolve_run(run_ref)
        override = _load_override(allowlist_path, agent)
        plan = plan_replay(store.session_rows([info.id]), store.call_rows([info.id]),
                           store.request_refs(info.id), sample=sample, seed=seed,
                           targets=targets)
        from agent_eval.errors import ConfigError

        known = {t.name for t in store.run_targets(info.id)}
        if unknown := sorted(set(targets) - known):
            raise ConfigError(f"run {info.id} has no target {unknown[0]!r}; its targets: "
                              f"{', '.join(sorted(known))}", field="--target")
        if (why := refusal(info, plan)) is not None:
            raise ConfigError(why)
        allowlist_for = allowlist_source(info, override)
        for scenario in sorted({c.scenario for c in plan.contexts}):
            allowlist_for(scenario)  # a scenario that no longer loads: refused before storing
        target = _target_from_options(target_name or model, base_url, model, concurrency, knobs)
        server_models = asyncio.run(probe_targets([target]))[target.name]
        run_id = start_replay(store, info, target, plan, label=label,
                              server_models=server_models, sample=sample, seed=seed,
                              repeats=repeats,
                              allowlist=override.allowlist if override else None,
                              allowlist_path=str(allowlist_path) if allowlist_path else None)
        tally = _play(store, run_id, plan, target, allowlist_for, repeats,
                      foreign=info.kind in ("proxy", "import"))
        _print_outcome(store, info, run_id, plan, tally)
    if tally.left:
        sys.exit(EXIT_FAULT)


def _load_override(path: Path | None, agent: str | None):
    if path is None:
        if agent is not None:
            from agent_eval.errors import ConfigError

            raise ConfigError("--agent picks an agent of --allowlist CONFIG; give both",
                              field="--agent")
        return None
    from agent_eval.scenario.bundled import load_policy

    return load_policy(path, agent)


def _play(store, run_id, plan, target, allowlist_for, repeats, *, foreign):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agent_eval.cli.run import _console
    from agent_eval.live.replay import ReplayTally, play_replay

    with Progress(TextColumn("[bold]replay {task.fields[run]}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("contexts · {task.fields[denied]} denied"),
                  TimeElapsedColumn(), console=_console(), transient=False) as progress:
        task = progress.add_task("replay", total=len(plan.contexts) * repeats, run=run_id,
                                 denied=0)

        def on_context(t: ReplayTally) -> None:
            progress.update(task, completed=t.done, denied=t.denied)

        try:
            return play_replay(store, run_id, plan, target, allowlist_for, repeats=repeats,
                               foreign=foreign, on_context=on_context)
        except KeyboardInterrupt:
            click.echo(f"Interrupted; replay run {run_id} keeps what was stored.", err=True)
            sys.exit(130)


def _print_outcome(store, info, run_id, plan, tally) -> None:
    from agent_eval.analysis.paired_replay import pair_replay, render_paired_text
    from agent_eval.cli.terminal import escape_terminal

    skipped = ", ".join(f"{n} {why}" for why, n in plan.skipped.most_common())
    click.echo(f"Replay run {run_id} of run {info.id}: {tally.done} replies stored "
               f"({tally.calls} called a tool, {tally.no_call} did not, {tally.errors} server "
               f"faults) from {len(plan.contexts)} of {plan.tool_turns} tool-call turns"
               + (f"; skipped: {skipped}" if skipped else "") + ".")
    if tally.left:
        click.echo(f"Error: the model server stopped answering; {tally.left} replies not "
                   f"sent (run {run_id} left interrupted).", err=True)
    a, b = [info.id], [run_id]
    paired = pair_replay(info.id, run_id, store.session_rows(a), store.call_rows(a),
                         store.session_rows(b), store.call_rows(b))
    click.echo(escape_terminal(render_paired_text(paired)), nl=False)
    click.echo(f"Full comparison: agent-eval compare {info.id} {run_id}")
