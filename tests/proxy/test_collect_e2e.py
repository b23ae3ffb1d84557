"""``agent-eval collect`` end to end: OTLP/JSON posted over real HTTP to the running
receiver, the judged sessions read back from the store (proxy/collect.py)."""

from __future__ import annotations

import gzip
import http.client
import json
import threading
from pathlib import Path

import pytest

from agent_eval.proxy.collect import Collector, CollectServer, serve
from agent_eval.scenario.bundled import load_policy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"


@pytest.fixture
def receiver(store):
    """A running receiver on a free loopback port; yields (server, stats holder)."""
    collector = Collector(store, load_policy("allowlists/ralf.yaml"), label="otel-night",
                          max_body=64 * 1024)
    server = CollectServer(collector, "127.0.0.1", 0)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(stats=serve(server)), daemon=True)
    thread.start()
    yield server, result
    if thread.is_alive():
        server.shutdown()
        thread.join()


def post(server: CollectServer, path: str, body: bytes, content_type: str = "application/json",
         headers: dict[str, str] | None = None) -> tuple[int, str]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def stop(server: CollectServer, result: dict):
    server.shutdown()
    while "stats" not in result:  # serve() stores the open sessions after the loop ends
        threading.Event().wait(0.01)
    return result["stats"]


def test_posted_telemetry_is_stored_as_judged_sessions(receiver, store):
    server, result = receiver
    for name, path in [("claude_code.logs.json", "/v1/logs"), ("codex.logs.json", "/v1/logs"),
                       ("gemini_cli.logs.json", "/v1/logs"), ("genai.traces.json", "/v1/traces")]:
        assert post(server, path, (FIXTURES / name).read_bytes()) == (200, "{}")
    stats = stop(server, result)
    assert (stats.sessions, stats.calls, stats.not_judged) == (4, 7, 3)
    run = store.resolve_run("label:otel-night").id
    sessions = {row.scenario: row for row in store.session_rows([run])}
    assert sorted(sessions) == ["claude_code:cc-sess-1", "codex:0199a1b2-codex",
                                "gemini_cli:gem-sess-9", "gen_ai:conv_77"]
    assert {"skipped_calls:2", "otlp_events:7"} <= set(sessions["claude_code:cc-sess-1"].tags)
    calls = {(row.scenario, row.index): row for row in store.call_rows([run])}
    bash = calls[("claude_code:cc-sess-1", 0)]
    assert (bash.command, bash.decision, bash.primary, bash.source_decision) == (
        "ls scripts/ | grep search", "deny", "AE301", "allow")
    assert calls[("codex:0199a1b2-codex", 1)].primary == "AE307"
    assert calls[("gen_ai:conv_77", 0)].primary == "AE302"
    stored = store.load_session(sessions["claude_code:cc-sess-1"].id).record
    assert stored.calls[0].source_reason == "claude_code accept by config"
    assert any("not judged: a value of 512" in m["content"] for m in stored.messages)


