"""The bundled suite played against real servers, shared by the interop test files: the
scenarios, the suite with its limits cut, the targets file, and the checks every server
must pass (no ``error`` session, the calls judged, failure classes counted).

Bounded for 2 CI cores, one per server: the scenario files are the bundled ones with only
the limits lowered (2 turns, 2 tool calls a session), 32 tokens a reply, temperature 0,
contexts just above the longest first request (conftest.CONTEXT).  A later turn that no
longer fits ends its session ``stalled`` with the server's words (the context is a limit,
like the turns), not ``error``.  The servers process each agent's ~1,500-2,300-token
system prompt once: the scenarios run in name order, one session at a time per server, so
consecutive sessions of one agent share that prefix in the server's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agent_eval.live.context import context_overflow
from agent_eval.scenario import load_suite
from agent_eval.store import open_store
from agent_eval.transcript import STACK_FAULT, TRUNCATED

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
ALL_SCENARIOS = sorted(sc.name for sc in load_suite(RALF).top_level())  # the 29 top-level
# Four scenarios that cover the shapes (a plain script call, a read, a closing handshake
# that spawns an evaluator child, a calendar task where SmolLM2's call under `auto` runs
# away until its window is full).  SmolLM2 plays these on llama-cpp-python, and both models
# play them on llama-server: Gemma 3 plays the whole suite on llama-cpp-python
# (test_llama_cpp_python.py), and with llama-server neither model gets a tool call
# (docs/servers.md), so more scenarios there would measure nothing more.  What each costs:
# BENCHMARKS.md ("fresh set-up").  AGENT_EVAL_INTEROP_SCENARIOS=all plays all 29 everywhere.
SHAPES = sorted(["lights-dim-office", "calendar-week-overview",
                 "research-benchmark-data-missing", "read-runbook-restart"])
PLAY_ALL = os.environ.get("AGENT_EVAL_INTEROP_SCENARIOS") == "all"
SCENARIOS = ALL_SCENARIOS if PLAY_ALL else SHAPES
FILES = sorted(p.stem for p in RALF.glob("*.yaml") if p.stem != "suite")  # + child templates


@dataclass(frozen=True)
class Played:
    """One target's ``agent-eval run``: what it printed, its exit code, its store."""
    target: str
    scenarios: list[str]
    output: str
    stderr: str
    exit_code: int
    db: Path


def write_short_suite(folder: Path) -> Path:
    """The bundled suite in ``folder``, every scenario kept, with the limits cut to 2 turns."""
    (folder / "suite.yaml").write_text(
        (RALF / "suite.yaml").read_text()
        .replace("../../allowlists/ralf.yaml", str(REPO / "allowlists" / "ralf.yaml"))
        .replace("limits: {turns: 10, tool_calls: 16}", "limits: {turns: 2, tool_calls: 2}"))
    for name in FILES:
        text = (RALF / f"{name}.yaml").read_text()
        lines = [ln for ln in text.splitlines() if not ln.startswith("limits:")]
        (folder / f"{name}.yaml").write_text("\n".join(lines) + "\n")
    return folder


def play(folder: Path, suite: Path, urls: dict[str, str], tool_choice: dict[str, str],
         scenarios: dict[str, list[str]]) -> dict[str, Played]:
    """``agent-eval run`` of ``scenarios[model]`` against each model of ``urls`` with its
    ``tool_choice``: one run (and store) per model, all played at once in their own
    processes (each server has its own core), so the longest sets the wall time."""
    common = ("max_tokens: 32, concurrency: 1, timeout_s: 900, retries: 0, "
              "sampling: {temperature: 0, seed: 7}")
    procs = {}
    for model, url in urls.items():
        config = folder / f"{model}.yaml"
        config.write_text(
            f"targets:\n  - {{name: {model}, base_url: '{url}', model: {model}, "
            f"tool_choice: {tool_choice[model]}, {common}}}\n")
        db = folder / f"{model}.db"
        procs[model] = (db, subprocess.Popen(
            [sys.executable, "-m", "agent_eval", "run", "--config", str(config),
             "--suite", str(suite), "--db", str(db),
             *(f"--scenario={name}" for name in scenarios[model])],
            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, COLUMNS="160")))
    played = {}
    for model, (db, proc) in procs.items():
        out, err = proc.communicate(timeout=3600)  # a deadline that only catches a hang
        played[model] = Played(model, scenarios[model], out, err, proc.returncode, db)
    return played


def stored(played: Played) -> tuple[list, list]:
    """(sessions, calls) of the one run in ``played``'s store."""
    with open_store(str(played.db)) as store:
        [run] = store.list_runs()
        return list(store.session_rows([run.id])), list(store.call_rows([run.id]))


def stack_ended(sessions: list) -> list:
    """The sessions the serving stack ended (a call cut by the token limit, AE501; a reply
    the stack lost, AE5xx), each holding the stack fault that ended it: real servers at
    ``max_tokens: 32`` cut calls, and that is the stack's, never the model's or ours."""
    ended = [s for s in sessions if s.status == "error"
             and (s.error or "").startswith((TRUNCATED, STACK_FAULT))]
    for s in ended:
        code = "AE501" if s.error.startswith(TRUNCATED) else s.error[len(STACK_FAULT):][:5]
        assert (code, True) in s.stack_faults, (s.scenario, s.error, s.stack_faults)
    return ended


def check_played(played: dict[str, Played], *, called: str) -> dict[str, tuple[list, list]]:
    """The checks every real server passes; ``called``: the target whose tool choice
    forces a call in every session.  Returns {target: (sessions, calls)} for more."""
    rows = {}
    denied = set()
    for target, one in played.items():
        sessions, calls = rows[target] = stored(one)
        roots = [s for s in sessions if s.parent_id is None]
        assert sorted(s.scenario for s in roots) == one.scenarios, (one.output, one.stderr)
        assert {s.target for s in sessions} == {target}
        cut = stack_ended(sessions)
        errors = [(s.scenario, s.error) for s in sessions if s.status == "error" and s not in cut]
        assert errors == [], errors  # no server refused a request, nothing failed on our side
        assert {s.status for s in sessions if s not in cut} <= {"completed", "stalled",
                                                               "abandoned"}
        # the only server words kept: a later turn outgrew the window (a run-away call under
        # `auto` or a long tool result), or a reply the model wrote filled it
        # (llama-cpp-python's 500 "could not broadcast ... into shape (0,)", on any turn);
        # either ends the session `stalled` like a turn limit
        overflowed = [(s, context_overflow(s.error or "")) for s in sessions
                      if s.error and s not in cut]
        assert all(s.status == "stalled" and seen is not None
                   and (s.n_turns >= 1 or seen.writing)
                   for s, seen in overflowed), [(s.scenario, s.status, s.n_turns, s.error)
                                                for s, _ in overflowed]
        assert all(c.decision in ("allow", "deny") for c in calls)
        if target == called:  # a call in every session the stack did not cut short
            assert len(calls) >= len(one.scenarios) - len(cut)
        denied |= {c.primary for c in calls if c.decision == "deny"}
        # the closing table: the target's row, with the failure-class breakdown
        assert target in one.output, one.output
        if one.exit_code != 0:  # only allowed: SmolLM2 answered every task in text
            assert (target, one.exit_code) == ("smollm2", 3), (one.output, one.stderr)
            assert "target 'smollm2' produced no judged tool call" in one.stderr
    assert denied and all(code.startswith("AE") for code in denied), denied
    assert any(code in one.output for one in played.values() for code in denied)
    return rows
