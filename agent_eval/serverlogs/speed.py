"""The ``perf`` tables: speed by concurrency, and useful work beside it.  Pure functions.

Definitions (stated once; the report and the README point here):

Window
    Each :class:`Sample` is one window: the interval that ends at its ``ts`` and starts
    ``window_s`` earlier, or at the previous sample of the same source if that is later
    (so windows never overlap).  This is what a vLLM throughput line describes: averages
    over the logging interval that just closed.  A window's concurrency is the sample's
    ``running`` count; windows are bucketed by it (0, 1, 2, …).
Generation tokens/s (per bucket)
    ``samples`` windows; ``average``, ``median`` and ``peak`` (max) of their
    ``generation_tps``; ``per_request`` = average / running (``None`` for bucket 0).
Prefill tokens/s (per bucket)
    ``sustained`` = average ``prompt_tps`` over all windows of the bucket;
    ``active`` = average over the windows with ``prompt_tps > 0`` only (``None`` if none),
    i.e. prefill speed while prefilling, not diluted by decode-only windows.
Completions per minute (per bucket)
    successful ``POST .../chat/completions`` requests (status 200) whose ``ts`` falls in a
    window of the bucket (start exclusive, end inclusive), divided by the minutes those
    windows cover.  Requests of other sources, or in no window, count in no bucket
    (``unwindowed``).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_eval.serverlogs.records import Request, Sample
from agent_eval.transcript import CallRow, SessionRow


@dataclass(frozen=True, slots=True)
class GenerationRow:
    running: int
    samples: int
    average_tps: float
    median_tps: float
    peak_tps: float
    per_request_tps: float | None


@dataclass(frozen=True, slots=True)
class PrefillRow:
    running: int
    samples: int
    sustained_tps: float
    active_samples: int
    active_tps: float | None


@dataclass(frozen=True, slots=True)
class CompletionsRow:
    running: int
    windows: int
    minutes: float
    completions: int
    per_minute: float | None


@dataclass(frozen=True, slots=True)
class PerfTables:
    """The three tables, one row per running-request count present, ascending.

    ``sources`` lists every server stream that contributed: with more than one, the
    buckets pool their windows (filter with ``perf --source`` to see one server).
    """

    window_s: float
    samples: int
    requests: int
    completions: int
    unwindowed: int
    first_ts: datetime | None
    last_ts: datetime | None
    sources: tuple[str, ...]
    generation: tuple[GenerationRow, ...]
    prefill: tuple[PrefillRow, ...]
    throughput: tuple[CompletionsRow, ...]


@dataclass(frozen=True, slots=True)
class _Window:
    sample: Sample
    start: datetime


def perf_tables(
    samples: Iterable[Sample], requests: Iterable[Request], *, window_s: float = 10
) -> PerfTables:
    """Bucket the windows by concurrency and compute the three tables (see module doc)."""
    windows = _windows(samples, window_s)
    requests = list(requests)
    by_running: dict[int, list[_Window]] = defaultdict(list)
    for w in windows:
        by_running[w.sample.running].append(w)
    completions_in, unwindowed = _place_completions(windows, requests)

    generation, prefill, throughput = [], [], []
    for running in sorted(by_running):
        group = by_running[running]
        gen = [w.sample.generation_tps for w in group]
        avg = statistics.fmean(gen)
        generation.append(
            GenerationRow(
                running=running,
                samples=len(gen),
                average_tps=avg,
                median_tps=statistics.median(gen),
                peak_tps=max(gen),
                per_request_tps=avg / running if running else None,
            )
        )
        prompt = [w.sample.prompt_tps for w in group]
        active = [p for p in prompt if p > 0]
        prefill.append(
            PrefillRow(
                running=running,
                samples=len(prompt),
                sustained_tps=statistics.fmean(prompt),
                active_samples=len(active),
                active_tps=statistics.fmean(active) if active else None,
            )
        )
        seconds = sum((w.sample.ts - w.start).total_seconds() for w in group)
        done = completions_in.get(running, 0)
        throughput.append(
            CompletionsRow(
                running=running,
                windows=len(group),
                minutes=seconds / 60,
                completions=done,
                per_minute=done / (seconds / 60) if seconds > 0 else None,
            )
        )
    stamps = [w.sample.ts for w in windows] + [r.ts for r in requests]
    return PerfTables(
        window_s=window_s,
        samples=len(windows),
        requests=len(requests),
        completions=sum(1 for r in requests if r.is_completion),
        unwindowed=unwindowed,
        first_ts=min(stamps) if stamps else None,
        last_ts=max(stamps) if stamps else None,
        sources=tuple(sorted({w.sample.source for w in windows} | {r.source for r in requests})),
        generation=tuple(generation),
        prefill=tuple(prefill),
        throughput=tuple(throughput),
    )


def busy_generation_tps(samples: Iterable[Sample]) -> float | None:
    """Average generation tokens/s over windows with at least one running request.

    Idle windows are left out so the figure is the speed while serving, comparable
    across runs with different idle gaps.  ``None`` when the server was never busy.
    """
    busy = [s.generation_tps for s in samples if s.running > 0]
    return statistics.fmean(busy) if busy else None


def _windows(samples: Iterable[Sample], window_s: float) -> list[_Window]:
    span = timedelta(seconds=window_s)
    last_by_source: dict[str, datetime] = {}
    windows = []
    for sample in sorted(samples, key=lambda s: (s.source, s.ts)):
        start = sample.ts - span
        previous = last_by_source.get(sample.source)
        if previous is not None and previous > start:
            start = previous
        last_by_source[sample.source] = sample.ts
        windows.append(_Window(sample, start))
    windows.sort(key=lambda w: w.sample.ts)
    return windows


def _place_completions(
    windows: list[_Window], requests: list[Request]
) -> tuple[dict[int, int], int]:
    """Count completions per running bucket; also how many fell in no window."""
    by_source: dict[str, list[_Window]] = defaultdict(list)
    for w in windows:
        by_source[w.sample.source].append(w)
    ends = {source: [w.sample.ts for w in ws] for source, ws in by_source.items()}
    counts: dict[int, int] = defaultdict(int)
    unwindowed = 0
    for request in requests:
        if not request.is_completion:
            continue
        source_windows = by_source.get(request.source, [])
        i = bisect_left(ends.get(request.source, []), request.ts)
        if i < len(source_windows) and source_windows[i].start < request.ts:
            counts[source_windows[i].sample.running] += 1
        else:
            unwindowed += 1
    return dict(counts), unwindowed


@dataclass(frozen=True, slots=True)
class UsefulWork:
    """What a run got done per unit of time, beside how fast the server was meanwhile.

    Over the run's window ``start``..``end``: ``allowed_per_min`` = allowed tool calls /
    minutes; ``denied_per_min`` likewise (wasted work: each denial costs a new prefill and
    generation); ``handshakes_per_hour`` = sessions whose required handshake completed /
    hours; ``completions_per_min`` from the server's access lines in the window;
    ``generation_tps`` = :func:`busy_generation_tps` of the samples in the window.
    Sessions that ended in a server or harness fault (``status="error"``) are left out,
    as from every model rate.
    """

    start: datetime
    end: datetime
    minutes: float
    allowed_calls: int
    denied_calls: int
    handshakes_completed: int
    completions: int
    allowed_per_min: float | None
    denied_per_min: float | None
    handshakes_per_hour: float | None
    completions_per_min: float | None
    generation_tps: float | None


def useful_work(
    calls: Iterable[CallRow],
    sessions: Iterable[SessionRow],
    samples: Iterable[Sample],
    requests: Iterable[Request],
    *,
    start: datetime,
    end: datetime,
    reach: datetime | None = None,
) -> UsefulWork:
    """Useful work per minute beside tokens/s for one run window (see :class:`UsefulWork`).

    Server lines count from ``start`` up to ``reach`` (default ``end``): a throughput line
    printed a few seconds after the run's last reply still describes the run, so callers
    pass ``end`` plus one log window.  Rates are per minute of the run itself."""
    reach = end if reach is None else reach
    counted = [s for s in sessions if s.status != "error"]
    ok_ids = {s.id for s in counted}
    decisions = [c.decision for c in calls if c.session_id in ok_ids]
    allowed = decisions.count("allow")
    denied = decisions.count("deny")
    handshakes = sum(1 for s in counted if s.handshake_required > 0 and s.handshake_completed)
    in_window = [s for s in samples if start <= s.ts <= reach]
    completions = sum(1 for r in requests if r.is_completion and start <= r.ts <= reach)
    minutes = (end - start).total_seconds() / 60

    def rate(count: int, per_minutes: float) -> float | None:
        return count / (minutes / per_minutes) if minutes > 0 else None

    return UsefulWork(
        start=start,
        end=end,
        minutes=minutes,
        allowed_calls=allowed,
        denied_calls=denied,
        handshakes_completed=handshakes,
        completions=completions,
        allowed_per_min=rate(allowed, 1),
        denied_per_min=rate(denied, 1),
        handshakes_per_hour=rate(handshakes, 60),
        completions_per_min=rate(completions, 1),
        generation_tps=busy_generation_tps(in_window),
    )
