"""The proxy under hostile traffic and a hostile machine: a compression bomb, a journal the
file system refuses, a lone surrogate, clients that trickle bytes, credentials in the
upstream URL, a compressed request.  Each keeps the proxy's promise: the user's bytes
pass unchanged, memory and time stay bounded, every turn is recorded or counted as lost,
and no credential is shown or stored."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import httpx2 as httpx
import pytest
from aiohttp import web
from support.loopback import serve_in_thread
from support.proxyplay import ALLOWLIST, proxy_in_thread, unused_port

from agent_eval.proxy.relay import CAPTURE_LIMIT, public_url
from agent_eval.proxy.replies import decode_body

SYSTEM = {"role": "system", "content": "You are the research subagent."}
TASK = {"role": "user", "content": "Open attempts for stage S2."}
REQUEST = {"model": "qwen", "messages": [SYSTEM, TASK],
           "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}]}
GOOD = "uv run scripts/db_query.py --sql 'select 1'"


def completion(command: str = GOOD, content: str = "") -> bytes:
    call = {"id": "call-1", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    return json.dumps({"model": "qwen", "choices": [{"index": 0, "finish_reason": "tool_calls",
                       "message": {"role": "assistant", "content": content,
                                   "tool_calls": [call]}}]}).encode()


def answering(body: bytes, **headers: str) -> web.Application:
    """An upstream that answers every chat request with ``body`` and ``headers``."""
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, headers={"Content-Type": "application/json", **headers})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    return app


def stored_sessions(store):
    run = store.resolve_run("latest")
    return [store.load_session(row.id).record for row in store.session_rows([run.id])]


# a compression bomb: 400 MiB of spaces in a reply, 408 KB on the wire

@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """The reply the attack sent: a chat completion whose content is 400 MiB of spaces,
    gzip level 6: 407,698 bytes on the wire (the "408 KB reply")."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = b'{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"'
    spaces = b" " * (1 << 20)
    parts = [packer.compress(head), *(packer.compress(spaces) for _ in range(400)),
             packer.compress(b'"}}]}'), packer.flush()]
    return b"".join(parts)


def test_a_gzip_bomb_is_inflated_no_further_than_the_capture_limit(gzip_bomb):
    assert 400_000 < len(gzip_bomb) < 410_000
    tracemalloc.start()
    try:
        assert decode_body(gzip_bomb, "gzip", CAPTURE_LIMIT) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # zlib's output buffer is joined once at the end: twice the limit at most; before,
    # the whole 400 MiB (and its text and JSON after it)
    assert peak < 2 * CAPTURE_LIMIT + 8 * 1024 * 1024


@pytest.mark.parametrize("encoding, pack", [
    pytest.param("gzip", gzip.compress, id="gzip"),
    pytest.param("gzip", lambda b: gzip.compress(b[:9]) + gzip.compress(b[9:]), id="gzip-members"),
    pytest.param("x-gzip", gzip.compress, id="x-gzip"),
    pytest.param("deflate", zlib.compress, id="deflate-zlib"),
    pytest.param("deflate", lambda b: zlib.compress(b, wbits=-15), id="deflate-raw"),
    pytest.param("", lambda b: b, id="identity"),
])
def test_compressed_bodies_within_the_limit_read_as_sent(encoding, pack):
    body = completion()
    assert decode_body(pack(body), encoding, CAPTURE_LIMIT) == body


@pytest.mark.parametrize("encoding, data", [
    pytest.param("gzip", gzip.compress(b"x" * 101), id="one-byte-over"),
    pytest.param("gzip", gzip.compress(b"{}")[:-6], id="cut-short"),
    pytest.param("deflate", b"\x00garbage", id="corrupt"),
    pytest.param("br", b"\x0b\x02\x80{}\x03", id="brotli-not-decoded"),
])
def test_bodies_that_cannot_be_read_within_the_limit_are_none(encoding, data):
    assert decode_body(data, encoding, 100) is None


