"""Read mini-swe-agent trajectories: the early bare list of messages (0.x, before
``trajectory_format`` existed), ``.traj.json`` objects of 1.x, and 2.x (2.0 to 2.2,
``trajectory_format: mini-swe-agent-1.1``) with text or tool-call models.

Where the command is depends on the model class, and the reader takes it from there:

* tool-call models (2.x ``LitellmToolcallModel`` and friends): each entry of the
  assistant message's ``tool_calls`` (a ``bash`` function, ``{"command": ...}``) is one
  call, its output the ``role: tool`` message with the same ``tool_call_id``; Responses
  API models store the raw response (``output`` items of type ``function_call``) and
  ``function_call_output`` items;
* text models: the parsed ``extra.actions`` of the reply (2.x) or, without them,
  exactly one fenced block of the reply (```` ```bash ```` up to 1.x,
  ```` ```mswea_bash_command ```` in 2.x, or the configured ``action_regex``); output =
  the next user message (``<returncode>..</returncode><output>..``).

The harness has no permission layer, so no source verdict is kept for a call it ran.  A
**format error** (no action, several text blocks, a tool call that is not ``bash`` or has
no ``command``) was rejected by the harness: it is one call carrying the raw reply (or
arguments) with the source verdict ``deny``, and our engine reports it malformed (AE102).

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
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    dict_field,
    list_field,
    load_json_document,
    text_of,
)
from agent_eval.transcript import ExitState, TurnRecord

ACTION_REGEX = r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```"
"""mini-swe-agent's default action patterns (``bash`` up to 1.x, ``mswea_bash_command`` 2.x)."""


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield the one session of a trajectory file (an object with ``messages`` or the
    early bare list of messages)."""
    path = Path(path)
    doc = load_json_document(path)
    if isinstance(doc, list):
        doc = {"messages": doc}
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list) or not any(_is_message(m) for m in messages):
        raise ConfigError(
            "not a mini-swe-agent trajectory: expected an object with `messages` or a "
            "list of chat messages; pass a .traj.json file or pick another FORMAT",
            path=str(path),
        )
    info = dict_field(doc, "info")
    config = dict_field(info, "config")
    agent = dict_field(config, "agent")
    try:
        pattern = re.compile(str(agent.get("action_regex") or ACTION_REGEX), re.DOTALL)
    except re.error:
        pattern = re.compile(ACTION_REGEX, re.DOTALL)
    session = ImportedSession(
        id=str(doc.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj")),
        model=model or _model_of(config, messages),
    )
    session.status, session.error = exit_state(info.get("exit_status") or _last_exit(messages))
    outputs = _tool_outputs(messages)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            continue
        if msg.get("object") == "response" or "role" in msg:
            session.messages.append({"role": msg.get("role") or "assistant",
                                     "content": text_of(msg.get("content") or _response_text(msg))})
        if msg.get("role") != "assistant" and msg.get("object") != "response":
            continue
        turn = len(session.turns)
        content = text_of(msg.get("content")) if msg.get("role") else _response_text(msg)
        session.turns.append(_turn(turn, content, msg.get("extra")))
        session.calls.extend(calls_of_reply(msg, content, turn, _next_output(messages, i), outputs, pattern))
    yield session


def calls_of_reply(
    msg: dict[str, Any], content: str, turn: int, output: str,
    outputs: dict[str, str], pattern: re.Pattern[str],
) -> list[ImportedCall]:
    """The calls one assistant reply makes, from where the harness put them (pure)."""
    tool_calls = _tool_calls(msg)
    if tool_calls:
        return [call_from_tool_call(tc, turn, outputs) if isinstance(tc, dict) else
                ImportedCall(tool="bash", arguments=json.dumps(tc, ensure_ascii=False, default=str),
                             turn_index=turn, kind="bash", source_decision="deny",
                             source_reason="format error: a tool call that is not an object")
                for tc in tool_calls]
    extra = dict_field(msg, "extra")
    actions = extra.get("actions")
    if isinstance(actions, list) and actions and all(
        isinstance(a, dict) and isinstance(a.get("command"), str) for a in actions
    ):
        return [_bash_call(a["command"], turn, output) for a in actions]
    return [call_from_reply(content, turn, output, pattern)]


def call_from_tool_call(tc: dict[str, Any], turn: int, outputs: dict[str, str]) -> ImportedCall:
    """One call from a chat ``tool_calls`` entry or a Responses ``function_call`` item (pure)."""
    function = tc.get("function")
    if not isinstance(function, dict):
        function = tc
    name = str(function.get("name") or "")
    raw = function.get("arguments")
    arguments = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    call_id = tc.get("call_id") or tc.get("id")
    output = outputs.get(str(call_id), "")
    try:
        args = json.loads(arguments) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        args = None
    command = args.get("command") if isinstance(args, dict) else None
    if name == "bash" and isinstance(command, str):
        call = _bash_call(command, turn, output)
        call.call_id = str(call_id) if call_id is not None else None
        return call
    return ImportedCall(
        tool=name or "bash", arguments=arguments, turn_index=turn, kind="bash" if name == "bash" else "other",
        text=None, call_id=str(call_id) if call_id is not None else None, output=output,
        source_decision="deny", source_reason="format error: not a bash call with a `command`",
    )


def call_from_reply(content: str, turn: int, output: str, pattern: re.Pattern[str]) -> ImportedCall:
    """The one call a text reply makes: its bash action, or a format error (pure)."""
    actions = pattern.findall(content)
    if len(actions) == 1 and isinstance(actions[0], str):
        return _bash_call(actions[0].strip(), turn, output)
    return ImportedCall(
        tool="bash", arguments=content, turn_index=turn, kind="bash", text=None,
        output=output, source_decision="deny",
        source_reason=f"format error: {len(actions)} actions (exactly one expected)",
    )


def _bash_call(command: str, turn: int, output: str) -> ImportedCall:
    return ImportedCall(
        tool="bash", arguments=json.dumps({"command": command}, ensure_ascii=False),
        turn_index=turn, kind="bash", text=command, output=output,
    )


def _is_message(m: Any) -> bool:
    return isinstance(m, dict) and ("role" in m or m.get("object") == "response")


def _tool_calls(msg: dict[str, Any]) -> list[Any]:
    if msg.get("object") == "response":
        output = list_field(msg, "output")
        return [o for o in output if isinstance(o, dict) and o.get("type") == "function_call"]
    calls = msg.get("tool_calls")
    return list(calls) if isinstance(calls, list) else []


def _tool_outputs(messages: list[Any]) -> dict[str, str]:
    """Tool results by call id: ``role: tool`` messages and ``function_call_output`` items."""
    found: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool" and m.get("tool_call_id") is not None:
            found[str(m["tool_call_id"])] = text_of(m.get("content"))
        elif m.get("type") == "function_call_output" and m.get("call_id") is not None:
            found[str(m["call_id"])] = text_of(m.get("output"))
    return found


def _next_output(messages: list[Any], i: int) -> str:
    nxt = messages[i + 1] if i + 1 < len(messages) else None
    return text_of(nxt.get("content")) if isinstance(nxt, dict) and nxt.get("role") == "user" else ""


def _response_text(msg: dict[str, Any]) -> str:
    output = list_field(msg, "output")
    texts = [text_of(o.get("content")) for o in output if isinstance(o, dict) and o.get("type") == "message"]
    return "\n".join(texts)


def _last_exit(messages: list[Any]) -> Any:
    for m in reversed(messages[-3:]):
        extra = m.get("extra") if isinstance(m, dict) else None
        if isinstance(extra, dict) and extra.get("exit_status"):
            return extra["exit_status"]
    return None


def exit_state(status: Any) -> tuple[ExitState, str | None]:
    """Map a mini-swe-agent exit status onto our session exit state."""
    if status is None or status == "Submitted":
        return "completed", None
    if status == "LimitsExceeded":
        return "stalled", None
    return "error", f"harness exit status: {status}"


def _model_of(config: dict[str, Any], messages: list[Any]) -> str:
    model_cfg = dict_field(config, "model")
    name = model_cfg.get("model_name")
    if name:
        return str(name)
    for m in messages:
        extra = m.get("extra") if isinstance(m, dict) else None
        response = extra.get("response") if isinstance(extra, dict) else None
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            return response["model"]
        if isinstance(m, dict) and m.get("object") == "response" and isinstance(m.get("model"), str):
            return m["model"]
    return "unknown"


def _turn(index: int, content: str, extra: Any) -> TurnRecord:
    turn = TurnRecord(index=index, content=content)
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return turn
    usage = dict_field(response, "usage")
    turn.prompt_tokens = usage.get("prompt_tokens")
    turn.completion_tokens = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details") or {}
    turn.reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    cached = usage.get("prompt_tokens_details") or {}
    turn.cached_tokens = cached.get("cached_tokens") if isinstance(cached, dict) else None
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        turn.finish_reason = choices[0].get("finish_reason")
        message = choices[0].get("message") or {}
        if isinstance(message, dict) and isinstance(message.get("reasoning"), str):
            turn.reasoning = message["reasoning"]
    return turn
