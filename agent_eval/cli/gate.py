"""``agent-eval gate``: pass or fail a stored run against thresholds, for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.cli import EXIT_FAIL, EXIT_INCONCLUSIVE, main
from agent_eval.cli.options import check_options, db_option, json_option
from agent_eval.errors import ConfigError


def __getattr__(name: str) -> object:
    """``sequential_alpha`` lives in ``analysis.gate_stored``; read here for older callers
    without importing the store when the CLI starts."""
    if name == "sequential_alpha":
        from agent_eval.analysis.gate_stored import sequential_alpha

        return sequential_alpha
    raise AttributeError(name)


@main.command()
@click.option("--run", "run_ref", default="latest", show_default=True, metavar="RUN",
              help="The run to judge: an id, `latest` or `label:NAME`.")
@check_options
@click.option("--min-handshake", type=float, metavar="X",
              help="Fail a target whose handshake completion share (0..1) is below X.")
@click.option("--max-leaks", type=click.IntRange(min=0), metavar="N",
              help="Fail a target with more than N leaked calls: allowed by an agent CLI's "
                   "rules, refused by their strict reading (docs/policies.md).")
@click.option("--max-stack-faults", type=float, metavar="X",
              help="Fail a target above X stack faults per 100 calls (point estimate): "
                   "what the serving stack lost or mangled, rules AE5xx, never in "
                   "errors/100.")
@click.option("--allow-missing-baseline", is_flag=True,
              help="Pass when the baseline, or a target's baseline, is not found (the first "
                   "run of a series) instead of failing.")
@click.option("--allow-incomplete", is_flag=True,
              help="Judge a run that is not finished, or has a target with no session, "
                   "instead of failing it (the status and targets are still named).")
@click.option("--min-coverage", type=click.FloatRange(0, 1), default=0.9, show_default=True,
              metavar="SHARE",
              help="Fail a target that judged fewer than this share of its planned sessions "
                   "(the rest lost to server faults, truncation or an interruption).")
@click.option("--on-inconclusive", type=click.Choice(["pass", "fail"]),
              help="Read a check whose interval straddles its limit as a pass or a fail "
                   "[default: its own exit code, 4].")
@click.option("--view-url", metavar="URL",
              help="The base URL of `agent-eval view` over this store (e.g. "
                   "http://127.0.0.1:8000): each failed or undecided check links its worst "
                   "sessions' pages too.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write the result as Markdown (e.g. for $GITHUB_STEP_SUMMARY).")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write the checks as JUnit XML (one test case per check).")
@json_option("the verdict and every check as JSON (exit codes unchanged)")
@db_option
def gate(run_ref, max_error_rate, max_class, baseline_ref, max_regression, min_handshake,
         max_leaks, max_stack_faults, allow_missing_baseline, allow_incomplete, min_coverage,
         on_inconclusive, view_url, markdown_path, junit_path, as_json, db) -> None:
    """Pass or fail a stored run against thresholds; exit 0 pass, 1 fail, 2 usage,
    4 inconclusive.

    Example:

    \b
        agent-eval gate --run latest --max-error-rate 8 --max-class AE301=3 \\
            --min-handshake 0.8 --baseline label:nightly --max-regression 2 \\
            --markdown gate.md --junit gate.xml
        agent-eval gate --run 12 --max-error-rate 8 --json

    Every threshold applies to each target of the run, and every target must pass.
    Each limit is read as a non-inferiority margin: a check PASSes only when its 95%
    interval ends at or below the limit (a value above it ruled out), FAILs when the
    interval starts above it, and is otherwise INCONCLUSIVE (exit 4, or as
    --on-inconclusive pass|fail says); a point estimate under the limit decides nothing.
    --max-error-rate and --max-class use the clustered interval, sessions as clusters
    (calls of one session err together; docs/statistics.md): one session never passes.
    A run played with `run --until-decided` is read at its last look's nominal level
    (repeated confidence intervals, so the gate agrees with the run's stop), and the
    title says it was sequential and how many looks it took.
    --baseline compares each target with the baseline target of the same name (for
    `label:NAME`, the newest run of that label that holds the target) on the 95% interval
    of (run − baseline) against --max-regression, which must be above 0 (no sample rules
    out every rise); an undecided check names the repeats per scenario that would decide
    it (`agent-eval power` plans them).  The interval is paired over the scenarios both runs share when they share
    enough of their mix (else post-stratified to the shared tag mix when the sessions
    carry tags, else independent, sessions as clusters), and the check prints the
    smallest rise it could have detected with 80% power.  Each check's method is named
    under the checks (and in --json).
    Each failed or undecided check names where to look: the classes that rose (or the
    largest), and its worst sessions as ready `agent-eval show RUN SESSION` lines (with
    their pages when --view-url gives the viewer's address).
    A gate is never green by accident: a `label:NAME` baseline with no other run of that
    label (a typo, or the first nightly) fails, so does a target missing from the
    baseline, and so does a gate whose every check was skipped; --allow-missing-baseline
    turns those into skips that say so.  Nor by a partial run: a run that is running,
    interrupted or failed, and each target of the run that played no session, fail
    unless --allow-incomplete.  Sessions that ended in a server fault or a truncation
    are left out of every rate, so each target's coverage is a check of its own: sessions
    planned / played / judged / lost by cause, failing below --min-coverage (90%).  Prints each check with its numbers.
    --max-leaks N counts, per target, the calls judged under an agent CLI's rules that
    the CLI allowed and the strict reading of its rules refuses (a count, all classes
    together, each class named); more than N fails.  --max-stack-faults X bounds what
    the serving stack (parser, template, streaming, output cap) lost or mangled, per
    target, per 100 calls: never in errors/100, so a broken stack fails on its own line
    (`agent-eval rules`, AE5xx).  With --baseline, a target whose stack faults rose
    significantly over the baseline is said first, before any check (STACK FAULTS ROSE,
    the codes that rose and how the stacks differ): the model's figures after it are
    read knowing the stack lost calls.
    """
    from agent_eval.analysis.gate_render import (
        render_gate_junit,
        render_gate_markdown,
        render_gate_text,
    )
    from agent_eval.analysis.gate_stored import GateThresholds, gate_stored_run
    from agent_eval.store import open_store

    thresholds = GateThresholds(
        max_error_rate, tuple(max_class), baseline_ref, max_regression, min_handshake,
        max_leaks, max_stack_faults, allow_missing_baseline, allow_incomplete, min_coverage,
        on_inconclusive, view_url)
    with open_store(db, create=False) as store:
        gated = gate_stored_run(store, run_ref, thresholds)
    result, title = gated.result, gated.title
    if as_json:
        click.echo(gated.json())
    else:
        from agent_eval.cli.terminal import escape_terminal, text_width

        click.echo(escape_terminal(render_gate_text(result, title=title, width=text_width())),
                   nl=False)
    if markdown_path is not None:
        _write(markdown_path, render_gate_markdown(result, title=title), "--markdown")
    if junit_path is not None:
        _write(junit_path, render_gate_junit(result, title=title), "--junit")
    if result.outcome == "fail":
        sys.exit(EXIT_FAIL)
    if result.outcome == "inconclusive":
        sys.exit(EXIT_INCONCLUSIVE)


def _write(path: Path, text: str | bytes, option: str) -> None:
    try:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the {option[2:]} file: {exc.strerror}", path=str(path),
                          field=option) from None
