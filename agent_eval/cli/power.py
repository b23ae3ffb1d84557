"""``agent-eval power``: how many repeats a decision needs, from a baseline run."""

from __future__ import annotations

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option
from agent_eval.cli.terminal import escape_terminal
from agent_eval.errors import ConfigError


@main.command()
@click.option("--baseline", "baseline_ref", required=True, metavar="RUN",
              help="The run whose variance components plan the next: an id, `latest` or "
                   "`label:NAME`.")
@click.option("--detect", type=float, default=2.0, show_default=True, metavar="X",
              help="The margin: the rise in errors per 100 tool calls the gate allows "
                   "(its --max-regression).")
@click.option("--power", "power", type=float, default=0.8, show_default=True, metavar="P",
              help="Chance that an unchanged model passes the gate (0..1).")
@click.option("--target", metavar="NAME",
              help="Plan for this target only [default: every target of the run].")
@db_option
def power(baseline_ref, detect, power, target, db) -> None:
    """Plan a comparison: repeats per scenario and tool calls the gate needs to decide.

    Example:

        agent-eval power --baseline label:nightly --detect 2

    For each target of the baseline run prints the repeats (sessions per scenario) and
    the tool calls per run at which `agent-eval gate --baseline --max-regression X`
    passes an unchanged model with the given probability (--power): the upper end of the
    paired 95% interval of the rise must be at or below X, so a true rise of X passes at
    most 2.5% of the time at any size.  The gate's "about N repeats would decide it" is
    the same rule.  A baseline with no errors holds no variance to plan from: the plan
    says so, and how many calls a run with no error needs.  The plan uses the baseline's own
    session variance in each scenario (how much its sessions' error rates differ; the
    spread between scenarios cancels in the paired design), and pays for how uncertain
    that is: its power is averaged over a bootstrap-t of the variance, whose 80% range of
    the repeats needed it prints from a baseline of 3 repeats or more.  Also prints the
    smallest rise the baseline's own number of repeats detects, then the `agent-eval run`
    that carries the plan out
    (a live baseline's suite, server, model and sampling, with the repeats needed) and
    how long it should take, scaled from the baseline's own duration.  Method:
    docs/statistics.md.  Exit codes: 0 done,
    2 bad run or option.
    """
    from agent_eval.analysis.gate_stored import run_units
    from agent_eval.metrics.power import plan_lines, plan_power
    from agent_eval.store import open_store

    if not detect > 0:
        raise ConfigError(f"must be > 0 errors per 100 calls, got {detect:g}",
                          field="--detect")
    if not 0 < power < 1:
        raise ConfigError(f"must be a probability strictly between 0 and 1, got {power:g}",
                          field="--power")
    with open_store(db, create=False) as store:
        info = store.resolve_run(baseline_ref)
        units = run_units(store, info.id)
    if target is not None:
        if target not in units:
            raise ConfigError(f"target {target!r} is not in run {info.id}; it holds "
                              f"{', '.join(units) or 'no sessions'}", field="--target")
        units = {target: units[target]}
    if not units:
        raise ConfigError(f"run {info.id} holds no sessions with tool calls to plan from",
                          field="--baseline")
    from agent_eval.cli.terminal import text_width
    from agent_eval.linewrap import fit_lines

    width = text_width()
    label = f" ({escape_terminal(info.label, one_line=True)})" if info.label else ""
    click.echo(f"Baseline run {info.id}{label}")
    plans = {}
    for name, items in units.items():
        click.echo(f"== {escape_terminal(name, one_line=True)} ==")
        plans[name] = plan_power(items, detect, power=power)
        for line in fit_lines(plan_lines(plans[name]), width):
            click.echo(line)
    for line in next_run_lines(info, plans):  # the ready command stays one line, to copy
        shown = escape_terminal(line)
        for part in ([shown] if shown.startswith("Ready:") else fit_lines([shown], width)):
            click.echo(part)


SAMPLING_OPTIONS = {"temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
                    "min_p": "--min-p", "presence_penalty": "--presence-penalty",
                    "repetition_penalty": "--repetition-penalty"}


def next_run_lines(info, plans: dict) -> list[str]:
    """The ``run`` that carries the plan out, ready to paste (a live baseline's suite,
    server, model and sampling with the planned repeats), and how long it should take,
    scaled from the baseline's own duration."""
    import shlex

    needed = [p.repeats for p in plans.values() if p.repeats is not None]
    if not needed:
        return []
    repeats = max(needed)
    config = info.config or {}
    settings = [t for t in config.get("targets", []) if t.get("name") in plans]
    lines = []
    if info.kind == "live" and len(settings) == 1:
        t = settings[0]
        words = ["agent-eval", "run"]
        if config.get("suite"):
            words += ["--suite", config["suite"]]
        words += ["--base-url", t["base_url"], "--model", t["model"], "--name", t["name"]]
        for key, option in SAMPLING_OPTIONS.items():
            if t.get("sampling", {}).get(key) is not None:
                words += [option, str(t["sampling"][key])]
        if t.get("max_tokens"):
            words += ["--max-tokens", str(t["max_tokens"])]
        words += ["--repeats", str(repeats)]
        if info.label:
            words += ["--label", info.label]
        lines.append("Ready: " + shlex.join(words))
    else:
        lines.append(f"Ready: agent-eval run --config TARGETS.yaml --repeats {repeats} "
                     "(the baseline's targets file)")
    base = config.get("repeats")
    took = (info.finished_at - info.created_at).total_seconds() if info.finished_at else None
    if base and took and took > 0:
        lines.append(f"Estimated length: about {_duration(took * repeats / base)} "
                     f"(baseline run {info.id} took {_duration(took)} for {base} repeat(s), "
                     "scaled to the repeats, with the same targets, servers and concurrency)")
    return lines


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
