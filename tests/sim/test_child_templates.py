"""The simulator recognises a child template's filled task (``evaluator-step`` spawned for
any research stage) and plays the reference filled with the same values, so a disciplined
evaluator closes the stage that spawned it, not the template's example one."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from support.simplay import REPO

from agent_eval.live.client import ModelClient
from agent_eval.live.orchestrator import run_session
from agent_eval.live.targets import Target
from agent_eval.scenario import instantiate, load_suite
from agent_eval.sim import SimServer, get_profile, plan_reply
from agent_eval.sim.behaviour import index_tasks

RALF = REPO / "scenarios" / "ralf"
SUITE = load_suite(RALF)
INDEX = index_tasks(SUITE.scenarios.values())
TEMPLATE = SUITE.scenarios["evaluator-step"]

STAGES = {  # research scenario -> (stage, attempt) its reference spawns the evaluator for
    "research-interview-synthesis": ("S1-interview-synthesis", "A1"),
    "research-literature-review": ("S2-literature", "A1"),
    "research-pricing-partial": ("S4-pricing", "A3"),
    "research-benchmark-data-missing": ("S5-benchmark-data", "A4"),
}


def filled_task(stage: str, attempt: str) -> str:
    return instantiate(TEMPLATE, {"stage": stage, "attempt": attempt}).spec.task


@pytest.mark.parametrize("stage, attempt", STAGES.values(), ids=list(STAGES))
def test_a_filled_evaluator_task_finds_the_template_filled_with_its_values(stage, attempt):
    found = INDEX.find(filled_task(stage, attempt).strip())
    assert found is not None and found.name == "evaluator-step"
    assert found.spec.reference[1].bash == (
        f"uv run scripts/research_notes.py --stage {stage} --show")
    assert found.spec.reference[2].read == f"notes/stages/{stage}/criteria.md"


def test_fixed_tasks_are_found_by_exact_text_and_other_text_by_nothing():
    lights = SUITE.scenarios["lights-evening-off"]
    assert INDEX.find(lights.spec.task.strip()) is lights
    assert INDEX.find("You were spawned by the ralf loop to evaluate stage S2") is None
    assert "evaluator-step" not in {sc.name for sc in INDEX.exact.values()}


def test_the_planner_plays_the_filled_reference_of_a_filled_task():
    task = filled_task("S4-pricing", "A3")
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": task},
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "tool_call_id": "c0", "content": "# context pack"}]
    plans = [plan_reply(messages, INDEX.find(task.strip()), get_profile("disciplined"),
                        random.Random(seed)) for seed in range(40)]
    commands = {json.loads(c.arguments_json).get("command") for p in plans for c in p.calls}
    assert "uv run scripts/research_notes.py --stage S4-pricing --show" in commands
    assert not any("S3-market-scan" in (c or "") for c in commands)


async def play_over_http(name: str, repeat: int):
    async with SimServer("disciplined", suite=RALF, seed=3) as server:
        target = Target(name="disciplined", base_url=server.base_url, model="sim-disciplined",
                        timeout_s=10, retries=0)
        async with ModelClient(target) as client:
            return await run_session(SUITE.scenarios[name], client, target="disciplined",
                                     suite=SUITE, repeat=repeat)


@pytest.mark.parametrize("name, stage, attempt",
                         [(n, *v) for n, v in STAGES.items()], ids=list(STAGES))
def test_disciplined_evaluator_closes_the_spawning_stage_over_http(name, stage, attempt):
    records = asyncio.run(play_over_http(name, repeat=0))
    parent, children = records[0], records[1:]
    assert parent.status == "completed", [c.command for c in parent.calls]
    (child,) = children
    assert f"evaluate stage {stage}, attempt {attempt}," in child.messages[1]["content"]
    assert child.status == "completed" and child.handshake.completed
    closing = [c for c in child.calls if c.decision == "allow"][-1]
    assert closing.command == f"uv run scripts/update_stage_status.py --stage {stage} --status done"
    assert closing.output == f'{{"stage": "{stage}", "status": "done"}}'
