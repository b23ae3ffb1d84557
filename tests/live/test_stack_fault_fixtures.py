"""Stack faults on the wire (tests/fixtures/wire/stack/) read through the real client.

Each fixture is served byte for byte from a loopback aiohttp server to ``ModelClient``
with the request settings its README names; the reply (or the error) is read by the
orchestrator's ``reply_stack_faults`` (``policy.stack``) and must be the class the
README gives it, never a model error.  Sources: tests/fixtures/wire/stack/README.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.loopback import serve_fixture

from agent_eval.live.client import ModelClient, Target
from agent_eval.live.orchestrator import reply_stack_faults, run_session
from agent_eval.scenario import load_suite

STACK = Path(__file__).resolve().parents[1] / "fixtures" / "wire" / "stack"
RALF = load_suite(Path(__file__).resolve().parents[2] / "scenarios" / "ralf")
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]

CASES = {  # file -> (codes, target settings)
    "vllm-cut-by-max-tokens.json": (["AE501"], {"max_tokens": 64}),
    "llama-cpp-python-cut-at-max-tokens.json": (["AE501"], {"max_tokens": 48}),
    "sglang-cut-by-max-tokens-stream.sse": (["AE501"], {"max_tokens": 32}),
    "vllm-required-empty-tool-calls.json": (["AE504"], {"tool_choice": "required"}),
    "ollama-stop-with-tool-call.json": (["AE502"], {}),
    "ollama-empty-message-with-tokens.json": (["AE503"], {}),
    "sglang-parallel-false-two-calls.json": (["AE505"],
                                             {"extra_body": {"parallel_tool_calls": False}}),
    "sglang-repeated-call-ids.json": (["AE506"], {}),
    "vllm-template-token-in-name.json": (["AE507"], {}),
    "ollama-calls-at-index-zero-stream.sse": (["AE502", "AE508"], {}),
}


async def _serve(name: str):
    return await serve_fixture(STACK / name, status=500 if name.endswith(".500.json") else 200)


def target(url: str, name: str, **settings) -> Target:
    return Target(name="t", base_url=url, model="m", stream=name.endswith(".sse"), retries=1,
                  **settings)


def test_every_fixture_in_the_folder_has_a_case_and_a_readme_row():
    readme = (STACK / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in STACK.iterdir() if p.name != "README.md")
    assert sorted([*CASES, "vllm-tool-parser-error.500.json"]) == files
    assert all(f"`{name}`" in readme for name in files)


@pytest.mark.parametrize("name", list(CASES))
def test_the_fixture_is_read_as_its_stack_fault(name):
    codes, settings = CASES[name]

    async def go():
        runner, url = await _serve(name)
        try:
            async with ModelClient(target(url, name, **settings), backoff_s=0.001) as client:
                return await client.complete([{"role": "user", "content": "x"}], TOOLS)
        finally:
            await runner.cleanup()

    reply = asyncio.run(go())
    assert [f.code for f in reply_stack_faults(reply, 0)] == codes


def test_a_parser_500_ends_the_session_as_the_servers_with_its_body_kept():
    name = "vllm-tool-parser-error.500.json"

    async def go():
        runner, url = await _serve(name)
        try:
            async with ModelClient(target(url, name), backoff_s=0.001) as client:
                return await run_session(RALF.scenarios["lights-evening-off"], client,
                                         target="t")
        finally:
            await runner.cleanup()

    (rec,) = asyncio.run(go())
    assert rec.status == "error" and rec.calls == []
    (fault,) = rec.stack_faults
    assert fault.code == "AE509" and fault.ends
    assert "Error in extracting tool call from response" in fault.raw
