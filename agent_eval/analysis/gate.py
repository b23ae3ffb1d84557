"""The CI gate: does a run meet its thresholds?  Pure; the CLI reads the store and exits.

``evaluate_gate`` turns per-target summaries (``agent_eval.metrics.summarize``) and the
operator's thresholds into a :class:`GateResult`: one :class:`GateCheck` per target and
threshold, and ``passed`` only when every check of every target passed.

What each threshold compares (the same words are in ``agent-eval gate --help``):

``max_error_rate``
    The **point estimate** of errors per 100 tool calls, ``<=`` passes.  No interval: an
    absolute bar is the operator's choice of number, and a CI gate that moves with the
    sample size would be harder to reason about.
``max_class``
    The same, per primary failure class (``{"AE301": 3.0}``).  A class the target never
    hit counts as 0 of its calls.
``min_handshake``
    Share of sessions (0..1) that emitted the required handshake in order, ``>=`` passes.
    When no session of a target required a handshake the check is skipped, and says so.
``baseline`` + ``max_regression``
    The one place intervals decide.  Targets are matched by name.  The check fails only
    when the increase in errors/100 over the baseline is **statistically supported** to be
    larger than ``max_regression``: the lower end of the 95% interval of the difference
    ``current − baseline`` must exceed it.  With session units (what the CLI passes) the
    interval is paired over shared scenarios, or independent with sessions as clusters
    (``agent_eval.metrics.regression``, docs/statistics.md), and the check names it and
    the smallest rise it could have detected; with summaries alone, ``compare_rates``.  So 2 errors in 20 calls
    after 0 in 20 (+10 per 100, but an interval reaching far below zero) does not fail a
    build on noise, while the same jump over 5,000 calls does.  A target absent from the
    baseline (or with no calls there) is skipped, and the check says so.

A target with no tool calls fails the error-rate and class checks: a run that made no
calls proves nothing, and a gate should not pass silently when the server died.  A gate
over no targets at all fails with a ``sessions`` check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_eval.metrics import GroupSummary, Rate, RateComparison, compare_rates
from agent_eval.metrics.clustered import Unit, interval_text, units_rate
from agent_eval.metrics.regression import regression_from_units
from agent_eval.metrics.sufficient import TargetStats

Units = Mapping[str, Sequence[Unit] | TargetStats]
"""Per-target session units (``agent_eval.metrics.clustered.session_units``) or their sums
per scenario (``store.cluster_stats``, what the CLI passes)."""

CheckKind = Literal["sessions", "error-rate", "class-rate", "handshake", "regression", "leaks"]
"""``sessions``: the run has something to judge; ``error-rate``: ``max_error_rate``;
``class-rate``: one ``max_class`` entry; ``handshake``: ``min_handshake``;
``regression``: ``baseline`` + ``max_regression``; ``leaks``: ``gate --max-leaks``
(``analysis.leaks``)."""

CheckStatus = Literal["pass", "fail", "skip"]
"""``skip``: the check could not be judged (no baseline target, no handshake required);
it never fails the gate and its ``detail`` says why."""


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

    @property
    def passed(self) -> bool:
        """True unless the check failed (a skipped check does not fail the gate)."""
        return self.status != "fail"


@dataclass(frozen=True, slots=True)
class GateResult:
    """Every check, in target order then threshold order; ``passed`` when none failed."""

    checks: list[GateCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

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
) -> GateResult:
    """Judge ``current`` (per-target summaries, or one overall summary) against thresholds.

    Thresholds left ``None`` (or an empty ``max_class``) are not checked.  ``baseline``
    without ``max_regression`` checks for any supported increase (``max_regression=0``).
    Raises ``ValueError`` for a negative threshold or a handshake share outside 0..1.

    With ``units`` (and ``baseline_units``), per-target session units, the rate checks
    also print the clustered interval and the regression check uses the paired analysis
    over shared scenarios, or the session-clustered independent one
    (``agent_eval.metrics.regression``); without them it uses ``compare_rates``.
    """
    _check_thresholds(max_error_rate, max_class or {}, min_handshake, max_regression)
    targets = _by_target(current)
    base = _by_target(baseline) if baseline is not None else None
    if base is not None and max_regression is None:
        max_regression = 0.0
    if not targets:
        return GateResult([GateCheck("sessions > 0", "(run)", "sessions", 0, 0, "fail",
                                     "the run holds no sessions: nothing to judge")])
    checks: list[GateCheck] = []
    for name, summary in targets.items():
        mine = None if units is None else units.get(name, ())
        if max_error_rate is not None:
            checks.append(_with_clustered(_error_rate_check(name, summary, max_error_rate),
                                          mine, None))
        for code, limit in (max_class or {}).items():
            checks.append(_with_clustered(_class_check(name, summary, code, limit), mine, code))
        if min_handshake is not None:
            checks.append(_handshake_check(name, summary, min_handshake))
        if base is not None:
            theirs = None if baseline_units is None else baseline_units.get(name)
            checks.append(_regression_check(name, summary, base.get(name), max_regression,
                                            mine, theirs))
    return GateResult(checks)


def _with_clustered(check: GateCheck, units: Sequence[Unit] | TargetStats | None,
                    code: str | None) -> GateCheck:
    """Add the clustered interval beside Wilson's: the bar is judged on the point
    estimate either way; the clustered interval says how far to trust it."""
    if units is None or check.observed is None:
        return check
    rate = units_rate(units, code=code)
    detail = check.detail.replace("95% CI", "Wilson 95% CI", 1)
    head, sep, tail = detail.rpartition(")")
    detail = f"{head}; clustered {interval_text(rate)}{sep}{tail}"
    return dataclasses.replace(check, detail=detail, method=f"point estimate; interval: "
                               f"Wilson and {rate.method}")


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
    if min_handshake is not None and not 0 <= min_handshake <= 1:
        raise ValueError(f"min_handshake is a share within 0..1, got {min_handshake}")


def _rate_check(name: str, target: str, kind: CheckKind, rate: Rate, limit: float,
                what: str) -> GateCheck:
    if rate.per100 is None:
        return GateCheck(name, target, kind, limit, None, "fail",
                         "no tool calls to judge (every session errored, or none ran)")
    ok = rate.per100 <= limit
    detail = (f"{what} {rate.per100:.2f} ({rate.k}/{rate.n} calls, 95% CI "
              f"{rate.lo100:.1f}–{rate.hi100:.1f}) {'<=' if ok else '>'} {_num(limit)}")
    return GateCheck(name, target, kind, limit, rate.per100, "pass" if ok else "fail", detail)


def _error_rate_check(target: str, summary: GroupSummary, limit: float) -> GateCheck:
    return _rate_check(f"errors/100 <= {_num(limit)}", target, "error-rate", summary.errors,
                       limit, "errors/100")


def _class_check(target: str, summary: GroupSummary, code: str, limit: float) -> GateCheck:
    rate = summary.classes.get(code) or Rate.of(0, summary.calls)
    return _rate_check(f"{code}/100 <= {_num(limit)}", target, "class-rate", rate, limit,
                       f"{code}/100")


def _handshake_check(target: str, summary: GroupSummary, minimum: float) -> GateCheck:
    name = f"handshake >= {_num(minimum)}"
    done = summary.handshake.completed
    if done.share is None:
        return GateCheck(name, target, "handshake", minimum, None, "skip",
                         "skipped: no session of this target required a handshake")
    ok = done.share >= minimum
    detail = (f"handshake completed in {done.k}/{done.n} sessions = {done.share:.2f} "
              f"{'>=' if ok else '<'} {_num(minimum)}")
    return GateCheck(name, target, "handshake", minimum, done.share, "pass" if ok else "fail",
                     detail)


def _regression_check(target: str, summary: GroupSummary, base: GroupSummary | None,
                      limit: float, units: Sequence[Unit] | TargetStats | None = None,
                      base_units: Sequence[Unit] | TargetStats | None = None) -> GateCheck:
    name = f"regression vs baseline <= {_num(limit)}"
    if base is None or base.calls == 0:
        why = "absent from the baseline" if base is None else "without tool calls in the baseline"
        return GateCheck(name, target, "regression", limit, None, "skip",
                         f"skipped: target {why}")
    if summary.calls == 0:
        return GateCheck(name, target, "regression", limit, None, "fail",
                         "no tool calls to judge (every session errored, or none ran)")
    if units is not None and base_units is not None:
        reg = regression_from_units(base_units, units, limit)
        return GateCheck(name, target, "regression", limit, reg.diff100,
                         "fail" if reg.regressed else "pass", reg.detail, reg.method)
    cmp = compare_rates(base.errors.k, base.calls, summary.errors.k, summary.calls)
    return GateCheck(name, target, "regression", limit, cmp.diff100,
                     "fail" if regressed(cmp, limit) else "pass", _regression_detail(cmp, limit))


def regressed(comparison: RateComparison, max_regression: float) -> bool:
    """The noise rule: the increase ``b − a`` in errors/100 is larger than
    ``max_regression`` at 95% confidence, i.e. the interval's lower end exceeds it."""
    return comparison.lo100 is not None and comparison.lo100 > max_regression


