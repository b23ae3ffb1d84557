"""Two runs side by side: what changed per target and class, is it real, what flipped.

Pure, like the gate: ``agent-eval compare`` reads summaries and repeat outcomes from the
store, :func:`compare_runs` lines them up, and the two renderers format the result.
Every difference reads **b − a** (run b against baseline run a), per 100 calls for error
rates and in percentage points for shares (handshake completion, pivots).  Each one is a
``RateComparison``: a 95% Wald interval of the difference, the pooled two-proportion
z-test that decides "significant" at alpha 0.05, and Fisher's exact p beside it because
counts here are small (docs/design.md "Noise").  A scenario **flipped** when its outcome
(every repeat passed, as ``agent_eval.metrics.repeats`` defines a pass) differs between
the runs; ``fixed`` passes in b where it failed in a, ``broke`` the reverse.

When one run is ``agent-eval rescore`` of the other, both hold the *same* calls, judged
twice: the tests above still treat them as independent samples, so a :class:`RescoreMoves`
beside them counts exactly which verdicts the policy change moved (:func:`rescore_moves`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_eval.analysis.stack_faults import stack_rise_line, stack_rose
from agent_eval.linewrap import fit_lines
from agent_eval.metrics import (
    FISHER_TEST,
    Z_TEST,
    GroupComparison,
    GroupSummary,
    RateComparison,
    RepeatStats,
    ScenarioFlip,
    compare_groups,
    compare_rates,
)
from agent_eval.metrics.clustered import (
    CLUSTERED_METHOD,
    RAO_SCOTT_TEST,
    ClusteredDiff,
    ClusteredRate,
    Unit,
    compare_independent,
    interval_text,
    rao_scott_test,
    units_rate,
)
from agent_eval.metrics.paired import PairedComparison, compare_paired, paired_lines
from agent_eval.metrics.sufficient import TargetStats, as_stats
from agent_eval.transcript import NEXT_ACTIONS, CallRow, NextAction, SessionRow

CompareBy = Literal["target", "all", "agent"]
"""``target``: targets matched by name across the runs; ``all``: each run pooled whole;
``agent``: the agents whose agent CLI rules judged the sessions, matched by name (no
session-level analysis and no flips: those are per target and scenario)."""
COMPARE_BYS: tuple[CompareBy, ...] = ("target", "all", "agent")


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Run b against run a.  ``groups`` holds the groups present in both runs (in a's
    order); ``only_a`` / ``only_b`` name the rest; ``flips`` lists each common group's
    flipped scenarios, by scenario name; ``recovery`` compares, per common group, the
    share of denials followed by each next action (pivot, retry-denied, repeat,
    abandon: ``transcript.NextAction``), each out of all denials."""

    label_a: str
    label_b: str
    by: CompareBy
    groups: dict[str, GroupComparison]
    only_a: list[str]
    only_b: list[str]
    flips: dict[str, list[ScenarioFlip]]
    test: str = Z_TEST
    exact_test: str = FISHER_TEST
    rescore: RescoreMoves | None = None
    recovery: dict[str, dict[NextAction, RateComparison]] = field(default_factory=dict)
    units: dict[str, UnitAnalysis] = field(default_factory=dict)
    # per common group, how b's serving stack differs from a's (``key: old -> new``)
    stack_changes: dict[str, list[str]] = field(default_factory=dict)
    class_p_holm: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per group, each class's p adjusted by Holm's step-down method across the group's
    classes (:func:`holm`): with 14 classes, one at p < 0.05 by chance alone is likely,
    so a class is called significant on this p.  With the session-level analysis
    (:func:`with_units`) the p before Holm is the class's Rao–Scott-corrected one
    (``metrics.clustered.rao_scott_test``); without it, the per-call z-test's."""
    class_method: str = Z_TEST  # the test behind ``class_p_holm`` before Holm


