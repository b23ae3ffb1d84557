"""Side requests: what agent CLIs ask their model besides the conversation.  Pure.

An agent CLI sends requests of its own next to the user's conversation: OpenCode asks for
a title for each new conversation, Qwen Code for a managed-memory extraction after a
turn (a request that carries the whole conversation under another system prompt, with
six tools).  They are not sessions of the stack: the proxy tags them ``side-request``
(shown, filtered with ``--tag side-request``, left out of the run's counts) and the
simulator answers them with text, never with a scenario's call.

Two rules, first match wins (docs/proxy.md "Side requests"):

- a known side request: the request's system prompt opens with one of
  :data:`SIDE_REQUESTS` (each read off the CLI's captured request,
  ``tests/fixtures/clis``);
- a one-turn conversation that offered no tool and got no call back
  (:func:`tool_less_turn`), as any CLI's title, summary or topic request is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_eval.wire.records import text_of

SIDE_REQUEST_TAG = "side-request"
"""The tag of a session that is a side request; ``side:<name>`` names a known one."""


@dataclass(frozen=True)
class SideRequest:
    """A known side request: its name, the CLI that sends it, how its prompt opens."""

    name: str
    client: str
    opening: str


SIDE_REQUESTS: tuple[SideRequest, ...] = (
    SideRequest("title", "OpenCode 1.18", "You are a title generator."),
    SideRequest("memory-extraction", "Qwen Code 0.24",
                "You are now acting as the managed memory extraction subagent"),
)


def side_request_of(messages: list[Any]) -> str | None:
    """The name of the known side request these (chat) messages are, or None: the
    leading system or developer message opens with its prompt."""
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer"):
            return None
        text = text_of(m.get("content")).lstrip()
        if text:
            return next((s.name for s in SIDE_REQUESTS if text.startswith(s.opening)), None)
    return None


def tool_less_turn(request: dict[str, Any] | None, calls: int) -> bool:
    """Whether one turn's chat request offered no tool and its reply made no call."""
    tools = request.get("tools") if isinstance(request, dict) else None
    return not tools and calls == 0
