"""One reply reader, one turn builder: a reply read by the live client and by the proxy
stores the same turn figures.

The two built a turn's token figures each by its own rules, and they had come apart: the
proxy kept a count that is not a whole number >= 0 as it came, so a server that reported
``completion_tokens: -3`` gave the proxy's turn -3 completion tokens and a *negative*
decode speed, where the live client stored both as unknown.  Both now build them with
``wire.records.token_figures``; the client also folds a stream with the proxy's reader
(``wire.chat.ChatStream``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agent_eval import wire
from agent_eval.live.client import wire_reply
from agent_eval.live.orchestrator import turn_record
from agent_eval.policy import load_allowlist
from agent_eval.proxy.relay import Exchange
from agent_eval.proxy.sessions import Sessions
from agent_eval.scenario.bundled import bundled_allowlist
from agent_eval.wire.chat import ChatStream
from agent_eval.wire.records import sse_objects, token_figures

MESSAGES = [{"role": "system", "content": "You are the research subagent."},
            {"role": "user", "content": "Open attempts for stage S2."}]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
CALL = {"id": "c-1", "type": "function", "function": {
    "name": "bash", "arguments": json.dumps({"command": "uv run scripts/db_query.py --sql 'x'"})}}
LATENCY, TTFT = 2.0, 0.5

USAGES = {
    "negative-completion": {"prompt_tokens": 900, "completion_tokens": -3},  # the case
    "odd-counts": {"prompt_tokens": "900", "completion_tokens": 40,
                   "prompt_tokens_details": {"cached_tokens": -2},
                   "completion_tokens_details": {"reasoning_tokens": True}},
    "whole": {"prompt_tokens": 900, "completion_tokens": 40,
              "prompt_tokens_details": {"cached_tokens": 896},
              "completion_tokens_details": {"reasoning_tokens": 12}},
    "zero-completion": {"prompt_tokens": 900, "completion_tokens": 0},
}


def _body(usage: dict) -> bytes:
    return json.dumps({"model": "qwen", "usage": usage, "choices": [{
        "index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "", "tool_calls": [CALL]}}]}).encode()


def _figures(turn) -> tuple:
    return (turn.prompt_tokens, turn.completion_tokens, turn.reasoning_tokens,
            turn.cached_tokens, turn.decode_tps)


def _live_turn(body: bytes):
    parsed = wire.parse_reply("chat", body, streamed=False)
    return turn_record(0, wire_reply(parsed, LATENCY, TTFT), datetime.now(UTC))


def _proxy_turn(body: bytes):
    sessions = Sessions(load_allowlist(bundled_allowlist("ralf")))
    request = json.dumps({"model": "qwen", "messages": MESSAGES, "tools": TOOLS}).encode()
    sessions.take(Exchange(path="/v1/chat/completions", request_body=request,
                           session_headers={}, started_at=datetime.now(UTC), status=200,
                           content_type="application/json", response_body=bytearray(body),
                           ttft_s=TTFT, latency_s=LATENCY), 0.0)
    [record] = sessions.close_all()
    return record.turns[0]


@pytest.mark.parametrize("usage", USAGES.values(), ids=USAGES.keys())
def test_a_reply_read_by_the_client_and_by_the_proxy_stores_the_same_figures(usage):
    body = _body(usage)
    assert _figures(_live_turn(body)) == _figures(_proxy_turn(body))


def test_a_negative_completion_count_is_unknown_on_both_paths_not_a_negative_speed():
    """The case that differed: the proxy stored -3 tokens at -2 tokens a second."""
    body = _body(USAGES["negative-completion"])
    for turn in (_live_turn(body), _proxy_turn(body)):
        assert _figures(turn) == (900, None, None, None, None)


def test_token_figures_read_counts_and_speed_by_one_rule():
    figures = token_figures(USAGES["whole"], LATENCY, TTFT)
    assert (figures.prompt_tokens, figures.completion_tokens, figures.reasoning_tokens,
            figures.cached_tokens) == (900, 40, 12, 896)
    assert figures.decode_tps == pytest.approx(40 / (LATENCY - TTFT))
    assert token_figures(USAGES["whole"], LATENCY, None).decode_tps == pytest.approx(40 / 2.0)
    assert token_figures(USAGES["whole"], None, None).decode_tps is None
    assert token_figures("not a usage object", LATENCY, TTFT) == token_figures({}, 1.0, None)


STREAM = [
    {"model": "qwen", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "Need the "}}]},
    {"choices": [{"index": 0, "delta": {"reasoning": "handshake."}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c-1", "function": {
        "name": "bash", "arguments": '{"command": "uv run '}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {
        "arguments": 'scripts/ralf_spawn.py"}'}}]}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 500, "completion_tokens": 40}},
]


def test_a_stream_folded_chunk_by_chunk_reads_as_the_whole_body_does():
    """The client folds the chunks it is handed (``ChatStream.add``), the proxy reads the
    body it relayed (``parse_reply``): one reader, one reply."""
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in STREAM) + "data: [DONE]\n\n"
    whole = wire.parse_reply("chat", text.encode(), streamed=True)
    folded = ChatStream()
    first = [folded.add(chunk) for _, chunk in sse_objects(text)]
    assert first == [False, True, True, True, True, False, False, False]
    assert folded.reply() == whole
    assert (whole.status, whole.reasoning, whole.usage["completion_tokens"]) == (
        "complete", "Need the handshake.", 40)
    assert [(c.id, c.name, c.arguments) for c in whole.calls] == [
        ("c-1", "bash", '{"command": "uv run scripts/ralf_spawn.py"}')]