def _regression_detail(cmp: RateComparison, limit: float) -> str:
    counts = (f"errors/100 {cmp.a.per100:.2f} ({cmp.a.k}/{cmp.a.n}) -> "
              f"{cmp.b.per100:.2f} ({cmp.b.k}/{cmp.b.n}), change {cmp.diff100:+.2f} "
              f"[95% CI {cmp.lo100:+.2f} to {cmp.hi100:+.2f}]")
    if regressed(cmp, limit):
        verdict = f"even the low end {cmp.lo100:+.2f} exceeds {_num(limit)}: a real regression"
    elif cmp.diff100 > limit:
        verdict = (f"above {_num(limit)} but the interval reaches {cmp.lo100:+.2f}: "
                   "not supported by the sample (noise)")
    else:
        verdict = f"within {_num(limit)}"
    return f"{counts}; {verdict}"


def _num(value: float) -> str:
    """``8`` for 8.0, ``2.5`` for 2.5: thresholds read as the operator typed them."""
    return f"{value:g}"


# --- rendering ---------------------------------------------------------------------------

_MARK: dict[CheckStatus, str] = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def render_gate_text(result: GateResult, *, title: str | None = None) -> str:
    """Plain terminal lines: one per check with its numbers, then the verdict."""
    lines = [title] if title else []
    for check in result.checks:
        lines.append(f"{_MARK[check.status]}  {check.target}: {check.name}: {check.detail}")
    lines += [f"method ({name}): {method}" for name, method in methods_used(result)]
    lines.append(_verdict(result))
    return "\n".join(lines) + "\n"


