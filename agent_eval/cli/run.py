"""``agent-eval run`` and ``agent-eval demo``: play a suite against models, store, summarise."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.cli.options import (
    allowlist_option,
    check_options,
    db_option,
    json_option,
    sampling_options,
    selection_options,
)
from agent_eval.cli.terminal import counted, escape_terminal
from agent_eval.errors import AgentEvalError, ConfigError
from agent_eval.live.targets import DEFAULT_DEADLINE_S, DEFAULT_MAX_REPLY_BYTES


def _bundled_suite() -> Path:
    from agent_eval.scenario.bundled import bundled_suite

    return bundled_suite()


def _client_options(f):
    """The sampling knobs (cli/options.py) and the bounds only a live run sets."""
    f = sampling_options()(f)
    for opt in reversed([
        click.option("--deadline", "deadline_s", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_DEADLINE_S, show_default=True,
                     help="Seconds one request may take in all (ends an endless stream)."),
        click.option("--max-reply-bytes", type=click.IntRange(1024),
                     default=DEFAULT_MAX_REPLY_BYTES, show_default=True,
                     help="Bytes one reply may have on the wire; more is a server fault."),
        click.option("--stream-parity", is_flag=True, default=False,
                     help="Play each turn whole and streamed from the same context: a "
                          "streamed reply that differs is the stack's fault (AE510); the "
                          "session goes on with the whole reply.  Two requests a turn; "
                          "needs --temperature 0 or a seed.  Also a targets-file field "
                          "(stream_parity)."),
        click.option("--tool-choice", metavar="auto|none|required|TOOL", default="auto",
                     show_default=True,
                     help="tool_choice sent with the tools: a mode, or the name of the tool "
                          "the model must call (base models); docs/servers.md."),
    ]):
        f = opt(f)
    return f


def _select(suite_obj, selection: dict):
    from agent_eval.scenario.select import select_scenarios

    return select_scenarios(suite_obj, include=selection.get("include", ()),
                            tags=selection.get("tags", ()),
                            exclude=selection.get("exclude", ()), limit=selection.get("limit"))


def _pop_selection(knobs: dict) -> dict:
    return {k: knobs.pop(k) for k in ("include", "tags", "exclude", "limit") if k in knobs}


@main.command()
@click.option("--suite", type=click.Path(path_type=Path), default=None,
              help="Scenario folder [default: the bundled scenarios/ralf].")
@click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option("--model", help="Model name as the server knows it.")
@click.option("--name", "target_name", help="Target name in reports [default: the model].")
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="Targets file for a nightly run (several targets); see README.")
@allowlist_option("Allow-list YAML to play and judge every scenario under",
                  default="the one each scenario names")
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: the agent whose rules apply [default: the "
                   "configuration's default agent].")
@click.option("--resume", "resume", metavar="RUN",
              help="Finish an interrupted run, with its stored targets (a different "
                   "--model or --base-url is refused).")
@click.option("--repeats", type=click.IntRange(1), default=None, help="Sessions per scenario.")
@click.option("--concurrency", type=click.IntRange(1), default=None,
              help="Sessions in flight per target [default 4].")
@click.option("--label", help="Label for the run (gate --baseline label:NAME).")
@click.option("--max-turns", type=click.IntRange(1), default=None, metavar="N",
              help="End every session after N model replies, over the suite's own limits "
                   "(stored in the run's config; --resume keeps it).")
@click.option("--max-tool-calls", type=click.IntRange(1), default=None, metavar="N",
              help="End every session after N tool calls, over the suite's own limits.")
@click.option("--plan-only", is_flag=True,
              help="Store the run's plan for `agent-eval worker` processes; play nothing.")
@click.option("--until-decided", is_flag=True,
              help="Play repeats in batches of --look-every and stop as soon as the gate's "
                   "checks given here (--max-error-rate, --max-class, --baseline, "
                   "--max-regression) are decided, or at --max-repeats; each look reads "
                   "the intervals at the level an alpha-spending boundary allows, so "
                   "stopping early keeps the gate's error rates (docs/gate.md).")
@click.option("--max-repeats", type=click.IntRange(1), default=None, metavar="N",
              help="With --until-decided: the cap, repeats per scenario (about 10% over "
                   "`agent-eval power`'s plan keeps its error rates).")
@click.option("--look-every", type=click.IntRange(1), default=None, metavar="N",
              help="With --until-decided: repeats per scenario played between looks "
                   "[default 2].")
@check_options
@selection_options
@_client_options
@json_option("the two tables as one JSON object on stdout, progress on stderr")
@db_option
def run(suite, base_url, model, target_name, config_file, allowlist_path, agent, resume, repeats,
        concurrency, label, max_turns, max_tool_calls, plan_only, until_decided, max_repeats,
        look_every, max_error_rate, max_class, baseline_ref, max_regression, as_json, db,
        **knobs) -> None:
    """Run a scenario suite against a served model and store every call.

    Example:

    \b
        agent-eval run --suite scenarios/ralf --base-url http://127.0.0.1:8000/v1 \\
            --model Qwen/Qwen3.5-27B --repeats 3 --temperature 1.0 --top-p 0.95 --top-k 20

    Play part of a suite with --scenario GLOB, --tag TAG, --exclude GLOB (each
    repeatable) and --limit N, e.g. `--scenario 'research-*' --exclude '*-web' --limit 2`;
    --resume keeps to the selection the run started with.  --max-turns N and
    --max-tool-calls N bound a slow model without editing the suite: they replace every
    scenario's own limits and are stored in the run's config (--resume keeps them).

    Before any session, each server's /v1/models is read: a --model the server does not
    serve stops the run with the served names (did you mean ...?), nothing stored.

    Prints a progress bar, then the per-target table and the failure-class breakdown.
    A request the server fails (500, dropped, hung past --timeout, cut off) ends its
    session as `error`, excluded from every model rate; the run goes on.  If the server
    stops answering altogether, the remaining sessions are left for `--resume RUN`.
    A later turn the server refuses as too long for its context ends the session
    `stalled` (a limit, like the turns; `show` quotes the server), never `error`; a
    --max-tokens past the room left is cut to fit.  Targets that share a --base-url share
    one cap on requests in flight (`server_limit`), pause together on 429/503 for the
    server's Retry-After, and slow down when it queues (docs/servers.md).
    Ctrl-C stops cleanly; finished sessions are kept and `--resume RUN` finishes the run.

    With --plan-only the run is checked, recorded and its sessions stored as work items
    for `agent-eval worker RUN` processes on any machines (docs/scale.md); nothing is
    played and the run id is printed.

    One process plays a run at a time: a second `--resume` of a run still being played
    is refused with the pid and host playing it (exit 2); a killed runner's claim lapses.

    A request the server refuses the same way each time (a 4xx, or a 500 repeated word
    for word) is not retried blindly; when a target's first 3 sessions all fail with the
    same refusal, that target stops with one line quoting the server and the likely fix.

    With --until-decided the run pays only for what decides: it plays --look-every
    repeats of every scenario, judges the gate's checks given to it (the same options
    and rules as `agent-eval gate`), prints one line per look (what is decided, what is
    not), and stops as soon as the verdict is decided (every check passed, or one
    failed) or --max-repeats is reached (then INCONCLUSIVE, and it says so).  Each look
    reads the gate's own intervals at a smaller nominal alpha given by an O'Brien–Fleming
    alpha-spending boundary (Lan & DeMets 1983) over repeats played / --max-repeats, so
    PASS and FAIL keep their 2.5% error each way however early the run stopped.  The
    looks are stored on the run: --resume (and workers of a --plan-only run) continue
    the sequence, and `agent-eval gate` reads the run at its last look's level.

    \b
        agent-eval run --base-url URL --model NAME --until-decided --max-repeats 20 \\
            --look-every 2 --baseline label:nightly --max-regression 2 --label nightly

    Exit codes: 0 done (error sessions included), 2 bad option or file, or the run is
    being played by another process, 3 model server unreachable at the start or gone
    mid-run (run left `interrupted`), a target stopped on a refused request, or a target
    that produced no judged tool call; 130 Ctrl-C.  With --until-decided, 0 whatever
    the verdict: `agent-eval gate` gives it its exit code.
    """
    from agent_eval.live.client import load_run_config
    from agent_eval.live.run import load_run_plan
    from agent_eval.store import open_store

    selection = _pop_selection(knobs)
    sequential = _sequential_options(
        until_decided, max_repeats, look_every, repeats, resume,
        (max_error_rate, max_class, baseline_ref, max_regression))
    store = open_store(db)
    _check_together(resume, max_turns or max_tool_calls, allowlist_path, agent, plan_only)
    if resume:
        run_id, suite_obj, targets, reps = load_run_plan(store, resume)
        _check_resumed_target(run_id, targets, base_url=base_url, model=model,
                              name=target_name, config_file=config_file)
        if store.has_work_items(run_id):
            _resume_planned(store, run_id, suite_obj, targets, as_json)
        elif is_sequential(store, run_id):
            _play_sequential(store, run_id, suite_obj, targets, resume=True, as_json=as_json)
        else:
            _play(store, run_id, suite_obj, targets, reps, resume=True, as_json=as_json)
        return
    if config_file:
        cfg = load_run_config(config_file)
        targets = list(cfg.targets)
        suite = suite or (Path(cfg.suite) if cfg.suite else None)
        repeats = repeats or cfg.repeats
        label = label or cfg.label
        if concurrency:
            targets = [_replace(t, concurrency=concurrency) for t in targets]
        if knobs.get("stream_parity"):
            targets = [_replace(t, stream_parity=True) for t in targets]
    else:
        if not base_url or not model:
            raise ConfigError("give --base-url and --model, or --config FILE, or --resume RUN",
                              field="run")
        targets = [_target_from_options(target_name or model, base_url, model,
                                        concurrency or 4, knobs)]
    from agent_eval.scenario.select import load_selected_suite

    policy = None
    if allowlist_path:
        policy = {"allowlist": str(Path(allowlist_path).resolve()), "agent": agent}
    suite_obj = load_selected_suite(suite, allowlist=policy["allowlist"] if policy else None,
                                    agent=agent, **selection, turns=max_turns,
                                    tool_calls=max_tool_calls)
    if sequential is not None:
        from agent_eval.analysis.gate_stored import pin_baseline

        sequential = pin_baseline(store, sequential)
        repeats = sequential.next_repeats()
    run_id = _start(store, suite_obj, targets, repeats or 1, label, _console(stderr=as_json),
                    policy=policy, sequential=sequential)
    if plan_only:
        _plan(store, run_id, suite_obj, targets, repeats or 1, as_json)
        return
    if sequential is not None:
        _play_sequential(store, run_id, suite_obj, targets, as_json=as_json)
        return
    _play(store, run_id, suite_obj, targets, repeats or 1, as_json=as_json)


def _check_resumed_target(run_id: int, targets, *, base_url, model, name, config_file) -> None:
    """``--resume`` plays the targets the run was planned with: a --base-url, --model,
    --name or --config that says otherwise is refused (naming what the run has), never
    ignored; one that repeats the stored target is fine."""
    given = {"--base-url": base_url, "--model": model, "--name": name}
    if config_file is None and all(v is None for v in given.values()):
        return
    stored = targets[0] if len(targets) == 1 else None
    if config_file is None and stored is not None and all(
            v is None or v == have for v, have in
            zip(given.values(), (stored.base_url, stored.model, stored.name), strict=True)):
        return
    has = "; ".join(f"{t.name!r}: model {t.model!r} at {t.base_url}" for t in targets)
    what = "--config" if config_file is not None else "/".join(
        k for k, v in given.items() if v is not None)
    raise ConfigError(
        f"run {run_id} plays its target{'s' if len(targets) > 1 else ''} {has}; --resume "
        f"cannot change them: start a new run with the new target (agent-eval run "
        f"--base-url URL --model NAME), or resume without {what}", field=what)


def _start(store, suite_obj, targets, repeats, label, console: Console, policy=None,
           sequential=None) -> int:
    """Probe the targets' servers (said at once: a busy server may take minutes to answer
    ``/v1/models``) and record the run (with ``sequential``, its sequential plan)."""
    from agent_eval.live.run import record_new_run

    console.print(checking_line(targets), markup=False, highlight=False, soft_wrap=True)
    return record_new_run(store, suite_obj, targets, repeats, label=label, policy=policy,
                          sequential=None if sequential is None else sequential.stored())


DEFAULT_LOOK_EVERY = 2


def _sequential_options(until_decided, max_repeats, look_every, repeats, resume, checks):
    """``--until-decided``'s plan (``metrics.sequential.SequentialPlan``), or None; each
    option that needs another, or contradicts one, is one ConfigError naming both."""
    from agent_eval.analysis.gate_stored import interval_checks
    from agent_eval.metrics.sequential import SequentialPlan

    given = [flag for flag, value in (("--max-repeats", max_repeats),
                                      ("--look-every", look_every),
                                      ("--max-error-rate", checks[0]),
                                      ("--max-class", checks[1] or None),
                                      ("--baseline", checks[2]),
                                      ("--max-regression", checks[3])) if value is not None]
    if resume and (until_decided or given):
        raise ConfigError("--resume continues the run's own sequence, with the checks, cap "
                          "and batch it started with; resume without "
                          f"{'--until-decided' if until_decided else given[0]}",
                          field="--resume")
    if not until_decided:
        if given:
            raise ConfigError(f"{given[0]} is an option of --until-decided (a run that stops "
                              "once the gate's checks are decided); add --until-decided, or "
                              "give it to `agent-eval gate`", field=given[0])
        return None
    parsed = interval_checks(*checks)
    if not parsed.any():
        raise ConfigError("--until-decided needs the checks to decide: --max-error-rate, "
                          "--max-class or --baseline (with --max-regression), as `agent-eval "
                          "gate` takes them", field="--until-decided")
    if repeats is not None:
        raise ConfigError("--until-decided plays batches of --look-every repeats up to "
                          "--max-repeats: give --max-repeats N instead of --repeats",
                          field="--repeats")
    if max_repeats is None:
        raise ConfigError("--until-decided needs --max-repeats N, the most repeats per "
                          "scenario it may play (`agent-eval power --baseline RUN --detect X` "
                          "plans a fixed size; a cap about 10% above it)",
                          field="--max-repeats")
    look_every = look_every or min(DEFAULT_LOOK_EVERY, max_repeats)
    if look_every > max_repeats:
        raise ConfigError(f"--look-every {look_every} is more than --max-repeats "
                          f"{max_repeats}: there would be one look only; give --look-every "
                          f"at most {max_repeats}", field="--look-every")
    return SequentialPlan(max_repeats, look_every, parsed.stored())


def is_sequential(store, run_id: int) -> bool:
    """Whether the run was started with ``--until-decided``."""
    from agent_eval.metrics.sequential import SequentialPlan

    return SequentialPlan.from_config(store.get_run(run_id).config) is not None


def checking_line(targets) -> str:
    """``Checking 2 servers… (URL, URL)``: the first line a run prints."""
    urls = list(dict.fromkeys(t.base_url for t in targets))
    return (f"Checking {len(urls)} server{'s' if len(urls) != 1 else ''}… "
            f"({', '.join(escape_terminal(u) for u in urls)})")


def _resume_planned(store, run_id, suite_obj, targets, as_json) -> None:
    """Finish a run planned for workers as one more worker on this machine would: its
    work items are claimed and marked done, so workers that join later find nothing left
    and nothing is played twice."""
    from agent_eval.cli.workers import play_worker_share

    left = store.work_progress(run_id)
    _console(stderr=as_json).print(
        f"Resuming run {run_id} (planned for workers): {left.planned - left.done} of "
        f"{left.planned} sessions left; playing them here as one more worker.")
    tally = play_worker_share(store, run_id, suite_obj, targets,
                              concurrency=max(t.concurrency for t in targets), err=as_json)
    from agent_eval.cli.tables import print_tables

    tables = _run_tables(store, run_id)
    if as_json:
        _print_json(tables, store.url, tables.status, tally.stored)
    else:
        print_tables(tables, _console())
    if tally.stopped:  # may quote the server: outside text
        click.echo(f"Error: {escape_terminal(tally.stopped)}", err=True)
        sys.exit(EXIT_FAULT)
    if tally.server_gone:
        click.echo(f"Error: the server of target {tally.server_gone!r} stopped answering; "
                   f"finish later with: agent-eval run --resume {run_id}", err=True)
        sys.exit(EXIT_FAULT)


def _plan(store, run_id, suite_obj, targets, repeats, as_json) -> None:
    """Store the run's work items; print how to start workers."""
    from agent_eval.live.workers import plan_work

    planned = plan_work(store, run_id, suite_obj, targets, repeats)
    if as_json:
        import json

        click.echo(json.dumps({"run": run_id, "planned": planned, "store": store.url}))
        return
    batch = (" (its first batch: the worker that completes a batch takes its look and "
             "stores the next)" if is_sequential(store, run_id) else "")
    click.echo(f"Run {run_id} planned: {planned} sessions stored as work items in "
               f"{store.url}{batch}.\nStart workers (any number, any machines) with: "
               f"agent-eval worker {run_id} --db URL")


