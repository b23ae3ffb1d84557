"""Proxy sessions are named by the bundled scenario whose task they play (as the
simulator finds it, also inside a client's wrapping), unique per role; other sessions
keep ``system-`` and their role's hash."""

from __future__ import annotations

from agent_eval.proxy.sessions import ScenarioNames
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import bundled_suite

SUITE = load_suite(bundled_suite())
TASK = SUITE.scenarios["lights-dim-office"].spec.task
ROLE_A, ROLE_B = "0f00503c" + "a" * 56, "9e11aa07" + "b" * 56


def chat(task: str) -> list[dict]:
    return [{"role": "system", "content": "You are a CLI."}, {"role": "user", "content": task}]


def test_a_session_playing_a_bundled_task_is_named_by_its_scenario():
    names = ScenarioNames()
    assert names.name(chat(TASK), ROLE_A) == "lights-dim-office"
    assert names.name(chat(TASK), ROLE_A) == "lights-dim-office"  # its repeats: one name


def test_a_task_inside_a_clients_wrapping_is_found():
    wrapped = [{"role": "system", "content": "CLI"}, {"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>today is Monday</system-reminder>"},
        {"type": "text", "text": TASK}]}]
    assert ScenarioNames().name(wrapped, ROLE_A) == "lights-dim-office"


def test_another_role_on_the_same_scenario_keeps_a_unique_name():
    names = ScenarioNames()
    assert names.name(chat(TASK), ROLE_A) == "lights-dim-office"
    assert names.name(chat(TASK), ROLE_B) == "lights-dim-office-9e11aa07"


def test_an_unknown_task_keeps_the_role_hash():
    assert ScenarioNames().name(chat("Summarise my inbox."), ROLE_A) == "system-0f00503c"
