"""Store glue: read a server log file, parse it, write its samples and requests.

The only part of ``serverlogs`` that touches files and the store.  The ``import`` command
(``agent-eval import vllm-log FILE`` / ``llamacpp-log``) calls :func:`import_log`.

Importing is idempotent: rows already stored for the same source and timestamp (and,
for requests, the same method, path and status) are skipped, so importing a log twice,
or a log and its longer successor, never counts a completion twice.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

from agent_eval.errors import ConfigError
from agent_eval.serverlogs.llamacpp import parse_llamacpp_log
from agent_eval.serverlogs.records import LogStats, Request, Sample
from agent_eval.serverlogs.vllm import parse_vllm_log

LogFormat = Literal["vllm-log", "llamacpp-log"]
"""``vllm-log``: a vLLM server's stdout/stderr; ``llamacpp-log``: llama.cpp's server log."""

LOG_FORMATS: tuple[LogFormat, ...] = ("vllm-log", "llamacpp-log")
_OPTIONS: dict[str, set[str]] = {
    "vllm-log": {"year", "utc_offset"},
    "llamacpp-log": {"start", "utc_offset"},
}


class ServerLogStore(Protocol):
    def add_server_samples(self, rows: list[dict[str, Any]]) -> Any: ...
    def add_server_requests(self, rows: list[dict[str, Any]]) -> Any: ...
    def server_samples(self, since: datetime | None = None, until: datetime | None = None,
                       source: str | None = None) -> list[dict[str, Any]]: ...
    def server_requests(self, since: datetime | None = None, until: datetime | None = None,
                        source: str | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class ImportStats:
    """What one import read and wrote, for the command to print.

    ``samples`` and ``requests`` count the rows written; ``already_imported`` counts the
    rows the log holds that the store already had (an earlier import of the same lines),
    skipped.  ``hidden`` counts lines a journal export printed as ``[101B blob data]``
    (see :class:`LogStats`): the command tells the user to export with ``journalctl -a``.
    """

    path: str
    fmt: LogFormat
    source: str
    lines: int
    samples: int
    requests: int
    ignored: int
    malformed: int
    untimed: int
    hidden: int = 0
    malformed_lines: tuple[int, ...] = ()
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    already_imported: int = 0


def import_log(
    store: ServerLogStore,
    fmt: LogFormat,
    path: str | Path,
    *,
    label: str | None = None,
    **opts: Any,
) -> ImportStats:
    """Parse the log at ``path`` and write its samples and requests to ``store``.

    ``label`` names the server stream (stored as ``source`` and ``label``; default: the
    file name) so ``agent-eval perf --source NAME`` can pick it.  Options, ``None`` meaning
    "not given":

    ``year`` (vllm-log)        year for vLLM's year-less dates; default the current year.
    ``start`` (llamacpp-log)   wall-clock time of the log's first line (datetime or ISO
                               text); required when the log carries no timestamps.
    ``utc_offset`` (both)      the server clock's offset from UTC (``"+02:00"``, hours as a
                               number, or a timedelta); subtracted so stored times are UTC.

    Rows the store already holds for this source (same timestamp; for requests also the
    same method, path and status, counted per occurrence) are skipped and counted in
    ``already_imported``, so importing the same log twice changes nothing.

    ``.gz`` files are read transparently.  Raises ConfigError naming the file for a missing,
    unreadable or binary file, an option that does not apply, or a file holding none of
    the lines this format describes.
    """
    if fmt not in LOG_FORMATS:
        raise ConfigError(
            f"unknown server log format {fmt!r}: use one of {', '.join(LOG_FORMATS)}",
            field="format",
        )
    where = str(path)
    given = {k: v for k, v in opts.items() if v is not None}
    for name in given.keys() - _OPTIONS[fmt]:
        raise ConfigError(
            f"option {name!r} does not apply to {fmt}: it takes {', '.join(sorted(_OPTIONS[fmt]))}",
            path=where,
            field=name,
        )
    offset = _utc_offset(given.get("utc_offset"), where)
    source = label or Path(path).name
    stats = LogStats()
    lines = _read_lines(Path(path))
    if fmt == "vllm-log":
        records = list(
            parse_vllm_log(lines, year=_year(given.get("year"), where), source=source, stats=stats)
        )
    else:
        start = _start(given.get("start"), where)
        records = list(parse_llamacpp_log(lines, start=start, source=source, stats=stats))
        if start is None and records and min(r.ts for r in records) < datetime(2000, 1, 1):
            raise ConfigError(
                "this llama.cpp log carries no wall-clock timestamps: pass the time its "
                "first line was written, e.g. --start '2025-08-01 12:00:00'",
                path=where,
                field="start",
            )
    if not records and stats.hidden:
        raise ConfigError(
            f"{stats.hidden} of its {stats.lines} lines were hidden by journalctl as "
            "[blob data]: export the journal again with journalctl -a",
            path=where,
            field="format",
        )
    if not records:
        other = "llamacpp-log" if fmt == "vllm-log" else "vllm-log"
        raise ConfigError(
            f"no throughput, timing or access lines in {stats.lines} lines "
            f"({stats.malformed} malformed): is this a {fmt} file? (try {other})",
            path=where,
            field="format",
        )
    stamps = [r.ts - offset for r in records]
    since, until = min(stamps), max(stamps) + timedelta(microseconds=1)
    samples, skipped_samples = _unstored(
        [_sample_row(r, label, offset) for r in records if isinstance(r, Sample)],
        store.server_samples(since, until, source), _sample_key,
    )
    requests, skipped_requests = _unstored(
        [_request_row(r, offset) for r in records if isinstance(r, Request)],
        store.server_requests(since, until, source), _request_key,
    )
    if samples:
        store.add_server_samples(samples)
    if requests:
        store.add_server_requests(requests)
    return ImportStats(
        path=where,
        fmt=fmt,
        source=source,
        lines=stats.lines,
        samples=len(samples),
        requests=len(requests),
        ignored=stats.ignored,
        malformed=stats.malformed,
        untimed=stats.untimed,
        hidden=stats.hidden,
        malformed_lines=tuple(stats.malformed_lines),
        first_ts=min(stamps),
        last_ts=max(stamps),
        already_imported=skipped_samples + skipped_requests,
    )


def _unstored(
    rows: list[dict[str, Any]], stored: list[dict[str, Any]], key: Callable[[dict], Hashable]
) -> tuple[list[dict[str, Any]], int]:
    """The rows the store does not hold yet, and how many it did.

    Counted per key, not as a set: several access lines legitimately share a second
    (and a path and a status), so a log holding three where two are stored adds one.
    """
    have = Counter(key(row) for row in stored)
    fresh = []
    for row in rows:
        k = key(row)
        if have[k]:
            have[k] -= 1
        else:
            fresh.append(row)
    return fresh, len(rows) - len(fresh)


def _naive_utc(ts: datetime) -> datetime:
    """Stored times read back zone-aware, parsed ones are naive UTC: compare them as naive."""
    return ts.astimezone(UTC).replace(tzinfo=None) if ts.tzinfo is not None else ts


def _sample_key(row: dict[str, Any]) -> Hashable:
    return _naive_utc(row["ts"])


def _request_key(row: dict[str, Any]) -> Hashable:
    return (_naive_utc(row["ts"]), row["method"], row["path"], row["status"])


def _sample_row(sample: Sample, label: str | None, offset: timedelta) -> dict[str, Any]:
    row = asdict(sample)
    row["ts"] = sample.ts - offset
    row["label"] = label
    return row


def _request_row(request: Request, offset: timedelta) -> dict[str, Any]:
    row = asdict(request)
    row["ts"] = request.ts - offset
    return row


def _read_lines(path: Path) -> Iterator[str]:
    """The file's lines as text; ConfigError (file, and line if known) when it is not text."""
    try:
        with path.open("rb") as probe:
            head = probe.read(4096)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the log file: {exc.strerror or exc}", path=str(path)
        ) from None
    opener = gzip.open if head[:2] == b"\x1f\x8b" else open
    if opener is open and b"\x00" in head:
        raise ConfigError("this is a binary file, not a text server log", path=str(path))
    return _decoded(path, opener)