def _play(store, run_id, suite_obj, targets, repeats, *, resume: bool = False,
          as_json: bool = False) -> None:
    """Play the run with a progress bar, then print the two tables (or, with ``as_json``,
    the progress on stderr and one JSON object on stdout)."""
    from agent_eval.cli.progress import run_progress
    from agent_eval.live.run import RunTally, play_run

    console = _console(stderr=as_json)
    tally = RunTally()
    bar = run_progress(console, run_id, tally)

    def on_start(n: int) -> None:
        if resume:
            console.print(f"Resuming run {run_id}: {counted(n, 'session')} left.")
            if n:
                console.print(checking_line(targets), markup=False, highlight=False,
                              soft_wrap=True)
        bar.start(n)

    try:
        play_run(store, run_id, suite_obj, targets, repeats, resume=resume, tally=tally,
                 on_start=on_start, on_session=bar.update)
    except KeyboardInterrupt:
        bar.stop()
        console.print(f"[yellow]Interrupted.[/] {counted(tally.done, 'session')} kept; "
                      f"finish with: agent-eval run --resume {run_id}")
        sys.exit(130)
    finally:
        bar.stop()
    _closing(store, run_id, tally, console, as_json, played=True)
    console.print(finished_line(run_id, tally, store.url), markup=False, highlight=False)


