"""The request path (agent_eval/proxy/relay.py) over real HTTP: what the client gets
through the proxy is what it gets without it, byte for byte, and faults on either side
behave as promised; the recorder hears about every exchange and stores it judged."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import threading
import types

import httpx2 as httpx
import pytest
from aiohttp import web
from support.loopback import serve_in_thread
from support.proxyplay import REPO, proxy_in_thread, unused_port

import agent_eval.sim.server as sim_server
from agent_eval.sim import Faults, run_sim_in_thread


def scenario_body(name: str = "db-open-attempts") -> dict:
    """A first request as a live run sends it for a bundled scenario (the simulator knows
    the task, so it answers with tool calls)."""
    from agent_eval.scenario import load_suite

    sc = load_suite(REPO / "scenarios" / "ralf").scenarios[name]
    return {"model": "sim-piper",
            "messages": [{"role": "system", "content": sc.system_prompt()},
                         {"role": "user", "content": sc.spec.task}],
            "tools": sc.tool_schemas()}


BODY = scenario_body()


@pytest.fixture
def store(tmp_path):
    """SQLite only: the relay does not care which store is behind the recorder."""
    from agent_eval.store import open_store

    with open_store(str(tmp_path / "proxy.db")) as opened:
        yield opened


@pytest.fixture
def fixed_clock(monkeypatch):
    """The simulator stamps ``created`` from the clock: freeze it so two answers to the
    same request are the same bytes."""
    monkeypatch.setattr(sim_server, "time", types.SimpleNamespace(time=lambda: 1.7e9))


def post(base: str, body: dict, **headers) -> httpx.Response:
    return httpx.post(base + "/chat/completions", json=body, headers=headers, timeout=30)


def stream_events(base: str, body: dict) -> tuple[list[bytes], str]:
    """The SSE events as received, and the SHA-256 of the whole stream."""
    data = b""
    with httpx.stream("POST", base + "/chat/completions", json=body, timeout=30) as resp:
        for piece in resp.iter_raw():
            data += piece
    return data.split(b"\n\n"), hashlib.sha256(data).hexdigest()


def test_whole_replies_are_byte_for_byte_the_servers(tmp_path, store, fixed_clock):
    with run_sim_in_thread("piper") as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        direct = post(upstream, BODY)
        through = post(proxy.base_url, BODY)
        models_direct = httpx.get(upstream + "/models").content
        models_through = httpx.get(proxy.base_url + "/models").content
        status = httpx.get(proxy.base_url.removesuffix("/v1") + "/_agent_eval/status").json()
    assert (status["relayed"], status["dropped"], status["lost_turns"]) == (2, 0, 0)
    assert through.status_code == direct.status_code == 200
    assert through.content == direct.content
    assert direct.json()["choices"][0]["message"]["tool_calls"]
    assert through.headers["content-type"] == direct.headers["content-type"]
    assert models_through == models_direct
    run = store.resolve_run("latest")
    assert run.kind == "proxy"
    [session] = [store.load_session(s.id) for s in store.session_rows([run.id])]
    assert session.record.turns[0].request == BODY
    assert [c.call_id for c in session.record.calls] == [
        c["id"] for c in direct.json()["choices"][0]["message"]["tool_calls"]]


def test_streamed_replies_are_the_same_events_and_the_same_stream_hash(tmp_path, store,
                                                                       fixed_clock):
    body = dict(BODY, stream=True, stream_options={"include_usage": True})
    faults = Faults(latency_s=0.2)  # paced: one write per event, as a real server streams
    with run_sim_in_thread("piper", faults=faults) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        direct_events, direct_hash = stream_events(upstream, body)
        through_events, through_hash = stream_events(proxy.base_url, body)
    assert through_hash == direct_hash
    assert through_events == direct_events and direct_events[-2] == b"data: [DONE]"
    [row] = store.session_rows([store.resolve_run("latest").id])
    session = store.load_session(row.id)
    assert session.record.turns[0].finish_reason == "tool_calls"
    assert session.record.calls and all(c.decision in ("allow", "deny")
                                        for c in session.record.calls)


def echo_app() -> web.Application:
    """An upstream that answers 418 with what it received, a custom and a hop-by-hop header."""
    async def echo(request: web.Request) -> web.Response:
        seen = {"headers": dict(request.headers), "body": (await request.read()).decode(),
                "path": request.path_qs}
        payload = gzip.compress(json.dumps(seen).encode())
        return web.Response(status=418, body=payload, headers={
            "X-Upstream": "yes", "Content-Encoding": "gzip", "Content-Type": "application/json",
            "Keep-Alive": "timeout=5"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


def test_status_headers_and_compressed_bodies_pass_and_authorization_reaches_upstream(
        tmp_path, store):
    with serve_in_thread(echo_app()) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions?x=1", content=b'{"messages": []}',
                          headers={"Authorization": "Bearer sk-secret-123",
                                   "Accept-Encoding": "gzip"})
    assert resp.status_code == 418
    assert resp.headers["x-upstream"] == "yes" and "keep-alive" not in resp.headers
    assert resp.headers["content-encoding"] == "gzip"
    seen = resp.json()  # httpx undoes the gzip the upstream applied
    assert seen["headers"]["Authorization"] == "Bearer sk-secret-123"
    assert seen["path"] == "/v1/chat/completions?x=1" and seen["body"] == '{"messages": []}'
    dumped = json.dumps([r.config for r in store.list_runs()])
    assert "sk-secret-123" not in dumped


def connection_naming_app() -> web.Application:
    """An upstream that echoes the request's headers and names one of its own answer's
    headers in ``Connection`` (hop-by-hop for that connection only, RFC 9110 7.6.1)."""
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"headers": dict(request.headers)}, headers={
            "Connection": "X-Upstream-Hop", "X-Upstream-Hop": "1", "X-Upstream-Kept": "2"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


def test_headers_named_in_connection_are_not_forwarded_either_way(tmp_path, store):
    with serve_in_thread(connection_naming_app()) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = httpx.post(proxy.base_url + "/chat/completions", content=b'{"messages": []}',
                          headers={"Connection": "keep-alive, X-Client-Hop,x-other-hop",
                                   "X-Client-Hop": "secret", "X-Other-Hop": "2",
                                   "X-Client-Kept": "yes"})
    seen = {k.lower(): v for k, v in resp.json()["headers"].items()}
    assert seen["x-client-kept"] == "yes"
    assert "x-client-hop" not in seen and "x-other-hop" not in seen
    assert "keep-alive" not in seen.get("connection", "")
    assert resp.headers["x-upstream-kept"] == "2" and "x-upstream-hop" not in resp.headers


def test_an_unreachable_upstream_gets_the_client_a_502_naming_it(tmp_path, store):
    upstream = f"http://127.0.0.1:{unused_port()}/v1"
    with proxy_in_thread(upstream, store, tmp_path) as proxy:
        resp = post(proxy.base_url, BODY)
    assert resp.status_code == 502
    assert upstream in resp.json()["message"]
    [row] = store.session_rows([store.resolve_run("latest").id])
    assert row.status == "error"


def dying_app(events: int) -> web.Application:
    """An upstream that streams ``events`` events of a reply, then drops the connection."""
    async def die(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(events):
            chunk = {"choices": [{"index": 0, "delta": {"content": f"part {i} "}}]}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await asyncio.sleep(0.01)
        request.transport.abort()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", die)
    return app


def test_an_upstream_killed_mid_stream_cuts_the_clients_stream_too(tmp_path, store):
    with serve_in_thread(dying_app(3)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        got = b""
        with pytest.raises(httpx.HTTPError, match="peer closed connection"), httpx.stream(
                "POST", proxy.base_url + "/chat/completions", json=dict(BODY, stream=True),
                timeout=10) as resp:
            for piece in resp.iter_raw():
                got += piece
    assert got.count(b"data: ") == 3 and b"[DONE]" not in got
    [row] = store.session_rows([store.resolve_run("latest").id])
    session = store.load_session(row.id)
    assert row.status == "error" and "reply:upstream-error" in session.record.tags
    assert session.record.turns[0].content == "part 0 part 1 part 2 "


def test_invalid_utf8_and_a_10_mb_reply_pass_unchanged(tmp_path, store, fixed_clock):
    faults = Faults(invalid_utf8_rate=1.0, huge_reply_rate=1.0, huge_reply_chars=10_000_000)
    with run_sim_in_thread("piper", faults=faults) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        direct = post(upstream, BODY).content
        through = post(proxy.base_url, BODY).content
    assert len(through) > 10_000_000 and hashlib.sha256(through).digest() == \
        hashlib.sha256(direct).digest()
    with pytest.raises(UnicodeDecodeError, match="can't decode byte 0xff"):
        through.decode("utf-8")
    stats = proxy.recorder.status()
    assert stats["stored_turns"] == 1 and stats["lost_turns"] == 0


def endless_app(closed: threading.Event) -> web.Application:
    """An upstream that streams forever and notes when its client (the proxy) goes away."""
    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            while True:
                await resp.write(b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\n\n')
                await asyncio.sleep(0.01)
        except (ConnectionError, asyncio.CancelledError):
            closed.set()
            raise

    app = web.Application()
    app.router.add_post("/v1/chat/completions", endless)
    return app


def test_a_client_disconnect_closes_the_upstream_request(tmp_path, store):
    closed = threading.Event()
    with serve_in_thread(endless_app(closed)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        with httpx.stream("POST", proxy.base_url + "/chat/completions",
                          json=dict(BODY, stream=True), timeout=10) as resp:
            next(resp.iter_raw())
        assert closed.wait(10)  # how fast: bench_proxy.py --close-aborts (BENCHMARKS.md)
    [row] = store.session_rows([store.resolve_run("latest").id])
    session = store.load_session(row.id)
    assert "reply:client-abort" in session.record.tags and session.record.calls == []


def lingering_app(closed: threading.Event) -> web.Application:
    """An upstream whose stream ends its answer (a bash call, its finish reason and
    ``[DONE]``) and then keeps the response open with comments until its client (the
    proxy) goes away: the body's own end never comes while the client is there."""
    args = json.dumps({"command": "ls -la"})
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                  {"index": 0, "id": "call-1", "type": "function",
                   "function": {"name": "bash", "arguments": args}}]}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]

    async def linger(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for chunk in chunks:
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        try:
            while True:
                await asyncio.sleep(0.01)
                await resp.write(b": still here\n\n")
        except (ConnectionError, asyncio.CancelledError):
            closed.set()
            raise

    app = web.Application()
    app.router.add_post("/v1/chat/completions", linger)
    return app


def test_a_client_that_leaves_after_the_answers_end_gets_its_calls_judged(tmp_path, store):
    # as Codex does: it closes the stream once the answer has ended, before the body's end
    closed = threading.Event()
    with serve_in_thread(lingering_app(closed)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path) as proxy:
        got = b""
        with httpx.stream("POST", proxy.base_url + "/chat/completions",
                          json=dict(BODY, stream=True), timeout=30) as resp:
            for piece in resp.iter_raw():
                got += piece
                if b"[DONE]" in got:
                    break
        assert closed.wait(60)
    [row] = store.session_rows([store.resolve_run("latest").id])
    session = store.load_session(row.id)
    assert "reply:client-abort" not in session.record.tags
    assert [(c.command, c.decision is not None) for c in session.record.calls] == [
        ("ls -la", True)]
