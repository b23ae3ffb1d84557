"""The index page's context: every table of the report, as plain records and strings.

Every figure comes from the store's aggregator (:func:`read_figures`: ``Store.summarize``,
``Store.cluster_stats``, ``Store.session_outcomes`` for pass^k and flips and
``Store.source_agreement`` for the agreement table, as the viewer, ``gate`` and
``compare`` read theirs); the session list and the disagreements listed from one pass
over the small session rows and the streamed calls.  Columns are targets; with several runs each (run, target)
pair is its own column (``name · run N``) so runs sit side by side instead of being
pooled.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup

from agent_eval.metrics import (
    FISHER_TEST,
    TOTAL,
    Z_TEST,
    GroupSummary,
    Rate,
    RepeatSummary,
    class_table,
    summarize_repeats,
)
from agent_eval.metrics.classes import order_classes
from agent_eval.metrics.clustered import (
    CLUSTERED_METHOD,
    FEW_CLUSTERS,
    ClusteredRate,
    ClusteredSummary,
    clustered_text,
    summarize_clustered,
    sums_rate,
)
from agent_eval.metrics.repeats import repeats_from_outcomes
from agent_eval.metrics.sufficient import Sums, TargetStats
from agent_eval.metrics.summary import (
    NO_AGENT,
    GroupBy,
    session_failed,
    status_class,
    status_text,
)
from agent_eval.policy import get_rule
from agent_eval.report.agreement import (
    AgreementTally,
    DisagreementItem,
    SourceAgreement,
    agreement_cells,
    agreement_rows,
    disagreement_items,
)
from agent_eval.report.breakdown import BreakdownRow, breakdown_rows, scenario_rates, tag_rates
from agent_eval.report.charts import class_chart, error_chart
from agent_eval.report.lists import class_file, list_href, scenario_file
from agent_eval.report.pages import SessionLink, handshake_text, rule_href, session_href
from agent_eval.report.throughput import RunThroughput
from agent_eval.store import RunInfo, Store
from agent_eval.transcript import (
    EXIT_STATES,
    NEXT_ACTIONS,
    CallRow,
    NextAction,
    SessionRow,
    completeness_text,
    run_stacks,
    stack_line,
    telemetry_completeness,
)

STATISTICS = (
    "Every rate is errors (or sessions) per 100 with a Wilson 95% score interval in "
    "brackets, which treats each call as independent. Calls of one session err together, "
    "so the \"clustered\" table gives the interval to trust: sessions as clusters, "
    f"{CLUSTERED_METHOD}; \"few clusters\" marks fewer than {FEW_CLUSTERS} sessions "
    "(docs/statistics.md). Comparisons between targets use the "
    f"{Z_TEST}, with {FISHER_TEST} as a check at small counts. Sessions that ended in a "
    "server or harness fault (status error) are left out of every model rate."
)


@dataclass(frozen=True, slots=True)
class RunView:
    id: int
    label: str | None
    kind: str
    status: str
    suite: str | None
    created_at: datetime
    engine_version: str | None
    stacks: tuple[tuple[str, str], ...] = ()  # (target, its stack as one line)


@dataclass(frozen=True, slots=True)
class ClassRow:
    code: str  # a rule code, or "total"
    name: str | None
    href: str | None
    cells: tuple[str, ...]  # one per column: errors/100 [95% CI]
    links: tuple[str | None, ...] = ()  # per column: the list of that column's calls


@dataclass(frozen=True, slots=True)
class SessionItem:
    """One line of the session list: a link and what to see before opening it."""

    link: SessionLink
    column: str
    repeat: int
    calls: int
    denials: int
    handshake: str
    is_child: bool
    error: str | None
    handshake_open: bool = False

    @property
    def failed(self) -> bool:
        """Did not complete, holds a denied call, or left its handshake open
        (``metrics.session_failed``)."""
        return session_failed(self.link.status or "", self.denials, self.handshake_open)

    @property
    def status_class(self) -> str:
        return status_class(self.link.status or "", self.failed)

    @property
    def status_text(self) -> str:
        return status_text(self.link.status or "", self.denials)


@dataclass(frozen=True, slots=True)
class IndexPage:
    """``index.html``.  ``summaries`` and ``repeats`` are keyed by column, in column order;
    ``rows`` hold the same figures already formatted for the tables.  ``server`` holds one
    "Server throughput" section per run (see ``report/throughput.py``); empty when the
    page was built without a store to read server samples from.  ``scenario_rows`` /
    ``tag_rows`` are the "By scenario" / "By tag" tables (``report/breakdown.py``);
    ``agreement`` and ``disagreements`` compare our verdicts with the source harness's
    (``report/agreement.py``), empty when no call carries a source verdict."""

    title: str
    runs: tuple[RunView, ...]
    columns: tuple[str, ...]
    summaries: dict[str, GroupSummary]
    repeats: dict[str, RepeatSummary]
    target_rows: tuple[tuple[str, ...], ...]
    class_rows: tuple[ClassRow, ...]
    handshake_rows: tuple[tuple[str, ...], ...]
    recovery_rows: tuple[tuple[str, ...], ...]
    exit_rows: tuple[tuple[str, ...], ...]
    speed_rows: tuple[tuple[str, ...], ...]
    repeat_rows: tuple[tuple[str, ...], ...]
    sessions: tuple[SessionItem, ...]
    error_sessions: tuple[SessionItem, ...]
    class_chart: Markup
    error_chart: Markup
    statistics: str = STATISTICS
    server: tuple[RunThroughput, ...] = ()
    scenario_rows: tuple[BreakdownRow, ...] = ()
    tag_rows: tuple[BreakdownRow, ...] = ()
    agent_rows: tuple[BreakdownRow, ...] = ()  # by whose agent CLI rules judged (if any)
    leak_rows: tuple[tuple[str, ...], ...] = ()  # (class, name, count per column)
    # (code, name, faults per column), then "per 100 calls" (stack_fault_rows)
    stack_rows: tuple[tuple[str, ...], ...] = ()
    agreement: tuple[SourceAgreement, ...] = ()  # columns with source verdicts only
    agreement_rows: tuple[tuple[str, ...], ...] = ()
    disagreements: tuple[DisagreementItem, ...] = ()  # the first MAX_DISAGREEMENTS
    clustered: dict[str, ClusteredSummary] = dataclasses.field(default_factory=dict)
    clustered_rows: tuple[tuple[str, ...], ...] = ()

    @property
    def clustered_head(self) -> tuple[str, ...]:
        return CLUSTERED_HEAD
    failed: tuple[SessionItem, ...] = ()  # the first FAILED_ON_INDEX failed sessions
    # sessions from telemetry (``agent-eval collect``): what it could prove, in words
    completeness: str = ""
    # per MCP server named in the tool names: (server, tools, calls, denied, AE108 calls)
    mcp_rows: tuple[tuple[str, ...], ...] = ()
    # the distinct tool lists the sessions were offered: (hash prefix, tools, sessions)
    tool_list_rows: tuple[tuple[str, ...], ...] = ()
    drift: tuple[tuple[str, str], ...] = ()  # (tool, schemas offered) where it changed
    failed_total: int = 0
    scenario_links: dict[str, str] = dataclasses.field(default_factory=dict)  # -> list page


FAILED_ON_INDEX = 50

TARGET_HEAD = ("target", "sessions", "messages", "tool calls", "errors",
               "errors/100 [95% CI]", "Wilson CI (calls)", "handshake completion",
               "error sessions")  # fmt: skip
"""The per-target table: errors/100 with its clustered interval (sessions as clusters, the
one gate and compare decide on), Wilson's on calls after it as detail."""
HANDSHAKE_HEAD = ("target", "sessions with a handshake", "completed [95% CI]",
                  "mean share of steps done", "most-missed step")  # fmt: skip
