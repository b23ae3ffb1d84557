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
from pathlib import Path

from click.testing import CliRunner, Result

from agent_eval.cli import main
from agent_eval.live.context import context_overflow
from agent_eval.scenario import load_suite
from agent_eval.store import open_store

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
ALL_SCENARIOS = sorted(sc.name for sc in load_suite(RALF).top_level())  # the 29 top-level
# The llama-server test plays four that cover the shapes (a plain script call, a read, a
# closing handshake that spawns an evaluator child, a calendar task): with these models it
# gets no tool call (docs/servers.md), so more scenarios would measure nothing more.
# AGENT_EVAL_INTEROP_SCENARIOS=all plays all 29 there too.  (The llama-cpp-python test
# plays the whole suite in CI: test_llama_cpp_python.py.)
CI_SCENARIOS = sorted(["lights-dim-office", "calendar-week-overview",
                       "research-benchmark-data-missing", "read-runbook-restart"])
SCENARIOS = (ALL_SCENARIOS if os.environ.get("AGENT_EVAL_INTEROP_SCENARIOS") == "all"
             else CI_SCENARIOS)
FILES = sorted(p.stem for p in RALF.glob("*.yaml") if p.stem != "suite")  # + child templates


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
         scenarios: list[str] = SCENARIOS) -> tuple[Result, Path]:
    """``agent-eval run`` of ``scenarios``, one target per model of ``urls`` with its
    ``tool_choice``: (CLI result, store path)."""
    db = folder / "interop.db"
    common = ("max_tokens: 32, concurrency: 1, timeout_s: 900, retries: 0, "
              "sampling: {temperature: 0, seed: 7}")
    config = folder / "targets.yaml"
    config.write_text("targets:\n" + "".join(
        f"  - {{name: {model}, base_url: '{url}', model: {model}, "
        f"tool_choice: {tool_choice[model]}, {common}}}\n" for model, url in urls.items()))
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--suite", str(suite),
                                       "--db", str(db),
                                       *(f"--scenario={name}" for name in scenarios)])
    return result, db


def check_played(result: Result, db: Path, *, called: str,
                 scenarios: list[str] = SCENARIOS) -> tuple[list, list]:
    """The checks every real server passes; ``called``: the target whose tool choice
    forces a call in every session.  Returns (sessions, calls) for more."""
    with open_store(str(db)) as store:
        [run] = store.list_runs()
        sessions = list(store.session_rows([run.id]))
        calls = list(store.call_rows([run.id]))
    roots = [s for s in sessions if s.parent_id is None]
    by_target = {s.id: s.target for s in sessions}
    targets = sorted({s.target for s in roots})
    per_target = {t: sorted(s.scenario for s in roots if s.target == t) for t in targets}
    assert per_target == {"gemma3": scenarios, "smollm2": scenarios}, (result.output,
                                                                      result.exception)
    errors = [(s.target, s.scenario, s.error) for s in sessions if s.status == "error"]
    assert errors == [], errors  # no server refused a request, nothing failed on our side
    assert {s.status for s in sessions} <= {"completed", "stalled", "abandoned"}
    # the only server words kept: a later turn outgrew the window (a run-away call under
    # `auto` or a long tool result), or a reply the model wrote filled it (llama-cpp-python's
    # 500 "could not broadcast ... into shape (0,)", on any turn); either ends the session
    # `stalled` like a turn limit
    overflowed = [(s, context_overflow(s.error or "")) for s in sessions if s.error]
    assert all(s.status == "stalled" and seen is not None and (s.n_turns >= 1 or seen.writing)
               for s, seen in overflowed), [(s.target, s.scenario, s.status, s.n_turns, s.error)
                                            for s, _ in overflowed]
    assert all(c.decision in ("allow", "deny") for c in calls)
    assert sum(by_target[c.session_id] == called for c in calls) >= len(scenarios)
    classes = {c.primary for c in calls if c.decision == "deny"}
    assert classes and all(code.startswith("AE") for code in classes), classes
    # the closing table: one row per target, with the failure-class breakdown
    assert "gemma3" in result.output and "smollm2" in result.output
    assert any(code in result.output for code in classes), result.output
    if result.exit_code != 0:  # only allowed: SmolLM2 answered every task in text
        assert result.exit_code == 3, result.output
        assert "target 'smollm2' produced no judged tool call" in result.stderr
    return sessions, calls
