"""Every mutation yields the failure class it is named after, as the policy engine judges
it under the scenario's allow-list; the reference steps themselves are allowed."""

from __future__ import annotations

import random

import pytest
from support.simplay import FIXTURE_SUITE, REPO

from agent_eval import policy
from agent_eval.scenario import instantiate, load_suite
from agent_eval.sim import MUTATIONS
from agent_eval.sim.mutations import Step, text_tool_call


def _steps() -> list[Step]:
    suites = [load_suite(FIXTURE_SUITE), load_suite(REPO / "scenarios" / "ralf")]
    filled = [  # a child template as spawned: every placeholder filled
        instantiate(sc, {name: f"{name}-7" for name in sc.placeholders})
        for suite in suites
        for sc in suite.scenarios.values()
    ]
    return [
        Step(ref, sc.allowlist, sc.spec.task, frozenset(sc.spec.tools))
        for sc in filled
        for ref in sc.spec.reference
    ]


STEPS = _steps()


def test_every_reference_step_is_allowed():
    denied = [
        (step.text, policy.check_call(call.tool, call.arguments_json, step.allowlist).primary)
        for step in STEPS
        if not policy.check_call((call := step.right_call()).tool, call.arguments_json,
                                 step.allowlist, offered=step.offered).allowed
    ]
    assert denied == []


@pytest.mark.parametrize("code", sorted(MUTATIONS))
def test_mutation_is_judged_as_its_code(code):
    mutation = MUTATIONS[code]
    judged = []
    for step in STEPS:
        if not mutation.applies(step):
            continue
        for seed in range(8):
            call = mutation.make(step, random.Random(seed))
            verdict = policy.check_call(call.tool, call.arguments_json, step.allowlist,
                                        offered=step.offered)
            judged.append((verdict.primary, call.tool, call.arguments_json))
    assert judged, f"{code} applies to no reference step"
    wrong = [j for j in judged if j[0] != code]
    assert wrong == []


@pytest.mark.parametrize("code", sorted(MUTATIONS))
def test_mutation_is_named_like_its_registered_rule(code):
    rule = policy.get_rule(code)
    assert rule is not None and rule.name == MUTATIONS[code].name


def test_text_tool_call_carries_the_right_step_inside_tool_call_markup():
    step = STEPS[0]
    text = text_tool_call(step)
    assert "<tool_call>" in text and "</tool_call>" in text
    assert step.text.replace('"', '\\"') in text or step.text in text
