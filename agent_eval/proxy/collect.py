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
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, cast

from agent_eval.importers import Judge
from agent_eval.importers.otlp import (
    OpenSession,
    PayloadError,
    Signal,
    Stitcher,
    imported_session,
    tool_events,
)
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.runs import RunSpec, RunWriter, SessionBatches, TargetDefaults
from agent_eval.store import Store

MAX_BODY = 16 * 1024 * 1024
"""Default cap on a request body, compressed or inflated (an exporter's batch is far
smaller: the SDKs send at most 512 records a batch by default)."""

PATHS: dict[str, Signal] = {"/v1/logs": "logs", "/v1/traces": "traces"}
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
    run_id: int | None = None
    errors: list[str] = field(default_factory=list)  # the last few refusals, for the log


class Collector:
    """The receiver's state: the stitcher, the judge and the run being written."""

    def __init__(self, store: Store, policy: AllowList | ResolvedPolicy, *, label: str = "collect",
                 model: str | None = None, idle_s: float = 600.0, max_body: int = MAX_BODY,
                 max_sessions: int = 1000, max_calls: int = 5000,
                 allowlist_path: str | None = None) -> None:
        self.store = store
        self.judge = Judge(policy)
        allowlist = self.judge.allowlist
        self.model = model
        self.idle_s = idle_s
        self.max_body = max_body
        self.stitcher = Stitcher(max_sessions=max_sessions, max_calls=max_calls)
        self.stats = CollectStats()
        self.last_seen: dict[tuple[str, str], float] = {}
        self._last_flush = time.monotonic()
        self.keys: dict[str, int] = {}

        self.run = RunWriter(store, RunSpec(
            kind="import", label=label, suite="otlp",
            config={"format": "otlp", "allowlist": allowlist.name,
                    "allowlist_path": allowlist_path, "model": model,
                    "engine_version": ENGINE_VERSION},
            fingerprint={"allowlist": allowlist.fingerprint, "engine_version": ENGINE_VERSION,
                         "source": "otlp"}), targets=TargetDefaults(base_url="otlp"))
        self.writer = SessionBatches(self.run)

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
        now = time.monotonic()
        for event in events:
            self.last_seen[(event.emitter, event.session)] = now
        self.stats.events += len(events)
        self._store(self.stitcher.add(events))
        if now - self._last_flush >= min(1.0, self.idle_s):
            # a steady stream on a keep-alive connection never leaves the handler for the
            # serving loop (``service_actions``): the idle sessions are stored from here too
            self.flush_idle(now)
        return 200, "{}"

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
        """Store the sessions idle for ``idle_s`` seconds or more."""
        now = time.monotonic() if now is None else now
        self._last_flush = now
        idle = [key for key, seen in self.last_seen.items() if now - seen >= self.idle_s]
        done = [self.stitcher.open.pop(key) for key in idle if key in self.stitcher.open]
        for key in idle:
            del self.last_seen[key]
        self._store(done)

    def close(self) -> CollectStats:
        """Store every open session and end the run (``finished``); the stats."""
        self._store(self.stitcher.close_all())
        self.last_seen.clear()
        self.writer.flush(create=self.stats.sessions > 0)
        self.stats.run_id = self.run.run_id
        self.run.set_status("finished")  # none when no session came
        return self.stats

    def _store(self, sessions: list[OpenSession]) -> None:
        for session in sessions:
            if not session.calls:
                continue
            imported = imported_session(session, self.model)
            count = self.keys.get(imported.id, 0)
            self.keys[imported.id] = count + 1
            key = imported.id if not count else f"{imported.id}#{count + 1}"
            record = self.judge.session(imported, key=key, source="otlp")
            record.tags.append(f"otlp_events:{session.events}")  # completeness: events seen
            self.stats.sessions += 1
            self.stats.calls += len(record.calls)
            self.stats.not_judged += imported.skipped_calls
            self.writer.add(record)
        self.writer.flush()
        self.stats.run_id = self.run.run_id


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
