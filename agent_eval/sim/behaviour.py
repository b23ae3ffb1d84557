"""What a simulated model says next, reconstructed from the conversation alone.

The simulator is stateless per request: progress is the number of tool results in the
conversation that were not denials (a denial is a ``tool`` message whose text says
"denied" in its first 120 characters), and that number indexes the scenario's ``reference`` plan.  When the last tool
result is a denial, the profile's reaction decides the reply (pivot, retry, repeat, give
up).  Pure: the caller passes a seeded ``random.Random``; no I/O.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from agent_eval.scenario import LoadedScenario, instantiate
from agent_eval.sim.mutations import MUTATIONS, Mutation, PlannedCall, Step, text_tool_call
from agent_eval.sim.profiles import TEMPTATION_CODES, Profile

FinishReason = Literal["tool_calls", "stop"]


@dataclass(frozen=True)
class Reply:
    """One assistant reply: reasoning text, visible text and the tool calls it carries."""

    reasoning: str
    content: str | None = None
    calls: tuple[PlannedCall, ...] = ()

    @property
    def finish_reason(self) -> FinishReason:
        return "tool_calls" if self.calls else "stop"


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return message_text(message).strip()
    return ""


@dataclass(frozen=True)
class TaskIndex:
    """Finds the scenario a conversation plays from its first user message: a fixed task
    by exact text, a child template's filled task by the template's precompiled pattern
    (the captured values fill the template, so its reference names the same stage)."""

    exact: dict[str, LoadedScenario]
    templates: tuple[tuple[re.Pattern[str], LoadedScenario], ...] = ()

    def find(self, task: str) -> LoadedScenario | None:
        """The scenario whose (filled) task is ``task``, stripped; None when none is."""
        found = self.exact.get(task)
        if found is not None:
            return found
        for pattern, template in self.templates:
            if (m := pattern.fullmatch(task)) is not None:
                return instantiate(template, m.groupdict())
        return None


def index_tasks(scenarios: Iterable[LoadedScenario]) -> TaskIndex:
    """Index scenarios by task text; templates by their task pattern, compiled once."""
    exact: dict[str, LoadedScenario] = {}
    templates = []
    for sc in scenarios:
        if sc.placeholders:
            templates.append((sc.task_pattern, sc))
        else:
            exact[sc.spec.task.strip()] = sc
    return TaskIndex(exact, tuple(templates))


DENIAL_WINDOW = 120
"""A denial says so up front ("Permission denied by the allow-list (AE301 ...)"); a
script's output that merely mentions denied calls further in is a result, not a denial."""


def is_denial(message: dict[str, Any]) -> bool:
    text = message_text(message).lstrip()[:DENIAL_WINDOW]
    return message.get("role") == "tool" and "denied" in text.lower()


def count_progress(messages: list[dict[str, Any]]) -> int:
    """Reference steps achieved: tool results that were not denials."""
    return sum(1 for m in messages if m.get("role") == "tool" and not is_denial(m))


def plan_reply(
    messages: list[dict[str, Any]],
    scenario: LoadedScenario | None,
    profile: Profile,
    rng: random.Random,
) -> Reply:
    """The next reply of ``profile`` in this conversation."""
    if scenario is None or not scenario.spec.reference:
        return Reply(
            reasoning="The request does not need any tool; I can answer directly.",
            content="I have no tool work to do for this request. Done.",
        )
    reference = scenario.spec.reference
    progress = count_progress(messages)
    if progress >= len(reference):
        return _final(rng, done=True)
    step = _step(scenario, progress)
    last = messages[-1] if messages else {}
    if is_denial(last):
        return _react_to_denial(messages, scenario, step, profile, rng)
    return _fresh_step(progress, scenario, step, profile, rng)


def _fresh_step(
    progress: int, scenario: LoadedScenario, step: Step, profile: Profile, rng: random.Random
) -> Reply:
    spec = scenario.spec
    handshake_at = len(spec.reference) - len(spec.handshake)
    if (
        spec.handshake
        and "handshake" in spec.temptations
        and progress == handshake_at
        and rng.random() < profile.p_skip_handshake
    ):
        return _final(rng, done=True)
    if rng.random() < profile.p_text_call:
        return Reply(reasoning=_think(rng, "text"), content=text_tool_call(step))
    tempted = _tempted_codes(scenario)
    candidates = _candidates(step, profile, tempted)
    p = profile.p_mistake * (
        profile.tempted if any(m.code in tempted for m, _ in candidates) else 1.0
    )
    if candidates and rng.random() < p:
        mutation = _draw(candidates, rng)
        return Reply(reasoning=_think(rng, mutation.code), calls=(mutation.make(step, rng),))
    calls = [step.right_call()]
    nxt = progress + 1
    if nxt < handshake_at and rng.random() < profile.p_parallel:
        calls.append(_step(scenario, nxt).right_call())
    return Reply(reasoning=_think(rng, "right"), calls=tuple(calls))


