"""The machine- and CI-facing files: ``summary.md``, ``summary.json`` and ``junit.xml``.

``summary.json`` keys (``schema_version`` 1; keys are only ever added; the writers are
type-checked against :mod:`agent_eval.report.summary_format`)::

    schema_version        1
    generator             "agent-eval <version>"
    runs                  [{id, label, kind, status, suite, created_at}]
    statistics            {interval, comparison, check, clustered_interval,
                          interval_to_trust}: the methods, named
    columns               column names in report order (targets; "name · run N" for
                          several runs)
    targets               {column: {
        sessions, error_sessions, messages, tool_calls, errors,
        errors_per_100, errors_per_100_ci95_clustered: [lo, hi], errors_per_100_ci95: [lo, hi],
        classes: {code: {errors, per_100, ci95: [lo, hi]}},   # primary class, denied calls
        leaks: {code: calls},    # allowed by an agent CLI's rules, refused by their strict reading
        stack_faults: {faults, calls, per_100, ci95, classes: {code: faults}},  # AE5xx
        handshake: {sessions, completed, completion_per_100, ci95, mean_done_share,
                    most_missed_step},
        recovery: {denials, pivot, retry-denied, repeat, abandon (shares per 100),
                   denials_per_session, turns_burned},
        exit_states: {completed, stalled, abandoned, error},
        speed: {latency_p50_s, latency_p95_s, ttft_p50_s, ttft_p95_s, decode_tps_mean,
                completions_per_min, allowed_calls_per_min, completed_sessions_per_hour},
        repeats: {scenarios, k, pass_all_per_100, pass_hat, flips_per_100} | null,
        clustered: {errors_per_100_ci95: [lo, hi], design_effect, sessions, strata, df,
                    few_clusters, across_tasks: {ci95: [lo, hi], design_effect, scenarios},
                    classes: {code: {ci95: [lo, hi], design_effect}}} | null}}
    sessions              {total, failed, errored}: counts as in junit.xml
    useful_work           [{run, start, end, minutes, samples, sources, allowed_calls,
                            denied_calls, handshakes_completed, completions,
                            allowed_calls_per_min, denied_calls_per_min,
                            completed_handshakes_per_hour, completions_per_min,
                            generation_tps}]: one entry per run whose window holds
                          imported server samples (``agent-eval import vllm-log``), else
                          empty; window and definitions in agent_eval/report/throughput.py
    source_agreement      {column: {calls_with_source_verdict, agree, agree_per_100,
                            agree_ci95: [lo, hi], ours_deny_source_allow,
                            ours_allow_source_deny}}: our verdict against the one an
                          imported transcript recorded itself, for columns with such
                          calls only (else empty); definitions in
                          agent_eval/report/agreement.py

Rates are per 100 (``null`` when nothing was counted); ``ci95`` intervals are Wilson 95%
(calls as independent); ``clustered`` holds the 95% intervals with sessions as clusters
(Korn–Graubard, docs/statistics.md), the ones to trust, ``null`` for a column without
sessions to cluster.  ``errors_per_100_ci95_clustered`` is ``clustered``'s
``errors_per_100_ci95`` beside the rate (the interval gate and compare decide on, the one
to read first); ``errors_per_100_ci95`` stays the Wilson interval, as it always was.

``junit.xml``: one ``testsuite`` per column, one ``testcase`` per session (children
included).  A session that ended ``error`` (server or harness fault) is an ``<error>``;
any other failed session (``metrics.session_failed``: it did not complete, holds a denied
call, or left its handshake open; as the report's and the viewer's lists judge it) is a
``<failure>`` naming why.  Everything else passes.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from agent_eval import __version__
from agent_eval.metrics import FISHER_TEST, TOTAL, Z_TEST, GroupSummary, Rate
from agent_eval.metrics.clustered import CLUSTERED_METHOD, ClusteredSummary
from agent_eval.metrics.summary import session_failed
from agent_eval.report.agreement import agreement_dict, agreement_line
from agent_eval.report.index import TARGET_HEAD, IndexPage, RepeatSummary, rate_text
from agent_eval.report.summary_format import ClusteredEntry, Interval, SummaryJson, TargetEntry
from agent_eval.report.throughput import work_dict
from agent_eval.transcript import NEXT_ACTIONS, CallRow, SessionRow

SUMMARY_SCHEMA_VERSION = 1
SUMMARY_KEYS = ("schema_version", "generator", "runs", "statistics", "columns", "targets",
                "sessions", "useful_work", "source_agreement")  # fmt: skip
INTERVAL = "Wilson score interval, 95%"
INTERVAL_TO_TRUST = ("clustered: calls of one session err together, so the Wilson interval "
                     "(calls as independent) is too narrow; the clustered one (sessions as "
                     "clusters) holds its 95% coverage (BENCHMARKS.md)")

SessionOutcome = Literal["pass", "failure", "error"]


def session_outcome(session: SessionRow, denials: int) -> tuple[SessionOutcome, str]:
    """How junit.xml (and the session counts in summary.json) judge one session."""
    if session.status == "error":
        return "error", session.error or "server or harness fault"
    handshake_open = bool(session.handshake_required) and not session.handshake_completed
    if not session_failed(session.status, denials, handshake_open):
        return "pass", ""
    reasons = []
    if session.status != "completed":
        reasons.append(f"ended {session.status}")
    if denials:
        reasons.append(f"{denials} tool call{'s' if denials != 1 else ''} denied")
    if handshake_open:
        missed = session.handshake_missed_step
        reasons.append("handshake incomplete" + (f" (missed {missed})" if missed else ""))
    return "failure", "; ".join(reasons)


def summary_json(page: IndexPage, sessions: list[SessionRow], denials: dict[int, int]) -> str:
    outcomes = [session_outcome(s, denials.get(s.id, 0))[0] for s in sessions]
    data: SummaryJson = {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generator": f"agent-eval {__version__}",
        "runs": [
            {"id": r.id, "label": r.label, "kind": r.kind, "status": r.status,
             "suite": r.suite, "created_at": r.created_at.isoformat()}
            for r in page.runs
        ],
        "statistics": {"interval": INTERVAL, "comparison": Z_TEST, "check": FISHER_TEST,
                       "clustered_interval": CLUSTERED_METHOD,
                       "interval_to_trust": INTERVAL_TO_TRUST},
        "columns": list(page.columns),
        "targets": {
            name: _target_dict(s, page.repeats.get(name), page.clustered.get(name))
            for name, s in page.summaries.items()
        },
        "sessions": {
            "total": len(sessions),
            "failed": outcomes.count("failure"),
            "errored": outcomes.count("error"),
        },
        "useful_work": [w for w in (work_dict(sec) for sec in page.server) if w is not None],
        "source_agreement": {a.column: agreement_dict(a) for a in page.agreement},
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _target_dict(s: GroupSummary, repeats: RepeatSummary | None,
                 clustered: ClusteredSummary | None) -> TargetEntry:
    hs, rec, sp = s.handshake, s.recovery, s.speed
    return {
        "sessions": s.sessions,
        "error_sessions": s.error_sessions,
        "messages": s.messages,
        "tool_calls": s.calls,
        "errors": s.errors.k,
        "errors_per_100": _r(s.errors.per100),
        "errors_per_100_ci95_clustered": (None if clustered is None
                                          else _pair(clustered.errors.lo100,
                                                     clustered.errors.hi100)),
        "errors_per_100_ci95": _ci(s.errors),
        "classes": {
            code: {"errors": r.k, "per_100": _r(r.per100), "ci95": _ci(r)}
            for code, r in s.classes.items()
        },
        # allowed by an agent CLI's rules, refused by their strict reading (per class)
        "leaks": dict(s.leaks),
        # what the serving stack lost or mangled (AE5xx), never in errors
        "stack_faults": {"faults": s.stack_faults.k, "calls": s.stack_faults.n,
                         "per_100": _r(s.stack_faults.per100), "ci95": _ci(s.stack_faults),
                         "classes": dict(s.stack_classes)},
        "handshake": {
            "sessions": hs.sessions,
            "completed": hs.completed.k,
            "completion_per_100": _r(hs.completed.per100),
            "ci95": _ci(hs.completed),
            "mean_done_share": _r(hs.mean_done_share, 4),
            "most_missed_step": hs.most_missed,
        },
        "recovery": {
            "denials": rec.denials,
            **{a: _r(rec.actions[a].per100) for a in NEXT_ACTIONS},
            "denials_per_session": _r(rec.denials_per_session, 4),
            "turns_burned": rec.turns_burned,
        },
        "exit_states": dict(s.exit_states),
        "speed": {
            "latency_p50_s": _r(sp.latency_p50, 4),
            "latency_p95_s": _r(sp.latency_p95, 4),
            "ttft_p50_s": _r(sp.ttft_p50, 4),
            "ttft_p95_s": _r(sp.ttft_p95, 4),
            "decode_tps_mean": _r(sp.decode_tps_mean),
            "completions_per_min": _r(sp.completions_per_min),
            "allowed_calls_per_min": _r(sp.allowed_calls_per_min),
            "completed_sessions_per_hour": _r(sp.completed_sessions_per_hour),
        },
        "repeats": None if repeats is None else {
            "scenarios": repeats.scenarios,
            "k": repeats.k,
            "pass_all_per_100": _r(repeats.pass_all.per100),
            "pass_hat": _r(repeats.pass_hat, 4),
            "flips_per_100": _r(repeats.flips.per100),
        },
        "clustered": clustered_dict(clustered),
    }


def clustered_dict(c: ClusteredSummary | None) -> ClusteredEntry | None:
    """The ``clustered`` entry of one column in summary.json."""
    if c is None or c.errors.per100 is None:
        return None
    e, t = c.errors, c.across_tasks
    return {
        "errors_per_100_ci95": _pair(e.lo100, e.hi100),
        "design_effect": _r(e.deff, 3),
        "sessions": e.clusters,
        "strata": e.strata,
        "df": e.df,
        "few_clusters": e.few_clusters,
        "across_tasks": {"ci95": _pair(t.lo100, t.hi100), "design_effect": _r(t.deff, 3),
                         "scenarios": t.clusters},
        "classes": {code: {"ci95": _pair(r.lo100, r.hi100), "design_effect": _r(r.deff, 3)}
                    for code, r in c.classes.items()},
    }


def _pair(lo: float | None, hi: float | None) -> Interval:
    return None if lo is None or hi is None else [round(lo, 2), round(hi, 2)]


def summary_markdown(page: IndexPage) -> str:
    """The two docs/design.md tables plus handshake and recovery, as GitHub Markdown; short
    enough for a CI step summary or a PR comment."""
    lines = [f"## {_md(page.title)}", ""]
    lines += _md_table(
        TARGET_HEAD,
        page.target_rows,
    )
    lines += ["", "95% CI: sessions as clusters (what gate and compare decide on); Wilson's "
              "on calls, as if a session's calls were independent, is detail.", ""]
    if page.clustered_rows:
        lines += ["Clustered intervals (sessions as clusters), in detail:", ""]
        lines += _md_table(page.clustered_head, page.clustered_rows)
    lines += ["", "### Errors per 100 tool calls by failure class", ""]
    rows = [
        (f"**{TOTAL}**" if r.code == TOTAL else f"{r.code} {r.name or ''}".strip(), *r.cells)
        for r in page.class_rows
    ]
    lines += _md_table(("failure class", *page.columns), rows)
    if page.stack_rows:
        lines += ["", "### Stack faults (the server's, never in the errors above)", ""]
        lines += _md_table(("stack fault", *page.columns),
                           [(f"{r[0]} {r[1]}".strip(), *r[2:]) for r in page.stack_rows])
    lines += ["", "### Handshake and reaction to denial", ""]
    lines += _md_table(
        ("target", "handshake completed % [95% CI]", "pivot %", "retry-denied %", "repeat %",
         "abandon %",
         "typical exit state"),
        [
            (name, rate_text(s.handshake.completed, digits=0),
             *(rate_text(s.recovery.actions[a], interval=False, digits=0) for a in NEXT_ACTIONS),
             exit_row[-1])
            for (name, s), exit_row in zip(page.summaries.items(), page.exit_rows, strict=True)
        ],
    )
    for section in page.server:
        if section.work is not None:
            lines += ["", f"Useful work beside server speed (run {section.run_id}): "
                      f"{_md(section.work_line)}."]
    if page.agreement:
        lines += ["", f"Agreement with the source harness: {_md(agreement_line(page.agreement))}."]
    lines += ["", f"_{_md(page.statistics)}_", ""]
    return "\n".join(lines)


def denied_lines(session: SessionRow, denied: Sequence[CallRow]) -> list[str]:
    """One line per denied call of a session: its class and rule name, the command (or
    path) judged, and the ``agent-eval show`` command that opens the session there."""
    from agent_eval.policy import get_rule

    lines = []
    for call in denied:
        rule = get_rule(call.primary) if call.primary else None
        what = f"{call.primary} {rule.name}" if rule else (call.primary or "denied")
        shown = call.command if call.command is not None else call.tool
        lines.append(f"{what}: call {call.index}: {shown}")
    return lines


def show_line(session: SessionRow) -> str:
    """The command that opens ``session`` turn by turn."""
    return f"agent-eval show {session.run_id} {session.id}"


def junit_xml(sessions: Iterable[SessionRow], denials: dict[int, int],
              denied: Mapping[int, Sequence[CallRow]] | None = None) -> bytes:
    """JUnit XML, one test case per session.  A failure's message names the first denied
    call's class and command (``AE301 pipe-to-filter: call 3: ls | head``), and its text
    every denied call and the ``agent-eval show`` line, when ``denied`` (the denied call
    rows per session id) is given; else the counts alone."""
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, int]] = {}
    root = ET.Element("testsuites", name="agent-eval")
    for s in sessions:
        suite = suites.get(s.target)
        if suite is None:
            suite = suites[s.target] = ET.SubElement(root, "testsuite", name=_xml(s.target))
            counts[s.target] = {"tests": 0, "failures": 0, "errors": 0}
        outcome, reason = session_outcome(s, denials.get(s.id, 0))
        reason = _xml(reason)
        case = ET.SubElement(
            suite, "testcase",
            classname=_xml(f"{s.target}.{s.scenario}"),
            name=_xml(f"{s.scenario} #{s.repeat} (session {s.id})"),
        )
        if s.started_at and s.finished_at:
            case.set("time", f"{max(0.0, (s.finished_at - s.started_at).total_seconds()):.3f}")
        tally = counts[s.target]
        tally["tests"] += 1
        if outcome == "failure":
            tally["failures"] += 1
            message, text = reason, reason
            if denied is not None:
                calls = denied_lines(s, denied.get(s.id, ()))
                if calls:
                    more = len(calls) - 1
                    message = calls[0] + (f" (+{more} more denied)" if more else "")
                text = "\n".join([reason, *calls, f"open it: {show_line(s)}"])
            ET.SubElement(case, "failure", message=_xml(message), type="policy").text = _xml(text)
        elif outcome == "error":
            tally["errors"] += 1
            ET.SubElement(case, "error", message=reason, type="harness-fault").text = reason
    for name, suite in suites.items():
        for key, value in counts[name].items():
            suite.set(key, str(value))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """Text XML 1.0 can carry: control characters (a model may emit NUL) become U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _md_table(head: tuple[str, ...], rows) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md(str(c)) for c in row) + " |" for row in rows]
    return out


def _md(text: str) -> str:
    """Markdown-safe cell text: pipes and HTML-significant characters escaped."""
    return (
        text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        .replace("\n", " ")
    )


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _ci(rate: Rate) -> Interval:
    if rate.lo100 is None or rate.hi100 is None:  # both or neither
        return None
    return [round(rate.lo100, 2), round(rate.hi100, 2)]