def _closing(store, run_id: int, tally, console: Console, as_json: bool, *,
             played: bool) -> None:
    """The tables (or the JSON), the warnings, and an exit 3 for a run that measured
    nothing or was left unplayed.  The JSON's status is the play's when ``played``
    (``interrupted`` with sessions left, else ``finished``), else the run's as stored."""
    from agent_eval.cli.tables import print_tables

    left = tally.left
    tables = _run_tables(store, run_id)
    if as_json:
        status = ("interrupted" if left else "finished") if played else tables.status
        _print_json(tables, store.url, status, tally.done)
    else:
        print_tables(tables, console)
    _report_context_full(tally)
    _report_truncated(tally)
    _report_server_faults(tally)
    if _report_unmeasured(tally, console):
        console.print(f"Run {run_id} stored in {store.url}; after the fix, finish it with: "
                      f"agent-eval run --resume {run_id}" if left else
                      f"Run {run_id} stored in {store.url}.", markup=False)
        sys.exit(EXIT_FAULT)
    if left:
        console.print(f"[red]{counted(left, 'session')} not played: the model server stopped "
                      f"answering.[/] Finish later with: agent-eval run --resume {run_id}")
        sys.exit(EXIT_FAULT)


def _play_sequential(store, run_id, suite_obj, targets, *, resume: bool = False,
                     as_json: bool = False) -> None:
    """Play a ``--until-decided`` run (``live/sequential.py``): each batch with a progress
    bar, one line per look, then the tables and how the sequence ended."""
    from agent_eval.analysis.gate_stored import IntervalChecks, judge_run
    from agent_eval.cli.progress import run_progress
    from agent_eval.live.run import RunTally, play_run
    from agent_eval.live.sequential import play_until_decided
    from agent_eval.metrics.sequential import SequentialPlan

    console = _console(stderr=as_json)
    stored = SequentialPlan.from_config(store.get_run(run_id).config)
    if stored is None:
        raise ConfigError(f"run {run_id} was not started with --until-decided", field="--resume")
    checks, cap = IntervalChecks.from_stored(stored.checks), stored.max_repeats
    total = RunTally()
    started: list[int] = []  # the batches played so far by this process

    def play_batch(repeats: int) -> bool:
        tally = RunTally()
        bar = run_progress(console, run_id, tally)

        def on_start(n: int) -> None:
            if n:
                what = f"Resuming run {run_id}" if resume and not started else f"Run {run_id}"
                console.print(f"{what}: playing up to {counted(repeats, 'repeat')} per scenario "
                              f"(at most {cap}): {counted(n, 'session')}.",
                              markup=False, highlight=False)
                if resume and not started:
                    console.print(checking_line(targets), markup=False, highlight=False,
                                  soft_wrap=True)
            bar.start(n)

        try:
            play_run(store, run_id, suite_obj, targets, repeats, resume=resume or bool(started),
                     tally=tally, on_start=on_start, on_session=bar.update, batch=True)
        finally:
            bar.stop()
            started.append(repeats)
            _add_tally(total, tally)
        return not tally.left and not any(t.stopped for t in tally.targets.values())

    def judge(alpha: float):
        return judge_run(store, store.get_run(run_id), checks, alpha=alpha, look=True).result

    def on_look(report) -> None:
        console.print(look_line(report), markup=False, highlight=False, soft_wrap=True)

    try:
        plan = play_until_decided(store, run_id, play_batch, judge, on_look)
    except KeyboardInterrupt:
        _left_between_batches(store, run_id)
        console.print(f"[yellow]Interrupted.[/] {counted(total.done, 'session')} kept; "
                      f"continue the sequence with: agent-eval run --resume {run_id}")
        sys.exit(130)
    except AgentEvalError:  # a server down when a batch starts: resumable as any other
        _left_between_batches(store, run_id)
        raise
    if plan.stopped is not None:
        from agent_eval.runs import RunWriter

        RunWriter(store, run_id).set_status("finished")
    _closing(store, run_id, total, console, as_json, played=False)
    console.print(sequence_end_line(run_id, plan, checks), markup=False, highlight=False,
                  soft_wrap=True)


