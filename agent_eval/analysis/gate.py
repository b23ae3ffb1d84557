"""The CI gate: does a run meet its thresholds?  Pure; the CLI reads the store and exits.

``evaluate_gate`` turns per-target summaries (``agent_eval.metrics.summarize``) and the
operator's thresholds into a :class:`GateResult`: one :class:`GateCheck` per target and
threshold, and ``passed`` only when every check of every target passed.

Every limit is read as a non-inferiority margin is read (FDA 2016 guidance on
non-inferiority trials; the go/no-go rules of Lalonde et al. 2007): the check **passes
only when the 95% interval's upper end is at or below the limit** (a value above it is
ruled out), **fails when the interval's lower end is above it** (a value within it is
ruled out), and is **inconclusive** otherwise (:func:`decide`).  A point estimate on the
right side of the limit decides nothing: a PASS certifies, at a one-sided 2.5%, that the
rate (or the rise) is within the limit.  The same words are in ``agent-eval gate --help``.

``max_error_rate``
    Errors per 100 tool calls, on the clustered interval (sessions as clusters) when
    session units are given (what the CLI passes), else Wilson's.  One session has no
    clustered interval: it can fail the limit, never pass it.
``max_class``
    The same, per primary failure class (``{"AE301": 3.0}``).  A class the target never
    hit counts as 0 of its calls.
``min_handshake``
    Share of sessions (0..1) that emitted the required handshake in order, ``>=`` passes
    (a point estimate: a share of sessions, not a rate the gate certifies).
    When no session of a target required a handshake the check is skipped, and says so.
``baseline`` + ``max_regression``
    The rise ``current − baseline`` in errors/100, against a margin ``max_regression``
    that must be above 0 (no sample rules out every rise: a margin of 0 could only fail
    or stay inconclusive, so it is refused; :data:`DEFAULT_MARGIN` when not given).
    Targets are matched by name.  With session units (what the CLI passes) the interval
    is paired over shared scenarios, or independent with sessions as clusters
    (``agent_eval.metrics.regression``, docs/statistics.md), and the check names it and
    the smallest rise it could have detected; with summaries alone, ``compare_rates``.
    A target absent from the baseline (or with no calls there) fails, and the check says
    so, unless ``allow_missing_baseline`` makes it a skip.  Fails are adjusted across
    targets by Holm (:func:`adjust_regressions`); passes need no adjustment, since the
    gate passes only when every check passes (an intersection–union test).

A target with no tool calls fails the error-rate and class checks: a run that made no
calls proves nothing, and a gate should not pass silently when the server died.  A gate
over no targets at all fails with a ``sessions`` check, one whose baseline was not found
with a ``baseline`` check, and one that judged nothing (every check skipped, or none
asked) with a ``judged`` check: a typo in a label must not keep a nightly green.
``allow_missing_baseline`` (the first nightly of a series) lets the last two pass.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_eval.metrics import GroupSummary, Rate, RateComparison, compare_rates
from agent_eval.metrics.clustered import Unit, t_quantile, units_rate, wilson_float
from agent_eval.metrics.coverage import MIN_COVERAGE, Coverage
from agent_eval.metrics.regression import ci_name, exceed_p, regression_from_units
from agent_eval.metrics.stats import ALPHA
from agent_eval.metrics.sufficient import TargetStats

Units = Mapping[str, Sequence[Unit] | TargetStats]
"""Per-target session units (``agent_eval.metrics.clustered.session_units``) or their sums
per scenario (``store.cluster_stats``, what the CLI passes)."""

CheckKind = Literal["run-status", "sessions", "coverage", "baseline", "judged", "error-rate",
                    "class-rate", "handshake", "regression", "leaks", "stack-faults"]
"""``run-status``: the run finished; ``sessions``: the run, or a target, has something
to judge; ``coverage``: a target judged at least ``min_coverage`` of its planned sessions;
``baseline``: the baseline asked for exists; ``judged``: at least one check was
judged; ``error-rate``: ``max_error_rate``;
``class-rate``: one ``max_class`` entry; ``handshake``: ``min_handshake``;
``regression``: ``baseline`` + ``max_regression``; ``leaks``: ``gate --max-leaks``
(``analysis.leaks``); ``stack-faults``: ``gate --max-stack-faults``
(``analysis.stack_faults``)."""

CheckStatus = Literal["pass", "fail", "inconclusive", "skip"]
"""``pass``: the interval's upper end is within the limit; ``fail``: its lower end is
beyond it; ``inconclusive``: the interval straddles the limit (or there is no interval),
so the sample can neither confirm nor rule out a value beyond it; ``skip``: the check
could not be judged (no handshake required, a missing baseline allowed); it never fails
the gate and its ``detail`` says why."""

DEFAULT_MARGIN = 2.0
"""The allowed rise in errors/100 when a baseline is given without ``max_regression``."""

MARGIN_ZERO = ("--max-regression 0 cannot pass: no sample rules out every rise, so a "
               "margin of 0 can only fail or stay inconclusive; give the largest rise you "
               "accept, e.g. --max-regression 2, and size the runs for it with "
               "`agent-eval power --baseline RUN --detect 2`")
"""Why a regression margin of 0 is refused, and what to use instead (one line)."""

Outcome = Literal["pass", "fail", "inconclusive"]
"""The gate's verdict: ``fail`` when a check failed, else ``inconclusive`` when a check was
(unless ``on_inconclusive`` maps it to ``pass`` or ``fail``), else ``pass``.  The CLI exits
0, 1 and 4 (``EXIT_INCONCLUSIVE``)."""


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One threshold judged on one target.  ``observed`` is in the threshold's unit
    (errors per 100 calls, a 0..1 share, or a difference per 100); ``None`` when there was
    nothing to observe."""

    name: str  # e.g. "errors/100 <= 8"
    target: str
    kind: CheckKind
    threshold: float
    observed: float | None
    status: CheckStatus
    detail: str
    method: str = ""  # the interval or test the check used, named
    p_value: float | None = None  # regression: one-sided p of a rise above the limit
    leads: tuple[str, ...] = ()  # where to look: classes that rose, worst sessions' show lines

    @property
    def passed(self) -> bool:
        """True when the check passed or was skipped (a skip never fails the gate)."""
        return self.status in ("pass", "skip")


