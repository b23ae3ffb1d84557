"""Test doubles for replay: the simulator's behaviour in process (no HTTP) and a scripted
candidate.  Both answer ``complete`` (a live session) and ``resend`` (a replayed context)
the way ``ModelClient`` does, with the request they were sent kept on the reply."""

from __future__ import annotations

import json
from typing import Any

from agent_eval.live.client import Reply, ToolCallOut
from agent_eval.live.shaping import shape_messages
from agent_eval.scenario import Suite
from agent_eval.sim import get_profile
from agent_eval.sim.behaviour import first_user_text, index_tasks, plan_reply
from agent_eval.sim.completions import build_completion
from agent_eval.sim.server import conversation_rng
from agent_eval.wire.markup import find_tool_markup


class InProcessSim:
    """The simulator's reply to a conversation, drawn exactly as the HTTP server draws it
    (seed header, server seed, profile, message count), without a socket."""

    def __init__(self, profile: str, suite: Suite, seed: int = 0):
        self.profile = get_profile(profile)
        self.index = index_tasks(suite.scenarios.values())
        self.seed = seed

    async def complete(self, messages, tools=None, *, seed_key=None) -> Reply:
        body = {"model": self.profile.model_id,
                "messages": shape_messages(messages), "tools": tools, "tool_choice": "auto"}
        return self._answer(body, seed_key)

    async def resend(self, body: dict[str, Any], *, seed_key=None) -> Reply:
        body = dict(body, model=self.profile.model_id,
                    messages=shape_messages(body["messages"], send_reasoning=True))
        return self._answer(body, seed_key)

    def _answer(self, body: dict[str, Any], seed_key: str | None) -> Reply:
        messages = body["messages"]
        task = first_user_text(messages)
        rng = conversation_rng(self.seed, self.profile, seed_key or task, len(messages))
        planned = plan_reply(messages, self.index.find(task), self.profile, rng)
        done = build_completion(body, planned, model=body["model"], created=0, rng=rng)
        content = planned.content or ""
        reply = Reply(
            content=content, reasoning=planned.reasoning,
            tool_calls=[ToolCallOut(c.id, c.name, c.arguments) for c in done.calls],
            finish_reason=planned.finish_reason, prompt_tokens=None, completion_tokens=None,
            reasoning_tokens=None, cached_tokens=None, latency_s=0.0, ttft_s=None,
            decode_tps=None, markup=find_tool_markup(content))
        reply.request = body
        return reply


class ScriptedCandidate:
    """Answers each replayed context from ``script``: seed key → a text reply (str) or a
    list of ``(tool, arguments dict)`` calls.  Records every body it was sent."""

    def __init__(self, script: dict[str, Any]):
        self.script = script
        self.sent: list[tuple[str | None, dict[str, Any]]] = []

    async def resend(self, body: dict[str, Any], *, seed_key=None) -> Reply:
        self.sent.append((seed_key, body))
        step = self.script[seed_key]
        calls = [] if isinstance(step, str) else [
            ToolCallOut(f"call_{i}", name, json.dumps(args)) for i, (name, args) in enumerate(step)]
        reply = Reply(
            content=step if isinstance(step, str) else "", reasoning="", tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop", prompt_tokens=None,
            completion_tokens=None, reasoning_tokens=None, cached_tokens=None, latency_s=0.0,
            ttft_s=None, decode_tps=None)
        reply.request = dict(body, model="candidate")
        return reply
