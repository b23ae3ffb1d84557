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
(``done request:`` in 2025+ builds, and the 2024 ``log_server_request`` records) become
:class:`Request`; a completion request takes the total time of its timing block as
``duration_s``: the block just before it, or, where the build writes the access line
first (2025+ streaming), the block right after it; and the block's time as its ``ts``:
a completion is counted when it finished, in the window of its own sample (its access
line comes a moment after the block, past that window's end, or, streamed, a whole
request before it).  A finished timing block no access
line claims, in a log that has printed no access line (builds and verbosity levels that
log none, the ``print_timings`` logs of 2023), is itself a finished completion: it
becomes a ``POST /v1/chat/completions`` 200 request at the block's time, lasting its
total time (llama.cpp prints timings only for completions), so a log with one finished
request imports one request, not none.

Time: many llama.cpp logs carry no timestamps, so line order is the clock.  It starts at
``start`` (default 1970-01-01 00:00, a relative clock: pass the real start to join the
log with a run) and moves forward by each block's total time, i.e. as if requests ran
one after another.  Where the log does carry time it wins: ``--log-timestamps`` prefixes
(``M.SS.mmm.uuu``, minutes since the server started) are added to ``start``; epoch
``timestamp`` fields of 2024 builds are taken as UTC wall time.  A log read from the
journal (``journalctl -u llama-server``: ``Nov 27 02:13:45 host llama-server[812]: ...``,
or ``-o short-iso``: ``2026-11-27T02:13:45+0000 host llama-server[812]: ...``) takes each
line's journal time, the host's wall clock (``--utc-offset`` says its zone; the ISO form
carries it); the year-less form takes the year of ``start``, else the current year (a
date past today is last year's).  In a stamped log a
block's sample takes the time of the last stamped line before its rate lines (the
``print_timing`` header, written when the request finished).

A journal exported without ``journalctl -a`` shows a line holding a control character
as ``[101B blob data]``, as it does llama.cpp's timing lines in some builds: such lines
are counted in ``LogStats.hidden``, their content lost.  In router mode (one
``llama-server`` serving several models) every line of a model's server is prefixed
with its port, ``[51234] ``; the prefix is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from agent_eval.serverlogs.records import CHAT_PATH, LogStats, Request, Sample

RELATIVE_EPOCH = datetime(1970, 1, 1)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
JOURNAL_PREFIX = re.compile(  # journalctl's short and ISO forms: time, host, unit[pid]

    r"^(?:(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))?"
    r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<zone>Z|[+-]\d\d:?\d\d)?)"
    r" \S+ [^\s:\[]+(?:\[\d+\])?: ")
_REL_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) (?:[IWED] )?")
_ROUTER_PORT = re.compile(r"^\[\d+\] ")
_BLOB = re.compile(r"^\[[\d.]+[KMG]?B blob data\]$")
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
    """Yield a :class:`Sample` per timing block and a :class:`Request` per access line
    (or per finished block, in a log without access lines).

    Never raises on content; see :class:`LogStats` for what is counted.
    """
    parser = _Parser(start, source, stats if stats is not None else LogStats())
    for lineno, raw in enumerate(lines, start=1):
        yield from parser.feed(lineno, raw)
    yield from parser.end()


