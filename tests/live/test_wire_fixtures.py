"""Recorded wire shapes (tests/fixtures/wire/) replayed through the real client over HTTP.

Each fixture is served byte for byte by a loopback aiohttp server; the test checks what
``ModelClient.complete`` makes of it, and for the tool calls written as text that the
orchestrator records them as AE104, counted against the model/server setup, which
``show`` prints.  Sources: tests/fixtures/wire/README.md.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.factories import add_run
from support.loopback import serve_fixture

from agent_eval.live.client import ModelClient, Target
from agent_eval.live.orchestrator import TEXT_CALL_TOOL, run_session
from agent_eval.scenario import load_suite

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
RALF = Path(__file__).resolve().parents[2] / "scenarios" / "ralf"
STATUS = '{"command": "uv run scripts/lights.py status"}'
OFF = "uv run scripts/lights.py set --room {} --state off"


async def _serve(name: str, seen: list[dict]):
    return await serve_fixture(WIRE / name, seen=seen)


def replay(name: str):
    """The Reply the client makes of the fixture, and the request bodies it sent."""

    async def go():
        seen: list[dict] = []
        runner, url = await _serve(name, seen)
        try:
            target = Target(name="t", base_url=url, model="m", stream=name.endswith(".sse"))
            async with ModelClient(target, backoff_s=0.001) as client:
                return await client.complete([{"role": "user", "content": "x"}], None), seen
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def calls_of(reply) -> list[tuple[str | None, str, dict]]:
    return [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls]


def test_vllm_hermes_stream_split_arguments_reasoning_content_usage_last():
    reply, seen = replay("vllm-hermes-reasoning-content-stream.sse")
    assert calls_of(reply) == [("chatcmpl-tool-5b3f0c2a", "bash", json.loads(STATUS))]
    assert reply.reasoning == "The user wants the status first."
    assert reply.finish_reason == "tool_calls" and reply.content == ""
    assert (reply.prompt_tokens, reply.completion_tokens) == (1480, 41)
    assert seen[0]["stream_options"] == {"include_usage": True}


def test_vllm_qwen3_coder_reasoning_field_and_two_calls():
    reply, _ = replay("vllm-qwen3-coder-reasoning-two-calls.json")
    assert reply.reasoning == "Check status, then switch the kitchen off."
    assert [c[0] for c in calls_of(reply)] == ["chatcmpl-tool-a1", "chatcmpl-tool-a2"]
    assert calls_of(reply)[1][2] == {"command": OFF.format("kitchen")}
    assert reply.content == "" and reply.markup == []


def test_vllm_empty_tool_calls_list_is_a_plain_reply():
    reply, _ = replay("vllm-empty-tool-calls.json")
    assert reply.tool_calls == [] and reply.content == "The kitchen light is off."
    assert reply.reasoning == "" and reply.markup == []


def test_sglang_two_streamed_calls_by_index():
    reply, _ = replay("sglang-two-calls-stream.sse")
    assert calls_of(reply) == [
        ("call_6c1f", "bash", {"command": OFF.format("living-room")}),
        ("call_9e02", "bash", {"command": OFF.format("kitchen")}),
    ]
    assert reply.reasoning == "Two rooms." and reply.prompt_tokens == 1480


def test_ollama_finish_reason_stop_beside_a_tool_call_keeps_the_call():
    reply, _ = replay("ollama-v1-finish-stop-with-call-stream.sse")
    assert reply.finish_reason == "stop"
    assert calls_of(reply) == [("call_k2x9q1", "bash", json.loads(STATUS))]
    assert reply.completion_tokens == 41


def test_lmstudio_call_without_id_is_kept_with_no_id():
    reply, _ = replay("lmstudio-missing-id-stream.sse")
    assert calls_of(reply) == [(None, "bash", json.loads(STATUS))]
    assert reply.prompt_tokens is None  # no usage chunk: not made up


@pytest.mark.parametrize("name, marker", [
    ("vllm-no-parser-tool-call-text.json", "<tool_call>"),
    ("ollama-v1-fenced-bash-text.json", "```bash"),
], ids=["tool-call-tag", "fenced-bash"])
def test_tool_call_written_as_text_is_found_in_the_reply(name, marker):
    reply, _ = replay(name)
    assert reply.tool_calls == []
    [(start, end)] = reply.markup
    assert reply.content[start:].startswith(marker)
    assert "uv run scripts/lights.py status" in reply.content[start:end]


def _session_against(name: str):
    async def go():
        seen: list[dict] = []
        runner, url = await _serve(name, seen)
        try:
            suite = load_suite(RALF)
            target = Target(name="t", base_url=url, model="m", stream=name.endswith(".sse"))
            async with ModelClient(target, backoff_s=0.001) as client:
                return (await run_session(suite.scenarios["lights-evening-off"], client,
                                          target="t", suite=suite))[0]
        finally:
            await runner.cleanup()

    return asyncio.run(go())


@pytest.mark.parametrize("name", ["vllm-no-parser-tool-call-text.json",
                                  "ollama-v1-fenced-bash-text.json"],
                         ids=["tool-call-tag", "fenced-bash"])
def test_text_tool_call_is_ae104_against_the_setup_and_show_says_so(name, tmp_path):
    record = _session_against(name)
    assert record.status == "abandoned"  # the model's session, not a harness error
    [call] = record.calls
    assert (call.tool, call.decision, call.primary) == (TEXT_CALL_TOOL, "deny", "AE104")
    assert "counted against the model/server setup" in call.findings[0].message

    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.store import open_store

    db = tmp_path / "s.db"
    with open_store(str(db)) as store:
        run_id = add_run(store, [record], label=None, suite=str(RALF), targets={"t": "m"},
                         base_url="http://x/v1")
        [row] = list(store.session_rows([run_id]))
    shown = CliRunner().invoke(main, ["show", str(row.id), "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "AE104" in text and "model/server setup" in text


def test_recorded_llama_cpp_python_500_on_null_content_is_rejected_after_one_retry():
    """The body llama-cpp-python 0.3.36 really sent: not retried 4 times."""
    from agent_eval.errors import RequestRejected
    from agent_eval.live.run import likely_fix

    async def go():
        seen: list[dict] = []
        runner, url = await serve_fixture(WIRE / "llama-cpp-python-null-content-500.json",
                                          status=500, seen=seen)
        try:
            target = Target(name="t", base_url=url, model="m", retries=3)
            async with ModelClient(target, backoff_s=0.001) as client:
                with pytest.raises(RequestRejected, match="request rejected") as info:
                    await client.complete([{"role": "user", "content": "x"}], None)
        finally:
            await runner.cleanup()
        return info.value, seen

    rejected, seen = asyncio.run(go())
    assert len(seen) == 2 and rejected.status == 500
    assert rejected.server_message.startswith("7 validation errors")
    assert "conversation's shape" in likely_fix(rejected.server_message)


# --- the other protocols the proxy records (agent_eval.wire) ---------------------------

WIRE_CMD = ("uv run scripts/db_query.py --sql \"SELECT attempt_id FROM attempts "
            "WHERE status = 'open'\"")


@pytest.mark.parametrize(("name", "protocol", "usage"), [
    ("vllm-responses-function-call.json", "responses", (1843, 61, 1536, 17)),
    ("vllm-responses-function-call-stream.sse", "responses", (1843, 61, 1536, 17)),
    ("llama-server-messages-tool-use-stream.sse", "messages", (412, 38, None, None)),
    ("gemini-api-function-call.json", "gemini", (389, 66, 256, 42)),
])
def test_a_server_reply_in_another_protocol_reads_as_its_call(name, protocol, usage):
    from agent_eval import wire

    reply = wire.parse_reply(protocol, (WIRE / name).read_bytes(), streamed=name.endswith(".sse"))
    assert reply.status == "complete" and reply.finish_reason == "tool_calls"
    [call] = reply.calls
    assert (call.name, json.loads(call.arguments)) == ("bash", {"command": WIRE_CMD})
    got = reply.usage
    assert (got.get("prompt_tokens"), got.get("completion_tokens"),
            got.get("prompt_tokens_details", {}).get("cached_tokens"),
            got.get("completion_tokens_details", {}).get("reasoning_tokens")) == usage
    if protocol == "responses":
        assert call.id == "call_8a41b7f2c9d0e3a5"
        assert reply.reasoning == "The task needs the open attempts; db_query.py is allowed."
    if protocol == "messages":
        assert reply.content == "Listing the open attempts." and call.id == "toolu_4c7e9a"
