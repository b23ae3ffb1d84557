"""End to end over real HTTP: ``agent-eval run`` in a subprocess against the simulator.

One run per store backend plays the bundled ralf suite once against every behaviour
profile (one target per profile, from a ``--config`` targets file) and writes into a
fresh SQLite file or the local PostgreSQL.  Each test then reads that run back from the
store: the failure classes each profile is built to show, handshake completion, the
parent/child links of spawned evaluators, a verdict on every call, and the count the CLI
printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_eval.sim import PROFILES, run_sim_in_thread
from agent_eval.store import Store, open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "scenarios" / "ralf"


@dataclass(frozen=True)
class PlayedRun:
    store: Store
    run_id: int
    stdout: str

    def sessions(self):
        return list(self.store.session_rows([self.run_id]))

    def calls(self):
        return list(self.store.call_rows([self.run_id]))


def agent_eval_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m agent_eval ARGS`` as a user would run it (no tty: plain output)."""
    env = dict(os.environ, COLUMNS="160")
    return subprocess.run([sys.executable, "-m", "agent_eval", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def write_targets(path: Path, base_url: str, profiles=tuple(PROFILES)) -> Path:
    lines = ["targets:"]
    for name in profiles:
        lines.append(f"  - {{name: {name}, base_url: '{base_url}', model: sim-{name}, "
                     f"concurrency: 8, timeout_s: 30}}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def played(request, tmp_path_factory) -> PlayedRun:
    tmp = tmp_path_factory.mktemp(f"e2e-{request.param}")
    db = str(tmp / "runs.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    label = f"e2e-{request.param}-{os.getpid()}"
    with run_sim_in_thread("disciplined", suite=SUITE) as base_url:
        targets = write_targets(tmp / "targets.yaml", base_url)
        done = agent_eval_cli("run", "--config", str(targets), "--suite", str(SUITE),
                              "--repeats", "1", "--label", label, "--db", db)
    assert done.returncode == 0, done.stdout + done.stderr
    store = open_store(db)
    request.addfinalizer(store.close)
    return PlayedRun(store, store.resolve_run(f"label:{label}").id, done.stdout)


def codes_of(run: PlayedRun, target: str) -> set[str]:
    return {c.primary for c in run.calls() if c.target == target and c.primary}


@pytest.mark.parametrize("profile, expected", [
    pytest.param("piper", {"AE301", "AE304"}, id="piper-pipes-and-chains"),
    pytest.param("wrapper", {"AE305", "AE306", "AE101"}, id="wrapper-heredoc-prefix-tool"),
    pytest.param("inventor", {"AE309"}, id="inventor-unlisted-scripts"),
])
def test_each_profile_shows_its_characteristic_classes(played, profile, expected):
    assert expected <= codes_of(played, profile)


def test_inventor_guesses_flags(played):
    assert codes_of(played, "inventor") & {"AE310", "AE311"}


def test_every_profile_played_every_top_level_scenario_once(played):
    from agent_eval.scenario import load_suite

    top = {sc.name for sc in load_suite(SUITE).top_level()}
    for profile in PROFILES:
        played_here = [s.scenario for s in played.sessions()
                       if s.target == profile and s.parent_id is None]
        assert sorted(played_here) == sorted(top), profile


def test_no_session_ends_in_error_against_a_healthy_server(played):
    assert {s.status for s in played.sessions()} <= {"completed", "stalled", "abandoned"}


def handshake_share(run: PlayedRun, target: str) -> float:
    needing = [s for s in run.sessions() if s.target == target and s.handshake_required]
    return sum(s.handshake_completed for s in needing) / len(needing)


def error_rate(run: PlayedRun, target: str) -> float:
    calls = [c for c in run.calls() if c.target == target]
    return sum(c.decision == "deny" for c in calls) / len(calls)


def test_disciplined_completes_at_least_80_percent_of_its_handshakes(played):
    assert handshake_share(played, "disciplined") >= 0.8


def test_disciplined_has_the_lowest_error_rate(played):
    rates = {p: error_rate(played, p) for p in PROFILES}
    assert min(rates, key=rates.get) == "disciplined", rates


def test_evaluator_children_are_linked_to_the_spawning_call(played):
    sessions = played.sessions()
    children = [s for s in sessions if s.scenario == "evaluator-step"]
    assert children, "no ralf_spawn reached: no evaluator child session"
    assert all(s.parent_id is not None for s in children)
    for child in children:
        parent = played.store.load_session(child.parent_id)
        spawn_index = next(i for i, cid in parent.child_links if cid == child.id)
        spawn = parent.record.calls[spawn_index]
        assert spawn.script == "ralf_spawn.py" and spawn.decision == "allow"


def test_every_stored_call_has_a_decision_and_denials_a_primary_code_and_findings(played):
    for row in played.sessions():
        for call in played.store.load_session(row.id).record.calls:
            assert call.decision in ("allow", "deny")
            if call.decision == "deny":
                assert call.primary and call.findings, (row.key, call.command)
                assert call.primary in {f.code for f in call.findings}
            else:
                assert call.primary is None


def printed_tool_calls(stdout: str) -> dict[str, int]:
    """The "tool calls" column of the per-target table the CLI printed."""
    header = next(line for line in stdout.splitlines() if "tool calls" in line)
    columns = [c.strip() for c in re.split(r"[┃│|]", header)]
    at = columns.index("tool calls")
    counts = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[┃│|]", line)]
        if len(cells) == len(columns) and cells[1] in PROFILES:
            counts[cells[1]] = int(cells[at])
    return counts


def test_stored_calls_equal_what_the_cli_printed(played):
    printed = printed_tool_calls(played.stdout)
    assert set(printed) == set(PROFILES)
    stored = {p: sum(c.target == p for c in played.calls()) for p in PROFILES}
    assert stored == printed


def test_run_is_recorded_finished_with_its_targets(played):
    info = played.store.get_run(played.run_id)
    assert info.status == "finished" and info.kind == "live"
    assert {t.name for t in played.store.run_targets(played.run_id)} == set(PROFILES)
    assert f"Run {played.run_id} finished" in played.stdout


def test_every_live_turn_keeps_the_exact_request_it_sent(played):
    """What replay needs: each turn's stored request is the conversation up to its reply,
    shaped as it went on the wire, with the scenario's tools and the target's model."""
    from agent_eval.live.shaping import shape_messages

    for row in played.sessions()[:40]:
        record = played.store.load_session(row.id).record
        assistants = [i for i, m in enumerate(record.messages) if m["role"] == "assistant"]
        assert len(assistants) == len(record.turns), row.key
        for turn, at in zip(record.turns, assistants, strict=True):
            sent = turn.request
            assert sent is not None, (row.key, turn.index)
            assert sent["messages"] == shape_messages(record.messages[:at]), (row.key, turn.index)
            assert sent["model"] == f"sim-{row.target}"
            assert {t["function"]["name"] for t in sent["tools"]} >= {"bash"}
