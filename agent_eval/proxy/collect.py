"""``agent-eval collect``: an OTLP/HTTP receiver that judges the tool calls in telemetry.

Agent CLIs and frameworks export OpenTelemetry logs and traces; pointed at this receiver
(``POST /v1/logs``, ``POST /v1/traces``, OTLP/JSON, or OTLP/protobuf when
opentelemetry-proto, the ``otel`` extra, is installed), their tool calls are read by
``importers/otlp.py``, stitched into sessions, judged by the importers' ``Judge`` (the
call recorder the proxy and imports use) and stored as a run of kind ``import``, format
``otlp``.  A session is stored once idle for ``idle_s`` seconds, when the bounds of the
stitcher push it out, and when the receiver stops.

One thread serves one request at a time and does all the store's work, so the store is
never shared between threads and memory is bounded by the body cap plus the stitcher's
bounds.  Every bad request gets one status and one line of text (400 unreadable, 404
other paths, 405 other methods, 411/413 length, 415 another type, or protobuf without
the extra); nothing a client sends ends the receiver.  Bodies come with a Content-Length
or chunked (OpenTelemetry JS's exporter streams them), both capped; ``/v1/metrics`` is
answered 200 and not read (an exporter pointed at one base URL sends every signal).

Durability is the proxy's (``recorder.py``), by its own writer: a closed session goes to
the store, or to the journal while the store is down (replayed every ``retry_s``
seconds, and at the next start into the run it was recorded for).  What the proxy keeps
in a child process that signals cannot stop, the receiver keeps on disk: every accepted
batch of tool events is appended to the journal's open part (``JOURNAL.open``, one JSON
line) before the 200 is sent (a batch it cannot write is answered 503, so the exporter
sends it again), and that part is rewritten as a snapshot of the sessions still open
each time sessions are written.  A receiver killed outright (SIGKILL, out of memory)
leaves it behind; the next start on the same journal stitches it again, judges and
writes those sessions into the killed receiver's run and marks that run
``interrupted``.  The lines are written, not synced: they outlive the process, not the
machine.  One window remains, and it loses nothing: a kill between writing sessions and
rewriting the open part makes the next start write those sessions again, one at a time,
and the store refuses each (its key is stored already), so they are stored once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, cast

from agent_eval.importers import Judge
from agent_eval.importers.otlp import (
    OpenSession,
    PayloadError,
    Signal,
    StitchedCall,
    Stitcher,
    ToolEvent,
    imported_session,
    tool_events,
)
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.proxy.recorder import Recorder, RecorderStats, _json_dict, _write_all
from agent_eval.runs import RunSpec, RunWriter, TargetDefaults
from agent_eval.store import Store
from agent_eval.transcript import SessionRecord

MAX_BODY = 16 * 1024 * 1024
"""Default cap on a request body, compressed or inflated (an exporter's batch is far
smaller: the SDKs send at most 512 records a batch by default)."""

PATHS: dict[str, Signal] = {"/v1/logs": "logs", "/v1/traces": "traces"}
OPEN_SLACK = 1024 * 1024
"""Bytes of events the journal's open part may gather past twice its last snapshot
before it is rewritten as one (see ``Collector._bound_open``)."""
IGNORED_PATHS = frozenset({"/v1/metrics"})
"""Signals an exporter sends to the same endpoint that hold no tool call: answered 200
(an exporter pointed at one base URL sends all three) and counted, never read."""


@dataclass(slots=True)
class CollectStats:
    """What the receiver did, for the status line and the exit summary."""

    requests: int = 0
    refused: int = 0
    ignored: int = 0  # requests of a signal holding no tool call (metrics), answered 200
    events: int = 0
    sessions: int = 0
    calls: int = 0
    not_judged: int = 0
    recovered: int = 0  # sessions a killed receiver left open, written at this start
    run_id: int | None = None
    errors: list[str] = field(default_factory=list)  # the last few refusals, for the log


class SessionWriter(Recorder):
    """The proxy's writer without its exchanges and thread: store, or journal while the
    store is down, replay the journal (``recorder.py`` holds the promises)."""

    def __init__(self, store: Store, run: RunWriter, journal: Path, *,
                 journal_max_bytes: int = 1024 * 1024 * 1024, retry_s: float = 5.0) -> None:
        # not Recorder.__init__: no exchange to link, no thread; only what writing uses
        self.store = store
        self.run = run
        self.journal = journal
        self.journal_max_bytes = journal_max_bytes
        self.retry_s = retry_s
        self.stats = RecorderStats()
        self._earlier_runs = {}
        self._last_retry = time.monotonic()

    @property
    def _target_defaults(self) -> TargetDefaults:
        return TargetDefaults(base_url="otlp")

    def retry(self, now: float) -> None:
        """Replay the journal into the store every ``retry_s`` seconds while it exists."""
        if self.journal.exists() and now - self._last_retry >= self.retry_s:
            self._last_retry = now
            self._replay_journal()


class Collector:
    """The receiver's state: the stitcher, the judge and the run being written.

    ``journal``: where sessions wait while the store is down, and (``JOURNAL.open``) the
    accepted events of the open sessions; None: a temporary directory, removed by
    :meth:`close` (a store outage is survived while the receiver runs, a kill is not)."""

    def __init__(self, store: Store, policy: AllowList | ResolvedPolicy, *, label: str = "collect",
                 model: str | None = None, idle_s: float = 600.0, max_body: int = MAX_BODY,
                 max_sessions: int = 1000, max_calls: int = 5000,
                 allowlist_path: str | None = None, journal: str | Path | None = None,
                 journal_max_bytes: int = 1024 * 1024 * 1024, retry_s: float = 5.0) -> None:
        self.store = store
        self.judge = Judge(policy)
        allowlist = self.judge.allowlist
        self.model = model
        self.idle_s = idle_s
        self.max_body = max_body
        self.max_sessions, self.max_calls = max_sessions, max_calls
        self.stitcher = Stitcher(max_sessions=max_sessions, max_calls=max_calls)
        self.stats = CollectStats()
        self.last_seen: dict[tuple[str, str], float] = {}
        self._last_flush = time.monotonic()
        self.keys: dict[str, int] = {}
        self._tmp = None if journal is not None else tempfile.TemporaryDirectory(
            prefix="agent-eval-collect-")
        self.journal = Path(journal) if journal is not None else Path(
            self._tmp.name if self._tmp is not None else ".") / "journal"
        self.open_log = self.journal.with_name(self.journal.name + ".open")
        self.journal_max_bytes = journal_max_bytes
        self.retry_s = retry_s
        self._open_bytes = self._snapshot_bytes = 0  # the open part's size, and its snapshot's

        self.run = RunWriter(store, RunSpec(
            kind="import", label=label, suite="otlp",
            config={"format": "otlp", "allowlist": allowlist.name,
                    "allowlist_path": allowlist_path, "model": model,
                    "engine_version": ENGINE_VERSION},
            fingerprint={"allowlist": allowlist.fingerprint, "engine_version": ENGINE_VERSION,
                         "source": "otlp"}), targets=TargetDefaults(base_url="otlp"))
        self.writer = SessionWriter(store, self.run, self.journal,
                                    journal_max_bytes=journal_max_bytes, retry_s=retry_s)
        self.recover()

    def recover(self) -> None:
        """What an earlier receiver on this journal left: its closed sessions are
        replayed into their run; its open part (it was killed) is stitched again, judged,
        written into its run, and that run marked ``interrupted``."""
        self.writer._replay_journal()
        if not self.open_log.exists():
            return
        try:
            lines = self.open_log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            self.writer._note_journal_error(exc)
            return
        stitcher = Stitcher(max_sessions=self.max_sessions, max_calls=self.max_calls)
        keys: dict[str, int] = {}
        run_id: int | None = None
        done: list[OpenSession] = []
        for line in lines:
            try:
                entry = json.loads(line)
                run_id = entry.get("run_id") or run_id
                if "open" in entry:  # a snapshot: the sessions open when it was written
                    stitcher.open.clear()
                    for data in entry["open"]:
                        session = _session_from_json(data)
                        stitcher.open[(session.emitter, session.id)] = session
                    keys = dict(entry.get("keys") or {})
                else:
                    done.extend(stitcher.add([_event_from_json(e) for e in entry["events"]]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a kill: its request was never answered
        done.extend(stitcher.close_all())
        earlier = self.writer if run_id is None else SessionWriter(
            self.store, RunWriter(self.store, run_id, targets=TargetDefaults(base_url="otlp")),
            self.journal, journal_max_bytes=self.journal_max_bytes, retry_s=self.retry_s)
        refused = earlier.stats.journal_errors
        for record in self._records(done, keys):
            # one at a time: the store refuses a batch whole when one key is stored
            # already (a kill between a write and the rewrite of the open part)
            earlier._write([record])
            self.stats.recovered += 1
        if run_id is not None:
            earlier._safely(lambda: earlier.run.set_status("interrupted"))
        if earlier.stats.journal_errors == refused:  # stored, journaled or stored before
            try:
                self.open_log.unlink()
            except OSError as exc:
                self.writer._note_journal_error(exc)

    def receive(self, path: str, content_type: str, encoding: str, body: bytes) -> tuple[int, str]:
        """One request: ``(status, one line)``.  Never raises for what a client sent."""
        self.stats.requests += 1
        signal = PATHS.get(path.split("?", 1)[0])
        if signal is None and path.split("?", 1)[0] in IGNORED_PATHS:
            self.stats.ignored += 1
            return 200, "{}"
        if signal is None:
            return self._refuse(404, f"no such path {path[:80]!r}: POST /v1/logs or /v1/traces")
        media = content_type.split(";", 1)[0].strip().lower()
        if media == "application/x-protobuf" and not protobuf_readable():
            return self._refuse(415, "OTLP/protobuf needs opentelemetry-proto (pip install "
                                     "'agent-eval[otel]'): or send OTLP/JSON "
                                     "(OTEL_EXPORTER_OTLP_PROTOCOL=http/json)")
        if media not in ("application/json", "application/x-protobuf"):
            return self._refuse(415, f"content type {media or 'none'!r}: send application/json "
                                     "or application/x-protobuf")
        try:
            data = self._inflate(body, encoding.strip().lower())
            payload = (protobuf_payload(signal, data) if media == "application/x-protobuf"
                       else json.loads(data))
            events = tool_events(signal, payload)
        except _TooLarge:
            return self._refuse(413, f"inflated body over {self.max_body} bytes")
        except (ValueError, RecursionError, PayloadError) as exc:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            kind = "protobuf" if media == "application/x-protobuf" else "JSON"
            return self._refuse(400, f"not an OTLP/{kind} {signal} export: {reason}")
        if events:
            try:  # durable before the 200: a receiver killed now loses none of it
                self._append_open({"run_id": self._run_id(),
                                   "events": [_to_json(e) for e in events]})
            except OSError as exc:
                self.writer._note_journal_error(exc)
                return self._refuse(503, f"the journal {self.open_log} cannot be written "
                                         f"({exc.strerror or exc}): send again later")
        now = time.monotonic()
        for event in events:
            self.last_seen[(event.emitter, event.session)] = now
        self.stats.events += len(events)
        self._store(self.stitcher.add(events))
        self._bound_open()
        if now - self._last_flush >= min(1.0, self.idle_s):
            # a steady stream on a keep-alive connection never leaves the handler for the
            # serving loop (``service_actions``): the idle sessions are stored from here too
            self.flush_idle(now)
        return 200, "{}"

    def _run_id(self) -> int | None:
        """The run, created with the first accepted events (None while the store is down:
        a later start then writes them into its own run)."""
        self.writer._ensure_run()
        self.stats.run_id = self.run.run_id
        return self.run.run_id

    def _append_open(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        size = self.open_log.stat().st_size if self.open_log.exists() else 0
        fd = os.open(self.open_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            _write_all(fd, line, size)
        finally:
            os.close(fd)
        self._open_bytes = size + len(line)

    def _bound_open(self) -> None:
        """Events that open no call (tool definitions sent again with every chat span)
        or long sessions that stay open grow the open part between writes: past twice
        its last snapshot (and OPEN_SLACK) it is rewritten as a snapshot, so the disk
        it takes stays bounded by what the stitcher holds."""
        if self._open_bytes > 2 * self._snapshot_bytes + OPEN_SLACK:
            self._snapshot_open()

    def _snapshot_open(self) -> None:
        """Rewrite the open part as the sessions still open and the keys given so far
        (a session seen again after it was written is stored under a new key), once
        sessions were written; a failure keeps the longer part (replayed the same)."""
        try:
            entry = {"run_id": self.run.run_id, "keys": self.keys,
                     "open": [_to_json(s) for s in self.stitcher.open.values()]}
            tmp = self.open_log.with_name(self.open_log.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as out:
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
            tmp.replace(self.open_log)
            self._open_bytes = self._snapshot_bytes = self.open_log.stat().st_size
        except OSError as exc:
            self.writer._note_journal_error(exc)

    def _refuse(self, status: int, line: str) -> tuple[int, str]:
        self.stats.refused += 1
        self.stats.errors = [*self.stats.errors[-4:], f"{status} {line}"]
        return status, line

    def _inflate(self, body: bytes, encoding: str) -> bytes:
        if encoding in ("", "identity"):
            return body
        if encoding not in ("gzip", "deflate"):
            raise ValueError(f"content encoding {encoding!r} is not read (gzip, deflate)")
        wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, self.max_body + 1)
        except zlib.error as exc:
            raise ValueError(f"bad {encoding} body: {exc}") from None
        if len(out) > self.max_body or inflater.unconsumed_tail:
            raise _TooLarge
        return out

    def flush_idle(self, now: float | None = None) -> None:
        """Store the sessions idle for ``idle_s`` seconds or more; replay the journal
        every ``retry_s`` seconds while the store was down."""
        now = time.monotonic() if now is None else now
        self._last_flush = now
        idle = [key for key, seen in self.last_seen.items() if now - seen >= self.idle_s]
        done = [self.stitcher.open.pop(key) for key in idle if key in self.stitcher.open]
        for key in idle:
            del self.last_seen[key]
        self._store(done)
        self.writer.retry(now)

    def close(self) -> CollectStats:
        """Store (or journal) every open session and end the run: ``finished`` once
        nothing waits in the journal; the stats."""
        self._store(self.stitcher.close_all())
        self.last_seen.clear()
        self.writer._replay_journal()
        self.stats.run_id = self.run.run_id
        if self.run.run_id is not None and not self.journal.exists():
            self.writer._safely(lambda: self.run.set_status("finished"))
        if not self.stitcher.open:  # every session is stored or journaled
            try:
                self.open_log.unlink(missing_ok=True)
            except OSError as exc:
                self.writer._note_journal_error(exc)
        if self._tmp is not None:
            self._tmp.cleanup()
        return self.stats

    @property
    def journaled(self) -> int:
        """Sessions waiting in the journal for the store."""
        return self.writer.stats.journaled_sessions

    @property
    def lost(self) -> int:
        """Sessions neither the store nor the journal took."""
        return self.writer.stats.lost_turns

    def _records(self, sessions: list[OpenSession], keys: dict[str, int]) -> list[SessionRecord]:
        records = []
        for session in sessions:
            if not session.calls:
                continue
            imported = imported_session(session, self.model)
            count = keys.get(imported.id, 0)
            keys[imported.id] = count + 1
            key = imported.id if not count else f"{imported.id}#{count + 1}"
            record = self.judge.session(imported, key=key, source="otlp")
            record.tags.append(f"otlp_events:{session.events}")  # completeness: events seen
            self.stats.calls += len(record.calls)
            self.stats.not_judged += imported.skipped_calls
            records.append(record)
        return records

    def _store(self, sessions: list[OpenSession]) -> None:
        if not sessions:
            return
        records = self._records(sessions, self.keys)
        self.stats.sessions += len(records)
        self.writer._write(records)  # the store, or the journal while it is down
        self.stats.run_id = self.run.run_id
        self._snapshot_open()


def _to_json(item: Any) -> dict[str, Any]:
    return dataclasses.asdict(item, dict_factory=_json_dict)


def _when(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _event_from_json(data: dict[str, Any]) -> ToolEvent:
    return ToolEvent(**dict(data, time=_when(data.get("time"))))


def _session_from_json(data: dict[str, Any]) -> OpenSession:
    return OpenSession(**dict(data, calls=[StitchedCall(**c) for c in data["calls"]],
                              started_at=_when(data.get("started_at")),
                              finished_at=_when(data.get("finished_at"))))


class _TooLarge(Exception):
    pass


def protobuf_readable() -> bool:
    """Whether OTLP/protobuf can be read: opentelemetry-proto (the ``otel`` extra) is there."""
    try:
        import opentelemetry.proto.collector.logs.v1.logs_service_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def protobuf_payload(signal: Signal, data: bytes) -> dict[str, Any]:
    """An OTLP/protobuf export request as the OTLP/JSON dict it encodes (ids in base64,
    not hex: only used as opaque session keys).  ValueError when it does not decode."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportLogsServiceRequest() if signal == "logs" else ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except (DecodeError, RecursionError) as exc:
        raise ValueError(f"protobuf does not decode: {exc}") from None
    return MessageToDict(request)