RECOVERY_HEAD = ("target", "denials", *(f"{a} [95% CI]" for a in NEXT_ACTIONS),
                 "denials per session", "turns burned")  # fmt: skip
EXIT_HEAD = ("target", *EXIT_STATES, "typical exit state")
SPEED_HEAD = ("target", "errors/100", "latency p50 / p95 (s)", "TTFT p50 / p95 (s)",
              "decode tok/s", "completions/min", "allowed calls/min",
              "completed sessions/hour")  # fmt: skip
REPEAT_HEAD = ("target", "scenarios", "k", "pass^k (all k passed) [95% CI]",
               "mean pass^k estimate", "flip rate [95% CI]")  # fmt: skip


def column_namer(run_ids: list[int]):
    """How a session's column is named: its target, plus the run when there are several."""
    if len(run_ids) > 1:
        return lambda s: f"{s.target} · run {s.run_id}"
    return lambda s: s.target


def rate_text(rate: Rate | None, *, interval: bool = True, digits: int = 2) -> str:
    """``12.03 [7.9–18.0]``; ``–`` for an empty denominator."""
    if rate is None or rate.per100 is None:
        return "–"
    if not interval:
        return f"{rate.per100:.{digits}f}"
    return f"{rate.per100:.{digits}f} [{rate.lo100:.1f}–{rate.hi100:.1f}]"