def _check_together(resume, limits, allowlist_path, agent, plan_only) -> None:
    """The options that cannot go together: --resume keeps the limits, the allow-list
    and the plan the run started with; --agent needs --allowlist."""
    if resume and limits:
        raise ConfigError("--resume keeps the limits the run started with",
                          field="--max-turns/--max-tool-calls")
    if resume and (allowlist_path or agent):
        raise ConfigError("--resume judges under the allow-list the run started with",
                          field="--allowlist")
    if agent and not allowlist_path:
        raise ConfigError("--agent picks an agent of --allowlist CONFIG; give both",
                          field="--agent")
    if resume and plan_only:
        raise ConfigError("--plan-only plans a new run; workers finish a planned one "
                          "(agent-eval worker RUN)", field="--plan-only")


def _left_between_batches(store, run_id: int) -> None:
    """A sequence stopped between batches (no recorder said so) is ``interrupted``:
    ``--resume`` continues it."""
    if store.get_run(run_id).status == "running":
        from agent_eval.runs import RunWriter

        RunWriter(store, run_id).set_status("interrupted")


def look_line(report) -> str:
    """One line per look: its repeats and level, the checks decided, those not."""
    from agent_eval.metrics.sequential import level_text

    result, look, plan = report.result, report.look, report.plan
    decided = [c for c in result.checks if c.status in ("pass", "fail")]
    open_ = result.inconclusive

    def named(c) -> str:
        seen = "" if c.observed is None else f" ({c.observed:.2f})"
        return f"{c.target}: {c.name}{seen}"

    parts = [f"Look {report.number}: {look.repeats} of at most {plan.max_repeats} repeats, "
             f"intervals at {level_text(1 - look.nominal_alpha)}"]
    if decided:
        parts.append("decided " + ", ".join(f"{named(c)} {c.status.upper()}" for c in decided))
    if open_:
        parts.append("undecided " + ", ".join(named(c) for c in open_))
    how = {"decided": "stopping: decided",
           "cap": "stopping: the cap is reached"}.get(plan.stopped or "", "going on")
    return escape_terminal("; ".join(parts) + f"; {how}.")