@dataclass(frozen=True, slots=True)
class GateResult:
    """Every check, in target order then threshold order, and the verdict (:data:`Outcome`);
    ``on_inconclusive`` is the operator's reading of an inconclusive check, ``None`` to keep
    it a verdict of its own."""

    checks: list[GateCheck] = field(default_factory=list)
    on_inconclusive: Literal["pass", "fail"] | None = None
    # said before any check: targets whose stack faults rose over the baseline
    # (``stack_faults.with_stack_rises``)
    leading: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        if any(check.status == "fail" for check in self.checks):
            return "fail"
        if any(check.status == "inconclusive" for check in self.checks):
            return self.on_inconclusive or "inconclusive"
        return "pass"

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def inconclusive(self) -> list[GateCheck]:
        return [check for check in self.checks if check.status == "inconclusive"]

    @property
    def failures(self) -> list[GateCheck]:
        return [check for check in self.checks if check.status == "fail"]


def evaluate_gate(
    current: Mapping[str, GroupSummary] | GroupSummary,
    *,
    max_error_rate: float | None = None,
    max_class: Mapping[str, float] | None = None,
    min_handshake: float | None = None,
    baseline: Mapping[str, GroupSummary] | GroupSummary | None = None,
    max_regression: float | None = None,
    units: Units | None = None,
    baseline_units: Units | None = None,
    missing_baseline: str | None = None,
    allow_missing_baseline: bool = False,
    run_status: str | None = None,
    declared_targets: Sequence[str] = (),
    allow_incomplete: bool = False,
    on_inconclusive: Literal["pass", "fail"] | None = None,
    coverage: Mapping[str, Coverage] | None = None,
    min_coverage: float = MIN_COVERAGE,
    alpha: float = ALPHA,
) -> GateResult:
    """Judge ``current`` (per-target summaries, or one overall summary) against thresholds.

    Thresholds left ``None`` (or an empty ``max_class``) are not checked.  ``baseline``
    without ``max_regression`` allows a rise of :data:`DEFAULT_MARGIN`.  Raises
    ``ValueError`` for a negative threshold, a regression margin of 0
    (:data:`MARGIN_ZERO`) or a handshake share outside 0..1.

    With ``units`` (and ``baseline_units``), per-target session units, the rate checks
    also print the clustered interval and the regression check uses the paired analysis
    over shared scenarios, or the session-clustered independent one
    (``agent_eval.metrics.regression``); without them it uses ``compare_rates``.

    A gate is never green by accident: ``missing_baseline`` (why a baseline asked for was
    not found, e.g. a label no run carries) fails a ``baseline`` check, a target absent
    from the baseline fails its regression check, and a gate that judged no check at all
    fails a ``judged`` check; ``allow_missing_baseline`` (the first nightly) turns the
    first two into skips and lets a gate with only skipped checks pass.

    Nor by a partial run: a ``run_status`` other than ``finished`` (``running``,
    ``interrupted``, ``failed``) fails a ``run-status`` check, and each of
    ``declared_targets`` that played no session fails a ``sessions`` check;
    ``allow_incomplete`` turns both into skips that still name the status and targets.
    Nor by a run that lost most of its sessions: with ``coverage`` (per target, what the
    run planned, played, judged and lost by cause), a target that judged fewer than
    ``min_coverage`` of its planned sessions fails a ``coverage`` check, whatever its
    rates over the few it kept.

    A check whose interval straddles its limit is ``inconclusive`` (a regression check
    names the repeats that would decide it); the verdict is then ``inconclusive`` unless
    ``on_inconclusive`` says ``pass`` or ``fail``.

    ``alpha`` is the intervals' two-sided level (5%: 95% intervals); a sequential run's
    look reads them at the smaller nominal alpha its spending boundary gives
    (``agent_eval.metrics.sequential``), so that a decision at any look errs at most
    2.5% each way over the whole sequence.
    """
    _check_thresholds(max_error_rate, max_class or {}, min_handshake, max_regression)
    if not 0 <= min_coverage <= 1:
        raise ValueError(f"min_coverage is a share within 0..1, got {min_coverage}")
    targets = _by_target(current)
    base = _by_target(baseline) if baseline is not None else None
    if base is not None and max_regression is None:
        max_regression = DEFAULT_MARGIN
    if not targets:
        return GateResult([GateCheck("sessions > 0", "(run)", "sessions", 0, 0, "fail",
                                     "the run holds no sessions: nothing to judge")])
    checks: list[GateCheck] = []
    if run_status is not None and run_status != "finished":
        checks.append(_run_status_check(run_status, allow_incomplete))
    checks += [_silent_target_check(name, allow_incomplete)
               for name in declared_targets if name not in targets]
    if missing_baseline is not None:
        checks.append(_missing_baseline_check(missing_baseline, allow_missing_baseline))
    for name, summary in targets.items():
        if coverage is not None and name in coverage and coverage[name].basis:
            checks.append(_coverage_check(coverage[name], min_coverage))
        mine = None if units is None else units.get(name, ())
        if max_error_rate is not None:
            checks.append(_error_rate_check(name, summary, max_error_rate, mine, alpha))
        for code, limit in (max_class or {}).items():
            checks.append(_class_check(name, summary, code, limit, mine, alpha))
        if min_handshake is not None:
            checks.append(_handshake_check(name, summary, min_handshake))
        if base is not None and max_regression is not None:  # set above whenever base is
            theirs = None if baseline_units is None else baseline_units.get(name)
            checks.append(_regression_check(name, summary, base.get(name), max_regression,
                                            mine, theirs, allow_missing_baseline, alpha))
    checks = adjust_regressions(checks, alpha)
    thresholds = [check for check in checks if check.kind != "coverage"]
    if not any(check.status != "skip" for check in thresholds):  # coverage is no threshold
        checks.append(_nothing_judged_check(thresholds, allow_missing_baseline))
    return GateResult(checks, on_inconclusive)