def test_a_bomb_through_the_proxy_reaches_the_client_whole_and_is_recorded_unparseable(
        tmp_path, store, gzip_bomb):
    upstream_app = answering(gzip_bomb, **{"Content-Encoding": "gzip"})
    with serve_in_thread(upstream_app) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        with httpx.stream("POST", proxy.base_url + "/chat/completions", json=REQUEST,
                          timeout=60) as resp:
            got = hashlib.sha256()
            for piece in resp.iter_raw():
                got.update(piece)
    assert got.digest() == hashlib.sha256(gzip_bomb).digest()
    [record] = stored_sessions(store)
    assert record.turns[0].finish_reason == "unparseable" and record.calls == []
    assert proxy.recorder.status()["lost_turns"] == 0


# the journal the file system refuses

CHILD = textwrap.dedent('''
    """A recorder whose store is down and whose journal hits RLIMIT_FSIZE (EFBIG)."""
    import json, resource, signal, sys, time
    db, journal, allowlist, limit, here = sys.argv[1:6]
    sys.path[:0] = [here, here + "/.."]
    from agent_eval.policy import load_allowlist
    from agent_eval.proxy import Recorder
    from agent_eval.store import open_store
    from test_recorder import SYSTEM, FlakyStore, completion, exchange

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then write() fails with EFBIG

    def exchange_of(i):  # a long task: a few sessions fill the journal's 12 KB
        return exchange([SYSTEM, {"role": "user", "content": f"task {i}: " + "x" * 2000}],
                        completion("uv run scripts/db_query.py --sql 'select 1'"))

    store = FlakyStore(open_store(db))
    store.down = True
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), resource.RLIM_INFINITY))
    recorder = Recorder(store, load_allowlist(allowlist), upstream="http://up/v1",
                        journal=journal, idle_s=0.0, retry_s=3600.0, tick_s=0.01)
    recorder.start()

    def settle(done):
        for _ in range(2000):
            s = recorder.status()
            if done(s):
                return s
            time.sleep(0.01)
        raise SystemExit(f"recorder stuck: {s}")

    for i in range(10):  # the store is down: each session goes to the journal, until full
        before = recorder.status()
        recorder.submit(exchange_of(i))
        settle(lambda s: s["journaled_sessions"] + s["lost_turns"]
               == before["journaled_sessions"] + before["lost_turns"] + 1)
    down = recorder.status()
    alive = recorder._thread.is_alive()
    torn = [line for line in open(journal, encoding="utf-8").read().splitlines()
            if not line.startswith("{") or not line.endswith("}")]
    store.down = False  # the store answers again: recording goes on
    for i in range(10, 13):
        before = recorder.status()
        recorder.submit(exchange_of(i))
        settle(lambda s: s["stored_sessions"] == before["stored_sessions"] + 1)
    recorder.stop()
    print(json.dumps({"down": down, "alive": alive, "torn": torn, "end": recorder.status()}))
''')


@pytest.mark.postgres
def test_a_journal_the_file_system_refuses_counts_every_lost_turn_and_recording_goes_on(
        tmp_path, pg_url):
    """RLIMIT_FSIZE in a child process: writes past 12 KB fail with EFBIG, as on a full
    disk.  The store is PostgreSQL, whose files the limit does not touch."""
    from agent_eval.store import open_store

    journal = tmp_path / "proxy.journal"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, pg_url, str(journal), str(ALLOWLIST), str(12 * 1024),
         str(Path(__file__).parent)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    down, end = out["down"], out["end"]
    assert out["alive"] and out["torn"] == []  # the writer lives; no half line left behind
    assert down["journal_errors"] >= 1
    assert 1 <= down["journaled_sessions"] <= 5 and down["lost_turns"] >= 5
    assert down["journaled_sessions"] + down["lost_turns"] == 10  # every turn accounted for
    assert end["stored_sessions"] == down["journaled_sessions"] + 3
    assert end["lost_turns"] == down["lost_turns"] and not journal.exists()
    with open_store(pg_url) as opened:  # the session's database: other tests' runs beside
        assert len(list(opened.session_rows([end["run_id"]]))) == end["stored_sessions"]