def sequence_end_line(run_id: int, plan, checks) -> str:
    """How the sequence ended, honestly, and the gate line that reads it."""
    gate = f"agent-eval gate --run {run_id} {checks.options()}"
    last = plan.looks[-1] if plan.looks else None
    if plan.stopped == "decided" and last is not None:
        return (f"Run {run_id} decided after {counted(len(plan.looks), 'look')}, "
                f"{counted(last.repeats, 'repeat')} of at most {plan.max_repeats}; the verdict "
                f"and exit code: {gate}")
    if plan.stopped == "cap" and last is not None:
        return (f"Run {run_id} reached its cap of {plan.max_repeats} repeats with "
                f"{counted(last.undecided, 'check')} still undecided: the gate will say "
                "INCONCLUSIVE (exit 4). The rise or rate is too close to its limit for this "
                "cap; a larger --max-repeats (agent-eval power plans one) or a wider margin "
                f"would decide it. {gate}")
    return (f"Run {run_id} is not decided yet; continue the sequence with: "
            f"agent-eval run --resume {run_id}")


def _add_tally(total, tally) -> None:
    """Fold one batch's tally into the run's: counts add, the first reasons stay."""
    import dataclasses

    total.planned += tally.planned
    total.done += tally.done
    total.stored += tally.stored
    for name, t in tally.targets.items():
        into = total.targets.setdefault(name, type(t)())
        for f in dataclasses.fields(t):
            mine, theirs = getattr(into, f.name), getattr(t, f.name)
            if isinstance(theirs, bool):
                setattr(into, f.name, mine or theirs)
            elif isinstance(theirs, int):
                setattr(into, f.name, mine + theirs)
            elif isinstance(theirs, str) and mine is None:
                setattr(into, f.name, theirs)


