"""Gemini CLI's and Qwen Code's rules as policy sources: reading their settings (and Gemini
CLI's TOML policies), and the verdicts of their pinned releases unattended.  The
expected verdicts are what the real CLIs did (tests/fixtures/conformance/gemini-cli-*
and qwen-code-*) or what their source says (docs/policies.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy.sources import (
    Setting,
    judge_call,
    judge_command,
    load_policy_source,
    source_kind,
)
from agent_eval.policy.sources.emulation import check_mode, version_from_headers
from agent_eval.policy.sources.gemini_cli import prefix_pattern

POLICY = """\
[[rule]]
toolName = "run_shell_command"
commandPrefix = "git push"
decision = "ask_user"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = ["curl", "wget"]
decision = "deny"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = "tee"
decision = "allow"
priority = 100
allowRedirection = true

[[rule]]
toolName = "run_shell_command"
commandPrefix = "echo"
decision = "allow"
priority = 100
"""


def gemini(tmp_path: Path, tools: dict, policy: str | None = POLICY):
    settings = tmp_path / ".gemini" / "settings.json"
    (settings.parent / "policies").mkdir(parents=True)
    settings.write_text(json.dumps({"tools": tools}))
    if policy is not None:
        (settings.parent / "policies" / "mine.toml").write_text(policy)
    return load_policy_source(settings).agent(None)


def qwen(tmp_path: Path, permissions: dict, **extra):
    settings = tmp_path / ".qwen" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": permissions, **extra}))
    return load_policy_source(settings).agent(None)


def decide(agent, command: str, mode: str = "default") -> str:
    return judge_command(agent, command, Setting(mode=mode)).harness.decision


ALLOWED = {"allowed": ["run_shell_command(echo)", "run_shell_command(git diff)",
                       "run_shell_command(cd)", "run_shell_command(ls)"]}


def test_the_files_are_told_apart_by_folder_and_suffix(tmp_path):
    for folder, kind in ((".gemini", "gemini-cli"), (".qwen", "qwen-code"),
                         (".claude", "claude-code")):
        path = tmp_path / folder / "settings.json"
        path.parent.mkdir()
        path.write_text('{"permissions": {"allow": []}}')
        assert source_kind(path) == kind
    toml = tmp_path / "p.toml"
    toml.write_text(POLICY)
    assert source_kind(toml) == "gemini-cli"
    assert source_kind(tmp_path) == "gemini-cli"  # a folder of .toml policies


def test_gemini_prefix_rules_match_at_a_word_boundary(tmp_path):
    agent = gemini(tmp_path, ALLOWED)
    assert decide(agent, "echo conform") == "allow"
    assert decide(agent, "echoes x") == "deny"  # the narrowing deny of tools.allowed
    assert decide(agent, "git diff HEAD") == "allow"
    assert decide(agent, "git --no-pager diff") == "deny"
    assert prefix_pattern("git diff") == r'\"command\":\"git\ diff(?:[\s"]|\\")'


def test_gemini_checks_every_part_of_a_chain_pipe_and_substitution(tmp_path):
    agent = gemini(tmp_path, ALLOWED)
    assert decide(agent, "echo a && uname -s") == "deny"
    assert decide(agent, "echo $(uname -s)") == "deny"
    assert decide(agent, "ls | head -1") == "deny"
    assert decide(agent, "cd /tmp && ls") == "allow"  # recorded: ran
    assert decide(agent, "echo conform &") == "allow"  # recorded: ran


def test_gemini_asks_for_a_redirection_unless_the_rule_allows_it(tmp_path):
    agent = gemini(tmp_path, {})
    assert decide(agent, "echo conform > out.txt") == "ask"
    assert decide(agent, "tee out.txt < notes.txt") == "allow"  # allowRedirection = true
    assert decide(agent, "echo conform > out.txt", "yolo") == "allow"


def test_gemini_toml_rules_are_outranked_by_the_settings_narrowing(tmp_path):
    narrowed = gemini(tmp_path, ALLOWED)
    # user-tier TOML priority 100 is 4.1, the narrowing deny 4.29 (recorded: refused)
    assert decide(narrowed, "git push origin main") == "deny"
    assert decide(narrowed, "uname -s", "yolo") == "deny"  # the narrowing has no mode
    agent = gemini(tmp_path / "toml", {})
    assert decide(agent, "git push origin main") == "ask"
    assert decide(agent, "wget http://x") == "deny"
    assert decide(agent, "git push origin main", "yolo") == "ask"  # 4.1 outranks yolo
    bare = gemini(tmp_path / "bare", {}, policy=None)
    assert decide(bare, "uname -s", "yolo") == "allow"
    assert decide(bare, "uname -s") == "deny"  # unattended: nothing allowed by default
    assert decide(bare, "ls", "plan") == "deny"


def test_gemini_exclude_names_a_tool_not_a_command(tmp_path):
    agent = gemini(tmp_path, {"allowed": ["run_shell_command"],
                              "exclude": ["run_shell_command(curl)"]}, policy=None)
    assert decide(agent, "curl http://x") == "allow"  # no tool is named `run_shell_command(curl)`
    whole = gemini(tmp_path / "w", {"exclude": ["run_shell_command"]}, policy=None)
    assert decide(whole, "echo hi", "yolo") == "deny"


def test_gemini_core_tools_deny_every_other_tool(tmp_path):
    agent = gemini(tmp_path, {"core": ["read_file"]}, policy=None)
    assert judge_call(agent, "read_file", {"file_path": "notes.txt"}).harness.allowed
    assert judge_call(agent, "web_fetch", {"prompt": "x"}).harness.decision == "deny"


@pytest.mark.parametrize(("text", "message"), [
    ('[[rule]]\ntoolName = "x"\ndecision = "maybe"\npriority = 1\n', "is not a decision"),
    ('[[rule]]\ntoolName = "x"\ndecision = "allow"\npriority = 5000\n', "from 0 to 999"),
    ('[[rule]]\ntoolName = "x"\ndecision = "allow"\n', "priority: is required"),
    ('[[rule]]\ndecision = "allow"\npriority = 1\n', "names no tool"),
    ('[[rule]\n', "not valid TOML"),
    ('[[rule]]\ntoolName = "x"\ndecision = "allow"\npriority = 1\nmodes = ["fast"]\n',
     "modes must be"),
])
def test_a_bad_gemini_policy_is_one_config_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_policy_source(path)
    assert str(path) in str(caught.value)


def test_qwen_unattended_default_mode_has_no_shell_without_a_whole_tool_rule(tmp_path):
    agent = qwen(tmp_path, {"allow": ["Bash(echo *)"]})
    assert decide(agent, "echo conform") == "deny"  # recorded: refused, not registered
    assert decide(agent, "echo conform", "yolo") == "allow"


def test_qwen_unattended_with_the_shell_registered_declines_what_needs_a_confirmation(
        tmp_path):
    """Recorded (qwen-code-0.24.4-default-core, read right): once tools.core registers
    the shell, a deny rule refuses, a write is refused as an edit, what an allow rule or
    the read-only analysis passes runs, and what needs a confirmation (an ask rule, or
    no rule and not read-only) comes back "Qwen Code requires permission to use
    "run_shell_command", but that permission was declined (non-interactive mode cannot
    prompt for confirmation)"; the strict reading keeps unmatched parts blocked."""
    agent = qwen(tmp_path, {"allow": ["Bash(npm run:*)"], "ask": ["Bash(git push *)"],
                            "deny": ["Bash(curl *)"]}, tools={"core": ["run_shell_command"]})
    assert decide(agent, "npm run build") == "allow"
    assert decide(agent, "uname -s") == "ask"  # recorded: declined
    assert decide(agent, "git push origin main") == "ask"  # recorded: declined
    assert decide(agent, "timeout 5 ls") == "ask"  # a wrapper is not read-only
    assert decide(agent, "git --no-pager diff") == "ask"
    assert decide(agent, "cat notes.txt") == "allow"  # read-only: ran with no rule
    assert decide(agent, "git status") == "allow"
    assert decide(agent, "bash -c 'cat notes.txt'") == "allow"  # its script is judged
    assert decide(agent, "ls && curl x") == "deny"
    assert decide(agent, "echo conform > out.txt") == "deny"  # recorded: "deny rule: edit"
    assert decide(agent, "echo a | tee out.txt") == "deny"
    assert decide(agent, "ls 2>/dev/null") == "allow"
    assert decide(agent, "echo conform > out.txt", "auto-edit") == "allow"
    assert decide(agent, "uname -s", "yolo") == "allow"  # yolo asks nobody
    dual = judge_command(agent, "cat notes.txt", Setting())
    assert dual.leak_class == "AE307"  # no rule allows it when read strictly
    strict = judge_command(agent, "FOO=1 npm run build", Setting()).strict
    assert strict.allowed is False  # an assignment is refused by the strict structure
    whole = qwen(tmp_path / "w", {"allow": ["Bash", "Edit"]})
    assert decide(whole, "echo conform > out.txt") == "allow"  # edits allowed whole


