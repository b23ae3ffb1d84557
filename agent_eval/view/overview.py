"""Page contexts of the runs list, one run, and two runs compared: the store's aggregator
(``Store.summarize``, the figures every reader shows) and the sums behind the clustered
intervals (``agent_eval.view.intervals``).

Every number a page shows is a :class:`Cell` whose ``href`` opens the calls or sessions
behind it, pre-filtered, so a reader goes from a rate to the transcripts in one click.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from markupsafe import Markup

from agent_eval.analysis.compare_stored import every_target
from agent_eval.analysis.comparison import unit_lines
from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.clustered import ClusteredRate, clustered_text, units_rate
from agent_eval.metrics.stats import wilson_interval
from agent_eval.metrics.sufficient import TargetStats
from agent_eval.metrics.summary import NO_AGENT, GroupSummary
from agent_eval.policy import RULES, get_rule
from agent_eval.report.charts import change_chart, class_chart, error_chart
from agent_eval.report.lists import ListCell as Cell  # one linked-cell record for report and view
from agent_eval.report.runs import (
    RUN_HEAD,
    planned_progress,
    run_cells,
    running_progress,
    stopped_runs,
)
from agent_eval.store import Page, RunInfo, Store
from agent_eval.transcript import (
    EXIT_STATES,
    NEXT_ACTIONS,
    completeness_text,
    run_stacks,
    stack_line,
    stack_mark,
)
from agent_eval.view.intervals import (
    ClusteredView,
    TargetAnalysis,
    clustered_view,
    run_units,
)
from agent_eval.view.links import (
    calls_href,
    compare_href,
    query,
    run_href,
    session_href,
    sessions_href,
)
from agent_eval.view.trend import run_stamps, trend_chart

if TYPE_CHECKING:
    from agent_eval.analysis.paired_replay import PairedReplay

TREND_RUNS = 20


@dataclass(frozen=True, slots=True)
class RunHead:
    id: int
    label: str | None
    kind: str
    status: str
    started: datetime
    finished: datetime | None
    played: bool = True  # a process is playing it (False: left running by a killed runner)
    planned: int | None = None  # sessions the plan holds (live runs), None when unknown
    stored: int | None = None  # of those, how many are stored
    # each target's serving stack: (target, its mark, the stack as one line), from the
    # run's fingerprint (live/stackprint.py); none for a run that kept none
    stacks: tuple[tuple[str, str, str], ...] = ()

    @property
    def live(self) -> bool:
        return self.status == "running" and self.played

    @property
    def stopped(self) -> bool:
        """Left ``running`` with no process playing it: only ``--resume`` finishes it."""
        return self.status == "running" and not self.played


@dataclass(frozen=True, slots=True)
class RunsPage:
    rows: tuple[tuple[Cell, ...], ...]
    page: Page
    filters: dict[str, str]
    trends: tuple[tuple[str, Markup], ...]  # (label, svg)
    stopped: tuple[str, ...]  # one line per run no process plays, with its resume command
    prev_href: str | None
    next_href: str | None
    live: bool




def build_runs_page(store: Store, filters: dict[str, str], offset: int = 0,
                    limit: int = 50) -> RunsPage:
    """The runs list and its labels' trends, in one read: the trend's runs are mostly the
    listed ones, whose sums the list has just read (``Store.one_read``)."""
    with store.one_read():
        return _runs_page(store, filters, offset, limit)


def _runs_page(store: Store, filters: dict[str, str], offset: int, limit: int) -> RunsPage:
    page = store.list_run_rows(label=filters.get("label"), kind=filters.get("kind"),
                               status=filters.get("status"), limit=limit, offset=offset)
    rows = []
    stopped = stopped_runs(store, page.rows)
    progress = running_progress(store, page.rows)
    for r in page.rows:
        cells = [Cell(t) for t in run_cells(r)]
        at = RUN_HEAD.index
        cells[0] = Cell(str(r.id), run_href(r.id))
        if r.id in stopped:  # left "running" by a killed runner: its page says how to resume
            cells[at("status")] = Cell("stopped", run_href(r.id))
        if r.id in progress:
            cells[at("sessions")] = Cell(progress[r.id])
        cells[at("sessions")] = Cell(cells[at("sessions")].text, sessions_href(run_id=r.id))
        cells[at("calls")] = Cell(cells[at("calls")].text, calls_href(run_id=r.id))
        cells[at("errors/100 [95% CI]")] = Cell(cells[at("errors/100 [95% CI]")].text,
                                                calls_href(run_id=r.id, decision="deny"))
        rows.append(tuple(cells))
    labels = list(dict.fromkeys(r.label for r in page.rows if r.label))
    trends = tuple((label, chart) for label in labels[:5]
                   if (chart := _trend(store, label)) is not None)
    return RunsPage(tuple(rows), page, filters, trends, tuple(s.hint for s in stopped.values()),
                    _pager(filters, page, -1), _pager(filters, page, +1),
                    any(r.status == "running" and store.run_is_played(r.id)
                        for r in page.rows))


def label_trend(store: Store, label: str) -> list[dict[str, GroupSummary]]:
    """The last :data:`TREND_RUNS` runs with ``label``, oldest first: per target, its
    totals (calls, denied calls, handshake completion)."""
    ids = [r.id for r in store.list_runs(TREND_RUNS, label=label)]
    figures = store.summarize(ids, ("run", "target"), with_turns=False, detail="totals")
    per_run: dict[str, dict[str, GroupSummary]] = {str(i): {} for i in ids}
    for (run, target), summary in figures.items():
        per_run[run][target] = summary
    return [per_run[str(i)] for i in reversed(ids)]


@dataclass(frozen=True, slots=True)
class RunPage:
    run: RunHead
    columns: tuple[str, ...]
    target_head: tuple[str, ...]
    target_rows: tuple[tuple[Cell, ...], ...]
    class_rows: tuple[tuple[Cell, ...], ...]
    scenario_rows: tuple[tuple[Cell, ...], ...]
    recovery_rows: tuple[tuple[Cell, ...], ...]
    exit_rows: tuple[tuple[Cell, ...], ...]
    failed_href: str
    calls_href: str
    previous_href: str | None  # compare with the previous run of the same label
    clustered: ClusteredView | None = None
    clustered_href: str | None = None  # a big run: the intervals on request (one link)
    leak_rows: tuple[tuple[Cell, ...], ...] = ()  # leaks per class (agent CLI rules only)
    stack_rows: tuple[tuple[Cell, ...], ...] = ()  # stack faults per code (AE5xx), if any
    agent_rows: tuple[tuple[Cell, ...], ...] = ()  # errors by agent (agent CLI rules only)
    # what people would rather look at than tables (inline SVG, no script)
    error_chart: Markup = Markup("")  # errors/100 per target with its interval
    class_chart: Markup = Markup("")  # per-class bars per target
    trend: Markup | None = None  # the label's nightly trend, each point a link to its run
    # a run from telemetry (``agent-eval collect``): what it could prove, in words
    completeness: str = ""


TARGET_HEAD = ("target", "sessions", "tool calls", "errors", "errors/100 [95% CI]",
               "Wilson CI (calls)", "handshake completed", "error sessions")  # fmt: skip
"""errors/100 leads with its clustered interval (sessions as clusters: what gate and compare
decide on); Wilson's on calls follows as detail."""