class _Handler(BaseHTTPRequestHandler):
    server: CollectServer
    timeout = 30  # seconds a client may stall on the socket before it is dropped
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # the stdlib's name
        collector = self.server.collector
        length = self.headers.get("Content-Length")
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        if chunked:  # OpenTelemetry JS's exporter (Gemini CLI's) streams its bodies chunked
            try:
                body = self._read_chunked(collector.max_body)
            except _TooLarge:
                self.close_connection = True  # the rest of the body is not read
                self._answer(413, collector._refuse(413, f"body over {collector.max_body} "
                                                         "bytes")[1])
                return
            except ValueError as exc:
                self.close_connection = True
                self._answer(400, collector._refuse(400, f"bad chunked body: {exc}")[1])
                return
        elif length is None or not length.isdigit():
            self.close_connection = True  # a body we cannot delimit ends the connection
            self._answer(411, collector._refuse(
                411, "Content-Length or Transfer-Encoding: chunked required")[1])
            return
        elif int(length) > collector.max_body:
            self._drain(int(length))  # read and dropped a piece at a time: memory stays flat
            self._answer(413, collector._refuse(413, f"body over {collector.max_body} bytes")[1])
            return
        else:
            body = self.rfile.read(int(length))
        try:
            status, line = collector.receive(self.path, self.headers.get("Content-Type", ""),
                                             self.headers.get("Content-Encoding", ""), body)
        except Exception as exc:  # a harness fault: answered and shown, never the end
            status, line = collector._refuse(500, f"harness fault: {type(exc).__name__}: {exc}"[:300])
        self._answer(status, line, json_body=status == 200)

    def _read_chunked(self, cap: int) -> bytes:
        """A ``Transfer-Encoding: chunked`` body, whole; _TooLarge past ``cap`` bytes,
        ValueError when the framing is not chunked (RFC 9112, section 7.1)."""
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
                raise ValueError("a chunk size line is cut or too long")
            try:
                n = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ValueError(f"chunk size {line[:40]!r} is not hexadecimal") from None
            if n == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields, not read
                return b"".join(parts)
            size += n
            if size > cap:
                raise _TooLarge
            parts.append(self.rfile.read(n))
            self.rfile.readline(8)  # the CRLF after the chunk

    def _drain(self, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, 64 * 1024))
            if not chunk:
                break
            length -= len(chunk)

    def do_GET(self) -> None:
        if self.path == "/_agent_eval/status":
            stats = self.server.collector.stats
            self._answer(200, json.dumps({
                "run_id": stats.run_id, "requests": stats.requests, "refused": stats.refused,
                "ignored": stats.ignored,
                "events": stats.events, "stored_sessions": stats.sessions,
                "judged_calls": stats.calls, "not_judged_calls": stats.not_judged,
                "open_sessions": len(self.server.collector.stitcher.open),
                "journaled_sessions": self.server.collector.journaled,
                "lost_turns": self.server.collector.lost,
                "recovered_sessions": stats.recovered,
                "store_errors": self.server.collector.writer.stats.store_errors,
                "journal_errors": self.server.collector.writer.stats.journal_errors,
                "last_refusals": stats.errors}), json_body=True)
            return
        self._answer(405, "POST OTLP/JSON to /v1/logs or /v1/traces")

    def _answer(self, status: int, text: str, *, json_body: bool = False) -> None:
        data = (text + ("" if json_body else "\n")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if json_body else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's name
        pass  # refusals are counted and shown on the status page, not printed per request


class CollectServer(HTTPServer):
    """An HTTP server serving one request at a time; between requests it stores the
    sessions gone idle (``service_actions`` runs in the serving loop)."""

    def __init__(self, collector: Collector, host: str, port: int) -> None:
        self.collector = collector
        super().__init__((host, port), _Handler)

    @property
    def base_url(self) -> str:
        host, port = cast(tuple[str, int], self.server_address[:2])
        return f"http://{host}:{port}"

    def service_actions(self) -> None:
        self.collector.flush_idle()


def serve(server: CollectServer) -> CollectStats:
    """Serve until ``server.shutdown()`` (or Ctrl-C), then store every open session, in
    this thread, and return the stats."""
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return server.collector.close()
