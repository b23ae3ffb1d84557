"""Leaks: calls a CLI's matcher allowed that the strict reading of the same rules denies.

The leak tests are built from the exact commands and configurations of three public Claude
Code permission reports (https://github.com/anthropics/claude-code/issues/28784, /4956,
/43085) and from the seed orchestrator's OpenCode configuration; `policy audit` must find
each, with its class and the rule responsible, over the bundled corpus, a calls file, a
transcript and a stored run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.policy.sources import Setting, load_policy_source, resolve_policy
from agent_eval.policy.sources.audit import AuditCall, audit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"
SEED = FIXTURES / "opencode-seed" / "opencode.json"
REPORTS = [
    # (settings, command, leak class, responsible rule, quirk)
    ({"allow": ["Bash(cd:*)"]}, "cd /some/path && python3 script.py", "AE304",
     "Bash(cd:*): allow", "cd-chain"),
    ({"allow": ["Bash(echo *)"]}, 'echo "test" && ls', "AE304", "Bash(echo *): allow",
     "whole-command-prefix"),
    ({"allow": ["Bash"]}, "bash -c 'echo \"...\" >> .claude/file'", "AE308", "Bash: allow",
     "inline-shell-unseen"),
]
REPORTED = "2.1.0"  # a release the reports hold for (the pinned one fixed the first two)


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write_settings(tmp_path: Path, permissions: dict) -> Path:
    folder = tmp_path / ".claude"
    folder.mkdir(exist_ok=True)
    path = folder / "settings.json"
    path.write_text(json.dumps({"permissions": permissions}))
    return path


@pytest.mark.parametrize(("permissions", "command", "code", "rule", "quirk"), REPORTS,
                         ids=["cd-chain", "echo-chain", "bash-c"])
def test_each_reported_bypass_is_a_leak(tmp_path, permissions, command, code, rule, quirk):
    agent = load_policy_source(write_settings(tmp_path, permissions)).agent(None)
    report = audit(agent, [AuditCall("bash", command, where="report")],
                   Setting(version=REPORTED))
    assert report.leak_count == 1
    leak = report.leaks[0]
    assert (leak.code, leak.rules, leak.quirk) == (code, (rule,), quirk)


@pytest.mark.parametrize(("permissions", "command", "code", "rule", "quirk"), REPORTS,
                         ids=["cd-chain", "echo-chain", "bash-c"])
def test_policy_audit_finds_them_in_the_bundled_corpus(tmp_path, permissions, command, code,
                                                       rule, quirk):
    result = run("policy", "audit", str(write_settings(tmp_path, permissions)), "--json",
                 "--cli-version", REPORTED)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_from"] == "the bundled red-team corpus"
    listed = data["agents"][0]["listed"]
    found = [leak for leak in listed if leak["text"] == command]
    assert found and found[0]["class"] == code and found[0]["rules"] == [rule]
    assert found[0]["quirk"] == quirk


def test_without_the_quirks_the_reports_are_not_leaks(tmp_path):
    for permissions, command, *_ in REPORTS:
        path = write_settings(tmp_path, permissions)
        calls = tmp_path / "calls.jsonl"
        calls.write_text(json.dumps({"command": command}) + "\n")
        result = run("policy", "audit", str(path), "--calls", str(calls), "--quirks", "none",
                     "--json", "--cli-version", REPORTED)
        assert json.loads(result.stdout)["agents"][0]["leaks"] == 0, command


def test_text_report_names_classes_rules_and_leaks(tmp_path):
    calls = tmp_path / "calls.txt"
    calls.write_text("cd /some/path && python3 script.py\ncd /x\nls\n")
    result = run("policy", "audit", str(write_settings(tmp_path, {"allow": ["Bash(cd:*)"]})),
                 "--calls", str(calls), "--cli-version", REPORTED)
    assert result.exit_code == 0
    assert "emulated: claude-code 2.1.0, mode default" in result.output
    assert "agent main (claude-code): 3 calls, harness allowed 2, strict allowed 1, leaks 1" \
        in result.output
    assert "AE304      1  shell-chain" in result.output
    assert "1  Bash(cd:*): allow" in result.output
    assert "AE304 line 1: cd /some/path && python3 script.py via cd-chain" in result.output


def test_opencode_leaks_per_agent_over_the_corpus():
    result = run("policy", "audit", str(SEED), "--agent", "email", "--agent", "lights",
                 "--json")
    agents = {a["agent"]: a for a in json.loads(result.stdout)["agents"]}
    email = agents["email"]
    assert email["classes"]["AE303"]["leaks"] >= 1      # `... > /tmp/out.txt`
    assert email["classes"]["AE313"]["leaks"] >= 1      # `... $HOME`
    assert "bash 'uv run scripts/email_search.py *': allow" in email["rules"]
    assert all("lights.py" not in leak["text"] for leak in email["listed"])
    assert any("lights.py" in leak["text"] for leak in agents["lights"]["listed"])


def test_calls_of_a_transcript_are_audited():
    transcript = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / \
        "claude-code" / "2.1.38-spotter" / "tool_heavy.jsonl"
    result = run("policy", "audit", str(FIXTURES / "claude-code" / ".claude" / "settings.json"),
                 "--calls", str(transcript), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls"] > 0 and data["calls_from"] == str(transcript)


def test_calls_of_a_stored_run_are_audited(tmp_path):
    records = tmp_path / "calls.jsonl"
    rows = [{"source_repo": "x/y", "model": "m", "session_id": "s1", "turn": i, "tool": "bash",
             "command": cmd, "license": "MIT"} for i, cmd in
            enumerate(["uv run scripts/email_search.py --q x > out.txt",
                       "uv run scripts/email_search.py --q x"])]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = str(tmp_path / "store.db")
    imported = run("import", "call-records", str(records), "--allowlist", "ralf", "--db", db)
    assert imported.exit_code == 0, imported.output
    result = run("policy", "audit", str(SEED), "--agent", "email", "--calls", "latest",
                 "--db", db, "--json")
    assert result.exit_code == 0, result.output
    agent = json.loads(result.stdout)["agents"][0]
    assert (agent["calls"], agent["leaks"]) == (2, 1)
    assert agent["listed"][0]["class"] == "AE303"


def test_a_bad_calls_line_is_reported_and_skipped(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"command": "ls"}\n{"nothing": 1}\nnot json\n')
    result = run("policy", "audit", str(SEED), "--agent", "email", "--calls", str(calls),
                 "--json")
    assert result.exit_code == 0
    assert "line 2: not a call" in result.stderr and "line 3: not JSON" in result.stderr


def test_check_prints_both_verdicts_for_a_policy_source(tmp_path):
    path = write_settings(tmp_path, {"allow": ["Bash(echo *)"]})
    result = run("check", "--allowlist", str(path), 'echo "test" && ls', "--cli-version",
                 REPORTED)
    assert result.exit_code == 1
    assert "emulated: claude-code 2.1.0, mode default" in result.output
    assert result.output.splitlines()[0] == "deny AE304 shell-chain"
    assert "harness (the whole command matches Bash(echo *): allow): allow" in result.output
    assert "leak: the harness allows it, the strict reading denies it (AE304)" in result.output
    plain = run("check", "--allowlist", str(path), 'echo "test"')
    assert plain.exit_code == 0 and plain.output.startswith("allow\n")


def test_check_batch_adds_the_harness_verdict(tmp_path):
    batch = tmp_path / "cmds.txt"
    batch.write_text("uv run scripts/lights.py on\nuv run scripts/lights.py on 2>&1\n")
    result = run("check", "--allowlist", str(SEED), "--agent", "lights", "--batch", str(batch))
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["decision"], r["harness"], r["leak"]) for r in rows] == [
        ("allow", "allow", False), ("deny", "allow", True)]


def test_the_resolver_gives_the_engine_an_allowlist_per_agent():
    email = resolve_policy(SEED, "email")
    assert email.check_call("bash", {"command": "uv run scripts/email_search.py --q x"}).allowed
    assert not email.check_call("bash", {"command": "uv run scripts/lights.py on"}).allowed
    assert [p.match for p in email.allowlist.patterns] == [
        "uv run scripts/email_search.py *", "uv run scripts/drafts.py *"]
