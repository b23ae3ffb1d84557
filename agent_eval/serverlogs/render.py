"""The perf tables as Markdown and as JSON-ready dicts (pure; the CLI writes the files)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from agent_eval.serverlogs.speed import PerfTables, UsefulWork

DEFINITIONS = (
    "Each throughput sample is one window (the interval its line closes, at most "
    "{window:g} s); windows are bucketed by the running-request count of their sample. "
    "Per request = average / running. Prefill sustained averages all windows of a bucket, "
    "active only the windows with prompt tokens/s > 0. Completions/min counts successful "
    "POST .../chat/completions in the bucket's windows over the minutes they cover."
)


def perf_document(
    tables: PerfTables, work: UsefulWork | None = None, *, scope: str = ""
) -> dict[str, Any]:
    """Everything ``perf.json`` holds: scope, counts, the three tables, useful work."""
    doc: dict[str, Any] = {
        "scope": scope,
        "window_s": tables.window_s,
        "samples": tables.samples,
        "requests": tables.requests,
        "completions": tables.completions,
        "unwindowed_completions": tables.unwindowed,
        "first_ts": _iso(tables.first_ts),
        "last_ts": _iso(tables.last_ts),
        "sources": list(tables.sources),
        "generation": [asdict(r) for r in tables.generation],
        "prefill": [asdict(r) for r in tables.prefill],
        "completions_per_minute": [asdict(r) for r in tables.throughput],
        "useful_work": None,
    }
    if work is not None:
        row = asdict(work)
        row["start"], row["end"] = _iso(work.start), _iso(work.end)
        doc["useful_work"] = row
    return doc


def generation_rows(tables: PerfTables) -> list[list[str]]:
    return [
        [
            str(r.running),
            str(r.samples),
            _f(r.average_tps),
            _f(r.median_tps),
            _f(r.peak_tps),
            _f(r.per_request_tps),
        ]
        for r in tables.generation
    ]


def prefill_rows(tables: PerfTables) -> list[list[str]]:
    return [
        [
            str(r.running),
            str(r.samples),
            _f(r.sustained_tps),
            str(r.active_samples),
            _f(r.active_tps),
        ]
        for r in tables.prefill
    ]


NO_ACCESS_LINES = (
    "Completions per minute: unknown, the log holds no access lines (vLLM started with "
    "--disable-uvicorn-access-log or --disable-log-requests, or a llama.cpp build that "
    "logs none); its throughput lines count tokens, not finished requests.")


def completion_rows(tables: PerfTables) -> list[list[str]]:
    """The completions table; none when the window holds no access line at all (a table
    of zeros would read as a server that finished nothing)."""
    if tables.requests == 0:
        return []
    return [
        [str(r.running), str(r.windows), _f(r.minutes, 2), str(r.completions), _f(r.per_minute, 2)]
        for r in tables.throughput
    ]


def work_rows(work: UsefulWork) -> list[list[str]]:
    return [
        ["allowed tool calls / min", _f(work.allowed_per_min, 2), f"{work.allowed_calls} calls"],
        ["denied tool calls / min", _f(work.denied_per_min, 2), f"{work.denied_calls} calls"],
        [
            "completed handshakes / hour",
            _f(work.handshakes_per_hour, 2),
            f"{work.handshakes_completed} handshakes",
        ],
        [
            "server completions / min",
            _f(work.completions_per_min, 2),
            f"{work.completions} requests",
        ],
        ["generation tokens/s (busy windows)", _f(work.generation_tps), ""],
    ]


GENERATION_HEADER = ["running", "samples", "average tok/s", "median", "peak", "per request"]
PREFILL_HEADER = ["running", "samples", "sustained tok/s", "active samples", "active tok/s"]
COMPLETIONS_HEADER = ["running", "windows", "minutes", "completions", "per minute"]
WORK_HEADER = ["useful work", "rate", "count"]


def render_markdown(tables: PerfTables, work: UsefulWork | None = None, *, scope: str = "") -> str:
    """``perf.md``: the three tables, useful work beside speed, and the definitions."""
    parts = ["# Server performance", ""]
    if scope:
        parts += [scope, ""]
    parts += [
        f"{tables.samples} samples, {tables.completions} completions "
        f"({tables.unwindowed} outside any sample window), "
        f"{_iso(tables.first_ts) or '-'} to {_iso(tables.last_ts) or '-'}; "
        f"sources: {', '.join(tables.sources) or '-'}.",
        "",
    ]
    if work is not None:
        parts += ["## Useful work beside speed", "", *_table(WORK_HEADER, work_rows(work)), ""]
    parts += ["## Generation tokens/s by concurrency", ""]
    parts += [*_table(GENERATION_HEADER, generation_rows(tables)), ""]
    parts += ["## Prefill tokens/s by concurrency", ""]
    parts += [*_table(PREFILL_HEADER, prefill_rows(tables)), ""]
    parts += ["## Completions per minute by concurrency", ""]
    if tables.requests == 0 and tables.throughput:
        parts += [NO_ACCESS_LINES, ""]
    else:
        parts += [*_table(COMPLETIONS_HEADER, completion_rows(tables)), ""]
    parts += [DEFINITIONS.format(window=tables.window_s), ""]
    return "\n".join(parts)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(no samples)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(sep=" ")