# a lone surrogate

LONE = json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": "bad \ud800 text", "tool_calls": [{
        "id": "call-1", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
            {"command": "uv run scripts/db_query.py --sql 'select \udc00'"})}}]}}]})
"""A reply whose content holds ``\\ud800`` and whose call, an allowed shape otherwise,
holds ``\\udc00`` in its command: valid JSON, text that is not UTF-8."""


def test_a_lone_surrogate_in_a_reply_keeps_its_session(tmp_path, store):
    with serve_in_thread(answering(LONE.encode())) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", json=REQUEST, timeout=30)
    assert resp.content == LONE.encode()
    [record] = stored_sessions(store)
    assert record.turns[0].content == "bad \ufffd text"
    [call] = record.calls
    assert call.command == "uv run scripts/db_query.py --sql 'select \ufffd'"
    assert (call.decision, call.primary) == ("deny", "AE202")  # judged as it came
    assert proxy.recorder.status()["lost_turns"] == 0


def test_a_lone_surrogate_waits_in_the_journal_like_any_session(tmp_path, store):
    from test_recorder import FlakyStore, exchange

    from agent_eval.policy import load_allowlist
    from agent_eval.proxy import Recorder

    flaky = FlakyStore(store)
    flaky.down = True
    journal = tmp_path / "proxy.journal"
    recorder = Recorder(flaky, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=journal, idle_s=0.0, retry_s=0.0, tick_s=0.01)
    recorder.start()
    recorder.submit(exchange([SYSTEM, TASK], LONE.encode()))
    for _ in range(1000):
        if recorder.status()["journaled_sessions"] == 1:
            break
        time.sleep(0.01)
    assert journal.read_bytes().decode("utf-8")  # the line is UTF-8: U+FFFD in place
    flaky.down = False
    recorder.stop()
    [record] = stored_sessions(store)
    assert record.turns[0].content == "bad \ufffd text"
    assert recorder.status()["lost_turns"] == 0 and recorder.status()["journal_errors"] == 0


# clients that trickle bytes

def _raw(base_url: str) -> socket.socket:
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _read_until_closed(sock: socket.socket) -> bytes:
    got = b""
    while piece := sock.recv(65536):  # a hang ends in socket.timeout after 10 s
        got += piece
    return got


def test_a_client_that_never_finishes_its_headers_is_disconnected(tmp_path, store):
    with serve_in_thread(answering(completion())) as upstream, \
            proxy_in_thread(upstream, store, tmp_path, client_timeout_s=0.5) as proxy:
        with _raw(proxy.base_url) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert _read_until_closed(sock) == b""


def test_a_client_that_never_finishes_its_body_gets_a_408_and_is_disconnected(tmp_path, store):
    with serve_in_thread(answering(completion())) as upstream, \
            proxy_in_thread(upstream, store, tmp_path, client_timeout_s=0.5) as proxy:
        with _raw(proxy.base_url) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"mo")
            answer = _read_until_closed(sock)
        status = httpx.get(proxy.base_url.removesuffix("/v1") + "/_agent_eval/status").json()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert status["client_timeouts"] == 1 and status["relayed"] == 0


# credentials in the upstream URL

def test_upstream_credentials_are_never_shown_nor_stored(tmp_path, store):
    port = unused_port()
    upstream = (f"http://agent:s3cret-pw@127.0.0.1:{port}/v1"
                "?api-version=1&key=Kq7secret&access_token=Tq7secret#sig=Fq7secret")
    with proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", json=REQUEST, timeout=30)
        status = httpx.get(proxy.base_url.removesuffix("/v1") + "/_agent_eval/status").text
    assert resp.status_code == 502
    assert f"http://127.0.0.1:{port}/v1?api-version=1&key=***" in resp.json()["message"]
    run = store.resolve_run("latest")
    kept = json.dumps(run.config) + repr(store.run_targets(run.id))
    assert "127.0.0.1" in kept
    for text in (resp.text, status, kept):
        assert "s3cret-pw" not in text and "agent:" not in text and "q7secret" not in text