def with_checks(result: GateResult, added: Sequence[GateCheck]) -> GateResult:
    """``result`` with ``added`` appended, its reading of inconclusive checks kept; a
    judged check among them (one that did not skip) means something was judged, so a
    "nothing judged" check of ``result`` no longer holds and is dropped."""
    judged = any(c.status != "skip" for c in added)
    kept = [c for c in result.checks if not (judged and c.kind == "judged")]
    return dataclasses.replace(result, checks=[*kept, *added])


def adjust_regressions(checks: list[GateCheck], alpha: float = ALPHA) -> list[GateCheck]:
    """Holm's step-down adjustment across the gate's regression checks (one per target),
    so 14 targets at a nominal one-sided 2.5% each do not fail an unchanged model 30% of
    the time: a regression fails only when its Holm-adjusted p
    (``analysis.comparison.holm``) is below ``ALPHA / 2``; one that fails alone but not after the
    adjustment is inconclusive and says so.  A single check is unchanged."""
    p_values = {i: c.p_value for i, c in enumerate(checks)
                if c.kind == "regression" and c.p_value is not None}
    judged = list(p_values)
    if len(judged) < 2:
        return checks
    from agent_eval.analysis.comparison import holm

    adjusted = holm({str(i): p for i, p in p_values.items()})
    out = list(checks)
    holm_note = (f"Holm's adjustment across the {len(judged)} regression checks (one-sided, "
                 f"alpha {alpha / 2:.3g})")
    for i in judged:
        p = adjusted[str(i)]
        check = out[i]
        note = f"; Holm-adjusted p {p:.3g}"
        status = check.status
        if status == "fail" and not p < alpha / 2:
            status = "inconclusive"
            note += ": not supported once the other targets' checks are counted"
        out[i] = dataclasses.replace(check, status=status, detail=check.detail + note,
                                     method="; ".join(filter(None, (check.method, holm_note))))
    return out