def finished_line(run_id: int, tally, url: str) -> str:
    """The closing line, counting stored sessions as the table's rows do (a research
    stage's spawned children included, and said apart)."""
    spawned = tally.stored - tally.done
    how = f" ({tally.done} played as planned, {spawned} spawned by them)" if spawned else ""
    return f"Run {run_id} finished: {counted(tally.stored, 'session')} stored{how} in {url}."


def _run_tables(store, run_id: int):
    """The closing tables' figures of the run, read in one library call."""
    from agent_eval.analysis.run_tables import run_tables

    return run_tables(store, [run_id])


def _print_json(tables, url: str, status: str | None, stored: int) -> None:
    """``{run, status, sessions_stored, store, targets}``, and for a ``--until-decided``
    run ``sequential``: its cap, batch, checks, looks and how it stopped."""
    import json

    from agent_eval.cli.tables import tables_json

    out = {"run": tables.run_ids[0], "status": status, "sessions_stored": stored,
           "store": url,
           "targets": tables_json(tables.summaries, tables.clustered, tables.classes)}
    if tables.sequential is not None:
        out["sequential"] = tables.sequential
    click.echo(json.dumps(out, indent=2))


def _report_context_full(tally) -> None:
    """One line per target whose sessions the server's context window cut short: they
    are stored ``stalled`` (a limit, not a fault), and the fix is the operator's."""
    for name, t in tally.targets.items():
        if t.context_full:
            click.echo(f"Note: target {name!r}: {t.context_full} session"
                       f"{'s' if t.context_full > 1 else ''} ended stalled when the "
                       "server's context window was full (`show` quotes the server); to let "
                       "them go on, start the server with a longer context (llama.cpp -c, "
                       "vLLM --max-model-len) or lower --max-tokens.", err=True)