def number_text(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True, slots=True)
class RunFigures:
    """Every figure of the index, from the store's aggregator: per column (``summaries``),
    per (scenario, column) and (tag, column) (the "By scenario" / "By tag" tables), and
    the sums behind each column's clustered intervals."""

    summaries: dict[str, GroupSummary]
    by_scenario: dict[tuple[str, str], GroupSummary]
    by_tag: dict[tuple[str, str], GroupSummary]
    clustered: dict[str, TargetStats]
    by_agent: dict[tuple[str, str], GroupSummary] = dataclasses.field(default_factory=dict)
    repeats: dict[str, RepeatSummary] = dataclasses.field(default_factory=dict)
    agreement: dict[str, tuple[int, int, int]] = dataclasses.field(default_factory=dict)
    # (tag, column) -> the sums of the clusters carrying the tag ("By tag" intervals)
    by_tag_clustered: dict[tuple[str, str], TargetStats] = dataclasses.field(
        default_factory=dict)
    # column -> next action -> its sums per scenario (the reaction table's intervals)
    actions_clustered: dict[str, dict[str, list[Sums]]] = dataclasses.field(
        default_factory=dict)


def read_figures(store: Store, run_ids: list[int]) -> RunFigures:
    """The index's figures of the runs (targets named as columns: :func:`column_namer`)."""
    def by(key: GroupBy) -> dict:
        return store.summarize(run_ids, (key, "target"), columns=True, with_turns=False,
                               detail="totals")

    return RunFigures(store.summarize(run_ids, "target", columns=True), by("scenario"),
                      by("tag"), store.cluster_stats(run_ids, classes=True, columns=True),
                      store.summarize(run_ids, ("agent", "target"), columns=True,
                                      with_turns=False, detail="rates"),
                      summarize_repeats(repeats_from_outcomes(
                          store.session_outcomes(run_ids, columns=True)).values()),
                      dict(store.source_agreement(run_ids, columns=True)),
                      store.tag_cluster_stats(run_ids, columns=True),
                      store.action_cluster_stats(run_ids, columns=True))


@dataclass(slots=True)
class CallTally:
    """Per-session call and denial counts, taken while the calls stream past; denied
    calls are kept (few) so repeats and the class lists need no second pass."""

    calls: Counter = dataclasses.field(default_factory=Counter)
    denials: Counter = dataclasses.field(default_factory=Counter)
    denied: list = dataclasses.field(default_factory=list)

    def watch(self, rows: Iterable[CallRow]) -> Iterator[CallRow]:
        for row in rows:
            self.calls[row.session_id] += 1
            if row.decision == "deny":
                self.denials[row.session_id] += 1
                self.denied.append(row)
            yield row


def _telemetry(sessions: list[SessionRow]) -> tuple[int, int, int] | None:
    """Events seen, calls judged and calls not judgeable over the sessions stored from
    telemetry; None when none was."""
    found = [f for s in sessions if (f := telemetry_completeness(s.tags, s.n_calls))]
    if not found:
        return None
    return (sum(f[0] for f in found), sum(f[1] for f in found), sum(f[2] for f in found))


