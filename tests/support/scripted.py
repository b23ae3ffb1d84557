"""A scripted chat model: the unit-test double for the orchestrator (no HTTP).

Each step of the script is one reply: a string (final text, no tool call), a list of
``(tool_name, arguments)`` pairs (tool calls; ``arguments`` a dict, or a raw string sent
as-is, e.g. malformed JSON), a ready ``Reply``, or an exception instance to raise
(e.g. ``HarnessFault``).  When the script runs out, the model answers "done".
End-to-end tests use the ``agent_eval.sim`` server over real HTTP instead.
"""

from __future__ import annotations

import json
from typing import Any

from agent_eval.live.client import Reply, ToolCallOut
from agent_eval.wire.markup import find_tool_markup


class ScriptedModel:
    def __init__(self, script: list[Any]):
        self.script = list(script)
        self.requests: list[list[dict[str, Any]]] = []  # the messages of every request

    async def complete(self, messages, tools=None, *, seed_key=None) -> Reply:
        self.requests.append([dict(m) for m in messages])
        step = self.script.pop(0) if self.script else "done"
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, Reply):
            return step
        if isinstance(step, str):
            return _reply(content=step, markup=find_tool_markup(step))
        calls = [
            ToolCallOut(id=f"call_{len(self.requests)}_{i}", name=name,
                        arguments=args if isinstance(args, str) else json.dumps(args))
            for i, (name, args) in enumerate(step)
        ]
        return _reply(tool_calls=calls)


def _reply(*, content: str = "", tool_calls=(), markup=()) -> Reply:
    return Reply(
        content=content, reasoning="", tool_calls=list(tool_calls),
        finish_reason="tool_calls" if tool_calls else "stop", prompt_tokens=100,
        completion_tokens=20, reasoning_tokens=None, cached_tokens=None, latency_s=0.01,
        ttft_s=None, decode_tps=2000.0, markup=list(markup),
    )