def _run_status_check(status: str, allowed: bool) -> GateCheck:
    why = f"the run is {status}, not finished: its sessions may not be all of the suite"
    if allowed:
        return GateCheck("run finished", "(run)", "run-status", 0, None, "skip",
                         f"skipped: {why} (--allow-incomplete)")
    return GateCheck("run finished", "(run)", "run-status", 0, None, "fail",
                     f"{why}; resume it, or pass --allow-incomplete to judge what it holds")


def _silent_target_check(target: str, allowed: bool) -> GateCheck:
    why = "the run names this target but it played no session"
    if allowed:
        return GateCheck("sessions > 0", target, "sessions", 0, 0, "skip",
                         f"skipped: {why} (--allow-incomplete)")
    return GateCheck("sessions > 0", target, "sessions", 0, 0, "fail",
                     f"{why}: nothing of it was judged (--allow-incomplete skips it)")


def _coverage_check(cov: Coverage, minimum: float) -> GateCheck:
    name = f"coverage >= {100 * minimum:g}%"
    share = cov.share or 0.0
    ok = share >= minimum
    detail = cov.text() + ("" if ok else f": below {100 * minimum:g}%, so no rate over the "
                           "sessions left can stand for the run (rerun or resume it; "
                           "--min-coverage sets the share)")
    return GateCheck(name, cov.target, "coverage", minimum, share, "pass" if ok else "fail",
                     detail)


def _missing_baseline_check(why: str, allowed: bool) -> GateCheck:
    if allowed:
        return GateCheck("baseline found", "(run)", "baseline", 0, None, "skip",
                         f"skipped: {why} (--allow-missing-baseline)")
    return GateCheck("baseline found", "(run)", "baseline", 0, None, "fail",
                     f"{why}; a misspelt label would keep the gate green for ever: fix the "
                     "label, or pass --allow-missing-baseline for the first run of a series")


def _nothing_judged_check(checks: Sequence[GateCheck], allowed: bool) -> GateCheck:
    why = f"all {len(checks)} checks were skipped" if checks else "no check applied"
    if allowed:
        return GateCheck("checks judged > 0", "(run)", "judged", 0, 0, "skip",
                         f"{why}; passing as --allow-missing-baseline allows")
    return GateCheck("checks judged > 0", "(run)", "judged", 0, 0, "fail",
                     f"{why}: a gate that judged nothing proves nothing "
                     "(--allow-missing-baseline lets it pass)")