@pytest.mark.parametrize("url, shown", [
    ("http://user:pw@h:8000/v1", "http://h:8000/v1"),
    ("https://user@h/v1", "https://h/v1"),
    ("http://h:8000/v1", "http://h:8000/v1"),
    ("http://h/v1?key=K", "http://h/v1?key=***"),
    ("http://h/v1?api-version=2024-06&api_key=K&X-Amz-Signature=S&access_token=T",
     "http://h/v1?api-version=2024-06&api_key=***&X-Amz-Signature=***&access_token=***"),
    ("http://h/v1?api%5Fkey=K;Token=T;model=m", "http://h/v1?api%5Fkey=***;Token=***;model=m"),
    ("http://h/v1?client_secret=K&password=P&auth=A&sig=S&session_id=I",
     "http://h/v1?client_secret=***&password=***&auth=***&sig=***&session_id=***"),
    ("http://u:p@ss@[::1]:8000/v1?x=1#token=F", "http://[::1]:8000/v1?x=1"),
    ("h/v1?key=K", "h/v1?key=***"),
    ("user:pw@h/v1", "h/v1"),
])
def test_public_url_drops_the_user_and_password_and_hides_credential_parameters(url, shown):
    assert public_url(url) == shown


def test_the_cli_never_prints_the_upstream_credentials(tmp_path):
    env = dict(os.environ, COLUMNS="160")
    done = subprocess.run(
        [sys.executable, "-m", "agent_eval", "proxy", "--upstream", "ftp://agent:s3cret-pw@h/v1",
         "--allowlist", str(ALLOWLIST), "--db", str(tmp_path / "s.db")],
        capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "s3cret-pw" not in done.stderr + done.stdout
    assert "ftp://h/v1" in done.stderr


@pytest.mark.parametrize("upstream", [
    "h/v1?key=Kq7secret", "http://h:99999/v1?key=Kq7secret", "http://[::1/v1?token=Kq7secret",
    "http://agent:Kq7secret@h:99999/v1",
], ids=["no-scheme", "bad-port", "bad-ipv6", "bad-port-password"])
def test_a_bad_upstream_url_is_one_error_line_without_its_credentials(tmp_path, upstream):
    done = subprocess.run(
        [sys.executable, "-m", "agent_eval", "proxy", "--upstream", upstream,
         "--allowlist", str(ALLOWLIST), "--db", str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Kq7secret" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: --upstream") and done.stderr.count("\n") == 1


# a compressed request

def test_a_gzip_request_body_reaches_the_upstream_byte_for_byte_and_is_recorded(tmp_path, store):
    seen: list[tuple[str, bytes]] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Content-Encoding", ""), await request.read()))
        return web.Response(body=completion(), content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    sent = gzip.compress(json.dumps(REQUEST).encode(), mtime=0)
    with serve_in_thread(app, auto_decompress=False) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", content=sent, timeout=30,
                          headers={"Content-Encoding": "gzip",
                                   "Content-Type": "application/json"})
    assert resp.status_code == 200
    assert seen == [("gzip", sent)]
    [record] = stored_sessions(store)
    assert record.turns[0].request == REQUEST
    assert [c.decision for c in record.calls] == ["allow"]


# memory per request: bodies streamed, what is kept for the recorder capped

def receiving_app(seen: list, first_piece: threading.Event | None = None) -> web.Application:
    """An upstream that reads the request body piece by piece (noting when the first
    piece came), then answers with a completion; ``seen`` gets the body's length, its
    SHA-256 and the framing headers."""
    async def answer(request: web.Request) -> web.Response:
        digest, size = hashlib.sha256(), 0
        while piece := await request.content.readany():
            if first_piece is not None:
                first_piece.set()
            digest.update(piece)
            size += len(piece)
        seen.append((size, digest.hexdigest(), request.headers.get("Content-Length"),
                     request.headers.get("Transfer-Encoding")))
        return web.Response(body=completion(), content_type="application/json")

    app = web.Application(client_max_size=1024 ** 3)
    app.router.add_post("/v1/chat/completions", answer)
    return app


def big_request(size: int) -> bytes:
    """A chat request of about ``size`` bytes (a long tool output in its history)."""
    pad = {"role": "user", "content": "x" * size}
    return json.dumps(dict(REQUEST, messages=[SYSTEM, pad, TASK])).encode()


def test_a_request_past_the_capture_limit_reaches_the_upstream_whole_and_is_not_judged(
        tmp_path, store, monkeypatch):
    monkeypatch.setattr("agent_eval.proxy.relay.CAPTURE_LIMIT", 256 * 1024)
    sent = big_request(3 * 1024 * 1024)
    seen: list = []
    with serve_in_thread(receiving_app(seen)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", content=sent, timeout=60,
                          headers={"Content-Type": "application/json"})
        small = httpx.post(proxy.base_url + "/chat/completions", json=REQUEST, timeout=60)
    assert resp.status_code == small.status_code == 200
    assert resp.content == completion()
    assert seen[0] == (len(sent), hashlib.sha256(sent).hexdigest(), str(len(sent)), None)
    status = proxy.recorder.status()
    assert (status["recorded_chat"], status["not_recorded_chat"]) == (1, 1)
    [record] = stored_sessions(store)  # the small one only: the big one is counted, unread
    assert record.turns[0].request == REQUEST


def test_a_request_body_goes_to_the_upstream_before_the_client_has_sent_all_of_it(
        tmp_path, store):
    """The client holds back the rest of its body until the upstream has the first
    piece: a relay that gathered the body first would never pass that piece on (the
    client gives up after a generous bound and the test fails)."""
    first_piece = threading.Event()
    seen: list = []
    head, tail = b'{"model": "qwen", "messages": [', json.dumps([SYSTEM, TASK])[1:].encode() + b"}"

    def chunks():
        yield head
        assert first_piece.wait(60), "the upstream never got the first piece"
        yield tail

    with serve_in_thread(receiving_app(seen, first_piece)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", content=chunks(), timeout=120,
                          headers={"Content-Type": "application/json"})
    assert resp.status_code == 200
    assert seen == [(len(head + tail), hashlib.sha256(head + tail).hexdigest(), None, "chunked")]
    [record] = stored_sessions(store)
    assert record.turns[0].request == json.loads(head + tail)
    assert [c.decision for c in record.calls] == ["allow"]


def streaming_app(events: list[bytes]) -> web.Application:
    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for event in events:
            await resp.write(event)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", stream)
    return app


def sse(delta: dict, finish: str | None = None) -> bytes:
    chunk = {"model": "qwen", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


CALL_DELTA = {"tool_calls": [{"index": 0, "id": "call-1", "type": "function", "function": {
    "name": "bash", "arguments": json.dumps({"command": GOOD})}}]}


@pytest.mark.parametrize("shape", ["one-huge-event", "many-small-events"])
def test_a_stream_with_an_event_past_the_limit_is_relayed_whole_and_not_read(
        tmp_path, store, monkeypatch, shape):
    monkeypatch.setattr("agent_eval.proxy.sessions.EVENT_LIMIT", 64 * 1024)
    text = "y" * (256 * 1024)
    contents = [text] if shape == "one-huge-event" else \
        [text[i:i + 4096] for i in range(0, len(text), 4096)]
    events = [sse({"role": "assistant", "content": c}) for c in contents] + [
        sse(CALL_DELTA), sse({}, "tool_calls"), b"data: [DONE]\n\n"]
    with serve_in_thread(streaming_app(events)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        got = httpx.post(proxy.base_url + "/chat/completions", json=dict(REQUEST, stream=True),
                         timeout=60).content
    assert got == b"".join(events)
    [record] = stored_sessions(store)
    if shape == "one-huge-event":
        assert record.turns[0].finish_reason == "unparseable" and record.calls == []
    else:
        assert record.turns[0].finish_reason == "tool_calls"
        assert [c.decision for c in record.calls] == ["allow"]