@dataclass(frozen=True, slots=True)
class UnitAnalysis:
    """One common group's session-level analysis (``analyse_units``): each side's
    clustered errors/100, the paired comparison over shared scenarios (``paired.errors``
    is ``None`` when the mix was refused) and the independent, session-clustered one.
    ``verdict`` names which of the two decides, and why."""

    clustered_a: ClusteredRate
    clustered_b: ClusteredRate
    paired: PairedComparison
    independent: ClusteredDiff
    expected_flips: float | None = None  # flips the shared scenarios show if nothing changed

    @property
    def called(self) -> tuple[str, bool] | None:
        """``(method, significant)`` of the one verdict on errors/100, or None when no
        difference is called: the table's errors/100 row shows this, not the z-test."""
        if self.paired.errors is not None:
            return "paired", self.paired.errors.significant
        st = self.paired.stratified
        if st is not None and st.refused is None:
            return "post-stratified", st.significant
        i = self.independent
        if not self.paired.mix.shared and i.diff100 is not None and i.lo100 is not None:
            return "sessions as clusters", i.significant
        return None

    @property
    def verdict(self) -> str:
        e = self.paired.errors
        if e is not None:
            called = "significant" if e.significant else "not significant"
            return (f"paired verdict on errors/100: {called} (permutation p "
                    f"{_p(e.p_value)}, alpha {e.alpha:g})")
        st = self.paired.stratified
        if st is not None and st.refused is None:
            called = "significant" if st.significant else "not significant"
            return (f"post-stratified verdict on errors/100 (shared tag mix): {called}, change "
                    f"{st.diff100:+.2f} [95% CI {st.lo100:+.2f} to {st.hi100:+.2f}], t p "
                    f"{_p(st.p_value)}")
        shared = len(self.paired.mix.shared)
        if shared == 0:
            i = self.independent
            if i.diff100 is None or i.lo100 is None:
                return "no shared scenarios and too few sessions: no difference called"
            called = "significant" if i.significant else "not significant"
            return (f"no shared scenarios: independent verdict on errors/100 (sessions as "
                    f"clusters): {called}, change {i.diff100:+.2f} [95% CI {i.lo100:+.2f} to "
                    f"{i.hi100:+.2f}], p {_p(i.p_value)}")
        return ("no verdict on errors/100: the runs hold different mixes and the overlap is "
                "too small to compare them fairly")


def analyse_units(units_a: Mapping[str, Sequence[Unit] | TargetStats],
                  units_b: Mapping[str, Sequence[Unit] | TargetStats],
                  groups: Iterable[str]) -> dict[str, UnitAnalysis]:
    """Session-level analysis of each common group (units grouped as the summaries, or
    their sums per scenario: ``store.cluster_stats``)."""
    out = {}
    for name in groups:
        a, b = as_stats(units_a.get(name, ())), as_stats(units_b.get(name, ()))
        out[name] = UnitAnalysis(units_rate(a), units_rate(b), compare_paired(a, b),
                                 compare_independent(a, b), expected_flips(a, b))
    return out


def with_units(cmp: RunComparison, units_a: Mapping[str, Sequence[Unit] | TargetStats],
               units_b: Mapping[str, Sequence[Unit] | TargetStats]) -> RunComparison:
    """``cmp`` with each common group's session-level analysis (:func:`analyse_units`) and
    its classes called on Rao–Scott-corrected p-values (each class's own design effect
    from the session clusters of both runs), Holm-adjusted across the group's classes."""
    from dataclasses import replace

    class_p = {}
    for name, group in cmp.groups.items():
        a, b = as_stats(units_a.get(name, ())), as_stats(units_b.get(name, ()))
        class_p[name] = holm({code: rao_scott_test(a, b, code).p_value
                              for code in group.classes})
    return replace(cmp, units=analyse_units(units_a, units_b, cmp.groups),
                   class_p_holm=class_p, class_method=RAO_SCOTT_TEST)


def expected_flips(a: TargetStats, b: TargetStats) -> float | None:
    """How many shared scenarios would flip (every repeat passed on one side, not on the
    other) if nothing changed, summed over the scenarios: ``P(flip) = qᵃ(1 − qᵇ) +
    qᵇ(1 − qᵃ) = qᵃ + qᵇ − 2qᵃ⁺ᵇ`` for ``a`` and ``b`` repeats and pass rate ``q``, each
    power estimated without bias from the ``x`` passes of the ``n = a + b`` sessions
    pooled, ``qʲ ≈ C(x, j) / C(n, j)`` (as pass^k is).  Plugging in the pooled ``q̂``
    instead is biased low (printed 50–82% of the flips observed under no change).
    Flips at about this count are the noise of repeats, not a change.  None when the
    outcomes were not read."""
    from math import comb

    total, seen = 0.0, False
    for scenario, x in a.scenarios.items():
        y = b.scenarios.get(scenario)
        if y is None or x.passes is None or y.passes is None or not x.passes.n or not y.passes.n:
            continue
        seen = True
        ra, rb = x.passes.n, y.passes.n
        n, passed = ra + rb, x.passes.passed + y.passes.passed

        def power(j: int, n: int = n, passed: int = passed) -> float:
            return comb(passed, j) / comb(n, j)

        total += power(ra) + power(rb) - 2 * power(n)
    return total if seen else None


