"""``agent-eval compare``: two stored runs side by side, with intervals and significance."""

from __future__ import annotations

import dataclasses
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
    from agent_eval.analysis.comparison import compare_runs, rescore_moves
    from agent_eval.metrics.repeats import repeats_from_outcomes
    from agent_eval.store import open_store

    if targets is not None:
        if run_b is not None:
            raise ConfigError("--targets compares two targets of ONE run: give RUN_A only",
                              field="--targets")
        return _compare_targets(run_a, targets, markdown_path, as_json, db, explain)
    if run_b is None:
        raise ConfigError("give RUN_B, or --targets A,B to compare two targets of RUN_A",
                          field="RUN_B")
    with open_store(db, create=False) as store:
        info_a, info_b = store.resolve_run(run_a), store.resolve_run(run_b)
        summaries, units = [], []
        for info in (info_a, info_b):
            ids = [info.id]
            summaries.append(store.summarize(ids, by, with_turns=False, detail="actions"))
            units.append(side_units(store, info.id, by) if by != "agent" else {})
        flippable = flip_candidates(*units)  # the P/F of each repeat, for these only
        repeats = [repeats_from_outcomes(store.session_outcomes([info.id], flippable))
                   if by != "agent" else {} for info in (info_a, info_b)]
        paired = _replay_pairs(store, info_a, info_b)
        moved = None
        if _is_rescore_pair(info_a, info_b):
            a, b = [info_a.id], [info_b.id]
            moved = rescore_moves(store.session_rows(a), store.call_rows(a),
                                  store.session_rows(b), store.call_rows(b))
    result = compare_runs(summaries[0], summaries[1], repeats[0], repeats[1],
                          label_a=_label(info_a), label_b=_label(info_b), by=by)
    if by == "target":  # each target's serving stack, from the runs' fingerprints
        from agent_eval.transcript import run_stacks, stack_changes, target_stack

        stacks_a, stacks_b = run_stacks(info_a.fingerprint), run_stacks(info_b.fingerprint)
        result = dataclasses.replace(result, stack_changes={
            name: stack_changes(target_stack(stacks_a, name), target_stack(stacks_b, name))
            for name in result.groups})
    if moved is not None:
        result = dataclasses.replace(result, rescore=moved)
    if not result.groups and by != "all" and paired is None:  # a replay pairs its turns
        raise ConfigError(no_common_line(result, by), field="RUN_A/RUN_B")
    if by != "agent":
        result = with_unit_analysis(result, *units)
    _emit(result, paired, markdown_path, as_json, explain)


def no_common_line(result, by: str) -> str:
    """Two runs with no target (agent) in common: which each has, and what to do."""
    what = "agent" if by == "agent" else "target"

    def has(names) -> str:
        return ", ".join(map(repr, names)) or "none"

    return (f"{result.label_a} and {result.label_b} share no {what}: {result.label_a} has "
            f"{has(result.only_a)}, {result.label_b} has {has(result.only_b)}; compare each "
            "run whole with --by all, or two targets of one run with RUN --targets A,B")


def _emit(result, paired, markdown_path, as_json, explain: bool = False) -> None:
    from agent_eval.analysis.comparison import (
        render_comparison_markdown,
        render_comparison_text,
    )

    if as_json:
        import json

        data = jsonable(result)
        for name, analysis in result.units.items():  # the one verdict on errors/100
            called = analysis.called
            data["units"][name]["verdict"] = None if called is None else {
                "method": called[0], "significant": called[1]}
        click.echo(json.dumps(data | _replay_json(paired), indent=2))
    else:
        from agent_eval.cli.terminal import escape_terminal, text_width

        click.echo(escape_terminal(render_comparison_text(result, width=text_width(),
                                                          explain=explain)
                                   + _replay_text(paired)), nl=False)
    if markdown_path is not None:
        try:
            markdown_path.write_text(render_comparison_markdown(result)
                                     + _replay_text(paired, markdown=True), encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the Markdown file: {exc.strerror}",
                              path=str(markdown_path), field="--markdown") from None