def decide(lo: float | None, hi: float | None, limit: float) -> CheckStatus:
    """The non-inferiority reading of a 95% interval against a limit: ``pass`` when its
    upper end is at or below the limit, ``fail`` when its lower end is above it, else
    (or with no interval) ``inconclusive``."""
    if lo is not None and lo > limit:
        return "fail"
    if hi is not None and lo is not None and hi <= limit:
        return "pass"
    return "inconclusive"


def _by_target(
    summaries: Mapping[str, GroupSummary] | GroupSummary,
) -> dict[str, GroupSummary]:
    if isinstance(summaries, GroupSummary):
        return {summaries.group: summaries}
    return dict(summaries)


def _check_thresholds(max_error_rate, max_class, min_handshake, max_regression) -> None:
    for label, value in (("max_error_rate", max_error_rate), ("max_regression", max_regression),
                         *((f"max_class[{code}]", v) for code, v in max_class.items())):
        if value is not None and value < 0:
            raise ValueError(f"{label} must be >= 0 errors per 100 calls, got {value}")
    if max_regression is not None and max_regression == 0:
        raise ValueError(MARGIN_ZERO)
    if min_handshake is not None and not 0 <= min_handshake <= 1:
        raise ValueError(f"min_handshake is a share within 0..1, got {min_handshake}")


def _rate_check(name: str, target: str, kind: CheckKind, rate: Rate, limit: float,
                what: str, units: Sequence[Unit] | TargetStats | None,
                code: str | None, alpha: float = ALPHA) -> GateCheck:
    """Judge a rate by its interval's ends (:func:`decide`): the clustered interval when
    session units are given (calls of one session err together), else Wilson's."""
    if rate.per100 is None:
        return GateCheck(name, target, kind, limit, None, "fail",
                         "no tool calls to judge (every session errored, or none ran)")
    counts = f"{what} {rate.per100:.2f} ({rate.k}/{rate.n} calls"
    wilson = _wilson100(rate, alpha)
    if units is None:
        (lo, hi), method = wilson, "Wilson score interval (calls independent)"
        interval = f"Wilson {ci_name(alpha)} {_ends(lo, hi)}"
    else:
        clustered = units_rate(units, code=code, alpha=alpha)
        lo, hi, method = clustered.lo100, clustered.hi100, clustered.method
        if lo is None:  # one session: it can still fail on Wilson's low end
            lo, hi = wilson[0], None
            interval = (f"{clustered.clusters} session: no clustered interval, and one "
                        "session cannot certify a rate")
        else:
            deff = "–" if clustered.deff is None else f"{clustered.deff:.1f}"
            interval = (f"clustered {ci_name(alpha)} {_ends(lo, hi)}, deff {deff}, "
                        f"{clustered.clusters} sessions")
    status = decide(lo, hi, limit)
    detail = f"{counts}, {interval}); {_verdict_words(status, lo, hi, limit)}"
    return GateCheck(name, target, kind, limit, rate.per100, status, detail,
                     f"interval ends against the limit: {method}")


def _wilson100(rate: Rate, alpha: float) -> tuple[float | None, float | None]:
    """The rate's Wilson interval per 100 at ``alpha`` (``Rate``'s own at 95%)."""
    if math.isclose(alpha, ALPHA) or not rate.n:
        return rate.lo100, rate.hi100
    lo, hi = wilson_float(rate.k, rate.n, t_quantile(math.inf, alpha))
    return 100 * lo, 100 * hi


def _ends(lo: float | None, hi: float | None, sign: str = "") -> str:
    if lo is None or hi is None:
        return "–"
    return f"{lo:{sign}.2f} to {hi:{sign}.2f}"


def _verdict_words(status: CheckStatus, lo: float | None, hi: float | None, limit: float,
                   sign: str = "", what: str = "a rate") -> str:
    x = number_text(limit)
    if status == "pass":
        return f"upper end {hi:{sign}.2f} <= {x}: {what} above {x} ruled out"
    if status == "fail":
        real = ": a real regression" if what == "a rise" else ""
        return f"even the low end {lo:{sign}.2f} exceeds {x}{real}"
    if hi is None:
        return f"INCONCLUSIVE: no interval to rule out {what} above {x}"
    return (f"INCONCLUSIVE: the interval {_ends(lo, hi, sign)} straddles {x}, so the sample "
            f"can neither confirm nor rule out {what} above it")


