"""The simulator over real HTTP, through the openai SDK, as the harness will see it."""

from __future__ import annotations

import asyncio
import json

import pytest
from openai import AsyncOpenAI, OpenAI
from support.simplay import (
    FIXTURE_SUITE,
    opening,
    play_session,
    raw_post,
    reference_call,
    sse_events,
)

from agent_eval.sim import PROFILES, SEED_HEADER, SimServer

pytestmark = pytest.mark.e2e


def test_models_lists_every_profile_in_openai_shape(client: OpenAI):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids[0] == "sim-disciplined"  # the server's default profile comes first
    assert set(ids) == {f"sim-{name}" for name in PROFILES}
    assert {m.owned_by for m in models.data} == {"agent-eval-sim"}
    assert {m.object for m in models.data} == {"model"}


def test_non_streaming_reply_carries_the_first_reference_step(client: OpenAI, suite):
    scenario = suite.scenarios["research_stage"]
    reply = client.chat.completions.create(
        model="sim-disciplined", messages=opening(scenario), tools=scenario.tool_schemas(),
        extra_headers={SEED_HEADER: "research_stage/0"},
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.id.startswith("chatcmpl-tool-")
    assert (call.function.name, json.loads(call.function.arguments)) == reference_call(scenario, 0)
    assert reply.id.startswith("chatcmpl-") and reply.object == "chat.completion"
    assert reply.model == "sim-disciplined"


def test_non_streaming_reply_has_reasoning_under_both_vllm_names(client: OpenAI, suite):
    scenario = suite.scenarios["research_stage"]
    message = client.chat.completions.create(
        model="sim-disciplined", messages=opening(scenario)
    ).choices[0].message
    extra = message.model_extra
    assert extra["reasoning_content"] and extra["reasoning"] == extra["reasoning_content"]


def test_usage_counts_prompt_and_completion_tokens(client: OpenAI, suite):
    scenario = suite.scenarios["research_stage"]
    usage = client.chat.completions.create(
        model="sim-disciplined", messages=opening(scenario)
    ).usage
    assert usage.prompt_tokens > len(scenario.system_prompt()) // 8
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streaming_reassembles_to_the_same_call_with_usage(client: OpenAI, suite):
    scenario = suite.scenarios["web_question"]
    kwargs = dict(model="sim-disciplined", messages=opening(scenario),
                  extra_headers={SEED_HEADER: "web_question/3"})
    whole = client.chat.completions.create(**kwargs).choices[0].message
    stream = client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    )
    ids, names, arguments, reasoning, finish, usage = [], [], "", "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        for part in delta.tool_calls or []:
            assert part.index == 0
            if part.id:
                ids.append(part.id)
                names.append(part.function.name)
            arguments += part.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert ids == [whole.tool_calls[0].id]
    assert names == [whole.tool_calls[0].function.name]
    assert arguments == whole.tool_calls[0].function.arguments
    assert reasoning == whole.model_extra["reasoning_content"]
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens > 0


def test_stream_ends_with_done_marker(sim_url: str, suite):
    body = {"model": "sim-disciplined", "stream": True, "messages": opening(suite.scenarios["chart_review"])}
    status, content_type, raw = raw_post(sim_url, body)
    assert (status, content_type) == (200, "text/event-stream")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "tool_calls"


def test_same_seed_header_gives_the_same_reply(client: OpenAI, suite):
    scenario = suite.scenarios["web_question"]

    def ask(seed: str):
        reply = client.chat.completions.create(
            model="sim-inventor", messages=opening(scenario), extra_headers={SEED_HEADER: seed}
        )
        return reply.choices[0].message.model_dump(exclude={"tool_calls"}), [
            (c.id, c.function.name, c.function.arguments) for c in reply.choices[0].message.tool_calls
        ]

    assert ask("web_question/1") == ask("web_question/1")


def test_different_seed_headers_give_different_replies(client: OpenAI, suite):
    scenario = suite.scenarios["web_question"]
    ids = {
        client.chat.completions.create(
            model="sim-inventor", messages=opening(scenario), extra_headers={SEED_HEADER: f"s/{i}"}
        ).choices[0].message.tool_calls[0].id
        for i in range(5)
    }
    assert len(ids) == 5


def test_model_field_selects_the_profile_and_unknown_names_get_the_default(client: OpenAI, suite):
    scenario = suite.scenarios["research_stage"]
    for model in ("sim-piper", "piper", "Qwen3.6-35B-A3B"):
        reply = client.chat.completions.create(model=model, messages=opening(scenario))
        assert reply.model == model
        assert reply.choices[0].finish_reason == "tool_calls"


def test_vllm_sampling_extras_are_accepted(client: OpenAI, suite):
    reply = client.chat.completions.create(
        model="sim-disciplined", messages=opening(suite.scenarios["research_stage"]),
        temperature=1.0, top_p=0.95, presence_penalty=1.5, max_tokens=512,
        extra_body={"top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0,
                    "chat_template_kwargs": {"enable_thinking": True}},
    )
    assert reply.choices[0].message.tool_calls


def test_unknown_task_gets_a_short_final_answer_without_tool_calls(client: OpenAI):
    reply = client.chat.completions.create(
        model="sim-disciplined", messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.tool_calls in (None, [])
    assert reply.choices[0].message.content


def test_task_is_recognised_from_text_parts_too(client: OpenAI, suite):
    scenario = suite.scenarios["chart_review"]
    parts = [{"type": "text", "text": "  " + scenario.spec.task + "\n"}]
    reply = client.chat.completions.create(
        model="sim-disciplined", messages=[{"role": "user", "content": parts}]
    )
    call = reply.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == reference_call(scenario, 0)


@pytest.mark.parametrize("scenario_name", ["research_stage", "web_question", "chart_review"])
def test_disciplined_session_walks_the_reference_and_stops(client: OpenAI, suite, scenario_name):
    scenario = suite.scenarios[scenario_name]

    def ask(messages):
        message = client.chat.completions.create(
            model="sim-disciplined", messages=messages,
            extra_headers={SEED_HEADER: f"{scenario_name}/walk"},
        ).choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return message.content, calls

    played = play_session(scenario, ask)
    allowed = [(name, json.loads(args)) for name, args, ok in played if ok]
    assert allowed == [reference_call(scenario, i) for i in range(len(scenario.spec.reference))]


def test_malformed_request_body_is_a_400_in_vllm_error_shape(sim_url: str):
    status, _, raw = raw_post(sim_url, b"{not json")
    assert status == 400
    assert json.loads(raw)["object"] == "error"


def test_async_server_serves_concurrent_requests(suite):
    scenario = suite.scenarios["research_stage"]

    async def main() -> set[str]:
        async with SimServer("wrapper", suite=FIXTURE_SUITE) as sim:
            assert sim.base_url.startswith("http://127.0.0.1:")
            client = AsyncOpenAI(base_url=sim.base_url, api_key="k", max_retries=0, timeout=120)
            replies = await asyncio.gather(*[
                client.chat.completions.create(
                    model="default", messages=opening(scenario),
                    extra_headers={SEED_HEADER: f"c/{i}"},
                )
                for i in range(32)
            ])
            await client.close()
            return {r.id for r in replies}

    assert len(asyncio.run(main())) == 32
