"""``agent-eval gate``: pass or fail a stored run against thresholds, for CI."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from agent_eval.cli import EXIT_FAIL, EXIT_INCONCLUSIVE, main
from agent_eval.cli.options import check_options, db_option, json_option
from agent_eval.errors import ConfigError


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
    from agent_eval.analysis.gate import with_leads
    from agent_eval.analysis.gate_render import (
        render_gate_junit,
        render_gate_markdown,
        render_gate_text,
    )
    from agent_eval.store import open_store

    checks = interval_checks(max_error_rate, max_class, baseline_ref, max_regression)
    if not checks.any() and min_handshake is None and max_leaks is None \
            and max_stack_faults is None:
        raise ConfigError("give at least one threshold: --max-error-rate, --max-class, "
                          "--min-handshake, --baseline, --max-leaks or --max-stack-faults",
                          field="gate")
    if max_stack_faults is not None and not max_stack_faults >= 0:
        raise ConfigError(f"--max-stack-faults must be 0 or more, not {max_stack_faults:g}",
                          field="--max-stack-faults")
    with open_store(db, create=False) as store:
        run = store.resolve_run(run_ref)
        judged = judge_run(store, run, checks, min_handshake=min_handshake,
                           allow_missing_baseline=allow_missing_baseline,
                           allow_incomplete=allow_incomplete, on_inconclusive=on_inconclusive,
                           min_coverage=min_coverage)
        result, current, baseline, pick, note, coverage = (
            judged.result, judged.current, judged.baseline, judged.pick, judged.note,
            judged.coverage)
        result = with_leads(result, run.id, worst_sessions(store, run.id, result.checks),
                            current, baseline, view_url)
    if current:
        from agent_eval.analysis.leaks import with_leak_checks

        result = with_leak_checks(result, current, max_leaks)
        from agent_eval.analysis.stack_faults import with_stack_fault_checks

        result = with_stack_fault_checks(result, current, max_stack_faults)
        if baseline:  # a nightly whose stack faults rose says so first
            from agent_eval.analysis.stack_faults import with_stack_rises
            from agent_eval.transcript import run_stacks, stack_changes, target_stack

            mine = run_stacks(run.fingerprint)
            changes = {t: stack_changes(target_stack(run_stacks(info.fingerprint), t),
                                        target_stack(mine, t))
                       for t, info in (pick.by_target if pick else {}).items()}
            result = with_stack_rises(result, current, baseline, changes)
    title = f"Run {run.id}" + (f" ({run.label})" if run.label else "")
    if pick is not None:
        title += f" against {pick.describe(baseline_ref)}"
    if judged.sequential is not None:
        title += "\n" + judged.sequential.describe()
    if as_json:
        click.echo(gate_json(result, run.id, pick, note, coverage, judged.sequential))
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


def gate_json(result, run_id: int, pick: BaselinePick | None, note: str | None,
              coverage: dict | None = None, sequential=None) -> str:
    """``{passed, outcome, run, stack_rose, baseline, baselines, note, coverage: {TARGET: {planned,
    played, judged, lost: {CAUSE: n}}}, checks: [{name, target, kind, threshold,
    observed, status, detail, method, p, leads}]}`` (``p``: a regression check's
    one-sided p; ``leads``: where to look, for a failed or undecided check; ``planned`` null when the run holds no plan); ``outcome`` is pass, fail or
    inconclusive (after --on-inconclusive); ``baseline`` is the newest baseline run and
    ``baselines`` the run each target was compared with; ``method`` names the interval or
    test a check used; ``stack_rose`` the lines said first, one per target whose stack
    faults rose over the baseline."""
    import json

    checks = [{"name": c.name, "target": c.target, "kind": c.kind, "threshold": c.threshold,
               "observed": c.observed, "status": c.status, "detail": c.detail, "method": c.method,
               "p": c.p_value, "leads": list(c.leads)}
              for c in result.checks]
    baselines = {} if pick is None else {t: info.id for t, info in pick.by_target.items()}
    covered = {name: {"planned": c.planned, "played": c.played, "judged": c.judged,
                      "lost": dict(c.lost)} for name, c in (coverage or {}).items()}
    return json.dumps({"passed": result.passed, "outcome": result.outcome, "run": run_id,
                       "stack_rose": list(result.leading),
                       "baseline": pick.runs[0].id if pick else None, "baselines": baselines,
                       "note": note, "coverage": covered,
                       "sequential": None if sequential is None else sequential.stored(),
                       "checks": checks}, indent=2)


@dataclass(frozen=True)
class IntervalChecks:
    """The gate's interval checks (``cli.options.check_options``), as ``gate`` judges
    them and ``run --until-decided`` plays until they are decided; stored on a sequential
    run (:meth:`stored`) so that a resumed run and its workers judge the same."""

    max_error_rate: float | None = None
    max_class: dict[str, float] = field(default_factory=dict)
    baseline_ref: str | None = None
    max_regression: float | None = None

    def any(self) -> bool:
        return (self.max_error_rate is not None or bool(self.max_class)
                or self.baseline_ref is not None)

    def stored(self) -> dict:
        return {"max_error_rate": self.max_error_rate, "max_class": dict(self.max_class),
                "baseline": self.baseline_ref, "max_regression": self.max_regression}

    @classmethod
    def from_stored(cls, stored: dict) -> IntervalChecks:
        return cls(stored.get("max_error_rate"), dict(stored.get("max_class") or {}),
                   stored.get("baseline"), stored.get("max_regression"))

    def options(self) -> str:
        """The checks as ``gate`` options, e.g. ``--max-error-rate 8 --baseline 3``."""
        import shlex

        parts = [] if self.max_error_rate is None else [f"--max-error-rate {self.max_error_rate:g}"]
        parts += [f"--max-class {code}={limit:g}" for code, limit in self.max_class.items()]
        if self.baseline_ref is not None:
            parts.append(f"--baseline {shlex.quote(str(self.baseline_ref))}")
        if self.max_regression is not None:
            parts.append(f"--max-regression {self.max_regression:g}")
        return " ".join(parts)


def interval_checks(max_error_rate, max_class, baseline_ref, max_regression) -> IntervalChecks:
    """The checks from ``gate``'s (or ``run``'s) options, checked: a bad ``--max-class``,
    a margin of 0 or a ``--max-regression`` without ``--baseline`` is a ConfigError."""
    from agent_eval.analysis.gate import MARGIN_ZERO

    classes = parse_max_class(tuple(max_class))
    if max_regression is not None and max_regression == 0:
        raise ConfigError(MARGIN_ZERO)
    if max_regression is not None and baseline_ref is None:
        raise ConfigError("--max-regression needs --baseline RUN or label:NAME",
                          field="--max-regression")
    if max_error_rate is not None and max_error_rate < 0:
        raise ConfigError(f"--max-error-rate must be 0 or more, not {max_error_rate:g}",
                          field="--max-error-rate")
    if max_regression is not None and max_regression < 0:
        raise ConfigError(f"--max-regression must be above 0, not {max_regression:g}",
                          field="--max-regression")
    return IntervalChecks(max_error_rate, classes, baseline_ref, max_regression)


@dataclass
class Judged:
    """A run judged (:func:`judge_run`): the result and what it was judged from."""

    result: Any
    current: dict
    baseline: dict | None
    pick: BaselinePick | None
    note: str | None
    coverage: dict | None
    sequential: Any = None  # the run's SequentialPlan, for a run --until-decided run


def judge_run(store, run, checks: IntervalChecks, *, min_handshake=None,
              allow_missing_baseline: bool = False, allow_incomplete: bool = False,
              on_inconclusive=None, min_coverage: float = 0.9, alpha: float | None = None,
              look: bool = False) -> Judged:
    """``gate``'s judgement of a stored run, for ``gate`` and for each look of ``run
    --until-decided``.  A sequential run's intervals are read at the nominal alpha of its
    last look (``metrics.sequential``), so the gate agrees with the run's stop; ``alpha``
    gives it instead (a look being taken).  A ``look`` judges only the interval checks,
    on a run still being played: not its status, declared targets or coverage."""
    from agent_eval.analysis.gate import evaluate_gate
    from agent_eval.metrics.sequential import SequentialPlan
    from agent_eval.metrics.stats import ALPHA

    sequential = SequentialPlan.from_config(run.config)
    if alpha is None:
        alpha = ALPHA if sequential is None else sequential_alpha(sequential, run.config)
    current = rates(store, run.id)
    declared = [] if look else [t.name for t in store.run_targets(run.id)]
    coverage = None if look else store.session_coverage(run.id)
    units = store.cluster_stats([run.id], classes=bool(checks.max_class))
    pick, note = None, None
    if checks.baseline_ref:
        pick = pick_baselines(store, checks.baseline_ref, run.id, list(current))
        if not pick.runs:
            note = (f"baseline {checks.baseline_ref}: no run other than run {run.id} has that "
                    "label; regression checks not judged")
            pick = None
    baseline = pick.summaries if pick else None
    try:
        result = evaluate_gate(
            current, max_error_rate=checks.max_error_rate, max_class=checks.max_class,
            min_handshake=min_handshake, baseline=baseline,
            max_regression=checks.max_regression if baseline is not None else None,
            units=units, baseline_units=pick.units if pick else None, missing_baseline=note,
            allow_missing_baseline=allow_missing_baseline,
            run_status=None if look else run.status, declared_targets=declared,
            allow_incomplete=allow_incomplete, on_inconclusive=on_inconclusive,
            coverage=coverage, min_coverage=min_coverage, alpha=alpha)
    except ValueError as exc:
        raise ConfigError(str(exc), field="gate") from None
    return Judged(result, current, baseline, pick, note, coverage, sequential)


def sequential_alpha(plan, config: dict) -> float:
    """The nominal alpha a sequential run's intervals are read at: its last look's, or,
    for a run stopped within a batch (its repeats past the last look), that of one more
    look at the repeats it planned."""
    planned = config.get("repeats")
    last = plan.looks[-1] if plan.looks else None
    if last is not None and (not isinstance(planned, int) or planned <= last.repeats):
        return last.nominal_alpha
    return plan.boundary_at(planned if isinstance(planned, int) else plan.next_repeats()
                            ).nominal_alpha


def worst_sessions(store, run_id: int, checks) -> dict:
    """For each check that failed or was undecided on a target's sessions (by index), its
    worst sessions (``analysis.gate.SessionLead``): the most denials (of the check's
    class, for a class check), the sessions lost, for coverage, or those that did not
    complete the handshake."""
    from agent_eval.analysis.gate import WORST_SESSIONS, SessionLead, check_code, needs_leads
    from agent_eval.store import SessionFilter

    out = {}
    for i, check in enumerate(checks):
        if not needs_leads(check):
            continue
        lost, handshake = check.kind == "coverage", check.kind == "handshake"
        f = SessionFilter(run_id=run_id, target=check.target, code=check_code(check),
                          status="error" if lost else None, handshake=handshake)
        sort = "id" if lost else "handshake" if handshake else "denials"
        rows = store.list_sessions(f, sort=sort, limit=WORST_SESSIONS).rows
        if handshake:
            out[i] = [SessionLead(r.id, r.scenario, r.repeat, r.calls, r.denials, r.status,
                                  f"handshake {r.handshake_done} of {r.handshake_required} "
                                  "steps, not completed")
                      for r in rows if not r.handshake_completed]
        else:
            out[i] = [SessionLead(r.id, r.scenario, r.repeat, r.calls, r.denials, r.status)
                      for r in rows if r.parent_id is None and (lost or r.denials)]
    return out


def parse_max_class(values: tuple[str, ...]) -> dict[str, float]:
    """``("AE301=3", "ae304=1.5")`` -> ``{"AE301": 3.0, "AE304": 1.5}``; a bad form, an
    unknown code or a session-level code (AE4xx, never a call's class) is a ConfigError
    naming the value."""
    from agent_eval.metrics import PRECEDENCE
    from agent_eval.policy import find_rule, get_rule, near_rules

    parsed: dict[str, float] = {}
    for value in values:
        code, sep, number = value.partition("=")
        named = find_rule(code)  # a code in any case, or a rule name
        code = named.code if named is not None else code.strip().upper()
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
                   else "not a rule code or name: " + (
                       f"did you mean {' or '.join(near_rules(code))}? "
                       if near_rules(code) else "") + "`agent-eval rules` lists them")
            raise ConfigError(f"{value!r}: {code} is {why}", field="--max-class")
        parsed[code] = limit
    return parsed


@dataclass
class BaselinePick:
    """The baseline of each target: ``by_target`` the run it is compared with, ``runs``
    those runs newest first, and their figures for the picked targets only."""

    runs: list = field(default_factory=list)
    by_target: dict = field(default_factory=dict)
    summaries: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)

    def describe(self, ref: str) -> str:
        """``baseline run 3 (nightly)``, or per target when they differ."""
        if len(self.runs) == 1:
            info = self.runs[0]
            return f"baseline run {info.id}" + (f" ({info.label})" if info.label else "")
        per = ", ".join(f"{t} -> run {info.id}" for t, info in self.by_target.items())
        return f"baseline {ref} per target: {per}"


def pick_baselines(store, ref: str, current_id: int, targets: list[str],
                   *, search: int = 200) -> BaselinePick:
    """Each target's baseline.  An id or ``latest`` is one run for every target (as
    ``resolve_run`` reads it); ``label:NAME`` is, per target, the newest run with that
    label, other than the current run, that holds that target, so a label whose newest
    run measured another model still gives each target its own last measurement (the
    ``search`` newest runs of the label are looked at).  ``runs`` is empty when no run
    of the label is there to compare with."""
    if not ref.startswith("label:") or not ref[len("label:"):]:
        candidates = [store.resolve_run(ref)]  # a bare "label:" gets the store's error
    else:
        candidates = [info for info in store.list_runs(search, label=ref[len("label:"):])
                      if info.id != current_id]
    pick = BaselinePick()
    for info in candidates:
        missing = [t for t in targets if t not in pick.by_target]
        if pick.runs and not missing:
            break
        figures = rates(store, info.id)
        held = [t for t in missing if t in figures]
        if not held and pick.runs:
            continue
        pick.runs.append(info)
        stats = store.cluster_stats([info.id])
        for t in held:
            pick.by_target[t] = info
            pick.summaries[t] = figures[t]
            if t in stats:
                pick.units[t] = stats[t]
    pick.by_target = {t: pick.by_target[t] for t in targets if t in pick.by_target}
    return pick


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


def _write(path: Path, text: str | bytes, option: str) -> None:
    try:
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the {option[2:]} file: {exc.strerror}", path=str(path),
                          field=option) from None