def test_events_of_one_session_in_two_requests_are_one_session(receiver, store):
    server, result = receiver
    body = json.loads((FIXTURES / "codex.logs.json").read_text())
    records = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    body["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = records[:1]
    first = gzip.compress(json.dumps(body).encode())  # the decision, gzip as exporters send
    body["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = records[1:]
    rest = json.dumps(body).encode()
    assert post(server, "/v1/logs", first, headers={"Content-Encoding": "gzip"}) == (200, "{}")
    assert post(server, "/v1/logs", rest) == (200, "{}")
    stats = stop(server, result)
    assert (stats.sessions, stats.calls) == (1, 2)
    [row] = store.session_rows([store.resolve_run("label:otel-night").id])
    assert row.n_calls == 2


def test_otlp_protobuf_is_read_as_its_json_twin(receiver, store):
    pytest.importorskip("opentelemetry.proto", reason="the otel extra reads OTLP/protobuf")
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server, result = receiver
    request = ParseDict(json.loads((FIXTURES / "genai.traces.json").read_text()),
                        ExportTraceServiceRequest())
    assert post(server, "/v1/traces", request.SerializeToString(),
                "application/x-protobuf") == (200, "{}")
    stats = stop(server, result)
    assert (stats.sessions, stats.calls, stats.not_judged) == (1, 1, 1)
    [call] = store.call_rows([store.resolve_run("label:otel-night").id])
    assert (call.tool, call.primary) == ("bash", "AE302")


def test_protobuf_without_the_extra_is_a_415_that_says_what_to_do(receiver, monkeypatch):
    import agent_eval.proxy.collect as collect

    monkeypatch.setattr(collect, "protobuf_readable", lambda: False)
    server, result = receiver
    status, text = post(server, "/v1/logs", b"\x0a\x00", "application/x-protobuf")
    assert status == 415 and "send OTLP/JSON" in text and "agent-eval[otel]" in text


@pytest.mark.parametrize("path, body, content_type, status, line", [
    ("/v1/logs", b"{not json", "application/json", 400, "not an OTLP/JSON logs export"),
    ("/v1/logs", b'{"resourceLogs": 3}', "application/json", 400, "resourceLogs is not a list"),
    ("/v1/logs", b"\x0a\x05\xff", "application/x-protobuf", 400, "not an OTLP/protobuf logs export"),
    ("/v1/logs", b"{}", "text/plain", 415, "send application/json"),
    ("/v1/profiles", b"{}", "application/json", 404, "POST /v1/logs or /v1/traces"),
    ("/v1/traces", b"x" * (65 * 1024), "application/json", 413, "body over 65536 bytes"),
    ("/v1/traces", gzip.compress(b" " * (65 * 1024)), "application/json", 413, "inflated body over"),
], ids=["not-json", "wrong-shape", "broken-protobuf", "other-type", "other-path", "too-large",
        "gzip-bomb"])
def test_a_bad_request_gets_one_line_and_the_receiver_goes_on(receiver, path, body, content_type,
                                                              status, line):
    server, result = receiver
    headers = {"Content-Encoding": "gzip"} if line == "inflated body over" else None
    got_status, text = post(server, path, body, content_type, headers)
    assert got_status == status and line in text and text.count("\n") == 1
    assert post(server, "/v1/logs", (FIXTURES / "codex.logs.json").read_bytes()) == (200, "{}")
    stats = stop(server, result)
    assert (stats.refused, stats.sessions) == (1, 1)


def test_a_session_idle_past_the_timeout_is_stored_and_its_run_named(store):
    collector = Collector(store, load_policy("allowlists/ralf.yaml"), label="idle", idle_s=60)
    assert collector.receive("/v1/logs", "application/json", "",
                             (FIXTURES / "gemini_cli.logs.json").read_bytes()) == (200, "{}")
    seen = max(collector.last_seen.values())  # the clock of its last event, not of this test
    collector.flush_idle(now=seen + 30)
    assert collector.stats.sessions == 0 and collector.stitcher.open
    collector.flush_idle(now=seen + 61)
    assert collector.stats.sessions == 1 and not collector.stitcher.open
    [row] = store.session_rows([collector.stats.run_id])
    assert (row.scenario, row.n_calls) == ("gemini_cli:gem-sess-9", 2)
    assert collector.close().sessions == 1


def test_a_steady_stream_on_one_connection_still_stores_the_sessions_gone_idle(store,
                                                                                 monkeypatch):
    """A keep-alive connection posting without pause never returns to the serving loop
    (whose service_actions stores idle sessions): each request stores them too."""
    import agent_eval.proxy.collect as collect_module

    clock = [1000.0]
    monkeypatch.setattr(collect_module.time, "monotonic", lambda: clock[0])
    collector = Collector(store, load_policy("allowlists/ralf.yaml"), label="stream", idle_s=60)
    gemini = (FIXTURES / "gemini_cli.logs.json").read_bytes()
    codex = (FIXTURES / "codex.logs.json").read_bytes()
    assert collector.receive("/v1/logs", "application/json", "", gemini) == (200, "{}")
    clock[0] += 61  # gemini's session idle past the timeout; codex's stream goes on
    assert collector.receive("/v1/logs", "application/json", "", codex) == (200, "{}")
    assert collector.stats.sessions == 1
    assert [key[0] for key in collector.stitcher.open] == ["codex"]


def _raw_post(server: CollectServer, head: bytes, body: bytes) -> bytes:
    """One request written by hand (chunked framing), the raw answer."""
    import socket

    host, port = server.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=30) as conn:
        conn.sendall(head + body)
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while piece := conn.recv(65536):
            answer += piece
    return answer


def _chunked(data: bytes, size: int = 1000) -> bytes:
    out = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size])
                   for i in range(0, len(data), size))
    return out + b"0\r\n\r\n"


CHUNKED_HEAD = (b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")


def test_a_chunked_body_as_opentelemetry_js_sends_it_is_read(receiver, store):
    """OpenTelemetry JS's OTLP/HTTP exporter (Gemini CLI's, 0.218.0) sends its bodies with
    Transfer-Encoding: chunked and no Content-Length: once answered 411, now read."""
    server, result = receiver
    answer = _raw_post(server, CHUNKED_HEAD,
                       _chunked((FIXTURES / "gemini_cli.logs.json").read_bytes()))
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    stats = stop(server, result)
    assert (stats.requests, stats.refused, stats.sessions, stats.calls) == (1, 0, 1, 2)


def test_a_chunked_body_over_the_cap_is_a_413_and_the_connection_ends(receiver):
    server, result = receiver
    answer = _raw_post(server, CHUNKED_HEAD, _chunked(b"x" * (65 * 1024), size=8192))
    assert answer.startswith(b"HTTP/1.1 413") and answer.count(b"HTTP/1.1") == 1
    assert stop(server, result).refused == 1


def test_metrics_sent_to_the_same_endpoint_are_answered_and_not_read(receiver):
    server, result = receiver
    assert post(server, "/v1/metrics", b'{"resourceMetrics": []}') == (200, "{}")
    stats = stop(server, result)
    assert (stats.ignored, stats.refused) == (1, 0)


def test_a_body_without_length_is_a_411_counted_and_the_connection_ends(receiver):
    server, result = receiver
    answer = _raw_post(server, b"POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: "
                               b"application/json\r\n\r\n", b"{}")
    assert answer.startswith(b"HTTP/1.1 411") and answer.count(b"HTTP/1.1") == 1
    assert stop(server, result).refused == 1
