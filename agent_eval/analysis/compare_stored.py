"""Two stored runs compared: one library call from run references to a comparison.

``agent-eval compare`` and the viewer's compare page both call :func:`compare_stored`
and show the :class:`StoredComparison` it returns: the CLI prints it (text, Markdown or
:meth:`StoredComparison.json`), the page draws its rows from the same
``RunComparison``, so a page and the CLI never disagree on a rate, an interval or a
Holm-adjusted p.  The figures are the store's aggregator's (``Store.summarize``), the
session-level analysis reads the sums of session clusters (``Store.cluster_stats``), and
the statistics are ``analysis.comparison``'s (pure).

``detail`` says what is read: ``"full"`` is ``compare``'s (Fisher's exact p beside the
z-test, the scenarios that flipped, the calls a rescore moved, each target's serving
stack, and a refusal when the runs share no target); ``"table"`` the page's (the z-test
only, every target the runs declared, even one with no session yet).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_eval.analysis.comparison import (
    CompareBy,
    RunComparison,
    compare_runs,
    render_comparison_markdown,
    render_comparison_text,
    rescore_moves,
    with_units,
)
from agent_eval.analysis.paired_replay import (
    PairedReplay,
    load_replay_pairs,
    render_paired_markdown,
    render_paired_text,
)
from agent_eval.errors import ConfigError
from agent_eval.metrics import RepeatStats
from agent_eval.metrics.repeats import repeats_from_outcomes
from agent_eval.metrics.sufficient import TargetStats
from agent_eval.metrics.summary import GroupSummary, Tally
from agent_eval.store import RunInfo, Store
from agent_eval.transcript import run_stacks, stack_changes, target_stack

if TYPE_CHECKING:
    from agent_eval.store import Detail

CompareDetail = Literal["full", "table"]
"""``full``: what ``agent-eval compare`` prints; ``table``: the viewer's compare page."""


@dataclass(frozen=True)
class StoredComparison:
    """Run b against run a, as read from the store: ``comparison`` (every rate, interval,
    p-value and, with the session-level analysis, each group's verdict) and ``replay``,
    the paired table when one run is ``agent-eval replay`` of the other."""

    run_a: RunInfo
    run_b: RunInfo
    comparison: RunComparison
    replay: PairedReplay | None = None
    session_level: bool = False  # the session-level analysis was read (``with_units``)

    def text(self, *, width: int | None = None, explain: bool = False) -> str:
        return (render_comparison_text(self.comparison, width=width, explain=explain)
                + replay_text(self.replay))

    def markdown(self) -> str:
        return render_comparison_markdown(self.comparison) + replay_text(self.replay,
                                                                         markdown=True)

    def json(self) -> str:
        """``compare --json``: the comparison whole, each group's one verdict on
        errors/100 (``units.NAME.verdict``) and, for a replay, the paired table."""
        data = jsonable(self.comparison)
        for name, analysis in self.comparison.units.items():  # the one verdict on errors/100
            called = analysis.called
            data["units"][name]["verdict"] = None if called is None else {
                "method": called[0], "significant": called[1]}
        paired = self.replay
        extra = {} if paired is None else {
            "replay": jsonable(paired) | {"moved": jsonable(paired.moved)}}
        return json.dumps(data | extra, indent=2)


def compare_stored(store: Store, run_a: str | int, run_b: str | int | None = None, *,
                   targets: tuple[str, str] | None = None, by: CompareBy = "target",
                   detail: CompareDetail = "full", max_sessions: int | None = None
                   ) -> StoredComparison:
    """Run ``run_b`` against run ``run_a`` (ids, ``latest`` or ``label:NAME``), or, with
    ``targets=(A, B)``, target B of run ``run_a`` against its target A, each renamed to
    one group ``A -> B`` so the comparison pairs them scenario by scenario.
    Each common group gets its clustered, paired and independent analysis, and its
    classes are called on Rao–Scott p-values (``analysis.comparison.with_units``), unless
    the runs hold more than ``max_sessions`` sessions together (the page of a big run
    leaves it for a second request; ``session_level`` says whether it was read).  A bad
    run or pair of targets, or (``detail="full"``) two runs that share no group, is a
    ConfigError."""
    if targets is not None:
        return _compare_targets(store, run_a, targets)
    if run_b is None:
        raise ValueError("compare_stored takes run_b or targets")
    full = detail == "full"
    info_a, info_b = store.resolve_run(run_a), store.resolve_run(run_b)
    infos = (info_a, info_b)
    if full:
        summaries = [store.summarize([i.id], by, with_turns=False, detail="actions")
                     for i in infos]
    else:
        summaries = [every_target(store, i.id, "rates") for i in infos]
    session_level = by != "agent" and (max_sessions is None or sum(
        t.sessions + t.error_sessions for side in summaries for t in side.values())
        <= max_sessions)
    grouped = by != "agent" and (full or session_level)
    units = [side_units(store, i.id, by) if grouped else {} for i in infos]
    repeats: list[Mapping[tuple[str, str], RepeatStats]] = [{}, {}]
    if full and by != "agent":
        flippable = flip_candidates(*units)  # the P/F of each repeat, for these only
        repeats = [repeats_from_outcomes(store.session_outcomes([i.id], flippable))
                   for i in infos]
    paired = load_replay_pairs(store, info_a, info_b)
    result = compare_runs(summaries[0], summaries[1], repeats[0], repeats[1],
                          label_a=run_label(info_a), label_b=run_label(info_b), by=by,
                          exact=full)
    if full:
        result = _with_provenance(store, result, info_a, info_b, by)
        if not result.groups and by != "all" and paired is None:  # a replay pairs its turns
            raise ConfigError(no_common_line(result, by), field="RUN_A/RUN_B")
    if session_level:
        result = with_units(result, *units)
    return StoredComparison(info_a, info_b, result, paired, session_level)