def build_run_page(store: Store, run_id: int, intervals: bool = False) -> RunPage:
    """The run page; its clustered intervals inline up to :data:`INLINE_SESSIONS` sessions
    (or when ``intervals`` asks), else a link to the same page with them.  In one read
    (``Store.one_read``): its errors by agent, when no session names one, is the per-target
    table's GROUP BY."""
    with store.one_read():
        return _run_page(store, run_id, intervals)


def _run_page(store: Store, run_id: int, intervals: bool) -> RunPage:
    info = store.get_run(run_id)
    figures = every_target(store, run_id, "actions")
    by_scenario = store.summarize([run_id], ("scenario", "target"), with_turns=False,
                                  detail="totals")
    inline = intervals or _sessions(figures) <= INLINE_SESSIONS
    planned, stored = planned_progress(store, info) if info.kind == "live" else (None, None)
    run = RunHead(info.id, info.label, info.kind, info.status, info.created_at,
                  info.finished_at,
                  played=info.status != "running" or store.run_is_played(run_id),
                  planned=planned, stored=stored,
                  stacks=tuple((name, stack_mark(stack), stack_line(stack))
                               for name, stack in run_stacks(info.fingerprint).items()))
    previous = store.previous_run_id(info)
    units = (None if inline else _units_in_trend(store, info)) or run_units(
        store, run_id, classes=inline)  # per target: cheap without classes
    rates = {name: units_rate(units[name]) for name in figures if name in units}
    return RunPage(
        run=run, columns=tuple(figures), target_head=TARGET_HEAD,
        target_rows=_target_rows(run_id, figures, rates),
        class_rows=_class_rows(run_id, figures),
        leak_rows=_leak_rows(figures), stack_rows=_stack_rows(figures),
        agent_rows=_agent_rows(tuple(figures), store.summarize(
            [run_id], ("agent", "target"), with_turns=False, detail="totals")),
        scenario_rows=_scenario_rows(run_id, tuple(figures), by_scenario),
        recovery_rows=_recovery_rows(run_id, figures), exit_rows=_exit_rows(run_id, figures),
        failed_href=sessions_href(run_id=run_id, failed=True),
        calls_href=calls_href(run_id=run_id),
        previous_href=compare_href(previous, info.id) if previous is not None else None,
        clustered=clustered_view(units, tuple(figures)) if inline else None,
        clustered_href=None if inline else f"/runs/{run_id}?intervals=1",
        error_chart=error_chart(figures, rates), class_chart=class_chart(figures),
        trend=_trend(store, info.label),
        completeness=completeness_text(store.run_telemetry(run_id))
        if info.suite == "otlp" else "",
    )


