"""``agent-eval collect`` keeps what it accepted as the proxy does (``test_signals.py``,
``test_pg_restart.py``): a stopping signal to the process or its group stores every open
session; a receiver killed outright (SIGKILL) leaves its accepted events in the journal's
open part, and the next start on that journal writes them into the killed run and marks
it ``interrupted``; a store that is down sends sessions to the journal, written when it
answers again.

Real processes and real HTTP posts of OTLP/JSON (the fixtures of ``tests/fixtures/otlp``:
four sessions, seven calls).  No timing is asserted: the tests wait on what the receiver
shows (its status page, its exit, its files) with generous bounds.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from support.proxyplay import wait_for

from agent_eval.proxy.collect import Collector, CollectServer, serve
from agent_eval.scenario.bundled import load_policy
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
FIXTURES = REPO / "tests" / "fixtures" / "otlp"
POSTS = [("claude_code.logs.json", "/v1/logs"), ("codex.logs.json", "/v1/logs"),
         ("gemini_cli.logs.json", "/v1/logs"), ("genai.traces.json", "/v1/traces")]
SESSIONS, CALLS = 4, 7


def request(base_url: str, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def post_all(base_url: str) -> None:
    for name, path in POSTS:
        assert request(base_url, "POST", path, (FIXTURES / name).read_bytes()) == (200, "{}")


def status(base_url: str) -> dict:
    return json.loads(request(base_url, "GET", "/_agent_eval/status")[1])


def start_collect(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """The CLI in a session of its own (its own process group, as under systemd or a
    terminal), run from ``tmp_path`` so its default journal lands there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "collect", "--allowlist", str(ALLOWLIST),
         "--port", "0", "--db", str(tmp_path / "collect.db"), "--idle-timeout", "3600",
         *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=dict(os.environ, COLUMNS="160", PYTHONPATH=str(REPO)))
    line = proc.stdout.readline().strip()
    if not line.startswith("http://"):
        proc.kill()
        raise AssertionError(proc.communicate()[1])
    return proc, line


def finish(proc: subprocess.Popen, sig: int, *, group: bool = False) -> tuple[str, str]:
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        return proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