def build_index_page(
    runs: list[RunInfo],
    sessions: list[SessionRow],
    calls: Iterable[CallRow],
    figures: RunFigures,
    tally: CallTally | None = None,
) -> IndexPage:
    """The index of a report over ``runs``; ``sessions`` already named by column (see
    :func:`column_namer`), ``figures`` the runs' :func:`read_figures`.  Pass ``tally`` to
    reuse the per-session counts afterwards."""
    tally = tally or CallTally()
    agreement = AgreementTally({s.id: s.target for s in sessions})
    for _ in agreement.watch(tally.watch(calls)):
        pass
    summaries = figures.summaries
    columns = tuple(summaries)
    repeats = figures.repeats if any(s.repeat > 0 for s in sessions) else {}
    links = session_links(sessions, from_dir=None)
    agreed = agreement_rows(figures.agreement, columns)
    items = tuple(
        SessionItem(
            link=links[s.id],
            column=s.target,
            repeat=s.repeat,
            calls=tally.calls[s.id],
            denials=tally.denials[s.id],
            handshake=handshake_text(s.handshake_required, s.handshake_done,
                                     s.handshake_completed, s.handshake_missed_step),
            is_child=s.parent_id is not None,
            error=s.error,
            handshake_open=s.handshake_required > 0 and not s.handshake_completed,
        )
        for s in sessions
    )
    items = tuple(sorted(items, key=lambda i: not i.failed))  # failed first, stable
    failed = tuple(i for i in items if i.failed)
    scenarios = sorted({s.scenario for s in sessions})
    clustered = clustered_fields(figures.clustered, summaries)
    rates = {name: c.errors for name, c in clustered["clustered"].items()}
    return IndexPage(
        title=_title(runs),
        runs=tuple(_run_view(r) for r in runs),
        columns=columns,
        summaries=summaries,
        repeats=repeats,
        target_rows=tuple(_target_row(name, s, rates.get(name)) for name, s in summaries.items()),
        class_rows=_class_rows(summaries, clustered["clustered"]),
        failed=failed[:FAILED_ON_INDEX],
        completeness=completeness_text(_telemetry(sessions)),
        failed_total=len(failed),
        scenario_links={name: list_href(scenario_file(n)) for n, name in enumerate(scenarios)},
        handshake_rows=tuple(_handshake_row(n, s) for n, s in summaries.items()),
        recovery_rows=tuple(_recovery_row(n, s, figures.actions_clustered.get(n))
                            for n, s in summaries.items()),
        exit_rows=tuple(_exit_row(n, s) for n, s in summaries.items()),
        speed_rows=tuple(_speed_row(n, s) for n, s in summaries.items()),
        repeat_rows=tuple(_repeat_row(n, r) for n, r in repeats.items()),
        sessions=items,
        error_sessions=tuple(i for i in items if i.link.status == "error"),
        class_chart=class_chart(summaries),
        error_chart=error_chart(summaries, rates),
        scenario_rows=breakdown_rows(figures.by_scenario, columns,
                                     (s.scenario for s in sessions if s.status != "error"),
                                     scenario_rates(figures.clustered)),
        tag_rows=breakdown_rows(figures.by_tag, columns, (
            tag for s in sessions if s.status != "error" for tag in s.tags),
            tag_rates(figures.by_tag_clustered)),
        agent_rows=agent_rows(figures.by_agent, columns, sessions),
        leak_rows=leak_rows(summaries),
        stack_rows=stack_fault_rows(summaries),
        agreement=agreed,
        agreement_rows=tuple(agreement_cells(a) for a in agreed),
        disagreements=disagreement_items(agreement, links),
        **clustered,
    )


def agent_rows(figures: dict[tuple[str, str], GroupSummary], columns: tuple[str, ...],
               sessions: list[SessionRow]) -> tuple[BreakdownRow, ...]:
    """The "By agent" table: errors per agent whose CLI rules judged the sessions; empty
    when every session was judged under an agent-eval allow-list."""
    if all(name == NO_AGENT for name, _ in figures):
        return ()
    return breakdown_rows(figures, columns, (s.policy_agent or NO_AGENT for s in sessions
                                             if s.status != "error"))


def leak_rows(summaries: dict[str, GroupSummary]) -> tuple[tuple[str, ...], ...]:
    """One row per leak class (calls an agent CLI's rules let through that their strict
    reading refuses), its count per column, then the total; empty with no leak."""
    codes = order_classes(code for s in summaries.values() for code in s.leaks)
    if not codes:
        return ()
    rows = [(code, _rule_name(code), *(str(s.leaks.get(code, 0)) for s in summaries.values()))
            for code in codes]
    rows.append(("total", "", *(str(sum(s.leaks.values())) for s in summaries.values())))
    return tuple(rows)