def methods_used(result: GateResult) -> list[tuple[str, str]]:
    """Each distinct (check name, method) once, in check order: which interval or test
    every check rests on, named once under the checks rather than on every line."""
    seen: dict[tuple[str, str], None] = {}
    for check in result.checks:
        if check.method:
            seen.setdefault((check.name, check.method), None)
    return list(seen)


def render_gate_markdown(result: GateResult, *, title: str | None = None) -> str:
    """The same as Markdown, for ``$GITHUB_STEP_SUMMARY`` or a PR comment."""
    icon = "✅" if result.passed else "❌"
    lines = [f"## {icon} agent-eval gate: {'passed' if result.passed else 'failed'}", ""]
    if title:
        lines += [_escape(title).replace("\n", "  \n"), ""]
    failures = result.failures
    if failures:
        lines.append("Failed thresholds:")
        lines += [f"- **{_md_name(f.target)}**: {_md(f.name)}: {_md(f.detail)}" for f in failures]
        lines.append("")
    lines += ["| result | target | check | threshold | observed | detail |",
              "|---|---|---|---:|---:|---|"]
    for c in result.checks:
        observed = "–" if c.observed is None else f"{c.observed:.2f}"
        lines.append(f"| {_MARK[c.status]} | {_md_name(c.target)} | {_md(c.name)} | "
                     f"{_num(c.threshold)} | {observed} | {_md(c.detail)} |")
    used = methods_used(result)
    if used:
        lines += ["", *(f"- method ({_md(name)}): {_md(method)}" for name, method in used)]
    return "\n".join(lines) + "\n"


def _verdict(result: GateResult) -> str:
    if result.passed:
        return f"gate passed: {len(result.checks)} checks, none failed"
    names = ", ".join(f"{f.target}: {f.name}" for f in result.failures)
    return f"gate FAILED: {len(result.failures)} of {len(result.checks)} checks failed ({names})"


def _md(text: str) -> str:
    """A table cell: pipes and newlines would break the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _md_name(text: str) -> str:
    """Target names come from config files: shown as text, never as HTML."""
    return _md(_escape(text))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
