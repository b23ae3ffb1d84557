"""``agent-eval replay``: a stored run's real contexts sent to a candidate model, paired."""

from __future__ import annotations

import sys
from typing import Any

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
    from agent_eval.live.replay_stored import ReplayRequest, replay_stored
    from agent_eval.store import open_store

    if agent is not None and allowlist_path is None:
        from agent_eval.errors import ConfigError

        raise ConfigError("--agent picks an agent of --allowlist CONFIG; give both",
                          field="--agent")
    request = ReplayRequest(tuple(targets), sample, seed, repeats, allowlist_path, agent, label)
    target = _target_from_options(target_name or model, base_url, model, concurrency, knobs)
    with open_store(db, create=False) as store, _Progress() as progress:
        try:
            replayed = replay_stored(store, run_ref, target, request,
                                     on_start=progress.start, on_context=progress.update)
        except KeyboardInterrupt:
            click.echo(f"Interrupted; replay run {progress.run_id} keeps what was stored.",
                       err=True)
            sys.exit(130)
    from agent_eval.cli.terminal import escape_terminal

    click.echo(replayed.summary())
    if (fault := replayed.fault()) is not None:
        click.echo(fault, err=True)
    click.echo(escape_terminal(replayed.text()), nl=False)
    if replayed.tally.left:
        sys.exit(EXIT_FAULT)


class _Progress:
    """The replay's progress bar: drawn once the replay run is recorded (``on_start``),
    moved after each session's replies (``on_context``)."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from agent_eval.cli.run import _console

        self.bar = Progress(TextColumn("[bold]replay {task.fields[run]}"), BarColumn(),
                            MofNCompleteColumn(),
                            TextColumn("contexts · {task.fields[denied]} denied"),
                            TimeElapsedColumn(), console=_console(), transient=False)
        self.task: Any = None
        self.run_id: int | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        if self.task is not None:
            self.bar.stop()

    def start(self, run_id: int, total: int) -> None:
        self.run_id = run_id
        self.bar.start()
        self.task = self.bar.add_task("replay", total=total, run=run_id, denied=0)

    def update(self, tally) -> None:
        self.bar.update(self.task, completed=tally.done, denied=tally.denied)