def _units_in_trend(store: Store, info: RunInfo) -> dict[str, TargetStats] | None:
    """This run's clustered sums per target, taken from the label trend's read of its
    runs (the same GROUP BY, grouped by run: ``Store.one_read`` reads it once for both),
    when the page shows that trend; else ``None``."""
    ids = [r.id for r in store.list_runs(TREND_RUNS, label=info.label)] if info.label else []
    if len(ids) < 2 or info.id not in ids:
        return None
    stats = store.cluster_stats(list(reversed(ids)), columns=True)
    suffix = f" · run {info.id}"
    return {name.removesuffix(suffix): s for name, s in stats.items() if name.endswith(suffix)}


def _trend(store: Store, label: str | None) -> Markup | None:
    """The nightly trend of a label (two runs at least): on axes, each run labelled by its
    date (and time, where several share a day), each point a link to its run with its
    clustered 95% interval (sessions as clusters, as the gate reads each run)."""
    if not label:
        return None
    infos = store.list_runs(TREND_RUNS, label=label)
    if len(infos) < 2:
        return None
    ordered = list(reversed(infos))
    runs = run_stamps([(r.id, r.created_at) for r in ordered])
    points = label_trend(store, label)
    return trend_chart(label, points, runs,
                       _trend_intervals(store, [r.id for r in ordered], points))


def _trend_intervals(store: Store, run_ids: list[int], points: list[dict[str, GroupSummary]]
                     ) -> list[dict[str, tuple[float, float]]]:
    """Per run (in ``run_ids``' order), per target, the clustered 95% interval of
    errors/100, from one query over the runs (columns ``target · run N``); a target with
    one session has none."""
    stats = store.cluster_stats(run_ids, columns=True)
    out: list[dict[str, tuple[float, float]]] = []
    for run_id, point in zip(run_ids, points, strict=True):
        spans = {}
        for name in point:
            column = stats.get(f"{name} · run {run_id}")
            rate = units_rate(column) if column is not None else None
            if rate is not None and rate.lo100 is not None and rate.hi100 is not None:
                spans[name] = (rate.lo100, rate.hi100)
        out.append(spans)
    return out


INLINE_SESSIONS = 2000
"""Up to this many sessions a page computes the clustered intervals with it; a bigger run
shows a link that computes them on request.  They are sums per scenario now
(``store.cluster_stats``: the compare page's analysis of 1M calls takes 0.2 s warm on
SQLite), but the run page's per-class sums group the denied calls per session."""


def _sessions(figures: dict[str, GroupSummary]) -> int:
    return sum(t.sessions + t.error_sessions for t in figures.values())


