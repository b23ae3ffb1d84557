"""Read mini-swe-agent ``.traj.json`` trajectories (bash-only agent, one action a reply).

The model answers in text; the harness takes exactly one fenced ```` ```bash ```` block
as the action.  Each assistant reply therefore becomes one call:

* exactly one block: a ``bash`` call whose command is the block, output = the next
  user message (``<returncode>..</returncode><output>..``).  The harness has no
  permission layer, so no source verdict is kept for these;
* zero or several blocks: a **format error**.  The harness rejected the reply, which we
  keep as the source verdict ``deny``; the call carries the raw reply as its arguments
  (not a JSON object), so our engine reports it malformed (AE102).

Session status: ``Submitted`` is ``completed``; ``LimitsExceeded`` (step or cost limit)
is ``stalled``; any other exit status (an exception name such as ``RuntimeError``) is a
harness ``error``; a trajectory without an exit status is ``completed``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.source import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    load_json_document,
    text_of,
)
from agent_eval.transcript import ExitState, TurnRecord

ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
"""mini-swe-agent's default action pattern (``DefaultAgent.action_regex``)."""


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the one session of a ``.traj.json`` file."""
    path = Path(path)
    doc = load_json_document(path)
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ConfigError(
            "not a mini-swe-agent trajectory: expected an object with `messages`; "
            "pass a .traj.json file or pick another FORMAT",
            path=str(path),
        )
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    agent = config.get("agent") if isinstance(config.get("agent"), dict) else {}
    pattern = re.compile(agent.get("action_regex") or ACTION_REGEX, re.DOTALL)
    session = ImportedSession(
        id=str(doc.get("instance_id") or path.name.removesuffix(".traj.json")),
        model=model or _model_of(info, config),
    )
    session.status, session.error = exit_state(info.get("exit_status"))
    turn = -1
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            continue
        session.messages.append({"role": msg.get("role"), "content": msg.get("content")})
        if msg.get("role") != "assistant":
            continue
        turn += 1
        content = text_of(msg.get("content"))
        session.turns.append(_turn(turn, content, msg.get("extra")))
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        output = text_of(nxt.get("content")) if isinstance(nxt, dict) and nxt.get("role") == "user" else ""
        session.calls.append(call_from_reply(content, turn, output, pattern))
    yield session


def call_from_reply(content: str, turn: int, output: str, pattern: re.Pattern[str]) -> ImportedCall:
    """The one call a reply makes: its bash action, or a format error (pure)."""
    actions = pattern.findall(content)
    if len(actions) == 1:
        command = actions[0].strip()
        return ImportedCall(
            tool="bash", arguments=json.dumps({"command": command}, ensure_ascii=False),
            turn_index=turn, kind="bash", text=command, output=output,
        )
    return ImportedCall(
        tool="bash", arguments=content, turn_index=turn, kind="bash", text=None,
        output=output, source_decision="deny",
        source_reason=f"format error: {len(actions)} actions (exactly one expected)",
    )


def exit_state(status: Any) -> tuple[ExitState, str | None]:
    """Map a mini-swe-agent exit status onto our session exit state."""
    if status is None or status == "Submitted":
        return "completed", None
    if status == "LimitsExceeded":
        return "stalled", None
    return "error", f"harness exit status: {status}"


def _model_of(info: dict[str, Any], config: dict[str, Any]) -> str:
    model_cfg = config.get("model") if isinstance(config.get("model"), dict) else {}
    name = model_cfg.get("model_name")
    return str(name) if name else "unknown"


def _turn(index: int, content: str, extra: Any) -> TurnRecord:
    turn = TurnRecord(index=index, content=content)
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return turn
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
    turn.prompt_tokens = usage.get("prompt_tokens")
    turn.completion_tokens = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details") or {}
    turn.reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    cached = usage.get("prompt_tokens_details") or {}
    turn.cached_tokens = cached.get("cached_tokens") if isinstance(cached, dict) else None
    choices = response.get("choices") or []
    if choices and isinstance(choices[0], dict):
        turn.finish_reason = choices[0].get("finish_reason")
        message = choices[0].get("message") or {}
        if isinstance(message, dict) and isinstance(message.get("reasoning"), str):
            turn.reasoning = message["reasoning"]
    return turn