def unit_lines(analysis: UnitAnalysis) -> list[str]:
    """The session-level lines printed under a group's table."""
    lines = [f"errors/100 clustered (sessions): a {_clustered(analysis.clustered_a)}, "
             f"b {_clustered(analysis.clustered_b)}"]
    lines += paired_lines(analysis.paired)
    lines.append(analysis.verdict)
    return lines


def _clustered(rate: ClusteredRate) -> str:
    return "–" if rate.per100 is None else f"{rate.per100:.2f} {interval_text(rate)}"


ALLOWED = "allowed"
"""Stands for an allowed call in :attr:`RescoreMoves.moves`."""


@dataclass(frozen=True, slots=True)
class RescoreMoves:
    """Run b re-judged run a's own calls (``agent-eval rescore``), so what moved is an exact
    count, not a sample.  ``calls`` were found in both runs (same session key and call
    index; sessions that ended in a fault left out, as from every rate); ``moves`` counts,
    for each call whose primary class changed, (class in a, class in b), an allowed call
    being ``"allowed"``; most common first, then by class."""

    calls: int
    moves: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        return sum(self.moves.values())


def rescore_moves(
    sessions_a: Iterable[SessionRow],
    calls_a: Iterable[CallRow],
    sessions_b: Iterable[SessionRow],
    calls_b: Iterable[CallRow],
) -> RescoreMoves:
    """Pair the calls of a run and its rescore by (session key, call index) and count how
    their primary class moved (pure)."""
    before = _classes_by_key(sessions_a, calls_a)
    after = _classes_by_key(sessions_b, calls_b)
    common = before.keys() & after.keys()
    moves = Counter((before[k], after[k]) for k in common if before[k] != after[k])
    ordered = sorted(moves.items(), key=lambda item: (-item[1], item[0]))
    return RescoreMoves(calls=len(common), moves=dict(ordered))


def _classes_by_key(
    sessions: Iterable[SessionRow], calls: Iterable[CallRow]
) -> dict[tuple[str, int], str]:
    keys = {s.id: s.key or f"session {s.id}" for s in sessions if s.status != "error"}
    return {
        (keys[c.session_id], c.index): (c.primary or "denied") if c.decision == "deny" else ALLOWED
        for c in calls
        if c.session_id in keys
    }


def compare_runs(
    summaries_a: Mapping[str, GroupSummary],
    summaries_b: Mapping[str, GroupSummary],
    repeats_a: Mapping[tuple[str, str], RepeatStats],
    repeats_b: Mapping[tuple[str, str], RepeatStats],
    *,
    label_a: str = "a",
    label_b: str = "b",
    by: CompareBy = "target",
    exact: bool = True,
) -> RunComparison:
    """Line up two runs.  ``summaries_*`` come from ``summarize(..., by=by)`` (``"all"``
    groups are named ``all``); ``repeats_*`` from ``repeat_stats`` over the same rows;
    ``exact=False`` leaves Fisher's exact p out (a page that does not show it)."""
    if by not in COMPARE_BYS:
        raise ValueError(f"unknown grouping {by!r}; expected one of {', '.join(COMPARE_BYS)}")
    common = [name for name in summaries_a if name in summaries_b]
    outcomes_a, outcomes_b = _outcomes(repeats_a, by), _outcomes(repeats_b, by)
    groups = {name: compare_groups(summaries_a[name], summaries_b[name], exact=exact)
              for name in common}
    return RunComparison(
        label_a=label_a,
        label_b=label_b,
        by=by,
        groups=groups,
        only_a=[name for name in summaries_a if name not in summaries_b],
        only_b=[name for name in summaries_b if name not in summaries_a],
        flips={name: _flips(outcomes_a.get(name, {}), outcomes_b.get(name, {}))
               for name in common},
        recovery={name: compare_recovery(summaries_a[name], summaries_b[name], exact=exact)
                  for name in common},
        class_p_holm={name: holm({code: c.p_value for code, c in group.classes.items()})
                      for name, group in groups.items()},
    )


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979), keys kept: the
    ``i``-th smallest of ``m`` becomes ``max_{j ≤ i} min(1, (m − j + 1) p_(j))``.  By hand,
    as the rest of the statistics (the core installs no scipy); equal to
    ``statsmodels.stats.multitest.multipletests(method="holm")`` (tested)."""
    m = len(p_values)
    out: dict[str, float] = {}
    running = 0.0
    for rank, (key, p) in enumerate(sorted(p_values.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - rank) * p))
        out[key] = running
    return {key: out[key] for key in p_values}


def compare_recovery(a: GroupSummary, b: GroupSummary, *, exact: bool = True
                     ) -> dict[NextAction, RateComparison]:
    """Each next action's share of denials, b against a (the reaction to denial that
    docs/design.md's users compare: pivot at once, or retry denied variants, or give up)."""
    return {
        action: compare_rates(a.recovery.actions[action].k, a.recovery.denials,
                              b.recovery.actions[action].k, b.recovery.denials, exact=exact)
        for action in NEXT_ACTIONS
    }