def _report_truncated(tally) -> None:
    """One warning per target whose replies the token limit cut inside a tool call: those
    sessions are stored ``error`` (a truncation, not the model's malformed arguments) and
    left out of every rate, so a limit set too low quietly shrinks the sample."""
    for name, t in tally.targets.items():
        if t.truncated:
            total = t.sessions + t.error_sessions
            click.echo(escape_terminal(
                f"Warning: target {name!r}: {t.truncated} of {total} sessions ended when a "
                "reply was cut by the token limit inside a tool call (finish reason length, "
                "or the completion tokens at max_tokens); they are counted apart as "
                "truncations (AE501), not as the model's malformed "
                "arguments (AE102), and left out of every rate. Raise the target's "
                "max_tokens (--max-tokens)."), err=True)


def _report_server_faults(tally) -> None:
    """One warning per target that lost sessions to server faults (``error`` sessions
    other than truncations): they are left out of every rate, so a dying server quietly
    shrinks the sample; ``gate`` fails a target that judged too few (--min-coverage)."""
    for name, t in tally.targets.items():
        faults = t.error_sessions - t.truncated
        if faults > 0 and t.calls > 0:  # none measured: _report_unmeasured says so, louder
            total = t.sessions + t.error_sessions
            click.echo(escape_terminal(
                f"Warning: target {name!r}: {faults} of {total} sessions ended in a server "
                f"fault (the first: {t.first_error}); they are left out of every rate, and "
                "`agent-eval gate` fails a target that judged fewer than 90% of its planned "
                "sessions (--min-coverage). Resume or rerun once the server is healthy."),
                err=True)


def _report_unmeasured(tally, console: Console) -> bool:
    """One line per target that measured nothing (stopped on a request the server refuses,
    or no tool call judged at all); True when there was one: the run must not exit 0."""
    lines = []
    for name, t in tally.targets.items():
        if t.stopped:
            lines.append(f"Error: {t.stopped}")
        elif t.calls == 0 and (t.sessions or t.error_sessions):
            why = (f"{t.error_sessions} of {t.sessions + t.error_sessions} sessions ended in "
                   f"error; the first: {t.first_error}" if t.error_sessions else
                   f"the model answered in text in all {t.sessions} sessions. Check the "
                   "server's tool-call parser and the target's tool_choice (docs/servers.md)")
            lines.append(f"Error: target {name!r} produced no judged tool call, so nothing was "
                         f"measured: {why}.")
    for line in lines:  # they quote the server's errors: outside text
        click.echo(escape_terminal(line), err=True)
    return bool(lines)


def _target_from_options(name, base_url, model, concurrency, knobs):
    from agent_eval.live.client import Sampling, Target

    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"{base_url!r} is not a URL; give one such as "
                          "http://127.0.0.1:8000/v1", field="--base-url")

    sampling = Sampling(
        temperature=knobs.get("temperature"), top_p=knobs.get("top_p"),
        top_k=knobs.get("top_k"), min_p=knobs.get("min_p"),
        presence_penalty=knobs.get("presence_penalty"),
        repetition_penalty=knobs.get("repetition_penalty"),
    )
    ctk = None
    if knobs.get("enable_thinking") is not None:
        ctk = {"enable_thinking": knobs["enable_thinking"]}
    return Target(
        name=name, base_url=base_url, model=model, api_key_env=knobs.get("api_key_env"),
        sampling=sampling, chat_template_kwargs=ctk, max_tokens=knobs.get("max_tokens"),
        stream=knobs.get("stream", False), timeout_s=knobs.get("timeout_s", 120.0),
        concurrency=concurrency, deadline_s=knobs.get("deadline_s", DEFAULT_DEADLINE_S),
        max_reply_bytes=knobs.get("max_reply_bytes", DEFAULT_MAX_REPLY_BYTES),
        tool_choice=_tool_choice(knobs.get("tool_choice") or "auto"),
        stream_parity=bool(knobs.get("stream_parity")),
    )


