"""The simulator plays any client (agent_eval/sim/clients.py), from the requests five real
agent CLIs sent (tests/fixtures/clis): the bundled scenario's task put where the CLI put
its user's prompt (inside its reminders, after its context), the simulator finds it and
answers with the CLI's own shell or read tool, named and keyed as the CLI defines it;
the CLI's side requests get text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agent_eval import wire
from agent_eval.policy import check_call, load_allowlist
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import BUNDLED_SUITE_NAME, data_dir
from agent_eval.sim import get_profile
from agent_eval.sim.behaviour import index_tasks, plan_reply
from agent_eval.sim.clients import SIDE_REPLY, adapt_calls, is_side_request, locate, target_for

CLIS = Path(__file__).resolve().parents[1] / "fixtures" / "clis"
CAPTURE_PROMPT = ("Run the shell command `ls -la`, then read the file notes.txt, then "
                  "delegate a short subtask to a subagent, then report what you found.")
SUITE = load_suite(data_dir() / "scenarios" / BUNDLED_SUITE_NAME)
INDEX = index_tasks(SUITE.scenarios.values())
PROTOCOL = {"opencode": "chat", "qwen-code": "chat", "qwen-code-memory": "chat",
            "codex": "responses", "claude-code": "messages", "gemini-cli": "gemini"}
SHELL = {"opencode": ("bash", "command"), "qwen-code": ("run_shell_command", "command"),
         "codex": ("exec_command", "cmd"), "claude-code": ("Bash", "command"),
         "gemini-cli": ("run_shell_command", "command")}
READ = {"opencode": ("read", "filePath"), "qwen-code": ("read_file", "file_path"),
        "codex": None, "claude-code": ("Read", "file_path"),
        "gemini-cli": ("read_file", "file_path")}


def captured(cli: str, n: int, task: str) -> dict:
    """Exchange ``n`` of the CLI's capture, read as a chat request, with the user's prompt
    replaced by ``task`` where the CLI put it."""
    path = CLIS / cli / "exchanges" / f"{n:02d}.request.json"
    meta = json.loads(path.with_name(f"{n:02d}.meta.json").read_text())
    raw = path.read_text().replace(json.dumps(CAPTURE_PROMPT)[1:-1], json.dumps(task)[1:-1])
    assert task in raw or json.dumps(task)[1:-1] in raw
    request = wire.read_request(PROTOCOL[cli], raw.encode(), meta["target"].split("?")[0])
    assert request is not None
    return request


def answer(request: dict):
    found = locate(INDEX, request["messages"])
    if is_side_request(request["messages"], request.get("tools"), found):
        return found, SIDE_REPLY
    reply = plan_reply(request["messages"], found.scenario, get_profile("disciplined"),
                       random.Random(0))
    return found, adapt_calls(reply, request.get("tools"))


@pytest.mark.parametrize("cli", sorted(SHELL))
def test_the_task_wrapped_by_a_cli_is_played_with_its_own_shell_tool(cli: str) -> None:
    scenario = SUITE.scenarios["db-open-attempts"]
    first = 1 if cli == "opencode" else 0  # OpenCode's first request asks for a title
    found, reply = answer(captured(cli, first, scenario.spec.task.strip()))
    assert found.scenario is not None and found.scenario.name == scenario.name
    [call] = reply.calls
    tool, key = SHELL[cli]
    assert (call.tool, call.arguments) == (tool, {key: scenario.spec.reference[0].bash})
    # the proxy's engine reads the call as the scenario's own bash call: the same verdict
    allowlist = scenario.allowlist
    ours = check_call(tool, json.dumps(call.arguments), allowlist, profiles=True)
    theirs = check_call("bash", json.dumps({"command": scenario.spec.reference[0].bash}),
                        allowlist)
    assert (ours.decision, ours.primary) == (theirs.decision, theirs.primary) == ("allow", None)


@pytest.mark.parametrize("cli", sorted(READ))
def test_a_read_step_goes_to_the_cli_read_tool_under_its_path_key(cli: str) -> None:
    scenario = SUITE.scenarios["read-chart-summary"]
    first = 1 if cli == "opencode" else 0
    request = captured(cli, first, scenario.spec.task.strip())
    target = target_for("read", request["tools"])
    assert (None if target is None else (target.name, target.key)) == READ[cli]
    _, reply = answer(request)
    [call] = reply.calls
    path = scenario.spec.reference[0].read
    if READ[cli] is None:  # Codex offers no text reader (view_image shows images)
        assert (call.tool, call.arguments) == ("read", {"path": path})
    else:
        assert (call.tool, call.arguments) == (READ[cli][0], {READ[cli][1]: path})


def test_codex_older_shell_tool_gets_the_command_as_bash_lc_argv() -> None:
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {
        "type": "object", "properties": {"command": {"type": "array"}}}}}]
    target = target_for("bash", tools)
    assert target is not None
    assert target.arguments("ls -la") == {"command": ["bash", "-lc", "ls -la"]}


def test_a_tool_of_a_profile_name_without_its_key_is_not_taken() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {
        "type": "object", "properties": {"absolute_path": {"type": "string"}}}}}]
    assert target_for("read", tools) is None


def test_opencode_title_request_is_answered_with_text() -> None:
    scenario = SUITE.scenarios["db-open-attempts"]
    request = captured("opencode", 0, scenario.spec.task.strip())
    found, reply = answer(request)
    assert found.scenario is not None and not found.exact  # the task is quoted in it
    assert reply == SIDE_REPLY and reply.calls == ()


def test_qwen_code_memory_extraction_is_answered_with_text_though_it_offers_a_shell() -> None:
    scenario = SUITE.scenarios["db-open-attempts"]
    request = captured("qwen-code-memory", 1, scenario.spec.task.strip())
    assert "run_shell_command" in [t["function"]["name"] for t in request["tools"]]
    _, reply = answer(request)
    assert reply == SIDE_REPLY


def test_a_bare_task_without_tools_is_still_played() -> None:
    """The simulator's own clients send the task alone and may send no tools."""
    scenario = SUITE.scenarios["db-open-attempts"]
    found, reply = answer({"messages": [{"role": "user", "content": scenario.spec.task}]})
    assert found.exact and [c.tool for c in reply.calls] == ["bash"]


def test_the_cli_allowlist_judges_each_cli_shell_call(tmp_path) -> None:
    """The fixtures' allow-list offers every CLI's tools: the simulator's call is allowed."""
    allowlist = load_allowlist(CLIS / "allowlist.yaml")
    command = SUITE.scenarios["db-open-attempts"].spec.reference[0].bash
    for cli, (tool, key) in SHELL.items():
        verdict = check_call(tool, json.dumps({key: command}), allowlist, profiles=True)
        assert (cli, verdict.decision) == (cli, "allow"), verdict.primary