def test_qwen_plan_mode_runs_only_what_it_can_tell_read_only(tmp_path):
    """Recorded (qwen-code-0.24.4-plan-core): "Plan mode could not determine whether this
    shell command is read-only ... The command was not run" for a substitution, an
    assignment or a command not read-only; "Plan mode blocked this shell command because
    it was classified as state-modifying" for git push and any output redirection."""
    agent = qwen(tmp_path, {"allow": ["Bash(echo *)"]}, tools={"core": ["run_shell_command"]})
    for command in ("echo conform", "ls -la", "cat notes.txt | grep conform", "echo $((1+1))",
                    "cd /tmp && ls", "(echo conform)"):
        assert decide(agent, command, "plan") == "allow", command
    for command in ("uname -s", "echo $(uname -s)", "echo `uname -s`", "FOO=1 ls",
                    "bash -c 'echo conform'", "timeout 5 ls"):
        assert decide(agent, command, "plan") == "ask", command
    for command in ("git push origin main", "ls 2>/dev/null"):
        assert decide(agent, command, "plan") == "deny", command


def test_modes_and_versions_of_the_new_clis(tmp_path):
    assert check_mode("gemini-cli", "autoEdit") == "autoEdit"
    assert check_mode("qwen-code", "auto-edit") == "auto-edit"
    with pytest.raises(ConfigError, match="its modes: default, autoEdit, yolo, plan"):
        check_mode("gemini-cli", "auto_edit")
    assert version_from_headers({"User-Agent": "GeminiCLI-tui/0.61.0/capture-model (linux)"}) \
        == ("gemini-cli", "0.61.0")
    assert version_from_headers({"user-agent": "QwenCode/0.24.4 (linux; x64)"}) \
        == ("qwen-code", "0.24.4")