@pytest.mark.parametrize("target", ["process", "group"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stopping_signal_stores_every_open_session_and_finishes_the_run(tmp_path, sig,
                                                                          target):
    proc, base_url = start_collect(tmp_path)
    try:
        post_all(base_url)
        wait_for(lambda: status(base_url)["open_sessions"] == SESSIONS, "4 open sessions")
    finally:
        out, err = finish(proc, sig, group=target == "group")
    assert proc.returncode == 0, err
    assert (f"{SESSIONS} sessions, {CALLS} calls judged, 3 not judged; 0 sessions in "
            "the journal; 0 not recorded") in err, err
    with open_store(str(tmp_path / "collect.db")) as store:
        run = store.resolve_run("latest")
        assert (run.kind, run.status) == ("import", "finished")
        assert len(list(store.session_rows([run.id]))) == SESSIONS
    assert not (tmp_path / "agent-eval-collect.journal.open").exists()  # nothing left open


def test_a_receiver_killed_outright_loses_nothing_it_accepted(tmp_path):
    journal = tmp_path / "spool" / "collect.journal"
    journal.parent.mkdir()
    proc, base_url = start_collect(tmp_path, "--journal", str(journal), "--label", "killed")
    try:
        post_all(base_url)  # every 200 came after the events were on disk
        wait_for(lambda: status(base_url)["open_sessions"] == SESSIONS, "4 open sessions")
    finally:
        finish(proc, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{journal}.open").exists()

    again, base_url = start_collect(tmp_path, "--journal", str(journal), "--label", "next")
    out, err = finish(again, signal.SIGTERM)
    assert again.returncode == 0, err
    assert (f"{SESSIONS} sessions a killed receiver had accepted were written from "
            f"{journal}.open; its run is marked interrupted") in err, err
    assert not Path(f"{journal}.open").exists() and not journal.exists()
    with open_store(str(tmp_path / "collect.db")) as store:
        (killed,) = store.list_runs(label="killed")
        assert killed.status == "interrupted"
        rows = {row.scenario: row for row in store.session_rows([killed.id])}
        assert sorted(rows) == ["claude_code:cc-sess-1", "codex:0199a1b2-codex",
                                "gemini_cli:gem-sess-9", "gen_ai:conv_77"]
        assert {"skipped_calls:2", "otlp_events:7"} <= set(rows["claude_code:cc-sess-1"].tags)
        calls = {(row.scenario, row.index): row for row in store.call_rows([killed.id])}
        assert len(calls) == CALLS
        assert (calls[("claude_code:cc-sess-1", 0)].primary,
                calls[("codex:0199a1b2-codex", 1)].primary) == ("AE301", "AE307")


def test_a_kill_after_some_sessions_were_stored_writes_only_the_open_ones(tmp_path):
    """The open part is rewritten once sessions are written: the stored ones are not
    written twice by the next start (the store would refuse their keys)."""
    journal = tmp_path / "collect.journal"
    proc, base_url = start_collect(tmp_path, "--journal", str(journal), "--label", "killed",
                                   "--idle-timeout", "0.5")
    try:
        post_all(base_url)
        wait_for(lambda: status(base_url)["stored_sessions"] == SESSIONS, "4 stored sessions")
        name, path = POSTS[0]  # the same session again: open, on top of the stored one
        assert request(base_url, "POST", path, (FIXTURES / name).read_bytes()) == (200, "{}")
    finally:
        finish(proc, signal.SIGKILL)
    again, _ = start_collect(tmp_path, "--journal", str(journal))
    out, err = finish(again, signal.SIGTERM)
    assert "1 sessions a killed receiver had accepted were written" in err, err
    with open_store(str(tmp_path / "collect.db")) as store:
        (killed,) = store.list_runs(label="killed")
        scenarios = sorted(row.scenario for row in store.session_rows([killed.id]))
        assert scenarios.count("claude_code:cc-sess-1") == 2 and len(scenarios) == 5


class FlakyStore:
    """The test's store with a switch: while ``down``, every write fails as a store that
    is unreachable does (OperationalError)."""

    def __init__(self, store) -> None:
        self._store = store
        self.down = threading.Event()

    def __getattr__(self, name: str):
        attr = getattr(self._store, name)
        if name in ("record_sessions", "create_run", "add_target", "set_run_status"):
            def guarded(*args, **kwargs):
                if self.down.is_set():
                    raise OperationalError("INSERT", {}, ConnectionRefusedError(
                        "connection refused"))
                return attr(*args, **kwargs)
            return guarded
        return attr


def test_a_store_that_is_down_sends_sessions_to_the_journal_written_when_it_returns(
        store, tmp_path):
    flaky = FlakyStore(store)
    flaky.down.set()
    journal = tmp_path / "collect.journal"
    collector = Collector(flaky, load_policy(str(ALLOWLIST)), label="outage", idle_s=0.2,
                          journal=journal, retry_s=0.2)
    server = CollectServer(collector, "127.0.0.1", 0)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(stats=serve(server)), daemon=True)
    thread.start()
    try:
        post_all(server.base_url)  # accepted while the store is down
        wait_for(lambda: status(server.base_url)["journaled_sessions"] == SESSIONS,
                 "4 sessions in the journal")
        assert journal.exists() and status(server.base_url)["lost_turns"] == 0
        flaky.down.clear()
        wait_for(lambda: not journal.exists(), "the journal written and removed")
    finally:
        server.shutdown()
        thread.join(120)
    stats = result["stats"]
    assert (stats.sessions, stats.calls, stats.not_judged) == (SESSIONS, CALLS, 3)
    run = store.resolve_run("label:outage")
    assert run.status == "finished"
    assert len(list(store.session_rows([run.id]))) == SESSIONS
    assert len(list(store.call_rows([run.id]))) == CALLS


def test_the_open_part_stays_bounded_and_a_start_on_it_writes_the_killed_run(
        store, tmp_path, monkeypatch):
    """A session that stays open while the same events keep coming (GenAI spans with
    their tool definitions) grows the open part only to about twice its snapshot; a
    receiver on the same journal (its predecessor never closed: killed) writes the open
    session whole into the earlier run and marks that run interrupted."""
    from agent_eval.proxy import collect

    monkeypatch.setattr(collect, "OPEN_SLACK", 4096)
    journal = tmp_path / "collect.journal"
    body = (FIXTURES / "genai.traces.json").read_bytes()
    killed = Collector(store, load_policy(str(ALLOWLIST)), label="killed", journal=journal)
    sizes = []
    for _ in range(40):
        assert killed.receive("/v1/traces", "application/json", "", body) == (200, "{}")
        sizes.append(Path(f"{journal}.open").stat().st_size)
    (session,) = killed.stitcher.open.values()
    snapshot = len(json.dumps({"run_id": killed.run.run_id, "keys": {},
                               "open": [collect._to_json(session)]}, ensure_ascii=False))
    assert max(sizes) <= 2 * snapshot + 4096 + 2 * len(body)
    assert sizes[-1] < sum(sizes) / 10  # rewritten, not only appended to

    after = Collector(store, load_policy(str(ALLOWLIST)), label="next", journal=journal)
    assert after.stats.recovered == 1 and not Path(f"{journal}.open").exists()
    run = store.get_run(killed.run.run_id)
    assert run.status == "interrupted"
    (row,) = store.session_rows([run.id])
    judgeable = sum(call.not_judged is None for call in session.calls)
    assert (row.n_calls, judgeable, len(session.calls)) == (40, 40, 80)
    assert f"otlp_events:{session.events}" in row.tags and "skipped_calls:40" in row.tags
    after.close()


def test_a_kill_between_a_write_and_the_rewrite_of_the_open_part_stores_each_session_once(
        store, tmp_path):
    """The one window: sessions written, the open part not yet rewritten.  The next
    start writes them one at a time; the store refuses the one stored already and takes
    the other, which a batch write would have lost with it."""
    journal = tmp_path / "collect.journal"
    open_part = Path(f"{journal}.open")
    killed = Collector(store, load_policy(str(ALLOWLIST)), label="killed", journal=journal,
                       idle_s=60)
    claude, codex = ((FIXTURES / name).read_bytes() for name, _ in POSTS[:2])
    assert killed.receive("/v1/logs", "application/json", "", claude) == (200, "{}")
    before_write = open_part.read_bytes()
    killed.flush_idle(time.monotonic() + 120)  # claude's session written, the part rewritten
    assert len(list(store.session_rows([killed.run.run_id]))) == 1
    open_part.write_bytes(before_write)  # as if killed before the rewrite
    assert killed.receive("/v1/logs", "application/json", "", codex) == (200, "{}")

    after = Collector(store, load_policy(str(ALLOWLIST)), label="next", journal=journal)
    assert not open_part.exists() and not journal.exists()
    assert store.get_run(killed.run.run_id).status == "interrupted"
    assert sorted(row.scenario for row in store.session_rows([killed.run.run_id])) == [
        "claude_code:cc-sess-1", "codex:0199a1b2-codex"]
    after.close()


def test_a_batch_the_journal_cannot_take_is_a_503_and_not_taken(store, tmp_path):
    """Accepted means on disk: when the open part cannot be written, the exporter is
    told to send again (503, one line naming the file) and nothing is held in memory."""
    (tmp_path / "not-a-dir").write_text("")
    journal = tmp_path / "not-a-dir" / "collect.journal"
    collector = Collector(store, load_policy(str(ALLOWLIST)), label="nojournal",
                          journal=journal)
    status_code, line = collector.receive("/v1/logs", "application/json", "",
                                          (FIXTURES / POSTS[0][0]).read_bytes())
    assert status_code == 503
    assert line.startswith(f"the journal {journal}.open cannot be written (")
    assert line.endswith("): send again later")
    assert not collector.stitcher.open and collector.stats.events == 0
    assert collector.writer.stats.journal_errors == 1
    collector.close()
