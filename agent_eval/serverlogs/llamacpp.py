"""Read llama.cpp server logs: per-request slot timings and access lines.

llama.cpp prints no periodic throughput line.  It prints, per finished request, a timing
block (newer builds after ``slot print_timing: id  0 | task 42 |``, older ones inside a
``print_timings`` log record)::

    prompt eval time =     123.45 ms /    64 tokens (    1.93 ms per token,   518.44 tokens per second)
           eval time =    2345.67 ms /   128 runs   (   18.33 ms per token,    54.57 tokens per second)
          total time =    2469.12 ms /   192 tokens

Each block becomes one :class:`Sample`: ``prompt_tps`` and ``generation_tps`` are that
request's own rates (so they are active-only by nature), ``running`` is the number of
slots busy when it finished (from ``launch_slot_``/``release`` lines; at least 1).
``waiting``, ``swapped`` and the cache fields are ``None``.  A block cut short before
``total time`` is still read when it has both rate lines; one without ``eval time`` is
malformed.

Access lines ``srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200``
(and the 2024 ``log_server_request`` records) become :class:`Request`; a completion
request takes the total time of the timing block just before it as ``duration_s``.

Time: many llama.cpp logs carry no timestamps, so line order is the clock.  It starts at
``start`` (default 1970-01-01 00:00, a relative clock: pass the real start to join the
log with a run) and moves forward by each block's total time, i.e. as if requests ran
one after another.  Where the log does carry time it wins: ``--log-timestamps`` prefixes
(``M.SS.mmm.uuu``, minutes since the server started) are added to ``start``; epoch
``timestamp`` fields of 2024 builds are taken as UTC wall time.  In a stamped log a
block's sample takes the time of the last stamped line before its rate lines (the
``print_timing`` header, written when the request finished).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agent_eval.serverlogs.records import LogStats, Request, Sample

RELATIVE_EPOCH = datetime(1970, 1, 1)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_REL_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) (?:[IWED] )?")
_EPOCH = re.compile(r"""\btimestamp["=:\s]+(\d{9,11})\b""")
_RATE = r"=\s*(\d+(?:\.\d+)?) ms /\s*(\d+) (?:tokens|runs)\s*\(\s*\d+(?:\.\d+)? ms per token,\s*(\d+(?:\.\d+)?|inf|nan) tokens per second\)"
_PROMPT = re.compile(r"prompt eval time\s*" + _RATE)
_EVAL = re.compile(r"(?<!prompt )\beval time\s*" + _RATE)
_TOTAL = re.compile(r"total time\s*=\s*(\d+(?:\.\d+)?) ms")
_TIMING_HINT = re.compile(r"(?:prompt eval|\beval|total) time\s*=")
_ACCESS = re.compile(r"\brequest: (?P<method>[A-Z]+) (?P<path>/\S*) \S+ (?P<status>\d{3})\b")
_ACCESS_2024 = re.compile(
    r"""\bstatus["=:\s]+(?P<status>\d{3})\b.*?\bmethod["=:\s]+"(?P<method>[A-Z]+)".*?\bpath["=:\s]+"(?P<path>[^"]+)\""""
)
_ACCESS_HINT = re.compile(r"log_server_r|log_server_request")
_SLOT_ID = re.compile(r"""\bid(?:_slot)?["=:\s]+(\d+)""")
_LAUNCH = re.compile(r"launch_slot_|slot is processing task")
_RELEASE = re.compile(r"\brelease:|slot released")
_COMPLETION_PATHS = (
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completion",
    "/completions",
)


@dataclass
class _Block:
    prompt_ms: float | None = None
    prompt_tps: float | None = None
    eval_ms: float | None = None
    eval_tps: float | None = None
    total_ms: float | None = None
    slot: int | None = None
    ts: datetime | None = None
    lineno: int = 0