def stack_fault_rows(summaries: dict[str, GroupSummary]) -> tuple[tuple[str, ...], ...]:
    """One row per stack-fault code (AE5xx: what the serving stack lost or mangled, never
    in the errors above), its count per column, then the total and the rate per 100 calls
    the stack handled [Wilson 95%]; empty when no column had one."""
    codes = sorted({code for s in summaries.values() for code in s.stack_classes})
    if not codes:
        return ()
    rows = [(code, _rule_name(code),
             *(str(s.stack_classes.get(code, 0)) for s in summaries.values()))
            for code in codes]
    rows.append(("total", "", *(str(s.stack_faults.k) for s in summaries.values())))
    rows.append(("per 100 calls", "", *(rate_text(s.stack_faults) for s in summaries.values())))
    return tuple(rows)


def _rule_name(code: str) -> str:
    rule = get_rule(code)
    return rule.name if rule is not None else ""


CLUSTERED_HEAD = ("target", "errors/100", "clustered 95% CI (sessions)", "Wilson 95% CI",
                  "design effect", "sessions", "across tasks 95% CI (scenarios)")


def clustered_fields(stats: dict[str, TargetStats],
                     summaries: dict[str, GroupSummary]) -> dict:
    """``clustered`` and ``clustered_rows`` of the index page, from each column's sums
    (``Store.cluster_stats``)."""
    clustered = {name: summarize_clustered(stats.get(name) or [], s.classes)
                 for name, s in summaries.items()}
    rows = []
    for name, c in clustered.items():
        e, across, w = c.errors, c.across_tasks, summaries[name].errors
        rows.append((
            name, number_text(e.per100),
            _ci_text(e.lo100, e.hi100) + (" few clusters" if e.few_clusters else ""),
            _ci_text(w.lo100, w.hi100),
            number_text(e.deff), str(e.clusters), _ci_text(across.lo100, across.hi100),
        ))
    return {"clustered": clustered, "clustered_rows": tuple(rows)}


def _ci_text(lo: float | None, hi: float | None) -> str:
    return "–" if lo is None or hi is None else f"[{lo:.1f}–{hi:.1f}]"


def session_links(sessions: Iterable[SessionRow], *, from_dir: str | None) -> dict[int, SessionLink]:
    return {
        s.id: SessionLink(s.id, s.key or f"session {s.id}", s.target, s.scenario, s.status,
                          session_href(s.id, from_dir=from_dir))
        for s in sessions
    }


def _title(runs: list[RunInfo]) -> str:
    names = [f"run {r.id}" + (f" ({r.label})" if r.label else "") for r in runs]
    return "agent-eval report: " + ", ".join(names)


def _run_view(run: RunInfo) -> RunView:
    engine = run.fingerprint.get("engine_version") if isinstance(run.fingerprint, dict) else None
    return RunView(run.id, run.label, run.kind, run.status, suite_shown(run.suite),
                   run.created_at, str(engine) if engine is not None else None,
                   tuple((name, stack_line(stack))
                         for name, stack in run_stacks(run.fingerprint).items()))


def suite_shown(suite: str | None) -> str | None:
    """The suite as a report shared in CI should name it: a bundled suite by its name
    (``ralf (bundled)``), one under the working directory relative to it, any other by
    its folder's name; never the runner's absolute paths (a venv, a home folder)."""
    if not suite:
        return suite
    from pathlib import Path

    from agent_eval.scenario.bundled import data_dir

    path = Path(suite)
    if not path.is_absolute():
        return suite
    for root, shown in ((data_dir() / "scenarios", "{} (bundled)"), (Path.cwd(), "{}")):
        try:
            return shown.format(path.resolve().relative_to(root.resolve()).as_posix())
        except (ValueError, OSError):
            continue
    return path.name


def _target_row(name: str, s: GroupSummary, clustered: ClusteredRate | None
                ) -> tuple[str, ...]:
    hs = s.handshake.completed
    hs_text = f"{hs.k}/{hs.n} ({hs.per100:.0f}%)" if hs.n else "–"
    wilson = rate_text(s.errors)
    return (name, str(s.sessions), str(s.messages), str(s.calls), str(s.errors.k),
            clustered_text(clustered), wilson.partition(" ")[2] or "–", hs_text,
            str(s.error_sessions))