def _outcomes(
    repeats: Mapping[tuple[str, str], RepeatStats], by: CompareBy
) -> dict[str, dict[str, tuple[bool, ...]]]:
    """group -> scenario -> outcomes; with ``all`` every target's repeats are pooled."""
    grouped: dict[str, dict[str, tuple[bool, ...]]] = {}
    for (target, scenario), stats in repeats.items():
        group = target if by == "target" else "all"
        per_scenario = grouped.setdefault(group, {})
        per_scenario[scenario] = per_scenario.get(scenario, ()) + stats.outcomes
    return grouped


def _flips(a: dict[str, tuple[bool, ...]], b: dict[str, tuple[bool, ...]]) -> list[ScenarioFlip]:
    """The same rule as ``metrics.flipped_scenarios``: outcome = every repeat passed."""
    flips = []
    for scenario in sorted(a.keys() & b.keys()):
        if a[scenario] and b[scenario] and all(a[scenario]) != all(b[scenario]):
            direction: Literal["fixed", "broke"] = "fixed" if all(b[scenario]) else "broke"
            flips.append(ScenarioFlip(scenario, a[scenario], b[scenario], direction))
    return flips


# --- rendering ---------------------------------------------------------------------------

_HEADER = ("measure", "a", "b", "b − a [95% CI]", "p (z-test)", "p (Fisher)", "significant")


def comparison_rows(
    group: GroupComparison, recovery: Mapping[NextAction, RateComparison] | None = None,
    analysis: UnitAnalysis | None = None, class_p: Mapping[str, float] | None = None,
) -> list[tuple[str, ...]]:
    """The table of one group: errors/100, each class, handshake completion and the
    share of denials followed by each next action (only pivot without ``recovery``).

    One verdict per row: with ``analysis`` the errors/100 row is called by the
    session-level method named under the table (``yes (paired)``), the z-test and Fisher
    p beside it being detail; with ``class_p`` (Holm-adjusted) a class is called on it."""
    from agent_eval.policy import get_rule

    errors = _row("errors/100 calls", group.errors)
    called = analysis.called if analysis is not None else None
    if analysis is not None:
        errors = (*errors[:-1], "– (no verdict)" if called is None
                  else f"{'yes' if called[1] else 'no'} ({called[0]})")
    rows = [errors]
    for code, cmp in group.classes.items():
        rule = get_rule(code)
        row = _row(f"  {code} {rule.name}" if rule else f"  {code}", cmp)
        if class_p is not None and code in class_p:
            row = (*row[:-1], f"{'yes' if class_p[code] < 0.05 else 'no'} "
                   f"(Holm p {_p(class_p[code])})")
        rows.append(row)
    rows.append(_row("handshake completed %", group.handshake))
    actions = recovery or {"pivot": group.pivot}
    rows += [_row(f"{action} after denial %", cmp) for action, cmp in actions.items()]
    return rows


