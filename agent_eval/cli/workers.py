"""``agent-eval worker``: one of many processes playing a planned run from a shared store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.cli.options import db_option, json_option, run_argument
from agent_eval.cli.terminal import escape_terminal
from agent_eval.errors import ConfigError


@main.command()
@run_argument()
@click.option("--concurrency", type=click.IntRange(1), default=4, show_default=True,
              help="Sessions this worker plays at once.")
@click.option("--lease-s", type=click.FloatRange(min=1.0), default=60.0, show_default=True,
              help="Seconds a claimed session stays this worker's without a heartbeat; a "
                   "dead worker's sessions are replayed by others after it.")
@click.option("--suite", type=click.Path(path_type=Path), default=None,
              help="The suite folder on this machine [default: the planner's path].")
@json_option("the closing tally as one JSON object")
@db_option
def worker(run_ref, concurrency, lease_s, suite, as_json, db) -> None:
    """Play a run planned with `run --plan-only`, sharing it with any number of workers.

    Example (start as many as you like, on any machines; docs/scale.md shows
    Kubernetes, GitHub Actions and SLURM):

    \b
        agent-eval run --plan-only --base-url http://gpu-1:8000/v1 --model qwen \\
            --repeats 5 --db postgresql://agent@db:5432/evals       # prints the run id
        agent-eval worker 7 --db postgresql://agent@db:5432/evals --concurrency 8

    Workers claim sessions from the database (SELECT ... FOR UPDATE SKIP LOCKED) and
    hold each under a lease they renew; a killed worker's sessions are replayed by the
    others once its lease lapses.  Each session is stored exactly once: a copy finished
    by a worker that outlived its lease is discarded and counted as a duplicate.  A
    worker whose suite, agent-eval, policies, sampling or server models differ from the
    planner's is refused.  Every worker stays until the run has no session left; the
    last one marks the run finished.  PostgreSQL for several machines; a SQLite file
    serves workers on one machine.

    A run planned with `run --plan-only --until-decided` is played batch by batch: the
    worker that completes a batch takes its look (one line), and unless the run is
    decided or at its cap stores the next batch for every worker.

    Exit codes: 0 the run has no session left, 2 bad option, an unplanned run or a
    different fingerprint, 3 a model server or the database stopped answering (this
    worker's unplayed sessions are given back to the others), or the worker's first
    sessions of a target were all refused the same way by the server (one line quoting
    it and the likely fix).
    """
    from agent_eval.live.run import load_run_plan
    from agent_eval.store import open_store

    store = open_store(db, create=False)
    run_id, suite_obj, targets, _ = load_run_plan(store, run_ref, suite)
    if not store.has_work_items(run_id):
        raise ConfigError(f"run {run_id} was not planned for workers: plan one with "
                          "agent-eval run --plan-only", field="RUN")
    tally = play_worker_share(store, run_id, suite_obj, targets, concurrency=concurrency,
                              lease_s=lease_s, err=as_json)
    progress = store.work_progress(run_id)
    if as_json:
        click.echo(json.dumps({
            "run": run_id, "worker": tally.worker, "stored": tally.stored,
            "duplicates": tally.duplicates, "released": tally.released,
            "marked_finished": tally.marked_finished, "server_gone": tally.server_gone,
            "stopped": tally.stopped,
            "planned": progress.planned, "done": progress.done,
            "run_duplicates": progress.duplicates}))
    else:
        click.echo(f"Worker {tally.worker}: stored {tally.stored} sessions, discarded "
                   f"{tally.duplicates} duplicates; run {run_id}: {progress.done} of "
                   f"{progress.planned} sessions done"
                   + (" (this worker marked it finished)." if tally.marked_finished else "."))
    if tally.stopped:
        click.echo(f"Error: {escape_terminal(tally.stopped)} This worker stopped; its unplayed sessions stay "
                   f"open for a worker started after the fix.", err=True)
        sys.exit(EXIT_FAULT)
    if tally.server_gone:
        click.echo(f"Error: the server of target {tally.server_gone!r} stopped answering; "
                   f"this worker gave its sessions back. Start a worker again once the "
                   "server is back.", err=True)
        sys.exit(EXIT_FAULT)


def play_worker_share(store, run_id: int, suite_obj, targets, *, concurrency: int,
                      lease_s: float = 60.0, err: bool = False, poll_s: float = 1.0):
    """Play this worker's share of a planned run (``live.workers.play_as_worker``); of a
    sequential one (``run --plan-only --until-decided``), batch after batch, taking the
    look of a batch this worker completes (``live.sequential.work_until_decided``).  The
    last round's tally."""
    from agent_eval.live.workers import play_as_worker
    from agent_eval.metrics.sequential import SequentialPlan

    def play_round():
        return play_as_worker(store, run_id, suite_obj, targets, concurrency=concurrency,
                              lease_s=lease_s)

    plan = SequentialPlan.from_config(store.get_run(run_id).config)
    if plan is None:
        return play_round()
    from agent_eval.analysis.gate_stored import IntervalChecks, judge_run
    from agent_eval.cli.run import look_line
    from agent_eval.live.run import plan_run
    from agent_eval.live.sequential import work_until_decided

    checks = IntervalChecks.from_stored(plan.checks)

    def add_batch(first: int, repeats: int) -> None:
        store.add_work_items(run_id, [(i.target.name, i.scenario.name, i.repeat)
                                      for i in plan_run(suite_obj, targets, repeats)
                                      if i.repeat >= first])

    def judge(alpha: float):
        return judge_run(store, store.get_run(run_id), checks, alpha=alpha, look=True).result

    def on_look(report) -> None:
        click.echo(look_line(report), err=err)

    _, tally = work_until_decided(store, run_id, play_round, add_batch, judge, on_look,
                                  poll_s=poll_s)
    return tally