def rate_text(k: int, n: int, *, interval: bool = True) -> str:
    if not n:
        return "–"
    text = f"{100 * k / n:.2f}"
    if interval:
        lo, hi = wilson_interval(k, n)
        text += f" [{100 * lo:.1f}–{100 * hi:.1f}]"
    return text


def _target_rows(run_id: int, figures: dict[str, GroupSummary],
                 rates: Mapping[str, ClusteredRate]) -> tuple[tuple[Cell, ...], ...]:
    rows = []
    for name, t in figures.items():
        f = {"run_id": run_id, "target": name}
        hs = t.handshake
        wilson = rate_text(t.errors.k, t.calls).partition(" ")[2] or "–"
        rows.append((
            Cell(name),
            Cell(str(t.sessions), sessions_href(**f)),
            Cell(str(t.calls), calls_href(**f)),
            Cell(str(t.errors.k), calls_href(**f, decision="deny")),
            Cell(clustered_text(rates.get(name)) if t.calls else "–",
                 calls_href(**f, decision="deny")),
            Cell(wilson),
            Cell(f"{hs.completed.k}/{hs.sessions}" if hs.sessions else "–",
                 sessions_href(**f, handshake=True, sort="handshake")),
            Cell(str(t.error_sessions), sessions_href(**f, status="error")),
        ))
    return tuple(rows)


def _class_rows(run_id: int, figures: dict[str, GroupSummary]) -> tuple[tuple[Cell, ...], ...]:
    found = {code for t in figures.values() for code in t.classes}
    rows = []
    for code in [c for c in RULES if c in found] + sorted(found - set(RULES)):
        rule = get_rule(code)
        head = Cell(f"{code} {rule.name}" if rule else code, f"/rules/{code}.html" if rule
                    else None)
        cells = [head]
        for name, t in figures.items():
            k = t.classes[code].k if code in t.classes else 0
            cells.append(Cell(f"{rate_text(k, t.calls, interval=False)} ({k})",
                              _class_calls(run_id, name, code) if k else None))
        rows.append(tuple(cells))
    total = [Cell("total")]
    for name, t in figures.items():
        total.append(Cell(f"{rate_text(t.errors.k, t.calls, interval=False)} ({t.errors.k})",
                          calls_href(run_id=run_id, target=name, decision="deny")))
    rows.append(tuple(total))
    return tuple(rows)


def _leak_rows(figures: dict[str, GroupSummary]) -> tuple[tuple[Cell, ...], ...]:
    """Per leak class, per target: the calls an agent CLI's rules let through that their
    strict reading refuses (docs/policies.md); empty when there is none."""
    found = {code for t in figures.values() for code in t.leaks}
    if not found:
        return ()
    rows = []
    for code in [c for c in RULES if c in found] + sorted(found - set(RULES)):
        rule = get_rule(code)
        rows.append((Cell(f"{code} {rule.name}" if rule else code,
                          f"/rules/{code}.html" if rule else None),
                     *(Cell(str(t.leaks.get(code, 0))) for t in figures.values())))
    rows.append((Cell("total"), *(Cell(str(sum(t.leaks.values()))) for t in figures.values())))
    return tuple(rows)


def _stack_rows(figures: dict[str, GroupSummary]) -> tuple[tuple[Cell, ...], ...]:
    """Per stack-fault code, per target: what the serving stack lost or mangled (rules
    AE5xx, never in the errors), then the rate per 100 calls; empty when there is none."""
    found = sorted({code for t in figures.values() for code in t.stack_classes})
    if not found:
        return ()
    rows = []
    for code in found:
        rule = get_rule(code)
        rows.append((Cell(f"{code} {rule.name}" if rule else code,
                          f"/rules/{code}.html" if rule else None),
                     *(Cell(str(t.stack_classes.get(code, 0))) for t in figures.values())))
    rows.append((Cell("per 100 calls"),
                 *(Cell(rate_text(t.stack_faults.k, t.stack_faults.n)) for t in figures.values())))
    return tuple(rows)


def _class_calls(run_id: int, target: str, code: str) -> str | None:
    """The calls of a class; denied calls stored without a class have no filter of theirs."""
    if code == UNCLASSIFIED:
        return None
    return calls_href(run_id=run_id, target=target, code=code)


