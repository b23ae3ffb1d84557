"""Stack faults on relayed traffic (agent_eval/proxy/sessions.py): a reply the serving
stack cut or mangled is the stack's fault (AE5xx), never the model's AE102, and gets the
verdict a live run gives the same bytes.

Every wire fixture of tests/fixtures/wire/stack/ is relayed as a proxied exchange with
the request settings its README names, and must be stored with the same stack faults,
status and reason as ``agent-eval run`` stores it (tests/live/test_stack_fault_fixtures.py
plays the same bytes through the live client).  A streamed llama-cpp-python-style cut
(``finish_reason: "tool_calls"``, ``completion_tokens`` at the request's ``max_tokens``,
arguments unterminated) is written here: the fixture folder holds the whole reply."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from support.proxyplay import ALLOWLIST
from test_stack_fault_fixtures import CASES, RALF, STACK, _serve, target

from agent_eval.live.client import ModelClient
from agent_eval.live.orchestrator import run_session
from agent_eval.policy import load_allowlist
from agent_eval.proxy import Exchange
from agent_eval.proxy.sessions import Sessions
from agent_eval.transcript import TRUNCATED

SYSTEM = {"role": "system", "content": "You are the research subagent."}
TASK = {"role": "user", "content": "Open attempts for stage S2."}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "read", "parameters": {
             "type": "object", "properties": {"path": {"type": "string"}}}}}]


def proxied(settings: dict, reply: bytes, *, streamed: bool, status: int = 200) -> Exchange:
    """One relayed exchange: a request carrying ``settings`` (as ``run`` sends a target's)
    and ``reply`` as the upstream answered it."""
    body = {"model": "m", "messages": [SYSTEM, TASK], "tools": TOOLS}
    extra = dict(settings)
    body.update(extra.pop("extra_body", {}))
    if "tool_choice" in extra:
        choice = extra.pop("tool_choice")
        body["tool_choice"] = choice if choice in ("auto", "required", "none") else {
            "type": "function", "function": {"name": choice}}
    body.update(extra)
    if streamed:
        body.update(stream=True, stream_options={"include_usage": True})
    return Exchange(path="/v1/chat/completions", request_body=json.dumps(body).encode(),
                    session_headers={}, started_at=datetime.now(UTC), status=status,
                    content_type="text/event-stream" if streamed else "application/json",
                    response_body=bytearray(reply), ttft_s=0.1, latency_s=0.5)


def relayed(ex: Exchange):
    sessions = Sessions(load_allowlist(ALLOWLIST))
    sessions.take(ex, 0.0)
    [record] = sessions.close_all()
    return record


def verdict(record) -> tuple:
    """What a run and the proxy must agree on: the faults (code, ended it), the status,
    how the reason starts, and no call judged as the model's malformed or unknown one."""
    reason = (record.error or "").split(":")[0]
    return ([(f.code, f.ends) for f in record.stack_faults], record.status, reason,
            [c.primary for c in record.calls if c.primary in ("AE101", "AE102")])


def live(name: str, settings: dict):
    """The session ``agent-eval run`` stores for the fixture ``name`` (first turn)."""

    async def go():
        runner, url = await _serve(name)
        try:
            async with ModelClient(target(url, name, **settings), backoff_s=0.001) as client:
                return await run_session(RALF.scenarios["lights-evening-off"], client,
                                         target="t")
        finally:
            await runner.cleanup()

    (record, *_) = asyncio.run(go())
    return record


@pytest.mark.parametrize("name", list(CASES))
def test_a_relayed_fixture_holds_the_stack_fault_a_run_finds(name):
    codes, settings = CASES[name]
    record = relayed(proxied(settings, (STACK / name).read_bytes(),
                             streamed=name.endswith(".sse")))
    assert [f.code for f in record.stack_faults] == codes
    assert not any(c.primary in ("AE101", "AE102") for c in record.calls)


@pytest.mark.parametrize("name", ["vllm-cut-by-max-tokens.json",
                                  "llama-cpp-python-cut-at-max-tokens.json",
                                  "sglang-cut-by-max-tokens-stream.sse",
                                  "vllm-template-token-in-name.json"])
def test_a_relayed_cut_gets_the_verdict_of_a_live_run(name):
    _, settings = CASES[name]
    record = relayed(proxied(settings, (STACK / name).read_bytes(),
                             streamed=name.endswith(".sse")))
    assert verdict(record) == verdict(live(name, settings))
    assert record.status == "error"


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> str:
    body: dict = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gemma3",
                  "choices": [] if delta is None else [
                      {"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def llama_cpp_python_stream(*, finish: str, completion_tokens: int) -> bytes:
    """A streamed call cut at ``max_tokens`` 48 in llama-cpp-python's manner: its
    ``chatml-function-calling`` handler ends a streamed call with ``tool_calls`` whatever
    stopped the sampler (llama_cpp/llama_chat_format.py)."""
    return "".join([
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call__0_bash_cmpl-1", "type": "function",
                               "function": {"name": "bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {
            "arguments": "{\"command\": \"uv run scripts/db_query.py --sql \\\"SELECT"}}]}),
        chunk({}, finish),
        chunk(usage={"prompt_tokens": 1204, "completion_tokens": completion_tokens,
                     "total_tokens": 1204 + completion_tokens}),
        "data: [DONE]\n\n"]).encode()


