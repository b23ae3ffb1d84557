"""The gate over a stored run: one library call from thresholds to a verdict.

``agent-eval gate`` parses its options into :class:`GateThresholds` and calls
:func:`gate_stored_run`, which reads the run (and its baseline: :func:`pick_baselines`)
from the store, judges it (``analysis.gate.evaluate_gate``), names where to look and adds
the leak and stack-fault checks; the CLI prints the :class:`StoredGate` it returns (text,
Markdown, JUnit or :meth:`StoredGate.json`) and exits by its outcome.  ``run
--until-decided`` and the workers take each look with :func:`judge_run`, the same
judgement on the interval checks only.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_eval.analysis.gate import (
    MARGIN_ZERO,
    WORST_SESSIONS,
    GateCheck,
    GateResult,
    SessionLead,
    check_code,
    evaluate_gate,
    needs_leads,
    with_leads,
)
from agent_eval.errors import ConfigError
from agent_eval.metrics import PRECEDENCE
from agent_eval.metrics.clustered import Unit, units_by_target
from agent_eval.metrics.coverage import Coverage
from agent_eval.metrics.sequential import SequentialPlan
from agent_eval.metrics.stats import ALPHA
from agent_eval.metrics.sufficient import TargetStats
from agent_eval.metrics.summary import GroupSummary
from agent_eval.policy import find_rule, get_rule, near_rules
from agent_eval.store import RunInfo, SessionFilter, Store


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

    def stored(self) -> dict[str, Any]:
        return {"max_error_rate": self.max_error_rate, "max_class": dict(self.max_class),
                "baseline": self.baseline_ref, "max_regression": self.max_regression}

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> IntervalChecks:
        return cls(stored.get("max_error_rate"), dict(stored.get("max_class") or {}),
                   stored.get("baseline"), stored.get("max_regression"))

    def options(self) -> str:
        """The checks as ``gate`` options, e.g. ``--max-error-rate 8 --baseline 3``."""
        parts = [] if self.max_error_rate is None else [f"--max-error-rate {self.max_error_rate:g}"]
        parts += [f"--max-class {code}={limit:g}" for code, limit in self.max_class.items()]
        if self.baseline_ref is not None:
            parts.append(f"--baseline {shlex.quote(str(self.baseline_ref))}")
        if self.max_regression is not None:
            parts.append(f"--max-regression {self.max_regression:g}")
        return " ".join(parts)


def interval_checks(max_error_rate: float | None, max_class: tuple[str, ...] | list[str],
                    baseline_ref: str | None, max_regression: float | None) -> IntervalChecks:
    """The checks from ``gate``'s (or ``run``'s) options, checked: a bad ``--max-class``,
    a margin of 0 or a ``--max-regression`` without ``--baseline`` is a ConfigError."""
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


def parse_max_class(values: tuple[str, ...]) -> dict[str, float]:
    """``("AE301=3", "ae304=1.5")`` -> ``{"AE301": 3.0, "AE304": 1.5}``; a bad form, an
    unknown code or a session-level code (AE4xx, never a call's class) is a ConfigError
    naming the value."""
    parsed: dict[str, float] = {}
    for value in values:
        code, sep, number = value.partition("=")
        named = find_rule(code)  # a code in any case, or a rule name
        code = named.code if named is not None else code.strip().upper()
        try:
            limit: float | None = float(number)
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


@dataclass(frozen=True)
class GateThresholds:
    """``agent-eval gate``'s options as given (checked by :func:`gate_stored_run`)."""

    max_error_rate: float | None = None
    max_class: tuple[str, ...] = ()
    baseline_ref: str | None = None
    max_regression: float | None = None
    min_handshake: float | None = None
    max_leaks: int | None = None
    max_stack_faults: float | None = None
    allow_missing_baseline: bool = False
    allow_incomplete: bool = False
    min_coverage: float = 0.9
    on_inconclusive: Literal["pass", "fail"] | None = None
    view_url: str | None = None

    def __post_init__(self) -> None:
        check_thresholds(self)  # a bad option is refused before any store is opened


@dataclass
class BaselinePick:
    """The baseline of each target: ``by_target`` the run it is compared with, ``runs``
    those runs newest first, and their figures for the picked targets only."""

    runs: list[RunInfo] = field(default_factory=list)
    by_target: dict[str, RunInfo] = field(default_factory=dict)
    summaries: dict[str, GroupSummary] = field(default_factory=dict)
    units: dict[str, TargetStats] = field(default_factory=dict)

    def describe(self, ref: str) -> str:
        """``baseline run 3 (nightly)``, or per target when they differ."""
        if len(self.runs) == 1:
            info = self.runs[0]
            return f"baseline run {info.id}" + (f" ({info.label})" if info.label else "")
        per = ", ".join(f"{t} -> run {info.id}" for t, info in self.by_target.items())
        return f"baseline {ref} per target: {per}"


def pick_baselines(store: Store, ref: str, current_id: int, targets: list[str],
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


def pin_baseline(store: Store, plan: SequentialPlan) -> SequentialPlan:
    """A sequential run's plan with a ``latest`` (or id) baseline pinned to the run it
    names now (later looks would name the run itself); a ``label:NAME`` stays a label,
    picked per target at each look (:func:`pick_baselines`), and is refused before
    playing when no run has it."""
    ref = plan.checks.get("baseline")
    if ref is None:
        return plan
    if ref.startswith("label:") and ref[len("label:"):]:
        if not store.list_runs(1, label=ref[len("label:"):]):
            raise ConfigError(f"--baseline {ref}: no run has that label, so the regression "
                              "check could never be decided; give a label or run id that "
                              "exists (agent-eval runs)", field="--baseline")
        return plan
    info = store.resolve_run(ref)
    return dataclasses.replace(plan, checks={**plan.checks, "baseline": str(info.id)})


def rates(store: Store, run_id: int) -> dict[str, GroupSummary]:
    """Per-target summaries of one run with only the figures the gate judges (error,
    class and handshake rates: ``store.summarize``'s ``detail="rates"``, no replies)."""
    return store.summarize([run_id], "target", with_turns=False, detail="rates")


def run_units(store: Store, run_id: int) -> dict[str, list[Unit]]:
    """Per-target session units of one run: the clusters of the clustered intervals and
    the paired regression check (``agent_eval.metrics.clustered``), from per-session
    GROUP BYs rather than every call row."""
    return units_by_target(store.session_units([run_id]))


@dataclass
class Judged:
    """A run judged (:func:`judge_run`): the result and what it was judged from."""

    result: GateResult
    current: dict[str, GroupSummary]
    baseline: dict[str, GroupSummary] | None
    pick: BaselinePick | None
    note: str | None
    coverage: dict[str, Coverage] | None
    sequential: SequentialPlan | None = None  # for a run --until-decided run


def judge_run(store: Store, run: RunInfo, checks: IntervalChecks, *,
              min_handshake: float | None = None, allow_missing_baseline: bool = False,
              allow_incomplete: bool = False,
              on_inconclusive: Literal["pass", "fail"] | None = None,
              min_coverage: float = 0.9, alpha: float | None = None,
              look: bool = False) -> Judged:
    """``gate``'s judgement of a stored run, for ``gate`` and for each look of ``run
    --until-decided``.  A sequential run's intervals are read at the nominal alpha of its
    last look (``metrics.sequential``), so the gate agrees with the run's stop; ``alpha``
    gives it instead (a look being taken).  A ``look`` judges only the interval checks,
    on a run still being played: not its status, declared targets or coverage."""
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


def sequential_alpha(plan: SequentialPlan, config: dict[str, Any]) -> float:
    """The nominal alpha a sequential run's intervals are read at: its last look's, or,
    for a run stopped within a batch (its repeats past the last look), that of one more
    look at the repeats it planned."""
    planned = config.get("repeats")
    last = plan.looks[-1] if plan.looks else None
    if last is not None and (not isinstance(planned, int) or planned <= last.repeats):
        return float(last.nominal_alpha)
    return float(plan.boundary_at(planned if isinstance(planned, int)
                                  else plan.next_repeats()).nominal_alpha)


def worst_sessions(store: Store, run_id: int, checks: list[GateCheck]
                   ) -> dict[int, list[SessionLead]]:
    """For each check that failed or was undecided on a target's sessions (by index), its
    worst sessions (``analysis.gate.SessionLead``): the most denials (of the check's
    class, for a class check), the sessions lost, for coverage, or those that did not
    complete the handshake."""
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


@dataclass(frozen=True)
class StoredGate:
    """A stored run gated (:func:`gate_stored_run`): what ``gate`` prints, writes and
    exits by.  ``result`` has every check with its leads; ``title`` names the run, its
    baseline and, for a sequential run, its looks."""

    run: RunInfo
    result: GateResult
    title: str
    judged: Judged

    def json(self) -> str:
        """``gate --json``'s document (:func:`gate_json`)."""
        return gate_json(self.result, self.run.id, self.judged.pick, self.judged.note,
                         self.judged.coverage, self.judged.sequential)


def check_thresholds(thresholds: GateThresholds) -> IntervalChecks:
    """The interval checks of ``thresholds``, after refusing a gate with no threshold or
    a negative stack-fault limit (ConfigError)."""
    t = thresholds
    checks = interval_checks(t.max_error_rate, t.max_class, t.baseline_ref, t.max_regression)
    if not checks.any() and t.min_handshake is None and t.max_leaks is None \
            and t.max_stack_faults is None:
        raise ConfigError("give at least one threshold: --max-error-rate, --max-class, "
                          "--min-handshake, --baseline, --max-leaks or --max-stack-faults",
                          field="gate")
    if t.max_stack_faults is not None and not t.max_stack_faults >= 0:
        raise ConfigError(f"--max-stack-faults must be 0 or more, not {t.max_stack_faults:g}",
                          field="--max-stack-faults")
    return checks


def gate_stored_run(store: Store, run_ref: str | int, thresholds: GateThresholds
                    ) -> StoredGate:
    """``agent-eval gate``: the run ``run_ref`` names judged against ``thresholds``, each
    failed or undecided check with its leads, the leak and stack-fault checks added.
    A bad threshold or run is a ConfigError."""
    from agent_eval.analysis.leaks import with_leak_checks
    from agent_eval.analysis.stack_faults import with_stack_fault_checks, with_stack_rises

    t = thresholds
    checks = check_thresholds(t)
    run = store.resolve_run(run_ref)
    judged = judge_run(store, run, checks, min_handshake=t.min_handshake,
                       allow_missing_baseline=t.allow_missing_baseline,
                       allow_incomplete=t.allow_incomplete, on_inconclusive=t.on_inconclusive,
                       min_coverage=t.min_coverage)
    result = with_leads(judged.result, run.id, worst_sessions(store, run.id,
                                                              judged.result.checks),
                        judged.current, judged.baseline, t.view_url)
    if judged.current:
        result = with_leak_checks(result, judged.current, t.max_leaks)
        result = with_stack_fault_checks(result, judged.current, t.max_stack_faults)
        if judged.baseline:  # a nightly whose stack faults rose says so first
            result = with_stack_rises(result, judged.current, judged.baseline,
                                      stack_changes_by_target(run, judged.pick))
    title = f"Run {run.id}" + (f" ({run.label})" if run.label else "")
    if judged.pick is not None:
        title += f" against {judged.pick.describe(str(t.baseline_ref))}"
    if judged.sequential is not None:
        title += "\n" + judged.sequential.describe()
    return StoredGate(run, result, title, judged)


def stack_changes_by_target(run: RunInfo, pick: BaselinePick | None
                            ) -> dict[str, list[str]]:
    """How each target's serving stack differs between its baseline run and ``run`` (the
    runs' fingerprints; ``transcript.stack_changes``)."""
    from agent_eval.transcript import run_stacks, stack_changes, target_stack

    mine = run_stacks(run.fingerprint)
    return {t: stack_changes(target_stack(run_stacks(info.fingerprint), t),
                             target_stack(mine, t))
            for t, info in (pick.by_target if pick else {}).items()}


def gate_json(result: GateResult, run_id: int, pick: BaselinePick | None, note: str | None,
              coverage: dict[str, Coverage] | None = None,
              sequential: SequentialPlan | None = None) -> str:
    """``{passed, outcome, run, stack_rose, baseline, baselines, note, coverage: {TARGET: {planned,
    played, judged, lost: {CAUSE: n}}}, checks: [{name, target, kind, threshold,
    observed, status, detail, method, p, leads}]}`` (``p``: a regression check's
    one-sided p; ``leads``: where to look, for a failed or undecided check; ``planned`` null when the run holds no plan); ``outcome`` is pass, fail or
    inconclusive (after --on-inconclusive); ``baseline`` is the newest baseline run and
    ``baselines`` the run each target was compared with; ``method`` names the interval or
    test a check used; ``stack_rose`` the lines said first, one per target whose stack
    faults rose over the baseline."""
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
