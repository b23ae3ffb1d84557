"""Each fault knob does what it says, seen from the client side over real HTTP."""

from __future__ import annotations

import json
import time

import openai
import pytest
from openai import OpenAI
from simplay import FIXTURE_SUITE, opening, raw_post, sse_events

from agent_eval.errors import ConfigError
from agent_eval.sim import Faults, run_sim_in_thread

pytestmark = pytest.mark.e2e


def _ask(url: str, suite, *, timeout: float = 10, stream: bool = False, **kw):
    client = OpenAI(base_url=url, api_key="k", max_retries=0, timeout=timeout)
    return client.chat.completions.create(
        model="sim-disciplined", messages=opening(suite.scenarios["research_stage"]),
        stream=stream, **kw,
    )


def test_error_rate_one_answers_500_or_503(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(error_rate=1.0)) as url:
        statuses = set()
        for _ in range(6):
            with pytest.raises(openai.APIStatusError) as err:
                _ask(url, suite)
            statuses.add(err.value.status_code)
    assert statuses <= {500, 503} and statuses


def test_drop_rate_one_closes_the_connection_without_an_answer(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(drop_rate=1.0)) as url:
        with pytest.raises(openai.APIConnectionError):
            _ask(url, suite)


def test_hang_rate_one_never_answers_before_the_client_gives_up(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(hang_rate=1.0)) as url:
        with pytest.raises(openai.APITimeoutError):
            _ask(url, suite, timeout=0.5)


def test_truncate_rate_one_ends_the_stream_without_done_or_finish_reason(suite):
    body = {"model": "sim-disciplined", "stream": True,
            "messages": opening(suite.scenarios["research_stage"])}
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(truncate_rate=1.0)) as url:
        status, _, raw = raw_post(url, body)
    events = sse_events(raw)
    assert status == 200 and events
    assert "[DONE]" not in events
    assert all(json.loads(e)["choices"][0]["finish_reason"] is None for e in events)


def test_truncate_rate_one_sends_half_a_json_body_when_not_streaming(suite):
    body = {"model": "sim-disciplined", "messages": opening(suite.scenarios["research_stage"])}
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(truncate_rate=1.0)) as url:
        status, content_type, raw = raw_post(url, body)
    assert (status, content_type) == (200, "application/json")
    assert raw.startswith(b'{"id": "chatcmpl-')
    with pytest.raises(ValueError):
        json.loads(raw)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_malformed_args_rate_one_emits_arguments_that_are_not_json(suite, stream):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(malformed_args_rate=1.0)) as url:
        for seed in range(5):
            headers = {"X-Agent-Eval-Seed": f"m/{seed}"}
            if stream:
                arguments = "".join(
                    part.function.arguments or ""
                    for chunk in _ask(url, suite, stream=True, extra_headers=headers)
                    for part in (chunk.choices[0].delta.tool_calls or [] if chunk.choices else [])
                )
            else:
                message = _ask(url, suite, extra_headers=headers).choices[0].message
                arguments = message.tool_calls[0].function.arguments
            assert "fetch_context.py" in arguments
            with pytest.raises(ValueError):
                json.loads(arguments)


def test_latency_delays_the_whole_answer_by_at_least_its_value(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(latency_s=0.3)) as url:
        started = time.monotonic()
        _ask(url, suite)
        assert time.monotonic() - started >= 0.3


def test_ttft_delays_the_first_streamed_token_by_at_least_its_value(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(ttft_s=0.3)) as url:
        started = time.monotonic()
        stream = _ask(url, suite, stream=True)
        next(iter(stream))
        assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize(
    "knob, value",
    [("error_rate", 1.5), ("drop_rate", -0.1), ("latency_s", -1.0)],
    ids=["rate-above-one", "negative-rate", "negative-latency"],
)
def test_out_of_range_knob_is_a_config_error_naming_the_field(knob, value):
    with pytest.raises(ConfigError, match=f"faults.{knob}"):
        Faults(**{knob: value})
