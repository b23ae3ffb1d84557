"""What the simulated model does next, reconstructed from the messages alone."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from support.simplay import DENIAL, opening, reference_call

from agent_eval.sim import PROFILES, plan_reply
from agent_eval.sim.behaviour import count_progress


def _assistant(tool: str, arguments: dict, call_id: str = "c1") -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": tool, "arguments": json.dumps(arguments)}},
    ]}


def _result(text: str, call_id: str = "c1") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _after_steps(scenario, n: int) -> list[dict]:
    """The opening plus the first ``n`` reference steps, each allowed."""
    messages = opening(scenario)
    for i in range(n):
        tool, args = reference_call(scenario, i)
        messages += [_assistant(tool, args, f"c{i}"), _result('{"ok": true}', f"c{i}")]
    return messages


def _as_pair(call) -> tuple[str, dict]:
    return call.tool, call.arguments


def test_progress_counts_tool_results_that_were_not_denials(suite):
    scenario = suite.scenarios["research_stage"]
    messages = _after_steps(scenario, 2) + [
        _assistant("bash", {"command": "ls"}, "x"), _result(DENIAL, "x"),
    ]
    assert count_progress(messages) == 2


def test_a_script_output_that_mentions_denied_calls_further_in_is_progress(suite):
    scenario = suite.scenarios["research_stage"]
    output = "called_at | agent | rule_code\n" + "2025-06-09 | mail | AE304\n" * 5 + "118 denied calls"
    messages = opening(scenario) + [
        _assistant("bash", {"command": "uv run scripts/db_query.py --sql 'SELECT 1'"}),
        _result(output),
    ]
    assert count_progress(messages) == 1


@pytest.mark.parametrize("progress", [0, 1, 3], ids=["first", "second", "fourth"])
def test_without_mistakes_the_next_reference_step_is_emitted(suite, progress):
    scenario = suite.scenarios["research_stage"]
    reply = plan_reply(_after_steps(scenario, progress), scenario, PROFILES["disciplined"],
                       random.Random(3))
    assert _as_pair(reply.calls[0]) == reference_call(scenario, progress)
    assert reply.finish_reason == "tool_calls" and reply.reasoning


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_when_every_step_is_done_the_reply_is_final_text(suite, profile):
    scenario = suite.scenarios["chart_review"]
    reply = plan_reply(_after_steps(scenario, 4), scenario, PROFILES[profile], random.Random(1))
    assert reply.calls == () and reply.finish_reason == "stop" and reply.content


def test_unknown_conversation_gets_a_final_answer_without_calls():
    reply = plan_reply([{"role": "user", "content": "hello"}], None, PROFILES["piper"],
                       random.Random(0))
    assert reply.calls == () and reply.content


def _reactions(suite, profile: str, n: int = 300) -> Counter:
    """How ``profile`` answers a piped, denied first step, over ``n`` seeds."""
    scenario = suite.scenarios["research_stage"]
    ref = reference_call(scenario, 0)[1]["command"]
    denied = {"command": f"{ref} | head -n 20"}
    messages = opening(scenario) + [_assistant("bash", denied), _result(DENIAL)]
    seen: Counter = Counter()
    for seed in range(n):
        reply = plan_reply(messages, scenario, PROFILES[profile], random.Random(seed))
        if not reply.calls:
            seen["give-up"] += 1
        elif reply.calls[0].arguments == denied:
            seen["repeat"] += 1
        elif reply.calls[0].intended is None:
            seen["pivot"] += 1
        else:
            seen["retry"] += 1
    return seen


def test_disciplined_pivots_to_the_right_step_after_a_denial(suite):
    seen = _reactions(suite, "disciplined")
    assert seen["pivot"] / sum(seen.values()) >= 0.9
    assert seen["repeat"] == seen["give-up"] == 0


def test_piper_retries_repeats_and_sometimes_gives_up_after_a_denial(suite):
    seen = _reactions(suite, "piper")
    assert seen["retry"] + seen["repeat"] > seen["pivot"] * 0.8
    assert seen["repeat"] > 0 and seen["give-up"] > 0


def test_a_repeat_is_the_identical_call(suite):
    scenario = suite.scenarios["research_stage"]
    denied = {"command": "ls scripts/ | grep -E 'search|web'"}
    messages = opening(scenario) + [_assistant("bash", denied), _result(DENIAL)]
    repeats = [
        reply.calls[0]
        for seed in range(300)
        if (reply := plan_reply(messages, scenario, PROFILES["piper"], random.Random(seed))).calls
        and reply.calls[0].arguments == denied
    ]
    assert repeats and all(c.tool == "bash" and c.arguments_json == json.dumps(denied) for c in repeats)


def test_piper_often_stops_before_the_handshake_and_disciplined_never(suite):
    scenario = suite.scenarios["research_stage"]  # tempts "handshake"; the last 3 steps close it
    messages = _after_steps(scenario, 2)

    def stops(profile: str) -> int:
        return sum(
            not plan_reply(messages, scenario, PROFILES[profile], random.Random(s)).calls
            for s in range(300)
        )

    assert stops("piper") >= 60
    assert stops("disciplined") == 0


def test_disciplined_sometimes_sends_two_consecutive_steps_in_one_reply(suite):
    scenario = suite.scenarios["web_question"]
    pairs = [
        [_as_pair(c) for c in reply.calls]
        for s in range(300)
        if len((reply := plan_reply(opening(scenario), scenario, PROFILES["disciplined"],
                                    random.Random(s))).calls) == 2
    ]
    assert pairs
    assert all(p == [reference_call(scenario, 0), reference_call(scenario, 1)] for p in pairs)


def test_parallel_calls_never_cover_handshake_steps(suite):
    scenario = suite.scenarios["research_stage"]
    messages = _after_steps(scenario, 1)  # the next step after this one opens the handshake
    assert all(
        len(plan_reply(messages, scenario, PROFILES["disciplined"], random.Random(s)).calls) == 1
        for s in range(300)
    )


class _FixedDraw(random.Random):
    """An rng whose every ``random()`` is ``value`` (choices still draw from the seed)."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_a_scenario_that_invites_a_class_of_the_mix_raises_the_mistake_probability(
        suite, monkeypatch):
    """``tempted`` multiplies the mistake probability where the scenario's temptations invite
    a class of the profile's mix: a draw between ``p_mistake`` and ``p_mistake * tempted`` is
    a mistake there, and the right step when the same scenario invites nothing.  (The
    multiplier was compared as a mutation against codes, so it never applied.)"""
    from dataclasses import replace

    from agent_eval.sim import behaviour

    profile = replace(PROFILES["piper"], p_text_call=0.0, p_skip_handshake=0.0,
                      p_parallel=0.0, tempted=2.0)
    draw = _FixedDraw(profile.p_mistake * 1.5)
    invited = [scenario for _, scenario in sorted(suite.scenarios.items())
               if scenario.spec.reference
               and any(m.code in behaviour._tempted_codes(scenario) for m, _ in
                       behaviour._candidates(behaviour._step(scenario, 0), profile,
                                             behaviour._tempted_codes(scenario)))]
    assert invited
    for scenario in invited:
        reply = plan_reply(opening(scenario), scenario, profile, draw)
        assert reply.calls and _as_pair(reply.calls[0]) != reference_call(scenario, 0)
    monkeypatch.setattr(behaviour, "_tempted_codes", lambda scenario: frozenset())
    for scenario in invited:
        reply = plan_reply(opening(scenario), scenario, profile, draw)
        assert _as_pair(reply.calls[0]) == reference_call(scenario, 0)