def _compare_targets(run_ref, targets, markdown_path, as_json, db, explain=False) -> None:
    """``compare RUN --targets A,B``: target B of one run against its target A, each
    renamed to one group ``A -> B`` so the comparison pairs them scenario by scenario."""
    from agent_eval.analysis.comparison import compare_runs
    from agent_eval.metrics.repeats import repeats_from_outcomes
    from agent_eval.store import open_store

    names = [t.strip() for t in targets.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise ConfigError(f"{targets!r} is not two different target names A,B",
                          field="--targets")
    a, b = names
    group = f"{a} -> {b}"
    with open_store(db, create=False) as store:
        info = store.resolve_run(run_ref)
        summaries = store.summarize([info.id], "target", with_turns=False, detail="actions")
        missing = [n for n in names if n not in summaries]
        if missing:
            raise ConfigError(f"run {info.id} has no sessions of {', '.join(map(repr, missing))}"
                              f"; it holds {', '.join(summaries) or 'none'}", field="--targets")
        units = side_units(store, info.id, "target")
        sides = [{group: units[a]}, {group: units[b]}]
        flippable = flip_candidates(*sides)
        outcomes = repeats_from_outcomes(store.session_outcomes([info.id], flippable))
    repeats = [{(group, scenario): r for (target, scenario), r in outcomes.items()
                if target == name} for name in names]
    label = _label(info)
    result = compare_runs({group: summaries[a]}, {group: summaries[b]}, *repeats,
                          label_a=f"{a} in {label}", label_b=f"{b} in {label}")
    result = with_unit_analysis(result, *sides)
    _emit(result, None, markdown_path, as_json, explain)


def jsonable(value):
    """Dataclasses, dicts (tuple keys joined as ``"a -> b"``), lists: plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {(" -> ".join(map(str, k)) if isinstance(k, tuple) else str(k)): jsonable(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def side_units(store, run_id: int, by: str):
    """One run's sums of session clusters and outcomes (``metrics.sufficient.TargetStats``)
    grouped as ``compare`` groups them (target, or ``all``), by GROUP BY per (target,
    scenario)."""
    return store.cluster_stats([run_id], by=by, passes=True, classes=True)


def flip_candidates(units_a, units_b) -> set[str]:
    """The scenarios whose outcome (every repeat passed) differs between the runs in some
    group both hold: the only ones ``compare`` prints repeat by repeat."""
    return {scenario for name in units_a.keys() & units_b.keys()
            for scenario, a in units_a[name].scenarios.items()
            if (b := units_b[name].scenarios.get(scenario)) is not None
            and a.passes is not None and b.passes is not None and a.passes.n and b.passes.n
            and a.passes.all_passed != b.passes.all_passed}


def with_unit_analysis(result, units_a, units_b):
    """Add the clustered, paired and independent session-level analysis per group, and
    call its classes on their Rao–Scott-corrected p (``analysis.comparison.with_units``)."""
    from agent_eval.analysis.comparison import with_units

    return with_units(result, units_a, units_b)


def _is_rescore_pair(info_a, info_b) -> bool:
    """One run re-judges the other's calls: the same calls on both sides."""
    return (info_b.kind == "rescore" and info_b.parent_run_id == info_a.id) or (
        info_a.kind == "rescore" and info_a.parent_run_id == info_b.id
    )


def _replay_pairs(store, info_a, info_b):
    """When one run is ``agent-eval replay`` of the other: each reply paired with the
    original turn it answers (analysis/paired_replay.py); else None."""
    from agent_eval.analysis.paired_replay import load_replay_pairs

    return load_replay_pairs(store, info_a, info_b)


def _replay_text(paired, *, markdown: bool = False) -> str:
    if paired is None:
        return ""
    from agent_eval.analysis.paired_replay import render_paired_markdown, render_paired_text

    return render_paired_markdown(paired) if markdown else render_paired_text(paired)


def _replay_json(paired) -> dict:
    if paired is None:
        return {}
    return {"replay": jsonable(paired) | {"moved": jsonable(paired.moved)}}


def _label(info) -> str:
    return f"run {info.id}" + (f" ({info.label})" if info.label else "")
