"""``agent_eval.wire``: the model-server protocols agent CLIs and servers speak, each read
into (and written back from) the Chat Completions vocabulary the rest of agent-eval uses.

One module per protocol, each with the same narrow interface:

``NAME``                          the protocol's name, stored on proxied sessions
``matches(path)``                 whether a POST to ``path`` is this protocol's
``read_request(body, path)``      the request as a chat request (``messages``, ``tools``
                                  as chat function tools, every other field kept), or None
``write_request(chat)``           ``(path under the base URL, body)``: the inverse, for
                                  ``replay`` to resend a stored turn as it was recorded
``parse_reply(text, streamed=)``  the reply, whole or streamed, as a :class:`ParsedReply`
``render_reply(reply, stream=)``  (not chat) the reply as the server sends it, for the
                                  simulator

+-------------+-----------------------------------------------+--------------------------+
| protocol    | path                                          | clients / servers        |
+=============+===============================================+==========================+
| ``chat``    | ``/v1/chat/completions``                      | OpenCode, Qwen Code;     |
|             |                                               | every server             |
| ``responses``| ``/v1/responses``                            | Codex CLI; vLLM          |
| ``messages``| ``/v1/messages`` (``?beta=true``)             | Claude Code; llama-server|
| ``gemini``  | ``/v1beta/models/M:(stream)GenerateContent``  | Gemini CLI               |
+-------------+-----------------------------------------------+--------------------------+

Pure: bytes and dicts in, dicts and records out.  Imports nothing else of agent-eval, so
the proxy, the simulator and replay all use it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Literal

from agent_eval.wire import chat, gemini, messages, responses
from agent_eval.wire.records import ParsedCall, ParsedReply, ReplyStatus, json_object

Protocol = Literal["chat", "responses", "messages", "gemini"]
PROTOCOLS: dict[str, ModuleType] = {m.NAME: m for m in (chat, responses, messages, gemini)}
"""Every protocol by name, in the order they are tried."""

__all__ = ["PROTOCOLS", "ParsedCall", "ParsedReply", "Protocol", "ReplyStatus", "protocol_of",
           "read_request"]


def protocol_of(path: str) -> str | None:
    """The protocol a POST to ``path`` (no query string) speaks, or None."""
    for name, module in PROTOCOLS.items():
        if module.matches(path):
            return name
    return None


def read_request(protocol: str, body: bytes, path: str = "") -> dict[str, Any] | None:
    """The request body read as a chat request, or None when it is not one."""
    value = json_object(body.decode("utf-8", "replace"))
    if value is None:
        return None
    return PROTOCOLS[protocol].read_request(value, path)


def parse_reply(protocol: str, body: bytes, *, streamed: bool) -> ParsedReply:
    return PROTOCOLS[protocol].parse_reply(body.decode("utf-8", "replace"), streamed=streamed)


def write_request(protocol: str, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A stored (chat-form) request as ``protocol`` sends it: ``(path, body)``."""
    return PROTOCOLS[protocol].write_request(request)