def test_a_leak_is_flagged_under_qwen_yolo(tmp_path):
    agent = qwen(tmp_path, {"deny": ["Bash(curl *)"]})
    dual = judge_command(agent, "echo a | tee out.txt", Setting(mode="yolo"))
    assert dual.harness.allowed and dual.leak_class == "AE301"


def test_explain_shows_the_parse_each_cli_matches_on(tmp_path):
    from agent_eval.policy.sources.explain import explain

    shown = explain(gemini(tmp_path, ALLOWED), "echo a && uname -s", Setting())
    assert shown.parse == ("echo a && uname -s", "echo a", "uname -s")
    assert shown.dual.harness.decision == "deny"
    assert [r.label() for r in shown.dual.harness.rules] == ["run_shell_command: deny"]
    assert shown.emulation.describe() == "gemini-cli 0.61.0, mode default"
    qwen_agent = qwen(tmp_path, {"allow": ["Bash"], "deny": ["Bash(curl *)"]})
    shown = explain(qwen_agent, "FOO=1 ls | curl x", Setting(mode="yolo"))
    assert shown.parse == ("FOO=1 ls", "curl x")
    assert [r.label() for r in shown.dual.harness.rules] == ["Bash(curl *): deny"]


def test_converted_allow_lists_never_allow_more_than_the_rules(tmp_path):
    from agent_eval.policy import check_command
    from agent_eval.policy.sources import resolve_policy

    path = tmp_path / ".gemini" / "settings.json"
    gemini(tmp_path, ALLOWED)
    allowlist = resolve_policy(path).allowlist
    assert check_command("git diff HEAD", allowlist).allowed
    assert not check_command("uname -s", allowlist).allowed
    assert not check_command("echo a && uname -s", allowlist).allowed
