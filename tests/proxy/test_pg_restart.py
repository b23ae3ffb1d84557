"""The fault "store killed mid-run": ``agent-eval proxy --db postgresql://…``
records into a private PostgreSQL cluster (tests/support/pgcluster.py) that is stopped while
traffic flows and started again.  While it is down the client's bytes are the server's
bytes and the closed sessions wait in the journal; once it is back they are written, no
turn is lost, and the stored sessions are the ones the client played.
"""

from __future__ import annotations

import time

import httpx2 as httpx
import pytest
from test_proxy_e2e import SCENARIOS, SUITE, ProxyProcess, call_sequences, cli
from test_relay import fixed_clock, post, scenario_body, stream_events  # noqa: F401

from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

RAW = "calendar-book-review"  # the raw requests' scenario, one the runs do not play
PLAYED = tuple(s for s in SCENARIOS if s != RAW)


def status(proxy: ProxyProcess) -> dict:
    return httpx.get(proxy.base_url.removesuffix("/v1") + "/_agent_eval/status",
                     timeout=10).json()


def wait_status(proxy: ProxyProcess, what: str, check, deadline_s: float = 60.0) -> dict:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        now = status(proxy)
        if check(now):
            return now
        time.sleep(0.2)
    pytest.fail(f"not within {deadline_s:g} s: {what}; status {now}")


def test_a_store_stopped_mid_traffic_keeps_the_bytes_and_loses_no_session(
        pg_cluster, tmp_path, fixed_clock):  # noqa: F811
    url = pg_cluster.create_database("proxy")
    client_db = str(tmp_path / "client.db")
    flags = ["--suite", str(SUITE), "--concurrency", "4", "--db", client_db,
             "--model", "sim-piper", *(f"--scenario={g}" for g in PLAYED)]
    body = scenario_body(RAW)
    streamed = dict(body, stream=True, stream_options={"include_usage": True})
    with run_sim_in_thread("piper", suite=SUITE) as upstream:
        proxy = ProxyProcess(upstream, url, tmp_path / "journal", "proxied",
                             extra=("--idle-timeout", "1"))
        try:
            before = cli("run", "--base-url", proxy.base_url, "--label", "before", *flags)
            assert before.returncode == 0, before.stdout + before.stderr
            wait_status(proxy, "the first run's sessions stored",
                        lambda s: s["open_sessions"] == 0 and s["queued"] == 0
                        and s["stored_sessions"] > 0)

            pg_cluster.stop()
            direct, through = post(upstream, body), post(proxy.base_url, body)
            (direct_events, direct_hash) = stream_events(upstream, streamed)
            (through_events, through_hash) = stream_events(proxy.base_url, streamed)
            during = cli("run", "--base-url", proxy.base_url, "--label", "during",
                         "--stream", *flags)
            down = wait_status(proxy, "the sessions played while the store was down "
                               "journaled", lambda s: s["open_sessions"] == 0
                               and s["queued"] == 0 and s["journaled_sessions"] > 0)
            assert not (tmp_path / "journal").stat().st_size == 0

            pg_cluster.start()
            back = wait_status(proxy, "the journal written once the store is back",
                               lambda s: s["journaled_sessions"] == 0
                               and not (tmp_path / "journal").exists())
        finally:
            summary = proxy.stop()
    assert during.returncode == 0, during.stdout + during.stderr
    assert (through.status_code, through.content) == (direct.status_code, direct.content)
    assert direct.json()["choices"][0]["message"]["tool_calls"]
    assert (through_hash, through_events) == (direct_hash, direct_events)
    assert down["store_errors"] >= 1 and down["lost_turns"] == 0
    assert back["lost_turns"] == 0
    assert "0 sessions in the journal; 0 turns not recorded" in summary

    with open_store(client_db) as client:
        sent = [client.resolve_run(f"label:{label}").id for label in ("before", "during")]
        expected = call_sequences(client, sent[0]) + call_sequences(client, sent[1])
        sent_turns = sum(len(s.record.turns) for s in client.iter_sessions(sent))
    with open_store(url) as store:
        recorded = store.resolve_run("label:proxied")
        assert (recorded.kind, recorded.status) == ("proxy", "finished")
        sessions = [store.load_session(s.id) for s in store.session_rows([recorded.id])]
        assert all(t.request for s in sessions for t in s.record.turns)
        raw = [s for s in sessions
               if s.record.turns[0].request["messages"] == body["messages"]]
        played = [s for s in sessions if s not in raw]
        assert sum(len(s.record.turns) for s in raw) == 2  # the whole and the streamed
        assert sum(len(s.record.turns) for s in played) == sent_turns
        seqs = call_sequences(store, recorded.id)
        for s in raw:
            seqs[tuple((c.tool, c.arguments, c.decision, c.primary,
                        tuple(f.code for f in c.findings)) for c in s.record.calls)] -= 1
        assert +seqs == expected
        keys = [s.record.key for s in sessions]
        assert len(keys) == len(set(keys))
