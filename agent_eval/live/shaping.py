"""Conversation shaping: the message list as every major OpenAI-compatible server takes it.

Servers disagree on the edges of the chat schema, and a request one of them refuses is
refused the same way every time, so a whole run ends in ``error`` sessions (see
docs/servers.md).  :func:`shape_messages` writes the one form all of them accept, by
default and with no knob:

- an assistant turn with tool calls carries ``content: ""`` (or the model's text), never
  ``null`` and never no key: llama-cpp-python's server answers 500 to ``null``
  (llama-cpp-python#1805) and to a missing ``content``;
- an assistant turn with neither text nor tool calls is left out: vLLM answers 400 to an
  empty assistant message (vllm#21089); ``tool_calls: []`` is dropped, not sent;
- tool-call ids are kept as the server gave them; a missing one is made up (9 letters and
  digits, unique in the conversation: Mistral templates refuse any other length) and the
  tool result that answers it gets the same id;
- tool-call arguments and tool results are strings (JSON text when they were objects);
- reasoning (``reasoning_content`` / ``reasoning``) is not sent back unless the target asks
  (``send_reasoning``): most chat templates drop it and some servers refuse the field.

Pure: the input list is not modified.
"""

from __future__ import annotations

from typing import Any

from agent_eval.transcript import as_text

_REASONING_KEYS = ("reasoning_content", "reasoning")


def made_up_call_id(turn: int, index: int) -> str:
    """An id for a tool call the server sent without one: ``call`` + 5 digits (9 chars)."""
    return f"call{turn % 1000:03d}{index % 100:02d}"


def shape_messages(messages: list[dict[str, Any]], *, send_reasoning: bool = False
                   ) -> list[dict[str, Any]]:
    """The conversation as it goes on the wire; see the module docstring for the rules."""
    shaped: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of the last assistant turn's calls not yet answered
    for turn, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            out = _shape_assistant(message, turn, send_reasoning)
            if out is None:
                continue
            pending = [tc["id"] for tc in out.get("tool_calls", ())]
        elif role == "tool":
            out = dict(message, content=as_text(message.get("content")))
            call_id = out.get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
            elif pending:
                out["tool_call_id"] = pending.pop(0)
        else:
            out = dict(message)
            if out.get("content") is None:
                out["content"] = ""
        shaped.append(out)
    return shaped


def _shape_assistant(message: dict[str, Any], turn: int, send_reasoning: bool
                     ) -> dict[str, Any] | None:
    out = {k: v for k, v in message.items() if send_reasoning or k not in _REASONING_KEYS}
    calls = [_shape_call(tc, turn, i) for i, tc in enumerate(out.pop("tool_calls", None) or ())]
    content = out.get("content")
    out["content"] = content if content is not None else ""
    if calls:
        out["tool_calls"] = calls
    elif out["content"] == "" or out["content"] == []:
        return None
    return out


def _shape_call(call: Any, turn: int, index: int) -> dict[str, Any]:
    call = call if isinstance(call, dict) else {}
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    return {
        "id": str(call.get("id") or made_up_call_id(turn, index)),
        "type": "function",
        "function": {"name": str(fn.get("name") or ""), "arguments": as_text(fn.get("arguments"))},
    }