def _row(label: str, cmp: RateComparison) -> tuple[str, ...]:
    def side(rate) -> str:
        return "–" if rate.per100 is None else f"{rate.per100:.2f} ({rate.k}/{rate.n})"

    if cmp.diff100 is None:
        diff = "–"
    else:
        diff = f"{cmp.diff100:+.2f} [{cmp.lo100:+.2f} to {cmp.hi100:+.2f}]"
    return (label, side(cmp.a), side(cmp.b), diff, _p(cmp.p_value), _p(cmp.fisher_p),
            "yes" if cmp.significant else "no")


def stack_line(group: GroupComparison) -> str | None:
    """What the serving stack did, said before any model figure: stack faults per 100
    calls in a and b and the change, and whether the model figures below compare the
    model alone (they never hold stack faults).  None when neither run had any."""
    cmp = group.stack_faults
    if cmp is None or (cmp.a.k == 0 and cmp.b.k == 0):
        return None

    def side(rate) -> str:
        return ("– (no call reached the stack)" if rate.per100 is None
                else f"{rate.per100:.2f} ({rate.k}/{rate.n})")

    change = ("" if cmp.diff100 is None else
              f", b − a {cmp.diff100:+.2f} [{cmp.lo100:+.2f} to {cmp.hi100:+.2f}]"
              f"{' (significant)' if cmp.significant else ''}")
    rose = cmp.diff100 is not None and cmp.significant and cmp.diff100 > 0
    return (f"stack faults/100 calls (the server's, AE5xx): a {side(cmp.a)}, b {side(cmp.b)}"
            f"{change}{'; the stack loses more in b' if rose else ''}. The model's figures "
            "below never count them." + _who(group))


def _who(group: GroupComparison) -> str:
    """Which one changed, when the stack faults moved apart and the model's errors did
    not: "the model is the same; the stack loses 7.40 calls per 100 more in b"."""
    cmp, errors = group.stack_faults, group.errors
    if cmp is not None and cmp.diff100 is None and errors.diff100 is None:
        return _nothing_to_compare(cmp)
    if cmp is None or cmp.diff100 is None or not cmp.significant or errors.significant:
        return ""
    more = "more" if cmp.diff100 > 0 else "fewer"
    if errors.diff100 is None:
        same = "the model made no call"
    else:
        interval = ("" if errors.lo100 is None or errors.hi100 is None
                    else f" [{errors.lo100:+.2f} to {errors.hi100:+.2f}]")
        same = (f"the model is the same (errors/100 b − a {errors.diff100:+.2f}{interval}, "
                "not significant)")
    return f" So {same}; the stack loses {abs(cmp.diff100):.2f} calls per 100 {more} in b."


def _nothing_to_compare(cmp: RateComparison) -> str:
    """One side's stack lost every call it was given and no call of the model's reached
    the other's (llama-server without jinja against the same model with it): the
    stacks differ, the model's figures cannot."""
    lossy = [(name, rate) for name, rate in (("a", cmp.a), ("b", cmp.b))
             if rate.n and rate.k == rate.n]
    if len(lossy) != 1 or (cmp.a.n and cmp.b.n):
        return ""
    name, rate = lossy[0]
    other = "b" if name == "a" else "a"
    return (f" So the stack of {name} lost every one of the {rate.n} calls it was given "
            f"and no call of the model's reached {other}'s: the model made no error "
            "through either, and nothing of the model's can be compared; fix the stack "
            f"of {name}.")


def _stack_diff(cmp: RunComparison, name: str) -> list[str]:
    """The line saying the two runs' serving stacks differ, and how; none when they are
    the same (or a run holds no stack fingerprint)."""
    changes = cmp.stack_changes.get(name)
    if not changes:
        return []
    return ["the serving stacks differ (b against a): " + "; ".join(changes)]


def _noise(analysis: UnitAnalysis | None) -> str:
    if analysis is None or analysis.expected_flips is None:
        return ""
    return (f" (about {analysis.expected_flips:.1f} expected from repeat noise alone if "
            "nothing changed)")


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _flip_line(flip: ScenarioFlip) -> str:
    def marks(outcomes: tuple[bool, ...]) -> str:
        return "".join("P" if passed else "F" for passed in outcomes)

    return f"{flip.scenario}: {flip.direction} (a {marks(flip.a)} -> b {marks(flip.b)})"


