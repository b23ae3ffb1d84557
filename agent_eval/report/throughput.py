"""The index's "Server throughput" section: what the server logged inside each run's window.

Speed is shown only next to reliability (docs/design.md, "Speed matters only next to
reliability"): beside the generation / prefill / completions tables by concurrency sits
the run's useful work, allowed tool calls per minute and completed handshakes per hour,
against the average generation tokens/s of the busy windows.

The section's window, stated once (the template, README and summary.json point here):

    A run's server lines are those stamped from the run's start to its end plus one
    logging interval (``WINDOW_S``, 10 s): a throughput line reports the interval that
    just closed, so the line printed up to 10 s after the run's last reply still
    describes the run.  Every server figure of the section is taken from that one set of
    lines: the samples and completions of the concurrency tables, the header's counts,
    and useful work's server completions and busy generation tokens/s.  The run's own
    figures (allowed and denied calls, completed handshakes) are its calls and sessions.
    Every per-minute and per-hour rate divides by the run's own duration, start to end.

Nothing is bucketed here: :func:`agent_eval.serverlogs.perf_tables` and
:func:`agent_eval.serverlogs.useful_work` do it, with the bucket definitions in
``agent_eval/serverlogs/speed.py``; the run window and the sample query are the ones
``agent-eval perf --run`` uses, so the tables and the call rates match that command.
(``perf --run`` counts useful work's server completions and generation tokens/s over
start..end only; the two differ only when server lines fall in the 10 s after the end.)
Server samples come from ``agent-eval import vllm-log FILE`` (or ``llamacpp-log``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_eval.report.summary_format import UsefulWorkEntry
from agent_eval.serverlogs import (
    PerfTables,
    Request,
    Sample,
    UsefulWork,
    perf_tables,
    useful_work,
)
from agent_eval.serverlogs import render as perf_render
from agent_eval.serverlogs.stored import (
    requests_from_rows,
    run_window,
    samples_from_rows,
)
from agent_eval.store import RunInfo
from agent_eval.transcript import CallRow, SessionRow

WINDOW_S = 10.0
"""Seconds one throughput sample covers at most: vLLM's default logging interval."""

NO_SAMPLES = (
    "No server samples in this run's window: add them with "
    "`agent-eval import vllm-log FILE` (or llamacpp-log) and write the report again."
)
NO_WINDOW = "This run has no finish time and no finished session, so it has no time window."

GENERATION_HEAD = tuple(perf_render.GENERATION_HEADER)
PREFILL_HEAD = tuple(perf_render.PREFILL_HEADER)
COMPLETIONS_HEAD = tuple(perf_render.COMPLETIONS_HEADER)
WORK_HEAD = tuple(perf_render.WORK_HEADER)


@dataclass(frozen=True, slots=True)
class RunThroughput:
    """One run's server throughput.  ``note`` is set (and ``tables`` / ``work`` are
    ``None``) when there is nothing to show: no window, or no sample inside it."""

    run_id: int
    start: datetime | None
    end: datetime | None
    note: str | None
    tables: PerfTables | None
    work: UsefulWork | None
    sources: tuple[str, ...] = ()
    generation_rows: tuple[tuple[str, ...], ...] = ()
    prefill_rows: tuple[tuple[str, ...], ...] = ()
    completion_rows: tuple[tuple[str, ...], ...] = ()
    work_rows: tuple[tuple[str, ...], ...] = ()
    work_line: str = ""


def read_run_throughput(
    store, run: RunInfo, sessions: list[SessionRow], *, window_s: float = WINDOW_S
) -> RunThroughput:
    """Read the server samples and requests inside ``run``'s window and build its section.

    ``sessions`` are the run's own rows.  Calls are streamed from the store only when
    there are samples to set them beside.
    """
    window = run_window(run.kind, run.created_at, run.finished_at, sessions)
    if window is None:
        return RunThroughput(run.id, None, None, NO_WINDOW, None, None)
    start, end = window
    reach = server_reach(end, window_s)
    samples = samples_from_rows(store.server_samples(start, reach))
    if not samples:
        return RunThroughput(run.id, start, end, NO_SAMPLES, None, None)
    requests = requests_from_rows(store.server_requests(start, reach))
    return build_run_throughput(run.id, start, end, samples, requests,
                                store.call_rows([run.id]), sessions, window_s=window_s)


def build_run_throughput(
    run_id: int,
    start: datetime,
    end: datetime,
    samples: list[Sample],
    requests: list[Request],
    calls: Iterable[CallRow],
    sessions: Iterable[SessionRow],
    *,
    window_s: float = WINDOW_S,
) -> RunThroughput:
    """The section for one run (pure): the perf tables and useful work, formatted.

    Samples and requests outside the section's window (module docstring) are dropped
    first, so every server figure comes from the same lines.
    """
    reach = server_reach(end, window_s)
    samples = [s for s in samples if start <= s.ts <= reach]
    requests = [r for r in requests if start <= r.ts <= reach]
    if not samples:
        return RunThroughput(run_id, start, end, NO_SAMPLES, None, None)
    tables = perf_tables(samples, requests, window_s=window_s)
    work = useful_work(calls, sessions, samples, requests, start=start, end=end, reach=reach)
    return RunThroughput(
        run_id=run_id,
        start=start,
        end=end,
        note=None,
        tables=tables,
        work=work,
        sources=tables.sources,
        generation_rows=_rows(perf_render.generation_rows(tables)),
        prefill_rows=_rows(perf_render.prefill_rows(tables)),
        completion_rows=_rows(perf_render.completion_rows(tables)),
        work_rows=_rows(perf_render.work_rows(work)),
        work_line=work_line(work),
    )


def server_reach(end: datetime, window_s: float = WINDOW_S) -> datetime:
    """The last moment a server line still belongs to a run that ended at ``end``."""
    return end + timedelta(seconds=window_s)


def work_line(work: UsefulWork) -> str:
    """``4.00 allowed calls/min and 60.00 completed handshakes/hour at 72.0 generation
    tok/s`` — the one sentence that puts useful work beside speed."""
    return (
        f"{_f(work.allowed_per_min, 2)} allowed calls/min and "
        f"{_f(work.handshakes_per_hour, 2)} completed handshakes/hour at "
        f"{_f(work.generation_tps, 1)} average generation tok/s (busy windows), "
        f"over {work.minutes:.2f} min"
    )


def work_dict(section: RunThroughput) -> UsefulWorkEntry | None:
    """The useful-work numbers of one run for ``summary.json`` (``None`` without samples)."""
    work, tables = section.work, section.tables
    if work is None or tables is None:
        return None
    return {
        "run": section.run_id,
        "start": work.start.isoformat(),
        "end": work.end.isoformat(),
        "minutes": _r(work.minutes, 4),
        "samples": tables.samples,
        "sources": list(tables.sources),
        "allowed_calls": work.allowed_calls,
        "denied_calls": work.denied_calls,
        "handshakes_completed": work.handshakes_completed,
        "completions": work.completions,
        "allowed_calls_per_min": _r(work.allowed_per_min),
        "denied_calls_per_min": _r(work.denied_per_min),
        "completed_handshakes_per_hour": _r(work.handshakes_per_hour),
        "completions_per_min": _r(work.completions_per_min),
        "generation_tps": _r(work.generation_tps),
    }


def _rows(rows: list[list[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(row) for row in rows)


def _f(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
