"""The simulator speaks OpenAI Responses, Anthropic Messages and Gemini as it speaks Chat
Completions: the same behaviour (a bundled scenario's reference call from the disciplined
profile), each request and reply in the protocol's own shape, streamed and not, over real
HTTP; and in front of an agent CLI it finds the task inside the CLI's wrapped messages and
answers with the CLI's own shell tool."""

from __future__ import annotations

import json
import urllib.request

import pytest

from agent_eval import wire
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import BUNDLED_SUITE_NAME, data_dir
from agent_eval.sim.server import run_sim_in_thread

SCENARIO = load_suite(data_dir() / "scenarios" / BUNDLED_SUITE_NAME).scenarios[
    "db-open-attempts"].spec
TASK = SCENARIO.task.strip()
COMMAND = SCENARIO.reference[0].bash
BASH = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def chat_request(messages, tools, *, stream: bool) -> dict:
    return {"model": "sim-disciplined", "messages": messages, "tools": tools, "stream": stream}


def post(base: str, protocol: str, chat: dict) -> tuple[str, wire.ParsedReply]:
    """Send ``chat`` written as ``protocol``; the reply as that protocol's parser reads it."""
    path, body = wire.write_request(protocol, chat)
    url = base.removesuffix("/v1") + ("/v1beta" if protocol == "gemini" else "/v1") + path
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        kind = answer.headers.get("Content-Type", "")
        raw = answer.read()
    return kind, wire.parse_reply(protocol, raw, streamed="text/event-stream" in kind)


@pytest.fixture(scope="module")
def sim():
    with run_sim_in_thread("disciplined") as base:
        yield base


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", ["responses", "messages", "gemini"])
def test_the_simulator_plays_a_scenario_in_each_protocol(sim, protocol, stream) -> None:
    kind, reply = post(sim, protocol, chat_request([{"role": "user", "content": TASK}],
                                                   [BASH], stream=stream))
    assert ("text/event-stream" in kind) == stream
    assert reply.status == "complete" and reply.finish_reason == "tool_calls"
    [call] = reply.calls
    assert (call.name, json.loads(call.arguments)) == ("bash", {"command": COMMAND})
    assert reply.usage["prompt_tokens"] > 0 and reply.usage["completion_tokens"] > 0
    # the call's output sent back in the protocol's shape: the task is done
    answered = [{"role": "user", "content": TASK}, reply.message(),
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "[]"}]
    _, final = post(sim, protocol, chat_request(answered, [BASH], stream=stream))
    assert final.status == "complete" and final.calls == [] and final.content


@pytest.mark.parametrize(("tool", "key"), [("exec_command", "cmd"), ("Bash", "command"),
                                           ("run_shell_command", "command")])
def test_a_task_wrapped_by_a_cli_is_found_and_played_with_the_cli_shell_tool(sim, tool, key):
    tools = [{"type": "function", "function": {"name": tool, "parameters": {
        "type": "object", "properties": {key: {"type": "string"}}}}}]
    messages = [{"role": "system", "content": "You are an agent CLI."},
                {"role": "user", "content": "<environment_context><cwd>/home/agent/project</cwd>"
                                            "</environment_context>"},
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>be "
                                              "brief</system-reminder>"},
                                             {"type": "text", "text": TASK}]}]
    _, reply = post(sim, "responses", chat_request(messages, tools, stream=True))
    [call] = reply.calls
    assert (call.name, json.loads(call.arguments)) == (tool, {key: COMMAND})
