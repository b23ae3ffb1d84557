"""The simulator's stack faults (sim/stack.py): each family's fault, rendered on the
wire as vLLM-shaped JSON or chunks, is read back by ``policy.stack`` as its AE5xx."""

from __future__ import annotations

import json
import random

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy.stack import check_reply
from agent_eval.sim import Faults
from agent_eval.sim.behaviour import Reply
from agent_eval.sim.completions import build_completion, render_chunks, render_completion
from agent_eval.sim.mutations import PlannedCall
from agent_eval.sim.stack import STACKS, pick_fault, play, play_on_chunks, split_model
from agent_eval.stack_reading import exchange_from_example

LIGHTS = PlannedCall("bash", {"command": "uv run scripts/lights.py status"})
READ = PlannedCall("read", {"path": "notes/plan.md"})


def completion(*calls: PlannedCall):
    reply = Reply(reasoning="", content="", calls=calls)
    return build_completion({"messages": []}, reply, model="m", created=0,
                            rng=random.Random(1))


def codes_whole(done, max_tokens=64) -> list[str]:
    obj = render_completion(done)
    spec = {"request": {"max_tokens": max_tokens}, "reply": obj["choices"][0],
            "usage": obj["usage"]}
    return [f.code for f in check_reply(exchange_from_example(json.dumps(spec)))]


def codes_streamed(chunks) -> list[str]:
    return [f.code for f in check_reply(exchange_from_example(json.dumps({"chunks": chunks})))]


@pytest.mark.parametrize(("fault", "code"), [
    ("cut-length", "AE501"), ("cut-at-cap", "AE501"), ("lost-call", "AE502"),
    ("stop-with-calls", "AE502"), ("empty-reply", "AE503"), ("template-name", "AE507"),
])
def test_each_fault_on_a_whole_reply_is_read_back_as_its_code(fault, code):
    assert codes_whole(play(completion(LIGHTS), fault, 64)) == [code]


def test_a_llama_cpp_python_cut_says_tool_calls_with_the_tokens_at_the_cap():
    obj = render_completion(play(completion(LIGHTS), "cut-at-cap", 64))
    assert obj["choices"][0]["finish_reason"] == "tool_calls"
    assert obj["usage"]["completion_tokens"] == 64
    vllm = render_completion(play(completion(LIGHTS), "cut-length", 64))
    assert vllm["choices"][0]["finish_reason"] == "length"


def test_the_same_id_on_every_reply_is_a_repeated_id_from_the_second_on():
    done = play(completion(LIGHTS), "repeated-id", None)
    obj = render_completion(done)
    spec = {"earlier_ids": ["call_0"], "reply": obj["choices"][0], "usage": obj["usage"]}
    assert [f.code for f in check_reply(exchange_from_example(json.dumps(spec)))] == ["AE506"]


def test_streamed_calls_all_at_index_zero_collide():
    chunks = render_chunks(completion(LIGHTS, READ), include_usage=True)
    assert codes_streamed(chunks) == []
    assert codes_streamed(play_on_chunks(chunks, "index-zero")) == ["AE508"]


def test_a_fault_is_picked_only_where_it_fits_and_at_its_rate():
    rng = random.Random(0)
    assert pick_fault("ollama:index-zero", 1.0, rng, calls=1, streamed=True) is None
    assert pick_fault("ollama:index-zero", 1.0, rng, calls=2, streamed=True) == "index-zero"
    assert pick_fault("vllm", 0.0, rng, calls=1, streamed=False) is None
    picked = {pick_fault("llamacpp", 1.0, rng, calls=1, streamed=False) for _ in range(60)}
    assert picked == set(STACKS["llamacpp"])


@pytest.mark.parametrize(("model", "split"), [
    ("sim-disciplined+llamacpp", ("sim-disciplined", "llamacpp")),
    ("sim-piper+vllm:cut-length", ("sim-piper", "vllm:cut-length")),
    ("sim-piper+vllm:no-such-fault", ("sim-piper+vllm:no-such-fault", None)),
    ("qwen3+coder", ("qwen3+coder", None)),
])
def test_the_model_names_suffix_names_the_stack(model, split):
    assert split_model(model) == split


def test_an_unknown_stack_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown stack 'tgi'"):
        Faults(stack="tgi")


def test_a_streamed_reply_that_differs_is_read_as_stream_parity_only_beside_the_whole():
    whole = completion(LIGHTS)
    assert pick_fault("sglang:stream-differs", 1.0, random.Random(0), calls=1,
                      streamed=False) is None  # the whole reply is never touched
    chunks = render_chunks(play(whole, "stream-differs", None), include_usage=True)
    assert codes_streamed(chunks) == []  # alone, the streamed reply looks fine
    obj = render_completion(whole)
    spec = {"chunks": chunks, "whole": {**obj["choices"][0], "usage": obj["usage"]}}
    assert [f.code for f in check_reply(exchange_from_example(json.dumps(spec)))] == ["AE510"]
    same = {"chunks": render_chunks(whole, include_usage=True),
            "whole": {**obj["choices"][0], "usage": obj["usage"]}}
    assert check_reply(exchange_from_example(json.dumps(same))) == []