def _legend(cmp: RunComparison) -> list[str]:
    return [
        f"b = {cmp.label_b} against a = {cmp.label_a}; differences read b − a "
        "(errors per 100 calls; shares in percentage points).",
        f"significant: {cmp.test} at alpha 0.05; p (Fisher): {cmp.exact_test}"
        + (" (both treat calls as independent: detail; the errors/100 row is called by the "
           "session-level method named in its cell and under the table, docs/statistics.md)."
           if cmp.units else "."),
        *([f"classes: exploratory, each called on its p ({_class_test(cmp)}) adjusted by "
           "Holm's method across the table's classes (family-wise alpha 0.05)."]
          if cmp.class_p_holm else []),
        "Flipped: outcome (every repeat passed, P/F per repeat) differs between the runs.",
        *([f"clustered interval: {CLUSTERED_METHOD}."] if cmp.units else []),
    ]


def _class_test(cmp: RunComparison) -> str:
    if cmp.class_method == RAO_SCOTT_TEST:
        return ("the z statistic divided by the class's design effect from the session "
                "clusters: Rao–Scott")
    return "per-call z-test"


def _missing(cmp: RunComparison) -> list[str]:
    lines = []
    if cmp.only_a:
        lines.append(f"only in a ({cmp.label_a}): {', '.join(cmp.only_a)}")
    if cmp.only_b:
        lines.append(f"only in b ({cmp.label_b}): {', '.join(cmp.only_b)}")
    if not cmp.groups:
        lines.append("no target is present in both runs: nothing to compare "
                     "(try --by all)")
    return lines


def _rescore_lines(cmp: RunComparison) -> list[str]:
    moved = cmp.rescore
    if moved is None:
        return []
    lines = [
        f"a and b judge the same {moved.calls} calls (one is agent-eval rescore of the "
        f"other): {moved.changed} moved class (a -> b), an exact count, not a sample; the "
        "tests above treat the runs as independent samples.",
    ]
    lines += [f"{a} -> {b}: {n} call{'s' if n != 1 else ''}" for (a, b), n in moved.moves.items()]
    return lines


METHOD_LINE = "method: session-level verdicts, paired by scenario; --explain says more"


def verdict_lines(cmp: RunComparison) -> list[str]:
    """What changed, first: per group, errors/100 in a and b (clustered intervals), the
    one verdict on it, handshake completion and the flips; the tables follow."""
    lines = [f"b = {cmp.label_b} against a = {cmp.label_a}:"]
    lines += [f"  {line}" for line in stack_rises(cmp)]  # before anything of the model
    for name, group in cmp.groups.items():
        analysis = cmp.units.get(name)
        e = group.errors
        rates = f"errors/100 {_short(e.a.per100)} -> {_short(e.b.per100)}"
        called = analysis.called if analysis is not None else ("per call", e.significant)
        verdict = ("no difference called" if called is None else
                   f"{'SIGNIFICANT' if called[1] else 'not significant'} ({called[0]})")
        hs = group.handshake
        handshake = ("" if hs.a.per100 is None and hs.b.per100 is None else
                     f"; handshake {_short(hs.a.per100)}% -> {_short(hs.b.per100)}%")
        flips = cmp.flips.get(name, [])
        lines.append(f"  {name}: {rates}, {verdict}{handshake}; {len(flips)} scenario"
                     f"{'s' if len(flips) != 1 else ''} flipped")
    return lines


def stack_rises(cmp: RunComparison) -> list[str]:
    """One line per common group whose stack faults rose significantly from a to b
    (``stack_faults.stack_rise_line``): what ``compare`` says first."""
    return [stack_rise_line(name, group.stack_faults, group.stack_codes,
                            cmp.stack_changes.get(name) or ())
            for name, group in cmp.groups.items()
            if group.stack_faults is not None and stack_rose(group.stack_faults)]


def _short(per100: float | None) -> str:
    return "–" if per100 is None else f"{per100:.2f}"