def _scenario_rows(run_id: int, targets: tuple[str, ...],
                   by_scenario: dict[tuple[str, str], GroupSummary]
                   ) -> tuple[tuple[Cell, ...], ...]:
    """Per scenario (by name), per target: errors/100 and completed/sessions (error
    sessions left out)."""
    rows = []
    for scenario in sorted({scenario for scenario, _ in by_scenario}):
        cells = [Cell(scenario, sessions_href(run_id=run_id, scenario=scenario))]
        for name in targets:
            s = by_scenario.get((scenario, name))
            if s is None:
                cells.append(Cell("–"))
                continue
            text = (f"{rate_text(s.errors.k, s.calls, interval=False)} · "
                    f"{s.exit_states['completed']}/{s.sessions}")
            cells.append(Cell(text, sessions_href(run_id=run_id, target=name,
                                                  scenario=scenario)))
        rows.append(tuple(cells))
    return tuple(rows)


def _agent_rows(targets: tuple[str, ...], by_agent: dict[tuple[str, str], GroupSummary]
                ) -> tuple[tuple[Cell, ...], ...]:
    """Per agent whose CLI rules judged the sessions, per target: errors/100 and
    completed/sessions; empty when every session was judged under an allow-list."""
    agents = sorted({agent for agent, _ in by_agent})
    if agents in ([], [NO_AGENT]):
        return ()
    rows = []
    for agent in agents:
        cells = [Cell(agent)]
        for name in targets:
            s = by_agent.get((agent, name))
            cells.append(Cell("–") if s is None else Cell(
                f"{rate_text(s.errors.k, s.calls, interval=False)} · "
                f"{s.exit_states['completed']}/{s.sessions}"))
        rows.append(tuple(cells))
    return tuple(rows)


def _recovery_rows(run_id: int, figures: dict[str, GroupSummary]
                   ) -> tuple[tuple[Cell, ...], ...]:
    rows = []
    for name, t in figures.items():
        denials = t.recovery.denials
        cells = [Cell(name), Cell(str(denials), calls_href(run_id=run_id, target=name,
                                                           decision="deny"))]
        for action in NEXT_ACTIONS:
            k = t.recovery.actions[action].k
            share = f"{100 * k / denials:.0f}% ({k})" if denials else "–"
            cells.append(Cell(share, calls_href(run_id=run_id, target=name, next_action=action)
                              if k else None))
        rows.append(tuple(cells))
    return tuple(rows)


def _exit_rows(run_id: int, figures: dict[str, GroupSummary]) -> tuple[tuple[Cell, ...], ...]:
    rows = []
    for name, t in figures.items():
        cells = [Cell(name)]
        for state in EXIT_STATES:
            k = t.exit_states.get(state, 0)
            cells.append(Cell(str(k), sessions_href(run_id=run_id, target=name, status=state)
                              if k else None))
        rows.append(tuple(cells))
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class ComparePage:
    a: RunHead
    b: RunHead
    head: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    analysis: tuple[TargetAnalysis, ...] = ()
    analysis_href: str | None = None  # big runs: the session-level analysis on request
    replay: ReplayView | None = None  # B replays A (or A replays B): the paired result
    change_chart: Markup = Markup("")  # the change per target and class with its interval


@dataclass(frozen=True, slots=True)
class MovedCall:
    """A replayed context whose class changed, with both sides one click away."""

    line: str
    original_href: str
    candidate_href: str


@dataclass(frozen=True, slots=True)
class ReplayView:
    """``agent-eval compare``'s paired table for a replay, as the compare page shows it."""

    lines: tuple[str, ...]
    class_head: tuple[str, ...]
    class_rows: tuple[tuple[str, ...], ...]
    moved: tuple[MovedCall, ...]
    moved_total: int


MOVED_LISTED = 200
"""Moved calls listed on the compare page (the count says how many there are)."""


COMPARE_HEAD = ("target", "failure class", "run A: errors/100 (calls)",
                "run B: errors/100 (calls)", "B − A [95% CI]", "p (z-test)", "moved")