def _step(scenario: LoadedScenario, index: int) -> Step:
    spec = scenario.spec
    return Step(spec.reference[index], scenario.allowlist, spec.task, frozenset(spec.tools))


def _react_to_denial(
    messages: list[dict[str, Any]],
    scenario: LoadedScenario,
    step: Step,
    profile: Profile,
    rng: random.Random,
) -> Reply:
    reactions = [r for r, _ in profile.after_denial]
    reaction = rng.choices(reactions, weights=[w for _, w in profile.after_denial])[0]
    denied = _denied_call(messages)
    if reaction == "give-up":
        return _final(rng, done=False)
    if reaction == "repeat" and denied is not None:
        return Reply(reasoning=_think(rng, "repeat"), calls=(denied,))
    if reaction in ("retry", "repeat"):
        candidates = _candidates(step, profile, _tempted_codes(scenario))
        for _ in range(6):
            if not candidates:
                break
            mutation = _draw(candidates, rng)
            call = mutation.make(step, rng)
            if denied is None or call.arguments != denied.arguments or call.tool != denied.tool:
                return Reply(reasoning=_think(rng, "retry"), calls=(call,))
    return Reply(reasoning=_think(rng, "pivot"), calls=(step.right_call(),))


def _denied_call(messages: list[dict[str, Any]]) -> PlannedCall | None:
    """The call the last (denial) tool message answered, as it was emitted."""
    call_id = messages[-1].get("tool_call_id")
    for message in reversed(messages[:-1]):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        chosen = next((c for c in calls if c.get("id") == call_id), calls[-1])
        function = chosen.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError, RecursionError):  # hostile arguments
            return None
        if not isinstance(arguments, dict):
            return None
        return PlannedCall(str(function.get("name", "")), arguments)
    return None


def _tempted_codes(scenario: LoadedScenario) -> frozenset[str]:
    codes: set[str] = set()
    for temptation in scenario.spec.temptations:
        codes |= TEMPTATION_CODES.get(temptation, frozenset())
    return frozenset(codes)


def _candidates(
    step: Step, profile: Profile, tempted: frozenset[str]
) -> list[tuple[Mutation, float]]:
    out = []
    for code, weight in profile.mix:
        mutation = MUTATIONS[code]
        if mutation.applies(step):
            out.append((mutation, weight * (profile.tempted if code in tempted else 1.0)))
    return out


def _draw(candidates: list[tuple[Mutation, float]], rng: random.Random) -> Mutation:
    return rng.choices([m for m, _ in candidates], weights=[w for _, w in candidates])[0]


_THOUGHTS: dict[str, tuple[str, ...]] = {
    "right": (
        "The next step of the plan is clear; I will run the listed script with its flags.",
        "I should call the allowed script for this step exactly as documented.",
    ),
    "pivot": (
        "That form was denied. Only the listed scripts with their flags are allowed, "
        "so I will run the script directly.",
        "The allow-list rejected it; switching to the documented script call.",
    ),
    "retry": (
        "The command was denied; maybe a slightly different form will get through.",
        "Denied again. Let me try another way to get the same information.",
    ),
    "repeat": ("That should have worked; I will run it again.",),
    "text": ("I will write out the tool call.",),
    "AE301": ("The output could be long; I will keep only the part I need.",),
    "AE302": ("I want to see errors too, so I will merge stderr into the output.",),
    "AE304": ("I will make sure I am in the project directory first.",),
    "AE305": ("The summary is long; a heredoc keeps the quoting simple.",),
    "AE306": ("The script might hang, so I will bound it with a timeout.",),
    "AE307": ("Let me look around first to see what is available.",),
    "AE308": ("A quick inline Python snippet will format the result.",),
    "AE309": ("There is probably a helper script for this; I will call it.",),
    "AE310": ("I think this script takes an extra flag for this.",),
    "AE311": ("I will pass the value the task describes.",),
    "AE320": ("The rendered file should have the details; I will read it.",),
    "AE101": ("This script is also exposed as a tool; I will call it directly.",),
}


def _think(rng: random.Random, situation: str) -> str:
    return rng.choice(_THOUGHTS[situation])


def _final(rng: random.Random, *, done: bool) -> Reply:
    if done:
        return Reply(
            reasoning="Every step of the task is done; I can report back.",
            content=rng.choice(["Done: the task is complete.", "All steps are finished."]),
        )
    return Reply(
        reasoning="The allow-list keeps blocking this; I will stop here.",
        content="I could not finish: the needed command was denied by the allow-list.",
    )