def _error_rate_check(target: str, summary: GroupSummary, limit: float,
                      units: Sequence[Unit] | TargetStats | None = None,
                      alpha: float = ALPHA) -> GateCheck:
    return _rate_check(f"errors/100 <= {number_text(limit)}", target, "error-rate", summary.errors,
                       limit, "errors/100", units, None, alpha)


def _class_check(target: str, summary: GroupSummary, code: str, limit: float,
                 units: Sequence[Unit] | TargetStats | None = None,
                 alpha: float = ALPHA) -> GateCheck:
    rate = summary.classes.get(code) or Rate.of(0, summary.calls)
    return _rate_check(f"{code}/100 <= {number_text(limit)}", target, "class-rate", rate, limit,
                       f"{code}/100", units, code, alpha)


def _handshake_check(target: str, summary: GroupSummary, minimum: float) -> GateCheck:
    name = f"handshake >= {number_text(minimum)}"
    done = summary.handshake.completed
    if done.share is None:
        return GateCheck(name, target, "handshake", minimum, None, "skip",
                         "skipped: no session of this target required a handshake")
    ok = done.share >= minimum
    detail = (f"handshake completed in {done.k}/{done.n} sessions = {done.share:.2f} "
              f"{'>=' if ok else '<'} {number_text(minimum)}")
    return GateCheck(name, target, "handshake", minimum, done.share, "pass" if ok else "fail",
                     detail)


def _regression_check(target: str, summary: GroupSummary, base: GroupSummary | None,
                      limit: float, units: Sequence[Unit] | TargetStats | None = None,
                      base_units: Sequence[Unit] | TargetStats | None = None,
                      allow_missing: bool = False, alpha: float = ALPHA) -> GateCheck:
    name = f"regression vs baseline <= {number_text(limit)}"
    if base is None or base.calls == 0:
        why = "absent from the baseline" if base is None else "without tool calls in the baseline"
        if allow_missing:
            return GateCheck(name, target, "regression", limit, None, "skip",
                             f"skipped: target {why} (--allow-missing-baseline)")
        return GateCheck(name, target, "regression", limit, None, "fail",
                         f"target {why}: nothing to compare with (--allow-missing-baseline "
                         "skips it)")
    if summary.calls == 0:
        return GateCheck(name, target, "regression", limit, None, "fail",
                         "no tool calls to judge (every session errored, or none ran)")
    if units is not None and base_units is not None:
        reg = regression_from_units(base_units, units, limit, alpha=alpha)
        status: CheckStatus = ("fail" if reg.regressed else
                               "inconclusive" if reg.inconclusive else "pass")
        return GateCheck(name, target, "regression", limit, reg.diff100, status, reg.detail,
                         reg.family or reg.method, reg.p_value)
    cmp = compare_rates(base.errors.k, base.calls, summary.errors.k, summary.calls, alpha=alpha)
    status = decide(cmp.lo100, cmp.hi100 if _has_width(cmp) else None, limit)
    se = (None if cmp.lo100 is None or cmp.hi100 is None
          else (cmp.hi100 - cmp.lo100) / (2 * t_quantile(math.inf, alpha)))
    p = None if cmp.diff100 is None else exceed_p(cmp.diff100, limit, se, math.inf)
    return GateCheck(name, target, "regression", limit, cmp.diff100, status,
                     _regression_detail(cmp, limit, alpha), p_value=p)


def regressed(comparison: RateComparison, max_regression: float) -> bool:
    """The increase ``b − a`` in errors/100 is larger than ``max_regression`` at 95%
    confidence: the interval's lower end exceeds it."""
    return comparison.lo100 is not None and comparison.lo100 > max_regression


def _has_width(cmp: RateComparison) -> bool:
    """A Wald interval of zero width (no errors on either side) rules nothing out."""
    return cmp.lo100 is not None and cmp.hi100 is not None and cmp.hi100 > cmp.lo100