def _with_provenance(store: Store, result: RunComparison, info_a: RunInfo, info_b: RunInfo,
                     by: CompareBy) -> RunComparison:
    """``compare``'s extras: each target's serving stack, from the runs' fingerprints, and
    for a rescore pair, the calls whose class moved (exact counts)."""
    if by == "target":
        stacks_a, stacks_b = run_stacks(info_a.fingerprint), run_stacks(info_b.fingerprint)
        result = dataclasses.replace(result, stack_changes={
            name: stack_changes(target_stack(stacks_a, name), target_stack(stacks_b, name))
            for name in result.groups})
    if is_rescore_pair(info_a, info_b):
        a, b = [info_a.id], [info_b.id]
        moved = rescore_moves(store.session_rows(a), store.call_rows(a),
                              store.session_rows(b), store.call_rows(b))
        result = dataclasses.replace(result, rescore=moved)
    return result


def _compare_targets(store: Store, run_ref: str | int, targets: tuple[str, str]
                     ) -> StoredComparison:
    """``compare RUN --targets A,B``."""
    a, b = targets
    group = f"{a} -> {b}"
    info = store.resolve_run(run_ref)
    summaries = store.summarize([info.id], "target", with_turns=False, detail="actions")
    missing = [n for n in targets if n not in summaries]
    if missing:
        raise ConfigError(f"run {info.id} has no sessions of {', '.join(map(repr, missing))}"
                          f"; it holds {', '.join(summaries) or 'none'}", field="--targets")
    units = side_units(store, info.id, "target")
    sides = [{group: units[a]}, {group: units[b]}]
    flippable = flip_candidates(*sides)
    outcomes = repeats_from_outcomes(store.session_outcomes([info.id], flippable))
    repeats = [{(group, scenario): r for (target, scenario), r in outcomes.items()
                if target == name} for name in targets]
    label = run_label(info)
    result = compare_runs({group: summaries[a]}, {group: summaries[b]}, *repeats,
                          label_a=f"{a} in {label}", label_b=f"{b} in {label}")
    return StoredComparison(info, info, with_units(result, *sides), None, True)


def every_target(store: Store, run_id: int, detail: Detail) -> dict[str, GroupSummary]:
    """The aggregator's figures per target of the run, every target of the run in the
    order added (one that has no session yet with zeros): what the viewer's pages show."""
    figures = store.summarize([run_id], "target", with_turns=False, detail=detail)
    return {t.name: figures.get(t.name) or Tally().freeze(t.name, False)
            for t in store.run_targets(run_id)}


def side_units(store: Store, run_id: int, by: str) -> dict[str, TargetStats]:
    """One run's sums of session clusters and outcomes (``metrics.sufficient.TargetStats``)
    grouped as ``compare`` groups them (target, or ``all``), by GROUP BY per (target,
    scenario)."""
    return store.cluster_stats([run_id], by="all" if by == "all" else "target",
                               passes=True, classes=True)


def flip_candidates(units_a: Mapping[str, TargetStats],
                    units_b: Mapping[str, TargetStats]) -> set[str]:
    """The scenarios whose outcome (every repeat passed) differs between the runs in some
    group both hold: the only ones ``compare`` prints repeat by repeat."""
    return {scenario for name in units_a.keys() & units_b.keys()
            for scenario, a in units_a[name].scenarios.items()
            if (b := units_b[name].scenarios.get(scenario)) is not None
            and a.passes is not None and b.passes is not None and a.passes.n and b.passes.n
            and a.passes.all_passed != b.passes.all_passed}


def is_rescore_pair(info_a: RunInfo, info_b: RunInfo) -> bool:
    """One run re-judges the other's calls: the same calls on both sides."""
    return (info_b.kind == "rescore" and info_b.parent_run_id == info_a.id) or (
        info_a.kind == "rescore" and info_a.parent_run_id == info_b.id
    )


def no_common_line(result: RunComparison, by: str) -> str:
    """Two runs with no target (agent) in common: which each has, and what to do."""
    what = "agent" if by == "agent" else "target"

    def has(names: list[str]) -> str:
        return ", ".join(map(repr, names)) or "none"

    return (f"{result.label_a} and {result.label_b} share no {what}: {result.label_a} has "
            f"{has(result.only_a)}, {result.label_b} has {has(result.only_b)}; compare each "
            "run whole with --by all, or two targets of one run with RUN --targets A,B")


def replay_text(paired: PairedReplay | None, *, markdown: bool = False) -> str:
    if paired is None:
        return ""
    return render_paired_markdown(paired) if markdown else render_paired_text(paired)


def run_label(info: RunInfo) -> str:
    return f"run {info.id}" + (f" ({info.label})" if info.label else "")


def jsonable(value: Any) -> Any:
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