def build_compare_page(store: Store, a_id: int, b_id: int,
                       analysis: bool = False) -> ComparePage:
    """Per common target and class: both rates, the difference, the p-value, links to
    each side's calls of that class; drawn from ``compare_stored``, the comparison
    ``agent-eval compare`` prints (its session-level analysis inline up to
    :data:`INLINE_SESSIONS` sessions, or when ``analysis`` asks)."""
    from agent_eval.analysis.compare_stored import compare_stored

    compared = compare_stored(store, a_id, b_id, detail="table",
                              max_sessions=None if analysis else INLINE_SESSIONS)
    cmp = compared.comparison
    heads = [RunHead(info.id, info.label, info.kind, info.status, info.created_at,
                     info.finished_at) for info in (compared.run_a, compared.run_b)]
    rows, changes = [], []
    for name, group in cmp.groups.items():
        calls = group.errors.a.n and group.errors.b.n
        adjusted = cmp.class_p_holm.get(name, {})
        # the classes are one family: each is called on its Holm-adjusted p, with the
        # sessions at hand each class's Rao–Scott p (its own design effect), as compare's
        for code, test in [("total", group.errors),
                           *((c, group.classes[c]) for c in RULES if c in group.classes)]:
            f = {"decision": "deny"} if code == "total" else {"code": code}
            shown = test if calls else None
            rows.append(_compare_row(name, code, (a_id, test.a.k, test.a.n),
                                     (b_id, test.b.k, test.b.n), f, shown,
                                     None if code == "total" else adjusted.get(code)))
            if shown is not None and shown.diff100 is not None and shown.lo100 is not None \
                    and shown.hi100 is not None:
                changes.append((f"{name} · {code}", shown.diff100, shown.lo100, shown.hi100))
    lines = tuple(TargetAnalysis(name, tuple(unit_lines(a))) for name, a in cmp.units.items())
    return ComparePage(heads[0], heads[1], COMPARE_HEAD, tuple(rows), tuple(cmp.only_a),
                       tuple(cmp.only_b), lines,
                       None if compared.session_level else
                       f"/compare?a={a_id}&b={b_id}&analysis=1",
                       _replay_view(compared.replay), change_chart(changes))


def _replay_view(paired: PairedReplay | None) -> ReplayView | None:
    from agent_eval.analysis.paired_replay import (
        CLASS_HEADER,
        class_rows,
        moved_line,
        paired_lines,
    )

    if paired is None:
        return None
    moved = paired.moved
    return ReplayView(
        tuple(paired_lines(paired)), CLASS_HEADER, tuple(class_rows(paired)),
        tuple(MovedCall(moved_line(p),
                        session_href(p.original.session_id, call=p.original.call_index),
                        session_href(p.candidate.session_id, call=p.candidate.call_index))
              for p in moved[:MOVED_LISTED]),
        len(moved))


def _compare_row(name, code, a, b, f, cmp=None, holm_p=None) -> tuple[Cell, ...]:
    """One row; ``cmp`` the z-test of its counts (no Fisher p on this table), ``holm_p``
    a class's p adjusted across the target's classes, on which the class is called."""
    (a_id, ka, na), (b_id, kb, nb) = a, b
    if cmp is not None:
        diff = (f"{cmp.diff100:+.2f} [{cmp.lo100:+.1f}, {cmp.hi100:+.1f}]"
                if cmp.diff100 is not None else "–")
        p = f"{cmp.p_value:.3g}"
        if holm_p is None:
            moved = "significant" if cmp.significant else ""
        else:
            moved = f"significant (Holm p {holm_p:.3g})" if holm_p < cmp.alpha else ""
    else:
        diff, p, moved = "–", "–", ""
    return (Cell(name), Cell(code),
            Cell(f"{rate_text(ka, na, interval=False)} ({ka})",
                 calls_href(run_id=a_id, target=name, **f) if ka else None),
            Cell(f"{rate_text(kb, nb, interval=False)} ({kb})",
                 calls_href(run_id=b_id, target=name, **f) if kb else None),
            Cell(diff), Cell(p), Cell(moved))


def _pager(filters: dict, page: Page, step: int) -> str | None:
    if step < 0 and page.offset == 0:
        return None
    if step > 0 and not page.has_next:
        return None
    offset = max(0, page.offset + step * page.limit)
    return "/" + query(**filters, offset=offset or None)
