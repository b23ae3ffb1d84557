"""Helpers of the simulator's tests: the fixture suite's path, the opening messages of a
session, and an offline session player that judges calls the way the harness would (a
call is allowed when it is the next reference step; anything else gets the harness's
denial text)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_eval.scenario import LoadedScenario

FIXTURE_SUITE = Path(__file__).resolve().parents[1] / "sim" / "fixtures" / "suite"
DENIAL = (
    "Permission denied by the allow-list (AE301 pipe-to-filter): output piped into "
    "another program. Only `uv run scripts/<name>.py` with its listed flags is allowed."
)


def opening(scenario: LoadedScenario) -> list[dict[str, Any]]:
    """The first two messages of a session: system prompt and the task."""
    return [
        {"role": "system", "content": scenario.system_prompt()},
        {"role": "user", "content": scenario.spec.task},
    ]


def reference_call(scenario: LoadedScenario, index: int) -> tuple[str, dict[str, str]]:
    step = scenario.spec.reference[index]
    if step.bash is not None:
        return "bash", {"command": step.bash}
    return "read", {"path": step.read or ""}


Ask = Callable[[list[dict[str, Any]]], tuple[str | None, list[tuple[str, str, str]]]]
"""One model turn: messages in, (content, [(call id, tool name, argument text)]) out."""


def play_session(scenario: LoadedScenario, ask: Ask) -> list[tuple[str, str, bool]]:
    """Play one session to its end; returns every call as (tool, argument text, allowed)."""
    messages = opening(scenario)
    done = 0
    played: list[tuple[str, str, bool]] = []
    for _ in range(scenario.spec.limits.turns):
        content, calls = ask(messages)
        if not calls:
            break
        messages.append({
            "role": "assistant", "content": content,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
        })
        for call_id, name, arguments in calls:
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            allowed = done < len(scenario.spec.reference) and (name, parsed) == reference_call(
                scenario, done
            )
            done += allowed
            played.append((name, arguments, allowed))
            messages.append({
                "role": "tool", "tool_call_id": call_id,
                "content": '{"ok": true}' if allowed else DENIAL,
            })
        if len(played) >= scenario.spec.limits.tool_calls:
            break
    return played


def raw_post(base_url: str, body: dict[str, Any] | bytes, *, timeout: float = 10) -> tuple[int, str, bytes]:
    """POST to ``/chat/completions`` without the SDK: (status, content type, whole body)."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("POST", f"{url.path}/chat/completions", body=payload,
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def sse_events(body: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]


REPO = Path(__file__).resolve().parents[2]


def offline_ask(scenario: LoadedScenario, profile, key: str, intended: dict[str, str | None]) -> Ask:
    """An ``Ask`` that calls the planner directly (no HTTP), seeded as the server seeds
    it; records each emitted call's intended AE code in ``intended`` by argument text."""
    from agent_eval.sim.behaviour import plan_reply
    from agent_eval.sim.server import conversation_rng

    def ask(messages: list[dict[str, Any]]) -> tuple[str | None, list[tuple[str, str, str]]]:
        rng = conversation_rng(0, profile, key, len(messages))
        reply = plan_reply(messages, scenario, profile, rng)
        if reply.content and "<tool_call>" in reply.content:
            intended[reply.content] = "AE104"
        calls = []
        for i, call in enumerate(reply.calls):
            if call.intended is not None or call.arguments_json not in intended:
                intended[call.arguments_json] = call.intended  # a repeat keeps the first code
            calls.append((f"call-{len(messages)}-{i}", call.tool, call.arguments_json))
        return reply.content, calls

    return ask