def _regression_detail(cmp: RateComparison, limit: float, alpha: float = ALPHA) -> str:
    counts = (f"errors/100 {cmp.a.per100:.2f} ({cmp.a.k}/{cmp.a.n}) -> "
              f"{cmp.b.per100:.2f} ({cmp.b.k}/{cmp.b.n}), change {cmp.diff100:+.2f} "
              f"[{ci_name(alpha)} {cmp.lo100:+.2f} to {cmp.hi100:+.2f}]")
    hi = cmp.hi100 if _has_width(cmp) else None
    status = decide(cmp.lo100, hi, limit)
    return f"{counts}; {_verdict_words(status, cmp.lo100, hi, limit, '+', 'a rise')}"


def number_text(value: float) -> str:
    """``8`` for 8.0, ``2.5`` for 2.5: thresholds read as the operator typed them."""
    return f"{value:g}"


LEAD_KINDS = frozenset({"error-rate", "class-rate", "regression", "coverage", "handshake"})
"""Checks that, failed or undecided, name where to look (:func:`with_leads`)."""

WORST_SESSIONS = 3


@dataclass(frozen=True, slots=True)
class SessionLead:
    """One session worth opening: what ``agent-eval show`` needs and what it holds."""

    id: int
    scenario: str
    repeat: int
    calls: int
    denials: int
    status: str
    note: str = ""  # what to see there, when not its denials (a handshake not completed)


def needs_leads(check: GateCheck) -> bool:
    """Whether the check failed or was undecided on a target's own sessions."""
    return check.status in ("fail", "inconclusive") and check.kind in LEAD_KINDS \
        and not check.target.startswith("(")


def check_code(check: GateCheck) -> str | None:
    """The failure class a class-rate check is about (``AE301/100 <= 3`` -> ``AE301``)."""
    return check.name.split("/", 1)[0] if check.kind == "class-rate" else None


def with_leads(result: GateResult, run_id: int, worst: Mapping[int, Sequence[SessionLead]],
               current: Mapping[str, GroupSummary] | None = None,
               baseline: Mapping[str, GroupSummary] | None = None,
               view_url: str | None = None) -> GateResult:
    """Each failed or inconclusive check (``worst`` by the check's index) names its worst
    sessions with a ready ``agent-eval show RUN SESSION`` line (and the viewer's page
    when ``view_url`` is the base of ``agent-eval view``), and a regression or rate check
    the classes that rose over the baseline (or the largest classes, with none)."""
    checks = list(result.checks)
    for i, check in enumerate(checks):
        if not needs_leads(check):
            continue
        leads = []
        rose = _classes_text(check, (current or {}).get(check.target),
                             (baseline or {}).get(check.target))
        if rose:
            leads.append(rose)
        for lead in worst.get(i, ()):
            what = lead.note or (f"{lead.denials} of {lead.calls} calls denied"
                                 if lead.status != "error" else "lost to a fault")
            line = (f"agent-eval show {run_id} {lead.id}  ({lead.scenario}, repeat "
                    f"{lead.repeat}: {what})")
            if view_url:
                line += f"  {view_url.rstrip('/')}/sessions/{lead.id}.html"
            leads.append(line)
        checks[i] = dataclasses.replace(check, leads=tuple(leads))
    return dataclasses.replace(result, checks=checks)


def _classes_text(check: GateCheck, mine: GroupSummary | None,
                  theirs: GroupSummary | None) -> str:
    if mine is None or check.kind not in ("error-rate", "regression"):
        return ""
    now = {code: rate.per100 or 0.0 for code, rate in mine.classes.items()}
    if check.kind == "regression" and theirs is not None:
        before = {code: rate.per100 or 0.0 for code, rate in theirs.classes.items()}
        rises = sorted(((now.get(c, 0.0) - before.get(c, 0.0), c) for c in {*now, *before}),
                       reverse=True)
        listed = [f"{c} {d:+.2f}" for d, c in rises[:WORST_SESSIONS] if d > 0]
        return ("classes that rose (per 100 calls): " + ", ".join(listed)) if listed else \
            "no class rose"
    top = sorted(((v, c) for c, v in now.items() if v > 0), reverse=True)[:WORST_SESSIONS]
    return ("largest classes (per 100 calls): " + ", ".join(f"{c} {v:.2f}" for v, c in top)
            if top else "")