def _tool_choice(value: str) -> str:
    from pydantic import TypeAdapter, ValidationError

    from agent_eval.live.targets import ToolChoiceSetting

    try:
        return TypeAdapter(ToolChoiceSetting).validate_python(value)
    except ValidationError as exc:
        raise ConfigError(exc.errors()[0]["msg"].removeprefix("Value error, "),
                          field="--tool-choice") from None


def _replace(target, **changes):
    import dataclasses

    return dataclasses.replace(target, **changes)


def _console(stderr: bool = False) -> Console:
    from agent_eval.cli.terminal import table_console

    return table_console(120, stderr=stderr)


@main.command()
@click.option("--repeats", type=click.IntRange(1), default=3, show_default=True,
              help="Sessions per scenario and profile.")
@click.option("--profiles", default=None, help="Comma-separated profiles [default: all].")
@click.option("--concurrency", type=click.IntRange(1), default=8, show_default=True)
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write the HTML report under reports/.")
@click.option("--stacks", default=None, metavar="FAMILY,...",
              help="Also serve each profile through these server families' stacks "
                   "(vllm, llamacpp, sglang, ollama): the same model errors beside each "
                   "stack's faults (AE5xx).")
@selection_options
@json_option("the two tables as one JSON object on stdout, progress on stderr")
@db_option
def demo(repeats, profiles, concurrency, report, stacks, as_json, db, **selection) -> None:
    """Run the bundled suite against every simulated behaviour profile; no GPU, no model.

    Example:

    \b
        agent-eval demo
        agent-eval demo --profiles piper --repeats 1 --tag lights --no-report
        agent-eval demo --profiles disciplined --stacks vllm,llamacpp

    With --stacks, each profile is also a target `PROFILE+FAMILY` served through that
    family's stack faults (10% of replies, max_tokens 4096), beside the profile alone.
    Starts the built-in simulator on a free loopback port, plays scenarios/ralf against
    each profile, stores everything in SQLite (agent_eval.db, or --db), prints the
    per-model failure-class table and the path of the HTML report.
    """
    from agent_eval.live.client import Target
    from agent_eval.scenario import load_suite
    from agent_eval.sim import PROFILES, Faults, get_profile, run_sim_in_thread
    from agent_eval.sim.stack import check_stack
    from agent_eval.store import open_store

    names = [p.strip() for p in profiles.split(",")] if profiles else list(PROFILES)
    for name in names:
        get_profile(name)
    families = [check_stack(f.strip()) for f in (stacks or "").split(",") if f.strip()]
    bundled = _bundled_suite()
    suite_obj = _select(load_suite(bundled), selection)
    store = open_store(db)
    faults = Faults(stack_rate=0.1) if families else None
    with run_sim_in_thread(profile=names[0], suite=bundled, faults=faults) as base_url:
        targets = [
            Target(name=name, base_url=base_url, model=name, concurrency=concurrency,
                   timeout_s=30.0)
            for name in names
        ] + [
            Target(name=f"{name}+{family}", base_url=base_url, model=f"{name}+{family}",
                   concurrency=concurrency, timeout_s=30.0, max_tokens=4096)
            for name in names for family in families
        ]
        run_id = _start(store, suite_obj, targets, repeats, "demo", _console(stderr=as_json))
        _play(store, run_id, suite_obj, targets, repeats, as_json=as_json)
    console = _console(stderr=as_json)
    if report:
        from agent_eval.report import write_report

        path = write_report(store, [run_id], Path(os.environ.get("AGENT_EVAL_REPORTS", "reports")))
        console.print(f"HTML report: {path}", markup=False)
    for line in next_steps(db):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def next_steps(db: str | None) -> list[str]:
    """What to open after the demo: the viewer, the failed sessions, one session."""
    import shlex

    where = f" --db {shlex.quote(db)}" if db else ""
    return ["Next:",
            f"  agent-eval view{where}: browse the run at http://127.0.0.1:8700/",
            f"  agent-eval sessions latest --failed{where}: the sessions that went wrong",
            f"  agent-eval show ID{where}: one session turn by turn (an id from sessions)"]
