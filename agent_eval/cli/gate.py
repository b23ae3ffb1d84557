"""``agent-eval gate``: pass or fail a stored run against thresholds, for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.cli import EXIT_FAIL, main
from agent_eval.cli.db import db_option
from agent_eval.errors import ConfigError


@main.command()
@click.option("--run", "run_ref", default="latest", show_default=True, metavar="RUN",
              help="The run to judge: an id, `latest` or `label:NAME`.")
@click.option("--max-error-rate", type=float, metavar="X",
              help="Fail a target above X errors per 100 tool calls (point estimate).")
@click.option("--max-class", "max_class", multiple=True, metavar="CODE=X",
              help="Fail a target above X calls per 100 in failure class CODE; repeatable.")
@click.option("--min-handshake", type=float, metavar="X",
              help="Fail a target whose handshake completion share (0..1) is below X.")
@click.option("--baseline", "baseline_ref", metavar="RUN",
              help="Compare with this run: an id, `latest` or `label:NAME` (the newest run "
                   "with that label other than --run).")
@click.option("--max-regression", type=float, metavar="X",
              help="With --baseline: fail when errors/100 rose by more than X, judged on "
                   "the 95% interval [default 0].")
@click.option("--max-leaks", type=click.IntRange(min=0), metavar="N",
              help="Fail a target with more than N leaked calls: allowed by an agent CLI's "
                   "rules, refused by their strict reading (docs/policies.md).")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write the result as Markdown (e.g. for $GITHUB_STEP_SUMMARY).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the verdict and every check as JSON (exit codes unchanged).")
@db_option
def gate(run_ref, max_error_rate, max_class, min_handshake, baseline_ref, max_regression,
         max_leaks, markdown_path, as_json, db) -> None:
    """Pass or fail a stored run against thresholds; exit 0 pass, 1 fail, 2 usage.

    Example:

        agent-eval gate --run latest --max-error-rate 8 --max-class AE301=3 \\
            --min-handshake 0.8 --baseline label:nightly --max-regression 2 \\
            --markdown gate.md
        agent-eval gate --run 12 --max-error-rate 8 --json

    Every threshold applies to each target of the run, and every target must pass.
    --max-error-rate and --max-class compare the point estimate of errors per 100 tool
    calls (printed with the Wilson 95% interval and the clustered one, sessions as
    clusters, with its design effect: calls of one session err together, so the
    clustered interval is the one to trust; docs/statistics.md).  --baseline compares
    each target with the baseline target of the same name and fails only when the rise
    is supported by the sample: the low end of the 95% interval of (run − baseline) must
    exceed --max-regression, so a jump over a handful of calls does not fail a build on
    noise.  The interval is paired over the scenarios both runs share when they share
    enough of their mix (else post-stratified to the shared tag mix when the sessions
    carry tags, else independent, sessions as clusters), and the check prints the
    smallest rise it could have detected with 80% power.  Each check's method is named
    under the checks (and in --json).
    A target missing from the baseline, or a `label:NAME` baseline with no other run
    of that label yet (the first nightly), is skipped and says so.  Sessions that ended
    in a server fault are left out of every rate.  Prints each check with its numbers.
    --max-leaks N counts, per target, the calls judged under an agent CLI's rules that
    the CLI allowed and the strict reading of its rules refuses (a count, all classes
    together, each class named); more than N fails.
    """
    from agent_eval.analysis.gate import evaluate_gate, render_gate_markdown, render_gate_text
    from agent_eval.store import open_store

    classes = parse_max_class(max_class)
    if max_regression is not None and baseline_ref is None:
        raise ConfigError("--max-regression needs --baseline RUN or label:NAME",
                          field="--max-regression")
    if max_error_rate is None and not classes and min_handshake is None and not baseline_ref \
            and max_leaks is None:
        raise ConfigError("give at least one threshold: --max-error-rate, --max-class, "
                          "--min-handshake, --baseline or --max-leaks", field="gate")
    with open_store(db) as store:
        run = store.resolve_run(run_ref)
        baseline_run, note = None, None
        if baseline_ref:
            baseline_run = resolve_baseline(store, baseline_ref, run.id)
            if baseline_run is None:
                note = (f"baseline {baseline_ref}: no run other than run {run.id} has that "
                        "label yet; regression checks skipped")
        current = rates(store, run.id)
        baseline = rates(store, baseline_run.id) if baseline_run else None
        units = store.cluster_stats([run.id], classes=bool(classes))
        baseline_units = store.cluster_stats([baseline_run.id]) if baseline_run else None
    try:
        result = evaluate_gate(
            current, max_error_rate=max_error_rate, max_class=classes,
            min_handshake=min_handshake, baseline=baseline,
            max_regression=max_regression if baseline is not None else None,
            units=units, baseline_units=baseline_units,
        )
    except ValueError as exc:
        raise ConfigError(str(exc), field="gate") from None
    if current:
        from agent_eval.analysis.leaks import with_leak_checks

        result = with_leak_checks(result, current, max_leaks)
    title = f"Run {run.id}" + (f" ({run.label})" if run.label else "")
    if baseline_run is not None:
        title += f" against baseline run {baseline_run.id}" + (
            f" ({baseline_run.label})" if baseline_run.label else "")
    if note:
        title += f"\n{note}"
    if as_json:
        click.echo(gate_json(result, run.id, baseline_run.id if baseline_run else None, note))
    else:
        from agent_eval.cli.terminal import escape_terminal

        click.echo(escape_terminal(render_gate_text(result, title=title)), nl=False)
    if markdown_path is not None:
        _write(markdown_path, render_gate_markdown(result, title=title))
    if not result.passed:
        sys.exit(EXIT_FAIL)


def gate_json(result, run_id: int, baseline_id: int | None, note: str | None) -> str:
    """``{passed, run, baseline, note, checks: [{name, target, kind, threshold, observed,
    status, detail, method}]}``; ``method`` names the interval or test a check used."""
    import json

    checks = [{"name": c.name, "target": c.target, "kind": c.kind, "threshold": c.threshold,
               "observed": c.observed, "status": c.status, "detail": c.detail, "method": c.method}
              for c in result.checks]
    return json.dumps({"passed": result.passed, "run": run_id, "baseline": baseline_id,
                       "note": note, "checks": checks}, indent=2)


def parse_max_class(values: tuple[str, ...]) -> dict[str, float]:
    """``("AE301=3", "ae304=1.5")`` -> ``{"AE301": 3.0, "AE304": 1.5}``; a bad form, an
    unknown code or a session-level code (AE4xx, never a call's class) is a ConfigError
    naming the value."""
    from agent_eval.metrics import PRECEDENCE
    from agent_eval.policy import get_rule

    parsed: dict[str, float] = {}
    for value in values:
        code, sep, number = value.partition("=")
        code = code.strip().upper()
        try:
            limit = float(number)
        except ValueError:
            limit = None
        if not sep or not code or limit is None or limit < 0:
            raise ConfigError(f"{value!r} is not CODE=X with X >= 0 errors per 100 calls "
                              "(e.g. AE301=3)", field="--max-class")
        if code not in PRECEDENCE:
            known = get_rule(code)
            why = ("a session outcome, not a call's failure class" if known
                   else "not a rule code: see `agent-eval rules`")
            raise ConfigError(f"{value!r}: {code} is {why}", field="--max-class")
        parsed[code] = limit
    return parsed


def resolve_baseline(store, ref: str, current_id: int):
    """The baseline run: an id or ``latest`` as ``resolve_run`` reads them; for
    ``label:NAME`` the newest run with that label other than the current run, or None
    when there is none (the first nightly has nothing to compare with)."""
    if not ref.startswith("label:"):
        return store.resolve_run(ref)
    label = ref[len("label:"):]
    if not label:
        return store.resolve_run(ref)  # the store's error for a bare "label:"
    limit = 100
    while True:
        runs = store.list_runs(limit)
        for info in runs:
            if info.label == label and info.id != current_id:
                return info
        if len(runs) < limit:
            return None
        limit *= 10


def rates(store, run_id: int):
    """Per-target summaries of one run with only the figures the gate judges (error,
    class and handshake rates: ``store.summarize``'s ``detail="rates"``, no replies)."""
    return store.summarize([run_id], "target", with_turns=False, detail="rates")


def run_units(store, run_id: int):
    """Per-target session units of one run: the clusters of the clustered intervals and
    the paired regression check (``agent_eval.metrics.clustered``), from per-session
    GROUP BYs rather than every call row."""
    from agent_eval.metrics.clustered import units_by_target

    return units_by_target(store.session_units([run_id]))


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the Markdown file: {exc.strerror}", path=str(path),
                          field="--markdown") from None
