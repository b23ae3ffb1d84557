"""Read SWE-agent trajectories: 0.x ``.traj`` files (``trajectory`` steps) and 1.x files,
which add ``replay_config`` and may hold only ``history`` (demonstrations).

Each ``trajectory`` step is one call of the shell tool: the action text is judged as a
bash command (an ACI command like ``edit 287:295`` is a program the allow-list does not
list), the observation is its output.  A file with no ``trajectory`` reads its
``history``: each assistant message with an ``action`` is one call (for function-calling
agents the action is the command SWE-agent rendered from the tool call), its output the
next ``tool``/``user`` observation.  The harness has no permission layer, so no source
verdict is kept.

Model: ``replay_config.agent.model.name`` (1.x), else the first ``__``-separated part of
the run folder's name (``gpt4__swe-bench-dev__default__t-0.00...`` is ``gpt4``), which is
how SWE-agent names its output folders.  Status: ``submitted`` is ``completed``;
``submitted (exit_cost)`` and other ``exit_*`` limits are ``stalled``; any other exit
status is a harness ``error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    dict_field,
    load_json_document,
    text_of,
)
from agent_eval.transcript import ExitState, TurnRecord

TOOL = "swe-agent-shell"


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the one session of a ``.traj`` file."""
    path = Path(path)
    doc = load_json_document(path)
    if not isinstance(doc, dict) or not (
        isinstance(doc.get("trajectory"), list) or isinstance(doc.get("history"), list)
    ):
        raise ConfigError(
            "not a SWE-agent trajectory: expected an object with `trajectory` (0.x, 1.x) or "
            "`history` (1.x); pass a .traj file or pick another FORMAT", path=str(path),
        )
    info = dict_field(doc, "info")
    session = ImportedSession(id=path.name.removesuffix(".traj"), model=model or model_of(doc, path))
    session.status, session.error = exit_state(info.get("exit_status"))
    steps = doc.get("trajectory") if isinstance(doc.get("trajectory"), list) else None
    if steps:
        pairs = [(str(s.get("response") or ""), s.get("action"), s.get("observation"))
                 for s in steps if isinstance(s, dict)]
        for _ in range(len(steps) - len(pairs)):
            session.skip_call("a `trajectory` step that is not an object")
    else:
        pairs = history_steps(doc.get("history") or [])
    for turn, (response, action, observation) in enumerate(pairs):
        _add_step(session, turn, response, action, observation)
    yield session


def history_steps(history: list[Any]) -> list[tuple[str, Any, Any]]:
    """(response, action, observation) for each assistant action of a 1.x ``history`` (pure)."""
    steps: list[tuple[str, Any, Any]] = []
    for i, msg in enumerate(history):
        if not isinstance(msg, dict) or msg.get("role") != "assistant" or "action" not in msg:
            continue
        nxt = history[i + 1] if i + 1 < len(history) else None
        observation = (text_of(nxt.get("content"))
                       if isinstance(nxt, dict) and nxt.get("role") in ("tool", "user") else "")
        steps.append((text_of(msg.get("content")), msg.get("action"), observation))
    return steps


def _add_step(session: ImportedSession, turn: int, response: str, action: Any, observation: Any) -> None:
    command = action.strip() if isinstance(action, str) else None
    arguments = json.dumps({"command": command} if command is not None else {"action": action},
                           ensure_ascii=False)
    output = text_of(observation)
    session.turns.append(TurnRecord(index=turn, content=response))
    session.calls.append(ImportedCall(tool=TOOL, arguments=arguments, turn_index=turn, kind="bash",
                                      text=command, output=output))
    session.messages.append({"role": "assistant", "content": response,
                             "tool_calls": [{"id": f"step{turn}", "type": "function",
                                             "function": {"name": TOOL, "arguments": arguments}}]})
    session.messages.append({"role": "tool", "tool_call_id": f"step{turn}", "content": output})


def model_of(doc: dict[str, Any], path: Path) -> str:
    """The model a SWE-agent file names: its replay config, else its run folder (pure)."""
    config = doc.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError):
            config = None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") or model.get("model_name") if isinstance(model, dict) else None
    if isinstance(name, str) and name:
        return name
    folder = path.parent.name
    if "__" in folder:
        return folder.split("__", 1)[0]
    return "unknown"


def exit_state(status: object) -> tuple[ExitState, str | None]:
    """Map a SWE-agent exit status onto our session exit state."""
    if status in (None, "submitted"):
        return "completed", None
    if isinstance(status, str) and "exit_" in status:
        return "stalled", None
    return "error", f"harness exit status: {status}"