def _decoded(path: Path, opener: Any) -> Iterator[str]:
    lineno = 0
    try:
        with opener(path, "rb") as handle:
            for lineno, raw in enumerate(handle, start=1):  # noqa: B007 (read in except)
                yield raw.decode("utf-8", errors="replace")
    except (OSError, EOFError) as exc:
        raise ConfigError(
            f"cannot read the log file after line {lineno}: {exc}",
            path=str(path),
            field=f"line {lineno + 1}",
        ) from None


def _year(value: Any, where: str) -> int | None:
    if value is None:
        return None
    try:
        year = int(value)
    except (TypeError, ValueError):
        year = 0
    if not 1970 <= year <= 9999:
        raise ConfigError(
            f"year must be a four-digit year, got {value!r}", path=where, field="year"
        )
    return year


def _start(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise ConfigError(
                f"start must be a date and time like '2025-08-01 12:00:00', got {value!r}",
                path=where,
                field="start",
            ) from None
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


_OFFSET = re.compile(r"^([+-])(\d{1,2}):?(\d{2})?$")


def _utc_offset(value: Any, where: str) -> timedelta:
    if value is None:
        return timedelta(0)
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(hours=value)
    match = _OFFSET.match(str(value).strip())
    if match is None:
        raise ConfigError(
            f"utc_offset must look like +02:00 or -05:00, got {value!r}",
            path=where,
            field="utc_offset",
        )
    sign = -1 if match.group(1) == "-" else 1
    return sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0))
