"""Each fault knob does what it says, seen from the client side over real HTTP."""

from __future__ import annotations

import json
import time

import openai
import pytest
from openai import OpenAI
from support.simplay import FIXTURE_SUITE, opening, raw_post, sse_events

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
            with pytest.raises(openai.APIStatusError, match="Error code: 50[03]") as err:
                _ask(url, suite)
            statuses.add(err.value.status_code)
    assert statuses <= {500, 503} and statuses


def test_drop_rate_one_closes_the_connection_without_an_answer(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(drop_rate=1.0)) as url:
        with pytest.raises(openai.APIConnectionError, match="Connection error"):
            _ask(url, suite)


def test_hang_rate_one_never_answers_before_the_client_gives_up(suite):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(hang_rate=1.0)) as url:
        with pytest.raises(openai.APITimeoutError, match="timed out"):
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
    with pytest.raises(ValueError, match="Unterminated string"):
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
            with pytest.raises(ValueError, match="^Expecting "):
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


# --- hostile output knobs: the bytes a client must survive -----------------------------


def _body(suite, *, stream: bool = False) -> dict:
    return {"model": "sim-disciplined", "stream": stream,
            "messages": opening(suite.scenarios["research_stage"])}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_endless_rate_one_keeps_answering_past_any_size(suite, stream):
    import http.client
    from urllib.parse import urlsplit

    faults = Faults(endless_rate=1.0, endless_pause_s=0.0)
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=faults) as url:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            conn.request("POST", f"{parts.path}/chat/completions",
                         body=json.dumps(_body(suite, stream=stream)).encode(),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            got = b""
            while len(got) < 2_000_000:  # more than any real reply, and still coming
                piece = response.read1(65536)
                assert piece, "the endless answer ended"
                got += piece
        finally:
            conn.close()
    assert response.status == 200
    assert got.startswith(b"data: {" if stream else b'{"id": "chatcmpl-endless"')
    assert b"[DONE]" not in got and b'"finish_reason": "stop"' not in got


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_invalid_utf8_rate_one_puts_bytes_that_are_not_utf8_in_the_content(suite, stream):
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(invalid_utf8_rate=1.0)) as url:
        status, _, raw = raw_post(url, _body(suite, stream=stream))
    assert status == 200 and b"\xff\xfe\xc3(" in raw
    with pytest.raises(UnicodeDecodeError, match="can't decode byte 0xff"):
        raw.decode("utf-8")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_nested_body_rate_one_nests_a_field_deeper_than_a_decoder_survives(suite, stream):
    faults = Faults(nested_body_rate=1.0, nesting_depth=5_000)
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=faults) as url:
        status, _, raw = raw_post(url, _body(suite, stream=stream))
    first = sse_events(raw)[0].encode() if stream else raw
    assert status == 200 and first.startswith(b'{"nested": ' + b"[" * 5_000 + b"]" * 5_000)
    with pytest.raises(RecursionError, match="maximum recursion depth exceeded"):
        json.loads(first)


def test_nested_args_rate_one_nests_the_tool_call_arguments(suite):
    faults = Faults(nested_args_rate=1.0, nesting_depth=5_000)
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=faults) as url:
        arguments = _ask(url, suite).choices[0].message.tool_calls[0].function.arguments
    assert arguments == '{"command": ' + "[" * 5_000 + "]" * 5_000 + "}"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_huge_reply_rate_one_pads_the_content_and_keeps_the_calls(suite, stream):
    faults = Faults(huge_reply_rate=1.0, huge_reply_chars=300_000)
    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=faults) as url:
        if stream:
            content, calls = "", 0
            for chunk in _ask(url, suite, stream=True):
                delta = chunk.choices[0].delta if chunk.choices else None
                content += (delta.content or "") if delta else ""
                calls += len(delta.tool_calls or []) if delta else 0
        else:
            message = _ask(url, suite).choices[0].message
            content, calls = message.content, len(message.tool_calls)
    assert len(content) >= 300_000 and content.endswith("x" * 1000)
    assert calls >= 1


def test_control_chars_rate_one_opens_the_content_with_terminal_escapes(suite):
    from agent_eval.sim.hostile import TERMINAL_ESCAPES

    with run_sim_in_thread(suite=FIXTURE_SUITE, faults=Faults(control_chars_rate=1.0)) as url:
        content = _ask(url, suite).choices[0].message.content
    assert content.startswith(TERMINAL_ESCAPES) and "\x1b]52;c;" in content