class _Parser:
    """The state of one pass over a llama.cpp log: the clock, busy slots, the timing
    block being read, and the request waiting for its block's duration."""

    def __init__(self, start: datetime | None, source: str, stats: LogStats) -> None:
        self.stats = stats
        self.source = source
        self.origin = start if start is not None else RELATIVE_EPOCH
        self.clock = self.origin
        self.busy: set[int] = set()
        self.current_slot: int | None = None
        self.block: _Block | None = None
        self.unclaimed: tuple[datetime, float] | None = None  # last finished block: ts, total ms
        self.held: Request | None = None  # a completion access line before its block
        self.has_stamps = False
        self.year = start.year if start is not None else None
        self.access_seen = False

    def feed(self, lineno: int, raw: str) -> list[Sample | Request]:
        self.stats.lines += 1
        line = _ANSI.sub("", raw).strip()
        journal = JOURNAL_PREFIX.match(line)
        if journal is not None:
            line = _ROUTER_PORT.sub("", line[journal.end():])
            line = _REL_STAMP.sub("", line)  # the journal's clock wins
            stamped = _journal_time(journal, self.year)
        else:
            line = _ROUTER_PORT.sub("", line)
            stamped = _line_time(line, self.origin)
        if stamped is not None:
            self.clock = max(self.clock, stamped)
            self.has_stamps = True
        if _BLOB.match(line):
            self.stats.hidden += 1
            return []
        line = _REL_STAMP.sub("", line)
        slot_match = _SLOT_ID.search(line)
        if slot_match is not None:
            self.current_slot = int(slot_match.group(1))
        timing = self._timing(line, lineno, stamped)
        if timing is not None:
            return timing
        slot = int(slot_match.group(1)) if slot_match is not None else None
        if slot is not None and _LAUNCH.search(line):
            self.busy.add(slot)
            self.stats.ignored += 1
            return []
        if slot is not None and _RELEASE.search(line):
            out = self._close_block()
            self.busy.discard(slot)
            self.stats.ignored += 1
            return out
        return self._access(line, lineno)

    def end(self) -> list[Sample | Request]:
        out = self._close_block()
        out += self._flush_unclaimed()
        if self.held is not None:
            out.append(self.held)
            self.held = None
        return out

    def _timing(self, line: str, lineno: int, stamped: datetime | None) -> list[Sample | Request] | None:
        """Records for a timing line (prompt/eval/total), or None when it is not one."""
        prompt = _PROMPT.search(line)
        if prompt is not None:
            out = self._close_block()
            self.block = _Block(
                prompt_ms=float(prompt.group(1)), prompt_tps=_rate(prompt.group(3)),
                slot=self.current_slot, ts=stamped or (self.clock if self.has_stamps else None),
                lineno=lineno,
            )
            return out
        block = self.block
        evaluated = _EVAL.search(line)
        if evaluated is not None and block is not None and block.eval_tps is None:
            block.eval_ms, block.eval_tps = float(evaluated.group(1)), _rate(evaluated.group(3))
            block.ts = stamped or block.ts
            return []
        total = _TOTAL.search(line)
        if total is not None and block is not None:
            block.total_ms = float(total.group(1))
            block.ts = stamped or block.ts
            return self._close_block()
        if _TIMING_HINT.search(line):
            self.stats.note_malformed(lineno)
            return []
        return None

    def _close_block(self) -> list[Sample | Request]:
        """Finish the open timing block: its sample, and the request it completes."""
        b, self.block = self.block, None
        if b is None:
            return []
        if b.prompt_tps is None or b.eval_tps is None:
            self.stats.note_malformed(b.lineno)
            return []
        out: list[Sample | Request] = self._flush_unclaimed()
        total_ms = b.total_ms if b.total_ms is not None else (b.prompt_ms or 0) + (b.eval_ms or 0)
        self.clock = b.ts if b.ts is not None else self.clock + timedelta(milliseconds=total_ms)
        running = len(self.busy | ({b.slot} if b.slot is not None else set())) or 1
        self.stats.samples += 1
        out.append(Sample(ts=self.clock, source=self.source, prompt_tps=b.prompt_tps,
                          generation_tps=b.eval_tps, running=running))
        if self.held is not None:
            out.append(replace(self.held, ts=self.clock, duration_s=total_ms / 1000.0))
            self.held = None
        else:
            self.unclaimed = (self.clock, total_ms)
        return out

    def _flush_unclaimed(self) -> list[Sample | Request]:
        """The request of a finished block no access line claimed, in a log without any."""
        unclaimed, self.unclaimed = self.unclaimed, None
        if unclaimed is None or self.access_seen:
            return []
        self.stats.requests += 1
        return [Request(ts=unclaimed[0], source=self.source, method="POST", path=CHAT_PATH,
                        status=200, duration_s=unclaimed[1] / 1000.0)]

    def _access(self, line: str, lineno: int) -> list[Sample | Request]:
        access = _ACCESS.search(line) or _ACCESS_2024.search(line)
        if access is None:
            if _ACCESS_HINT.search(line) and "request" in line and "POST" in line:
                self.stats.note_malformed(lineno)
            else:
                self.stats.ignored += 1
            return []
        out = self._close_block()
        self.access_seen = True
        method, path = access["method"], access["path"].split("?", 1)[0]
        request = Request(ts=self.clock, source=self.source, method=method, path=path,
                          status=int(access["status"]))
        self.stats.requests += 1
        if method != "POST" or path not in _COMPLETION_PATHS:
            return [*out, request]
        if self.unclaimed is not None:
            (ts, ms), self.unclaimed = self.unclaimed, None
            return [*out, replace(request, ts=ts, duration_s=ms / 1000.0)]
        if self.held is not None:
            out.append(self.held)
        self.held = request
        return out


def _journal_time(m: re.Match[str], year: int | None) -> datetime | None:
    """A journal prefix's time, naive UTC for the ISO form with a zone, else the host's
    wall clock (see the module docstring for the year)."""
    try:
        if m.group("iso"):
            when = datetime.fromisoformat(m.group("iso"))
            zone = m.group("zone")
            if zone:
                zone = "+00:00" if zone == "Z" else zone[:3] + ":" + zone[-2:]
                when = datetime.fromisoformat(m.group("iso") + zone).astimezone(UTC)
            return when.replace(tzinfo=None)
        hours, minutes, seconds = (int(p) for p in m.group("hms").split(":"))
        micros = int((m.group("frac") or "0")[:6].ljust(6, "0"))
        now = datetime.now(UTC).replace(tzinfo=None)
        when = datetime(year or now.year, _MONTHS[m.group("mon")], int(m.group("day")),
                        hours, minutes, seconds, micros)
        if year is None and when > now + timedelta(days=1):
            when = when.replace(year=when.year - 1)
        return when
    except (KeyError, ValueError):
        return None


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