def _class_rows(summaries: dict[str, GroupSummary],
                clustered: Mapping[str, ClusteredSummary] | None = None
                ) -> tuple[ClassRow, ...]:
    """One row per failure class, then the total; each cell errors/100 with its clustered
    interval (sessions as clusters, as the gate's ``--max-class`` reads it) when the
    column's sums are there, else Wilson's on calls."""
    rows = []
    for code, cells in class_table(summaries):
        rule = get_rule(code) if code != TOTAL else None
        rows.append(ClassRow(
            code=code,
            name=rule.name if rule else None,
            href=rule_href(code, from_dir=None),
            cells=tuple(_class_cell(code, cells.get(col), (clustered or {}).get(col))
                        for col in summaries),
            links=tuple(
                list_href(class_file(code), n) if code != TOTAL and (r := cells.get(col))
                and r.k else (list_href("failed.html", n) if code == TOTAL else None)
                for n, col in enumerate(summaries)),
        ))
    return tuple(rows)


def _class_cell(code: str, wilson: Rate | None, clustered: ClusteredSummary | None) -> str:
    rate = None if clustered is None else (
        clustered.errors if code == TOTAL else clustered.classes.get(code))
    if rate is None or rate.per100 is None:
        return rate_text(wilson)
    return clustered_text(rate)


def _handshake_row(name: str, s: GroupSummary) -> tuple[str, ...]:
    hs = s.handshake
    share = f"{100 * hs.mean_done_share:.0f}%" if hs.mean_done_share is not None else "–"
    return (name, str(hs.sessions), rate_text(hs.completed, digits=0), share,
            hs.most_missed or "–")


def _recovery_row(name: str, s: GroupSummary,
                  clustered: dict[str, list[Sums]] | None = None) -> tuple[str, ...]:
    """Each next action's share of the denials with its clustered interval (sessions as
    clusters: ``Store.action_cluster_stats``), Wilson's on denials only when those sums
    were not read."""
    rec = s.recovery

    def share(action: NextAction) -> str:
        if clustered is None or rec.actions[action].per100 is None:
            return rate_text(rec.actions[action], digits=0)
        return share_text(sums_rate(clustered[action]))

    return (name, str(rec.denials), *(share(a) for a in NEXT_ACTIONS),
            number_text(rec.denials_per_session), str(rec.turns_burned))


def share_text(rate: ClusteredRate) -> str:
    """``50 [9.5–90.5]``: a share per 100 with its clustered interval, or ``50 [2
    sessions]`` where there is none (too few sessions to tell how they vary)."""
    if rate.per100 is None:
        return "–"
    if rate.lo100 is None or rate.hi100 is None:
        unit = "session" if rate.clusters == 1 else "sessions"
        return f"{rate.per100:.0f} [{rate.clusters} {unit}]"
    return f"{rate.per100:.0f} [{rate.lo100:.1f}–{rate.hi100:.1f}]"


def _exit_row(name: str, s: GroupSummary) -> tuple[str, ...]:
    states = s.exit_states
    typical: str = "–"
    if any(states.values()):
        typical = max(EXIT_STATES, key=lambda st: states.get(st, 0))
    return (name, *(str(states.get(st, 0)) for st in EXIT_STATES), typical)


def _speed_row(name: str, s: GroupSummary) -> tuple[str, ...]:
    sp = s.speed
    return (
        name,
        rate_text(s.errors, interval=False),
        f"{number_text(sp.latency_p50)} / {number_text(sp.latency_p95)}",
        f"{number_text(sp.ttft_p50)} / {number_text(sp.ttft_p95)}",
        number_text(sp.decode_tps_mean, 1),
        number_text(sp.completions_per_min, 1),
        number_text(sp.allowed_calls_per_min, 1),
        number_text(sp.completed_sessions_per_hour, 0),
    )


def _repeat_row(name: str, r: RepeatSummary) -> tuple[str, ...]:
    hat = f"{100 * r.pass_hat:.0f}%" if r.pass_hat is not None else "–"
    return (name, str(r.scenarios), str(r.k), rate_text(r.pass_all, digits=0), hat,
            rate_text(r.flips, digits=0))
