"""Policy sources wherever an allow-list is taken, and the agent whose rules judge a
session: ``policy.sources.choose_agent``, ``recorded_verdict``, ``calls.SessionJudges``,
a scenario's ``agent:``, and one ``Error:`` line from every command for a broken one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.call_recorder import CallRecorder, SessionJudges
from agent_eval.errors import ConfigError
from agent_eval.policy import load_allowlist
from agent_eval.policy.rules import code_for
from agent_eval.policy.sources import (
    choose_agent,
    judge_command,
    load_policy_source,
    recorded_verdict,
    resolve_policy,
)
from agent_eval.policy.sources.model import (
    AgentPolicy,
    DualVerdict,
    HarnessVerdict,
    PolicySource,
)
from agent_eval.policy.verdict import Verdict
from agent_eval.scenario import load_suite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SEED = FIXTURES / "policies" / "opencode-seed" / "opencode.json"
CLAUDE = FIXTURES / "clients" / "claude-code" / "claude_with_rejection.jsonl"
RALF = Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml"


def seed() -> PolicySource:
    return load_policy_source(SEED)


# --- which agent judges a session ----------------------------------------------------

def test_the_clients_header_names_the_agent():
    choice = choose_agent(seed(), named="lights", system_prompt="You are the email agent.")
    assert (choice.agent.name, choice.via) == ("lights", "header")


def test_the_system_prompt_holding_an_agents_own_prompt_names_it():
    prompt = "Environment: linux.\nYou are the research agent. Query the database and " \
             "read the rendered pages.\nTools: bash, read."
    choice = choose_agent(seed(), named="nobody", system_prompt=prompt)
    assert (choice.agent.name, choice.via) == ("research", "prompt")


def test_the_longest_matching_prompt_wins():
    agents = {name: AgentPolicy("opencode", name, (), prompt=prompt) for name, prompt in (
        ("short", "You are the mail agent."),
        ("long", "You are the mail agent. Only drafts, never send."))}
    source = PolicySource("opencode", "x", agents, "short")
    choice = choose_agent(source, system_prompt="You are the mail agent. Only drafts, "
                                                "never send. Be brief.")
    assert choice.agent.name == "long"


def test_a_prompt_too_short_to_tell_agents_apart_is_not_matched():
    agents = {"a": AgentPolicy("opencode", "a", (), prompt="Be brief."),
              "main": AgentPolicy("opencode", "main", ())}
    source = PolicySource("opencode", "x", agents, "main")
    assert choose_agent(source, system_prompt="Be brief. Be kind.").via == "default"


def test_nothing_said_is_the_default_agent():
    choice = choose_agent(seed(), system_prompt="You are a helpful assistant.")
    assert (choice.agent.name, choice.via) == ("orchestrator", "default")


def test_an_operators_agent_judges_every_session():
    judges = SessionJudges(resolve_policy(SEED, "lights"), foreign=True)
    judge = judges.for_session(named="email", system_prompt="You are the email agent.")
    assert (judge.agent, judge.via) == ("lights", "option")


def test_an_allow_list_has_no_agent():
    judge = SessionJudges(load_allowlist(RALF)).for_session(named="email")
    assert (judge.agent, judge.via) == (None, None)


# --- the verdict stored ---------------------------------------------------------------

def test_the_stored_verdict_is_the_harness_one_and_the_leak_its_strict_class():
    email = seed().agent("email")
    recorder = CallRecorder(resolve_policy(SEED, "email").allowlist,
                            policy=resolve_policy(SEED, "email"), foreign=True)
    record, _ = recorder.record(0, 0, "bash", json.dumps(
        {"command": "uv run scripts/email_search.py --q x > /tmp/out.txt"}))
    assert (record.decision, record.primary, record.leak) == ("allow", None, "AE303")
    record, _ = recorder.record(1, 0, "Bash", json.dumps(
        {"command": "uv run scripts/lights.py on"}))  # another harness's tool name
    assert (record.decision, record.primary, record.leak) == (
        "deny", code_for("disallowed-program"), None)
    assert "lights.py" in judge_command(email, "uv run scripts/lights.py on").strict \
        .findings[0].message


def test_a_call_only_the_harness_refuses_is_classed_by_what_was_refused():
    # the harness asks (nobody answers: refused) where the strict reading allows
    stricter = DualVerdict(HarnessVerdict("ask", reason="nobody answered"), Verdict("allow"),
                           "bash", "ls")
    verdict = recorded_verdict(stricter)
    assert (verdict.decision, verdict.primary) == ("deny", code_for("disallowed-program"))
    assert "nobody answered" in verdict.findings[0].message


def test_a_tool_nobody_offered_is_still_the_engines_unknown_tool():
    policy = resolve_policy(SEED, "email")
    recorder = CallRecorder(policy.allowlist, policy=policy)
    judged = recorder.judge("web_search", {"query": "x"}, offered=["bash", "read"])
    assert (judged.verdict.primary, judged.leak) == (code_for("unknown-tool"), None)


# --- a scenario's agent ---------------------------------------------------------------

def suite_with(tmp_path: Path, scenario: str) -> Path:
    (tmp_path / "opencode.json").write_text(SEED.read_text())
    (tmp_path / "suite.yaml").write_text("allowlist: opencode.json\n")
    (tmp_path / "one.yaml").write_text(scenario)
    return tmp_path


def test_a_scenarios_agent_picks_its_rules(tmp_path):
    suite = load_suite(suite_with(tmp_path, "agent: lights\ntask: t\n"))
    scenario = suite.scenarios["one"]
    assert (scenario.policy.agent_name, scenario.policy.via) == ("lights", "scenario")
    assert scenario.allowlist.name == "opencode-lights"


def test_a_scenario_naming_no_agent_of_the_configuration_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is not an agent of") as refused:
        load_suite(suite_with(tmp_path, "agent: mailer\ntask: t\n"))
    assert "agent 'mailer' is not an agent of" in str(refused.value)
    assert "its agents: build, plan, orchestrator, email, lights" in str(refused.value)
    assert refused.value.field == "agent"


# --- one Error line from every command ------------------------------------------------

def one_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture
def broken(tmp_path) -> Path:
    path = tmp_path / "opencode.json"
    path.write_text('{"permission": {"bash": {"*": "allow",}')
    return path


def test_every_command_taking_an_allow_list_refuses_a_broken_config_in_one_line(
        tmp_path, broken):
    db = str(tmp_path / "runs.db")
    runner = CliRunner()
    stored = runner.invoke(main_cli(), ["import", "claude-code", str(CLAUDE), "--allowlist",
                                        str(RALF), "--db", db])
    assert stored.exit_code == 0, stored.output
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text(f"allowlist: {broken}\n")
    (suite / "one.yaml").write_text("task: t\n")
    commands = [
        ["import", "claude-code", str(CLAUDE), "--allowlist", str(broken), "--db", db],
        ["rescore", "latest", "--allowlist", str(broken), "--db", db],
        ["replay", "latest", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
         "--allowlist", str(broken), "--db", db],
        ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--allowlist", str(broken),
         "--db", db],
        ["run", "--suite", str(suite), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
         "--db", db],
        ["check", "--allowlist", str(broken), "ls"],
    ]
    for args in commands:
        line = one_error(runner.invoke(main_cli(), args))
        assert "not valid JSON at line 1" in line and "opencode.json" in line, (args, line)


def main_cli():
    from agent_eval.cli import main

    return main
