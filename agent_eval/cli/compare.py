"""``agent-eval compare``: two stored runs side by side, with intervals and significance."""

from __future__ import annotations

from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option
from agent_eval.errors import ConfigError


@main.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="[RUN_B]", required=False)
@click.option("--targets", "targets", metavar="A,B",
              help="Compare two targets of one run (RUN_A): B against A, paired over the "
                   "scenarios both played.")
@click.option("--by", type=click.Choice(["target", "all", "agent"]), default="target",
              show_default=True,
              help="Match targets by name across the runs, pool each run whole, or match "
                   "the agents whose CLI rules judged the sessions (docs/policies.md).")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write the comparison as Markdown.")
@click.option("--explain", is_flag=True,
              help="Print every method in full before the tables (one line without it).")
@json_option("the whole comparison as JSON (every rate, interval and p-value)")
@db_option
def compare(run_a, run_b, targets, by, markdown_path, explain, as_json, db) -> None:
    """Compare run B against run A: what changed, is it real, which scenarios flipped.

    Example:

    \b
        agent-eval compare label:nightly latest
        agent-eval compare 1 2 --by all --markdown compare.md
        agent-eval compare 1 2 --json
        agent-eval compare 7 --targets qwen3.5-27b,qwen3.6-35b

    Opens with the verdict per target (errors/100 in A and B, the one session-level
    verdict on it, handshake, flips) and the method in one line; --explain prints the
    methods in full.  Runs that share no target name are refused (exit 2) with the
    targets each run has, unless one is `agent-eval replay` of the other.

    RUN_A and RUN_B are ids, `latest` or `label:NAME`.  With --targets A,B and one run,
    compares target B of that run against its target A (two models of one targets file),
    with every figure below, paired over the scenarios both played.  For each target in both runs
    (matched by name; --by all pools each run) prints errors per 100 calls in A and B,
    the difference B − A with its 95% interval, the two-proportion z-test p-value and
    Fisher's exact p (per call, detail: "significant" on errors/100 is the session-level
    verdict named in the cell, on a class its Holm-adjusted p); the same per failure class,
    for handshake completion and for the share of denials followed by each next action
    (pivot, retry-denied, repeat, abandon); then the scenarios whose outcome (every
    repeat passed) flipped.  Under each table, the session-level analysis: errors/100
    with its clustered interval (sessions as clusters), and, when the runs share
    scenarios, the paired comparison over the shared mix (per-scenario differences
    weighted by pooled calls, t interval, permutation p; pass rate per scenario and exact
    McNemar on scenario pairs); that paired line gives the verdict on errors/100.  When
    the mixes differ the comparison is restricted to the shared scenarios and says so;
    when the overlap is too small (under 3 scenarios or half of either run's calls) it
    calls no paired difference; then, when the sessions carry tags, it compares the
    runs post-stratified to their shared tag mix (each tag set's rate re-weighted to
    the pooled mix, session-clustered interval).  Runs with neither
    fall back to the independent test, sessions as clusters.  When one
    run is `agent-eval rescore` of the other, also the exact count of calls whose class
    moved (e.g. `AE301 -> allowed: 12 calls`).  When one run is `agent-eval replay` of
    the other, also the paired table (each reply against the original call it answers:
    both allowed, fixed, broken, both denied, per class, exact McNemar) and the calls
    that moved.  --by agent lines up the agents whose agent CLI rules judged the
    sessions (errors per agent; no session-level analysis or flips, which are per target
    and scenario).  Sessions that ended in a server fault are left out.  Exit codes: 0 done, 2 bad run or option.
    """
    from agent_eval.analysis.compare_stored import compare_stored
    from agent_eval.store import open_store

    pair = None
    if targets is not None:
        if run_b is not None:
            raise ConfigError("--targets compares two targets of ONE run: give RUN_A only",
                              field="--targets")
        pair = _target_pair(targets)
    elif run_b is None:
        raise ConfigError("give RUN_B, or --targets A,B to compare two targets of RUN_A",
                          field="RUN_B")
    with open_store(db, create=False) as store:
        compared = compare_stored(store, run_a, run_b, targets=pair, by=by)
    if as_json:
        click.echo(compared.json())
    else:
        from agent_eval.cli.terminal import escape_terminal, text_width

        click.echo(escape_terminal(compared.text(width=text_width(), explain=explain)),
                   nl=False)
    if markdown_path is not None:
        try:
            markdown_path.write_text(compared.markdown(), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the Markdown file: {exc.strerror}",
                              path=str(markdown_path), field="--markdown") from None


def _target_pair(targets: str) -> tuple[str, str]:
    """``--targets A,B`` as ``(A, B)``: two different names, else a ConfigError."""
    names = [t.strip() for t in targets.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise ConfigError(f"{targets!r} is not two different target names A,B",
                          field="--targets")
    return names[0], names[1]


def __getattr__(name: str) -> object:
    """``side_units`` lives in ``analysis.compare_stored``; read here for older callers
    without importing the store when the CLI starts."""
    if name == "side_units":
        from agent_eval.analysis.compare_stored import side_units

        return side_units
    raise AttributeError(name)
