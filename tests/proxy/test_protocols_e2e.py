"""End to end over real HTTP: conversations in OpenAI Responses, Anthropic Messages and
Gemini through ``agent-eval proxy`` in front of the simulator are stored as sessions of
their protocol, judged like Chat Completions ones, counted per protocol on the exit line;
``agent-eval replay`` of that run sends each stored turn again in the protocol it was
recorded in (a second proxy, in front of the same simulator, counts what it received)."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from agent_eval import wire
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import BUNDLED_SUITE_NAME, data_dir
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from tests.proxy.test_proxy_e2e import ProxyProcess, cli

pytestmark = pytest.mark.e2e

SUITE = data_dir() / "scenarios" / BUNDLED_SUITE_NAME
SCENARIO = load_suite(SUITE).scenarios["db-open-attempts"].spec
TASK, COMMAND = SCENARIO.task.strip(), SCENARIO.reference[0].bash
BASH = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
PLAYED = {"responses": True, "messages": False, "gemini": True}  # protocol -> streamed


def post(base: str, protocol: str, chat: dict) -> wire.ParsedReply:
    path, body = wire.write_request(protocol, chat)
    root = base.removesuffix("/v1") + ("/v1beta" if protocol == "gemini" else "/v1")
    request = urllib.request.Request(root + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        streamed = "text/event-stream" in answer.headers.get("Content-Type", "")
        return wire.parse_reply(protocol, answer.read(), streamed=streamed)


def play(base: str, protocol: str, stream: bool) -> None:
    """The scenario's two turns: the reference call, then (its output sent back) the end."""
    chat = {"model": "sim-disciplined", "stream": stream, "tools": [BASH],
            "messages": [{"role": "user", "content": TASK}]}
    first = post(base, protocol, chat)
    [call] = first.calls
    chat["messages"] += [first.message(), {"role": "tool", "tool_call_id": call.id,
                                           "name": call.name, "content": "[]"}]
    last = post(base, protocol, chat)
    assert last.status == "complete" and not last.calls


def test_each_protocol_is_recorded_judged_and_replayed_in_its_own_protocol(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with run_sim_in_thread("disciplined", suite=SUITE) as sim:
        proxy = ProxyProcess(sim, db, tmp_path / "journal", "cli-protocols",
                             extra=("--idle-timeout", "30"))
        try:
            for protocol, stream in PLAYED.items():
                play(proxy.base_url, protocol, stream)
            status_url = proxy.base_url.removesuffix("/v1") + "/_agent_eval/status"
            for _ in range(100):  # the recorder publishes its counts every 0.25 s
                with urllib.request.urlopen(status_url, timeout=10) as answer:
                    status = json.loads(answer.read())
                if status["recorded_gemini"] == 2:
                    break
                time.sleep(0.1)
        finally:
            said = proxy.stop()
        assert {k: v for k, v in status.items() if "recorded_" in k} == {
            "recorded_chat": 0, "not_recorded_chat": 0, "recorded_responses": 2,
            "not_recorded_responses": 0, "recorded_messages": 2, "not_recorded_messages": 0,
            "recorded_gemini": 2, "not_recorded_gemini": 0}
        assert ("exchanges by protocol: responses 2 recorded, 0 not; messages 2 recorded, "
                "0 not; gemini 2 recorded, 0 not") in said
        with open_store(db) as store:
            run = store.resolve_run("label:cli-protocols")
            records = [s.record for s in store.iter_sessions([run.id])]
        assert sorted(r.protocol for r in records) == ["gemini", "messages", "responses"]
        for r in records:
            assert [(c.tool, c.command, c.decision) for c in r.calls] == [
                ("bash", COMMAND, "allow")]
            assert [t.finish_reason for t in r.turns] == ["tool_calls", "stop"]
            assert r.calls[0].output == "[]"
        # each plays a bundled task: named by its scenario, unique per role (system prompt)
        assert [r.scenario for r in records] == ["db-open-attempts"] * 3
        # replay, through a second proxy that counts what arrives in which protocol
        second = ProxyProcess(sim, f"sqlite:///{tmp_path / 'seen.db'}", tmp_path / "j2",
                              "seen")
        try:
            result = cli("replay", str(run.id), "--base-url", second.base_url, "--model",
                         "sim-disciplined", "--db", db, "--label", "replayed")
        finally:
            seen = second.stop()
    assert result.returncode == 0, result.stderr
    assert ("responses 1 recorded, 0 not; messages 1 recorded, 0 not; "
            "gemini 1 recorded, 0 not") in seen
    with open_store(db) as store:
        replayed = store.resolve_run("label:replayed")
        calls = [(c.tool, c.command, c.decision) for s in store.iter_sessions([replayed.id])
                 for c in s.record.calls]
    assert calls == [("bash", COMMAND, "allow")] * 3
