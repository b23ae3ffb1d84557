"""End to end over real HTTP through the real CLI: ``agent-eval run`` as the client,
``agent-eval proxy`` in front of the simulator.  The sessions, calls and verdicts the
proxy stores from the traffic must equal the ones the run stores itself, streaming and
not.  (That the client sees the same bytes with and without the proxy is test_relay.py's.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path

import httpx2 as httpx
import pytest

from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.store.requests import save_blobs

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "scenarios" / "ralf"
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
SCENARIOS = ("db-open-attempts", "research-literature-review", "research-market-scan-web",
             "calendar-book-review")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="160")
    return subprocess.run([sys.executable, "-m", "agent_eval", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


class ProxyProcess:
    """``agent-eval proxy`` in a subprocess on a free port; ``stop()`` is Ctrl-C."""

    def __init__(self, upstream: str, db: str, journal: Path, label: str,
                 extra: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_eval", "proxy", "--upstream", upstream,
             "--allowlist", str(ALLOWLIST), "--port", "0", "--db", db, "--label", label,
             "--journal", str(journal), *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline().strip()
        assert line.startswith("http://"), self.proc.stderr.read()
        self.base_url = line

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return err


def call_sequences(store, run_id: int) -> Counter:
    """Each session as its calls (tool, arguments, decision, primary, findings), counted."""
    seqs: Counter = Counter()
    for s in store.iter_sessions([run_id]):
        calls = tuple((c.tool, c.arguments, c.decision, c.primary,
                       tuple(f.code for f in c.findings)) for c in s.record.calls)
        seqs[calls] += 1
    return seqs


def test_proxied_runs_store_the_runs_sessions_calls_and_verdicts(tmp_path):
    """The same run through the proxy twice (whole replies, then streamed): the proxy's
    run holds every session of both, call for call, verdict for verdict."""
    db = str(tmp_path / "runs.db")
    flags = ["--suite", str(SUITE), "--repeats", "2", "--concurrency", "4", "--db", db,
             "--model", "sim-piper", *(f"--scenario={g}" for g in SCENARIOS)]
    with open_store(db) as store, store.engine.begin() as conn:  # a prompt unused since 2020
        save_blobs(conn, {"0" * 64: '{"role":"system","content":"old"}'}, today=date(2020, 1, 1))
    with run_sim_in_thread("piper", suite=SUITE) as upstream:
        proxy = ProxyProcess(upstream, db, tmp_path / "journal", "proxied",
                             extra=("--keep-requests-days", "30"))
        try:
            whole = cli("run", "--base-url", proxy.base_url, "--label", "whole", *flags)
            streamed = cli("run", "--base-url", proxy.base_url, "--label", "streamed",
                           "--stream", *flags)
            status = httpx.get(proxy.base_url.removesuffix("/v1") + "/_agent_eval/status",
                               timeout=10).json()
        finally:
            summary = proxy.stop()
    assert status["loop"] == "uvloop"  # the command's relay runs on uvloop (proxy/loop.py)
    assert status["pruned_request_texts"] == 1  # --keep-requests-days: only the 2020 text
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert streamed.returncode == 0, streamed.stdout + streamed.stderr
    assert "0 turns not recorded" in summary
    with open_store(db) as store:
        runs = [store.resolve_run(f"label:{label}").id for label in ("whole", "streamed")]
        expected = call_sequences(store, runs[0])
        assert call_sequences(store, runs[1]) == expected  # the simulator is seeded
        recorded = store.resolve_run("label:proxied")
        assert recorded.kind == "proxy" and recorded.status == "finished"
        assert call_sequences(store, recorded.id) == expected + expected
        n_calls = sum(len(k) * n for k, n in expected.items())
        assert n_calls > 20 and any(c[2] == "deny" for k in expected for c in k)
        sessions = [store.load_session(s.id) for s in store.session_rows([recorded.id])]
        turns = [t for s in sessions for t in s.record.turns]
        assert all(t.request is not None and t.request["messages"] for t in turns)
        assert sum(t.request.get("stream") is True for t in turns) == len(turns) // 2
        assert {s.record.source for s in sessions} == {"proxy"}
        assert {s.record.status for s in sessions} == {"completed"}
        def calls_by_class(run_id):  # per target: calls, denied calls by class
            return {target: (s.calls, {code: r.k for code, r in s.classes.items()})
                    for target, s in store.summarize([run_id], with_turns=False,
                                                     detail="rates").items()}

        assert calls_by_class(recorded.id) == {
            target: (2 * n, {code: 2 * k for code, k in classes.items()})
            for target, (n, classes) in calls_by_class(runs[0]).items()}
    # a proxy run keeps each turn's exact request, so it replays and pairs
    with run_sim_in_thread("disciplined", suite=SUITE) as candidate:
        replayed = cli("replay", str(recorded.id), "--base-url", candidate, "--model",
                       "sim-disciplined", "--sample", "6", "--seed", "1", "--db", db,
                       "--label", "candidate")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    compared = cli("compare", str(recorded.id), "label:candidate", "--db", db)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert "6 replies paired with the original turn" in compared.stdout
    assert "exact McNemar on the" in compared.stdout
    with open_store(db) as store:
        replay_run = store.resolve_run("label:candidate")
        assert (replay_run.kind, replay_run.parent_run_id) == ("replay", recorded.id)


@pytest.mark.parametrize("stack", ["llamacpp:cut-at-cap", "vllm:cut-length"])
def test_a_run_through_the_proxy_to_a_stack_that_cuts_calls_gets_one_verdict(tmp_path, stack):
    """llama-cpp-python-style (``tool_calls`` at max_tokens) and vLLM-style (``length``)
    cuts: the run and the proxy store the same sessions, each cut a truncation (AE501),
    never the model's AE102, and both say so when they stop."""
    from agent_eval.sim import Faults

    db = str(tmp_path / "runs.db")
    with run_sim_in_thread("disciplined", suite=SUITE,
                           faults=Faults(stack_rate=1.0)) as upstream:
        proxy = ProxyProcess(upstream, db, tmp_path / "journal", "proxied")
        try:
            run = cli("run", "--base-url", proxy.base_url, "--model",
                      f"sim-disciplined+{stack}", "--suite", str(SUITE), "--max-tokens", "64",
                      "--scenario=lights-evening-off", "--label", "played", "--db", db)
        finally:
            summary = proxy.stop()
    assert "counted apart as truncations (AE501)" in run.stderr, run.stdout + run.stderr
    assert "counted apart as truncations (AE501" in summary, summary
    with open_store(db) as store:
        rows = {label: list(store.session_rows([store.resolve_run(f"label:{label}").id]))
                for label in ("played", "proxied")}
        calls = {label: list(store.call_rows([store.resolve_run(f"label:{label}").id]))
                 for label in ("played", "proxied")}
    # the proxy also holds the run's tool-less model check: the sessions that had tools
    cut = {label: [r for r in rows[label] if r.stack_faults] for label in rows}
    assert cut["played"] and len(cut["proxied"]) == len(cut["played"]) == len(rows["played"])
    for label in ("played", "proxied"):
        for row in cut[label]:
            assert row.status == "error" and row.stack_faults == (("AE501", True),), label
            assert row.error.startswith("reply cut by the token limit inside a tool call: ")
        assert not any(c.primary == "AE102" for c in calls[label])