def test_a_streamed_llama_cpp_python_cut_and_a_vllm_cut_are_one_truncation():
    cpp = relayed(proxied({"max_tokens": 48},
                          llama_cpp_python_stream(finish="tool_calls", completion_tokens=48),
                          streamed=True))
    vllm = relayed(proxied({"max_tokens": 48},
                           llama_cpp_python_stream(finish="length", completion_tokens=48),
                           streamed=True))
    for record in (cpp, vllm):
        assert verdict(record) == ([("AE501", True)], "error", TRUNCATED.split(":")[0], [])
        assert record.calls == [] and "reply:length-cut" in record.tags
        assert record.error.startswith(TRUNCATED) and "'bash'" in record.error
        assert record.stack_faults[0].raw.endswith("SELECT")  # the cut text, kept
        # the transcript keeps the call as relayed
        assert record.messages[-1]["tool_calls"][0]["function"]["arguments"].endswith("SELECT")


def test_the_same_stream_under_the_cap_is_the_models_malformed_call():
    """Unterminated arguments with tokens to spare: the model stopped, not the cap."""
    record = relayed(proxied({"max_tokens": 512},
                             llama_cpp_python_stream(finish="tool_calls", completion_tokens=48),
                             streamed=True))
    assert record.stack_faults == [] and record.status == "completed"
    assert [c.primary for c in record.calls] == ["AE102"]


def test_a_cut_the_client_carried_on_past_leaves_the_session_judged():
    """The agent CLI, not the harness, decides whether a proxied session goes on: a cut
    on an earlier reply is counted (the lost call too) and the later calls are judged."""
    sessions = Sessions(load_allowlist(ALLOWLIST))
    cut = llama_cpp_python_stream(finish="tool_calls", completion_tokens=48)
    sessions.take(proxied({"max_tokens": 48}, cut, streamed=True), 0.0)
    whole = json.dumps({"model": "gemma3", "choices": [{"index": 0, "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": "", "tool_calls": [
                            {"id": "call-2", "type": "function", "function": {
                                "name": "bash", "arguments": json.dumps(
                                    {"command": "uv run scripts/db_query.py --sql 'select 1'"})}}]}}],
                        "usage": {"prompt_tokens": 1300, "completion_tokens": 30}}).encode()
    ex = proxied({"max_tokens": 48}, whole, streamed=False)
    body = json.loads(ex.request_body)
    body["messages"] += [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call__0_bash_cmpl-1", "type": "function", "function": {
            "name": "bash", "arguments": "{\"command\": \"uv run"}}]},
        {"role": "tool", "tool_call_id": "call__0_bash_cmpl-1", "content": "parse error"}]
    ex.request_body = json.dumps(body).encode()
    sessions.take(ex, 1.0)
    [record] = sessions.close_all()
    assert [(f.turn_index, f.code, f.ends) for f in record.stack_faults] == [(0, "AE501", True)]
    assert record.status == "completed"
    assert [(c.turn_index, c.decision) for c in record.calls] == [(1, "allow")]


def test_a_parser_500_relayed_is_kept_on_the_error_session():
    name = "vllm-tool-parser-error.500.json"
    record = relayed(proxied({}, (STACK / name).read_bytes(), streamed=False, status=500))
    assert record.status == "error"
    assert [(f.code, f.ends) for f in record.stack_faults] == [("AE509", True)]


def test_the_recorder_counts_the_truncations_it_kept_for_the_stop_line(tmp_path):
    from agent_eval.proxy import Recorder
    from agent_eval.store import open_store

    with open_store(str(tmp_path / "p.db")) as store:
        recorder = Recorder(store, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                            journal=tmp_path / "j", tick_s=0.01)
        recorder.start()
        recorder.submit(proxied({"max_tokens": 48}, llama_cpp_python_stream(
            finish="tool_calls", completion_tokens=48), streamed=True))
        recorder.stop()
        assert recorder.status()["truncations"] == 1
        [row] = store.session_rows([recorder.run_id])
    assert row.status == "error" and row.stack_faults == (("AE501", True),)
