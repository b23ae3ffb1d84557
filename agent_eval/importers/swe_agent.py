"""Read SWE-agent 0.x ``.traj`` trajectories (ACI commands such as ``open``/``edit`` plus
bash, one action per step).

Each ``trajectory`` step is one call of the shell tool: the action text is judged as a
bash command (an ACI command like ``edit 287:295`` is a program the allow-list does not
list), the observation is its output.  The harness has no permission layer, so no source
verdict is kept.  Status: ``submitted`` is ``completed``; ``submitted (exit_cost)`` and
other ``exit_*`` limits are ``stalled``; any other exit status is a harness ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from agent_eval.errors import ConfigError
from agent_eval.importers.source import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    load_json_document,
)
from agent_eval.transcript import ExitState, TurnRecord

TOOL = "swe-agent-shell"


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the one session of a ``.traj`` file."""
    path = Path(path)
    doc = load_json_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), list):
        raise ConfigError(
            "not a SWE-agent trajectory: expected an object with `trajectory`; "
            "pass a .traj file or pick another FORMAT", path=str(path),
        )
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    session = ImportedSession(id=path.name.removesuffix(".traj"), model=model or "unknown")
    session.status, session.error = exit_state(info.get("exit_status"))
    for turn, step in enumerate(s for s in doc["trajectory"] if isinstance(s, dict)):
        action = str(step.get("action") or "").strip()
        output = str(step.get("observation") or "")
        session.turns.append(TurnRecord(index=turn, content=str(step.get("response") or "")))
        session.calls.append(ImportedCall(
            tool=TOOL, arguments=json.dumps({"command": action}, ensure_ascii=False),
            turn_index=turn, kind="bash", text=action, output=output,
        ))
        session.messages.append({"role": "assistant", "content": str(step.get("response") or ""),
                                 "tool_calls": [{"id": f"step{turn}", "type": "function",
                                                 "function": {"name": TOOL, "arguments": session.calls[-1].arguments}}]})
        session.messages.append({"role": "tool", "tool_call_id": f"step{turn}", "content": output})
    yield session


def exit_state(status: object) -> tuple[ExitState, str | None]:
    """Map a SWE-agent exit status onto our session exit state."""
    if status in (None, "submitted"):
        return "completed", None
    if isinstance(status, str) and "exit_" in status:
        return "stalled", None
    return "error", f"harness exit status: {status}"
