"""Read vLLM server logs: periodic throughput lines and uvicorn access lines.

Every line is first stripped of ANSI colour codes, of a log collector's RFC 3339 stamp
(``docker logs -t``, ``kubectl logs --timestamps``; ignored, so all times come from one
clock) and of the process prefix newer vLLM prints (``(APIServer pid=12345) ``,
``(EngineCore_DP0 pid=7) ``).  Then:

Throughput lines, all versions seen in the wild::

    V0 (~0.4-0.6)  INFO 05-14 10:22:31 metrics.py:351] Avg prompt throughput: 1234.5
                   tokens/s, Avg generation throughput: 56.7 tokens/s, Running: 3 reqs,
                   Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 12.3%,
                   CPU KV cache usage: 0.0%.      [+ Prefix cache hit rate: GPU: 45.00%, CPU: 0.00%]
    V1 (~0.8-0.11) INFO 08-01 12:00:10 [loggers.py:118] [Engine 000: ]Avg prompt
                   throughput: 512.3 tokens/s, Avg generation throughput: 88.1 tokens/s,
                   Running: 2 reqs, Waiting: 0 reqs, [GPU ]KV cache usage: 5.2%,
                   Prefix cache hit rate: 71.3%

``Pending`` and ``Waiting`` both fill ``waiting``; ``GPU KV cache usage`` and ``KV cache
usage`` both fill ``kv_cache_pct`` (never the CPU one); the V0 prefix hit rate is the
GPU one, whether it ends the throughput line or comes on a line of its own right after
it (as V0 prints it).  Prompt, generation and running are required; the rest is ``None`` when absent.

Dates: vLLM prints ``MM-DD HH:MM:SS`` without a year.  The year is ``year`` if given,
else the current year, and it steps forward when the month goes back (a log crossing
New Year).  A date with a year (``2025-08-01 12:00:10``, optional ``,123``/``.123``
fraction) is used as written.  Times are kept naive, as the server's clock printed them.

Access lines (``INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 200 OK``)
have no timestamp of their own.  Each takes the timestamp of the nearest preceding line
that has one (any vLLM log line, not only throughput lines): uvicorn writes the line when
the response starts, so a streamed completion is stamped near its start and a
non-streamed one near its end, never later than the event.  Except right after a
throughput line (no newer stamp between them), the common case with request logging off
(no ``Received request`` lines, the default of recent vLLM): that line closed the window
*before* the request's, so the access line takes the stamp of the next stamped line
instead, the end of the window it was written in, at most one logging interval late.
vLLM skips idle throughput lines, so a request after a pause lands in the window where it
ran, not in the idle one before it.  At the end of the log it takes one microsecond past
the throughput line's stamp.  Access lines before any timestamped line are dropped and
counted as ``untimed``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta

from agent_eval.serverlogs.llamacpp import JOURNAL_PREFIX
from agent_eval.serverlogs.records import LogStats, Request, Sample

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PROC_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w-]*) pid=\d+\)\s*")
_COLLECTOR_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s+")
_HEADER = re.compile(
    r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"(?:(?P<year>\d{4})-)?(?P<month>\d{2})-(?P<day>\d{2})\s+"
    r"(?P<hms>\d{2}:\d{2}:\d{2})(?:[.,](?P<frac>\d{1,6}))?\s+"
    r"\[?[\w./<>-]+:\d+\]\s?(?P<msg>.*)$"
)
_ACCESS = re.compile(
    r'^INFO:\s+\S+ - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})\b'
)
_ACCESS_HINT = re.compile(r'^INFO:\s+\S+ - "')
_THROUGHPUT_HINT = "Avg prompt throughput"
_AFTER = timedelta(microseconds=1)

_NUM = r"(\d+(?:\.\d+)?|nan)"
_PROMPT = re.compile(rf"Avg prompt throughput: {_NUM} tokens/s")
_GENERATION = re.compile(rf"Avg generation throughput: {_NUM} tokens/s")
_RUNNING = re.compile(r"Running: (\d+) reqs")
_WAITING = re.compile(r"(?:Waiting|Pending): (\d+) reqs")
_SWAPPED = re.compile(r"Swapped: (\d+) reqs")
_KV = re.compile(rf"(?<!CPU )(?:GPU )?KV cache usage: {_NUM}%")
_PREFIX_V0 = re.compile(rf"Prefix cache hit rate: GPU: {_NUM}%")
_PREFIX_V1 = re.compile(rf"Prefix cache hit rate: {_NUM}%")


def parse_vllm_log(
    lines: Iterable[str],
    *,
    year: int | None = None,
    source: str = "vllm",
    stats: LogStats | None = None,
) -> Iterator[Sample | Request]:
    """Yield a :class:`Sample` per throughput line and a :class:`Request` per access line.

    Never raises on content: unknown lines are counted in ``stats.ignored``, lines that
    look like ours but cannot be read in full in ``stats.malformed``.
    """
    stats = stats if stats is not None else LogStats()
    clock = _YearClock(year if year is not None else datetime.now().year)
    last_ts: datetime | None = None
    closed: datetime | None = None  # the end of the last window a throughput line closed
    pending: list[Request] = []  # access lines after it, waiting for the next stamp
    held: Sample | None = None  # V0 may print its prefix hit rate on the next line
    for lineno, raw in enumerate(lines, start=1):
        stats.lines += 1
        line = _bare_line(raw)
        header = _HEADER.match(line)
        if header is not None and held is not None and header["msg"].startswith("Prefix cache"):
            hit = _number(_PREFIX_V0, header["msg"])
            if hit is not None and held.prefix_hit_pct is None:
                held = replace(held, prefix_hit_pct=hit)
                stats.ignored += 1
                continue
        if held is not None:
            yield held
            held = None
        if header is not None:
            ts = clock.stamp(header)
            if ts is None:
                stats.note_malformed(lineno)
                continue
            last_ts = ts
            for request in pending:  # written after the previous window closed
                yield replace(request, ts=max(ts, request.ts + _AFTER))
            pending = []
            msg = header["msg"]
            if _THROUGHPUT_HINT not in msg:
                stats.ignored += 1
                continue
            held = _read_sample(msg, ts, source, line)
            if held is None:
                stats.note_malformed(lineno)
            else:
                stats.samples += 1
                closed = ts
            continue
        access = _ACCESS.match(line)
        if access is not None:
            if last_ts is None:
                stats.untimed += 1
                continue
            stats.requests += 1
            request = Request(
                ts=last_ts,
                source=source,
                method=access["method"],
                path=access["path"].split("?", 1)[0],
                status=int(access["status"]),
            )
            if closed is not None and last_ts <= closed:
                pending.append(request)
            else:
                yield request
            continue
        _note_unread(stats, lineno, line)
    if held is not None:
        yield held
    for request in pending:
        yield replace(request, ts=request.ts + _AFTER)


def _bare_line(raw: str) -> str:
    """A log line without colours and the prefixes collectors add (journalctl's: vLLM's
    own stamp wins; a process prefix; a collector's time stamp)."""
    line = _ANSI.sub("", raw).strip()
    journal = JOURNAL_PREFIX.match(line)
    if journal is not None:
        line = line[journal.end():]
    return _PROC_PREFIX.sub("", _COLLECTOR_STAMP.sub("", line))


def _note_unread(stats: LogStats, lineno: int, line: str) -> None:
    """A line read as nothing: malformed when it looks like ours, else ignored."""
    if _THROUGHPUT_HINT in line or _ACCESS_HINT.match(line):
        stats.note_malformed(lineno)
    else:
        stats.ignored += 1


class _YearClock:
    """Turns a header's date into a datetime, supplying the year vLLM leaves out."""

    def __init__(self, year: int) -> None:
        self.year = year
        self.last_month: int | None = None

    def stamp(self, header: re.Match[str]) -> datetime | None:
        month, day = int(header["month"]), int(header["day"])
        if header["year"]:
            year = int(header["year"])
        else:
            if self.last_month is not None and month < self.last_month - 6:
                self.year += 1
            self.last_month = month
            year = self.year
        hh, mm, ss = (int(p) for p in header["hms"].split(":"))
        micro = int((header["frac"] or "0").ljust(6, "0"))
        try:
            return datetime(year, month, day, hh, mm, ss, micro)
        except ValueError:
            return None


def _read_sample(msg: str, ts: datetime, source: str, raw: str) -> Sample | None:
    prompt, generation = _number(_PROMPT, msg), _number(_GENERATION, msg)
    running = _count(_RUNNING, msg)
    if prompt is None or generation is None or running is None:
        return None
    prefix = _number(_PREFIX_V0, msg)
    if prefix is None:
        prefix = _number(_PREFIX_V1, msg)
    return Sample(
        ts=ts,
        source=source,
        prompt_tps=prompt,
        generation_tps=generation,
        running=running,
        waiting=_count(_WAITING, msg),
        swapped=_count(_SWAPPED, msg),
        kv_cache_pct=_number(_KV, msg),
        prefix_hit_pct=prefix,
        raw=raw,
    )


def _number(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    if match is None:
        return None
    value = next(g for g in match.groups() if g is not None)
    return None if value == "nan" else float(value)


def _count(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(1)) if match else None