def render_comparison_text(cmp: RunComparison, *, width: int | None = None,
                           explain: bool = False) -> str:
    """The verdict first (:func:`verdict_lines`) and the method in one line (in full with
    ``explain``), then aligned plain-text tables, one per group, each followed by its
    flipped scenarios; for a run and its rescore, the exact moves last.  Within ``width``
    columns: prose wraps between words; a table too wide drops its two p columns (detail
    beside the verdict, said under the table), and one still too wide gives each measure
    two lines."""
    method = _legend(cmp) if explain else [METHOD_LINE]
    lines = fit_lines([*verdict_lines(cmp), *_missing(cmp), "", *method], width)
    for name, group in cmp.groups.items():
        rows = [_HEADER, *comparison_rows(group, cmp.recovery.get(name), cmp.units.get(name),
                                          cmp.class_p_holm.get(name))]
        stack = [*_stack_diff(cmp, name), *filter(None, [stack_line(group)])]
        lines += ["", f"== {name} ==", *fit_lines(stack, width),
                  *_table_lines(rows, width)]
        after = unit_lines(cmp.units[name]) if name in cmp.units else []
        flips = cmp.flips.get(name, [])
        after.append(f"flipped scenarios: {len(flips)}{_noise(cmp.units.get(name))}")
        after += [f"  {_flip_line(flip)}" for flip in flips]
        lines += fit_lines(after, width)
    if cmp.rescore is not None:
        first, *moves = _rescore_lines(cmp)
        lines += ["", "== rescore: what moved ==",
                  *fit_lines([first, *(f"  {m}" for m in moves)], width)]
    return "\n".join(lines) + "\n"


_P_COLUMNS = (4, 5)  # p (z-test), p (Fisher): the detail a narrow terminal does without


def _table_lines(rows: list[tuple[str, ...]], width: int | None) -> list[str]:
    """The aligned table; narrower when ``width`` asks (see :func:`render_comparison_text`)."""
    full = _aligned(rows)
    if width is None or max(map(len, full)) <= width:
        return full
    keep = [i for i in range(len(_HEADER)) if i not in _P_COLUMNS]
    narrow = _aligned([tuple(row[i] for i in keep) for row in rows])
    if max(map(len, narrow)) <= width:
        return [*narrow, *fit_lines(["(p (z-test) and p (Fisher) left out at this width: "
                                     "--json or --markdown has them)"], width)]
    out = []
    for row in rows[1:]:  # each measure: its name, then its values, "head value" unbroken
        out.append(row[0])
        indent = " " * (len(row[0]) - len(row[0].lstrip(" ")) + 4)
        line = ""
        for head, cell in zip(_HEADER[1:], row[1:], strict=True):
            piece = f"{head} {cell.strip()}"
            if line and len(line) + 3 + len(piece) > width:
                out.append(line)
                line = ""
            line = f"{line}   {piece}" if line else indent + piece
        out.append(line)
    return out


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join([row[0].ljust(widths[0]),
                       *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]).rstrip()
            for row in rows]


def render_comparison_markdown(cmp: RunComparison) -> str:
    """The same as Markdown, for a PR comment or a step summary."""
    lines = [f"## agent-eval compare: {_md(cmp.label_a)} → {_md(cmp.label_b)}", ""]
    lines += [f"**{_md(line)}**  " for line in stack_rises(cmp)]
    lines += [f"{_md(line)}  " for line in (*_legend(cmp), *_missing(cmp))]
    for name, group in cmp.groups.items():
        stack = [*_stack_diff(cmp, name), *filter(None, [stack_line(group)])]
        lines += ["", f"### {_md(name)}", *(["", *(f"{_md(s)}  " for s in stack)] if stack
                                            else []), "",
                  "| " + " | ".join(_HEADER) + " |", "|---|" + "---:|" * (len(_HEADER) - 1)]
        lines += ["| " + " | ".join(_md(cell.strip()) for cell in row) + " |"
                  for row in comparison_rows(group, cmp.recovery.get(name),
                                             cmp.units.get(name), cmp.class_p_holm.get(name))]
        if name in cmp.units:
            lines += [""] + [f"{_md(line)}  " for line in unit_lines(cmp.units[name])]
        flips = cmp.flips.get(name, [])
        lines += ["", f"Flipped scenarios: {len(flips)}{_noise(cmp.units.get(name))}"]
        lines += [f"- {_md(_flip_line(flip))}" for flip in flips]
    if cmp.rescore is not None:
        first, *moves = _rescore_lines(cmp)
        lines += ["", "### Rescore: what moved", "", _md(first), ""]
        lines += [f"- {_md(m)}" for m in moves]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Names and labels from config files render as text, never as HTML or table cells."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|").replace("\n", " ")