def parse_llamacpp_log(
    lines: Iterable[str],
    *,
    start: datetime | None = None,
    source: str = "llamacpp",
    stats: LogStats | None = None,
) -> Iterator[Sample | Request]:
    """Yield a :class:`Sample` per timing block and a :class:`Request` per access line.

    Never raises on content; see :class:`LogStats` for what is counted.
    """
    stats = stats if stats is not None else LogStats()
    origin = start if start is not None else RELATIVE_EPOCH
    clock = origin
    busy: set[int] = set()
    current_slot: int | None = None
    block: _Block | None = None
    unclaimed_ms: float | None = None
    has_stamps = False

    def finish(b: _Block) -> Sample | None:
        nonlocal clock, unclaimed_ms
        if b.prompt_tps is None or b.eval_tps is None:
            stats.note_malformed(b.lineno)
            return None
        total_ms = b.total_ms if b.total_ms is not None else (b.prompt_ms or 0) + (b.eval_ms or 0)
        clock = b.ts if b.ts is not None else clock + timedelta(milliseconds=total_ms)
        unclaimed_ms = total_ms
        running = len(busy | ({b.slot} if b.slot is not None else set())) or 1
        stats.samples += 1
        return Sample(
            ts=clock,
            source=source,
            prompt_tps=b.prompt_tps,
            generation_tps=b.eval_tps,
            running=running,
        )

    for lineno, raw in enumerate(lines, start=1):
        stats.lines += 1
        line = _ANSI.sub("", raw).strip()
        stamped = _line_time(line, origin)
        if stamped is not None:
            clock = max(clock, stamped)
            has_stamps = True
        line = _REL_STAMP.sub("", line)
        slot_match = _SLOT_ID.search(line)
        if slot_match is not None:
            current_slot = int(slot_match.group(1))

        prompt = _PROMPT.search(line)
        if prompt is not None:
            if block is not None and (sample := finish(block)) is not None:
                yield sample
            block = _Block(
                prompt_ms=float(prompt.group(1)),
                prompt_tps=_rate(prompt.group(3)),
                slot=current_slot,
                ts=stamped or (clock if has_stamps else None),
                lineno=lineno,
            )
            continue
        evaluated = _EVAL.search(line)
        if evaluated is not None and block is not None and block.eval_tps is None:
            block.eval_ms, block.eval_tps = float(evaluated.group(1)), _rate(evaluated.group(3))
            block.ts = stamped or block.ts
            continue
        total = _TOTAL.search(line)
        if total is not None and block is not None:
            block.total_ms = float(total.group(1))
            block.ts = stamped or block.ts
            sample = finish(block)
            block = None
            if sample is not None:
                yield sample
            continue
        if _TIMING_HINT.search(line):
            stats.note_malformed(lineno)
            continue

        if _LAUNCH.search(line) and slot_match is not None:
            busy.add(int(slot_match.group(1)))
            stats.ignored += 1
            continue
        if _RELEASE.search(line) and slot_match is not None:
            if block is not None and (sample := finish(block)) is not None:
                yield sample
            block = None
            busy.discard(int(slot_match.group(1)))
            stats.ignored += 1
            continue

        access = _ACCESS.search(line) or _ACCESS_2024.search(line)
        if access is not None:
            if block is not None and (sample := finish(block)) is not None:
                yield sample
            block = None
            method, path = access["method"], access["path"].split("?", 1)[0]
            duration = None
            if method == "POST" and path in _COMPLETION_PATHS and unclaimed_ms is not None:
                duration, unclaimed_ms = unclaimed_ms / 1000.0, None
            stats.requests += 1
            yield Request(
                ts=clock,
                source=source,
                method=method,
                path=path,
                status=int(access["status"]),
                duration_s=duration,
            )
            continue
        if _ACCESS_HINT.search(line) and "request" in line and "POST" in line:
            stats.note_malformed(lineno)
        else:
            stats.ignored += 1

    if block is not None and (sample := finish(block)) is not None:
        yield sample


def _line_time(line: str, origin: datetime) -> datetime | None:
    """The time a line carries itself, if any: a relative prefix or an epoch field."""
    rel = _REL_STAMP.match(line)
    if rel is not None:
        minutes, seconds, millis, micros = (int(g) for g in rel.groups())
        return origin + timedelta(
            minutes=minutes, seconds=seconds, milliseconds=millis, microseconds=micros
        )
    epoch = _EPOCH.search(line)
    if epoch is not None:
        return datetime.fromtimestamp(int(epoch.group(1)), UTC).replace(tzinfo=None)
    return None


def _rate(text: str) -> float:
    return float(text) if text not in ("inf", "nan") else 0.0
