"""A small store with known counts, for the query layer, the CLI twins and the viewer.

Run "nightly" (live), targets ``careful`` and ``sloppy``:

- careful/pipe/0: AE301 (``| head -5``, with a hostile note) then allowed; completed,
  handshake 1/1; spawned a child session (evaluator-step, one allowed call);
- careful/clean/0: one allowed call, completed, no handshake;
- sloppy/pipe/0: AE301 then AE304, abandoned, handshake 0/2, tags ralf + db;
- sloppy/fault/0: server fault, no call, status error.

A second run "nightly" (rescore-free, older status ``failed``) holds one clean session.
Calls are judged by the real policy engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_eval.policy import load_allowlist
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
    assign_next_actions,
)
from support.factories import add_run, judged_bash

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = load_allowlist(REPO / "allowlists" / "ralf.yaml")
SCRIPT_TAG = "<script>alert(1)</script>"
JS_LINK = "javascript:alert(document.cookie)"
ESC = "\x1b[31mRED\x1b[0m"
HOSTILE = f"{SCRIPT_TAG} [x]({JS_LINK}) {ESC}"
PIPED = "uv run scripts/db_query.py --sql \"SELECT 1\" | head -5"
CHAINED = "uv run scripts/fetch_context.py --no-attach --agent researcher && ls"
ALLOWED = "uv run scripts/fetch_context.py --no-attach --agent researcher"
T0 = datetime(2025, 6, 9, 7, 0, tzinfo=UTC)


def judged(index: int, turn: int, command: str, output: str = "ok", **kw) -> CallRecord:
    return judged_bash(index, turn, command, ALLOWLIST, output=output, **kw)


def record(key: str, calls: list[CallRecord], *, status="completed", **kw) -> SessionRecord:
    target, scenario, _ = key.split("/", 2)
    assign_next_actions(calls)
    n_turns = 1 + max((c.turn_index for c in calls), default=-1)
    turns = [TurnRecord(index=i, content=f"reply {i} {HOSTILE}", reasoning="thinking")
             for i in range(n_turns)]
    return SessionRecord(key=key, target=target, scenario=kw.pop("scenario", scenario),
                         status=status, turns=turns, calls=calls,
                         messages=[{"role": "system", "content": "system"},
                                   {"role": "user", "content": f"task {HOSTILE}"}],
                         started_at=T0, finished_at=T0 + timedelta(seconds=30), **kw)


@dataclass(frozen=True)
class Filled:
    run_id: int
    old_run_id: int
    ids: dict[str, int]


def fill(store) -> Filled:
    old = add_run(store, [record("careful/clean/0", [judged(0, 0, ALLOWED)])], suite="s",
                  targets={"careful": "m"}, settings={"api_key": "sk-secret-do-not-show"},
                  status="failed")

    run_id = add_run(store, suite="s", targets=("careful", "sloppy"))
    pipe = record("careful/pipe/0",
                  [judged(0, 0, PIPED, f"denied {HOSTILE}"),
                   judged(1, 1, ALLOWED, child_key="careful/pipe/0/child")],
                  handshake=HandshakeResult(1, 1, True), tags=["ralf"])
    child = record("careful/pipe/0/child", [judged(0, 0, ALLOWED)], scenario="evaluator-step",
                   parent_key=pipe.key)
    store.record_sessions(run_id, [pipe, child])
    store.record_session(run_id, record("careful/clean/0", [judged(0, 0, ALLOWED)]))
    store.record_session(run_id, record(
        "sloppy/pipe/0", [judged(0, 0, PIPED), judged(1, 1, CHAINED)], status="abandoned",
        handshake=HandshakeResult(2, 0, False, "update_attempt_outcome.py"),
        tags=["ralf", "db"]))
    store.record_session(run_id, record("sloppy/fault/0", [], status="error",
                                        error=f"server answered 500 {HOSTILE}"))
    store.set_run_status(run_id, "finished")
    keys = ("careful/pipe/0", "careful/pipe/0/child", "careful/clean/0", "sloppy/pipe/0",
            "sloppy/fault/0")
    return Filled(run_id, old, {k: store.find_session(run_id, k) for k in keys})
