"""`policy explain` and `policy diff` on real configurations of each CLI.

Explain: which rule of which file decided, the release and mode emulated, the parse the
rules were matched on, and the strict reading.  Diff: what a rule change would have done
to recorded calls (newly allowed, newly refused, leaks opened and closed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"
CLAUDE = FIXTURES / "claude-code" / ".claude" / "settings.json"
CODEX = FIXTURES / "codex" / "development.rules"
OPENCODE = FIXTURES / "opencode-docs" / "opencode.json"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(("config", "command", "decision", "rule", "origin", "parts"), [
    (CLAUDE, "git push origin main", "ask", "Bash(git push:*): ask", "permissions.ask[0]",
     ["git push origin main"]),
    (CODEX, "just fmt && git push", "sandboxed",
     "prefix_rule('just [fmt|fmt-check|test|clippy|fix|bench|bench-smoke|bazel-test|"
     "bazel-clippy|bazel-lock-check|bazel-lock-update|bazel-argument-comment-lint|"
     "argument-comment-lint|build-for-release]', allow)", "development.rules:5",
     ["just fmt", "git push"]),
    (OPENCODE, "git status && git push", "deny", "bash 'git push *': deny",
     "agent.build.permission.bash", ["git status", "git push"]),
], ids=["claude-code", "codex", "opencode"])
def test_explain_names_the_rule_its_file_the_parse_and_the_emulation(
        config, command, decision, rule, origin, parts):
    result = run("policy", "explain", str(config), command, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["decision"] == decision
    assert [r["rule"] for r in found["rules"]] == [rule]
    assert found["rules"][0]["file"] == str(config)
    assert origin in found["rules"][0]["origin"]
    assert found["parse"]["parts"] == parts
    assert found["emulated"]["version"] and found["emulated"]["mode"]
    assert found["strict"]["decision"] == "deny"


def test_explain_in_text_says_the_mode_and_the_leak():
    result = run("policy", "explain", str(CODEX), "ls -la | head -5", "--mode",
                 "never/workspace-write")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "emulated: codex 0.169.0, mode never/workspace-write; behaviours: none"
    assert "harness: sandboxed (runs inside the workspace-write sandbox (approval never): " \
           "'ls -la')" in lines
    assert "  by no rule: the CLI's default in this mode" in lines
    assert lines[-1] == "leak: the CLI lets it through, the strict reading refuses it (AE301)"


def test_explain_a_release_with_its_quirk(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(cd:*)"]}}))
    old = run("policy", "explain", str(settings), "cd /x && python3 s.py", "--cli-version",
              "2.1.0", "--json")
    new = run("policy", "explain", str(settings), "cd /x && python3 s.py", "--json")
    assert (json.loads(old.stdout)["decision"], json.loads(old.stdout)["quirk"]) == \
        ("allow", "cd-chain")
    assert json.loads(new.stdout)["decision"] == "ask"


def test_explain_refuses_a_mode_the_cli_does_not_have():
    result = run("policy", "explain", str(CLAUDE), "ls", "--mode", "never/read-only")
    assert result.exit_code == 2
    assert result.output.startswith("Error: --mode: Claude Code has no mode 'never/read-only'")


def changed(result) -> dict[str, list[tuple[str, str, str]]]:
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    return {k: [(c["text"], c["old"], c["new"]) for c in data[k]]
            for k in ("newly_allowed", "newly_refused", "leaks_opened", "leaks_closed")}


def test_diff_of_a_claude_code_settings_change(tmp_path):
    new = tmp_path / ".claude" / "settings.json"
    new.parent.mkdir()
    data = json.loads(CLAUDE.read_text())
    data["permissions"]["allow"].append("Bash(git push:*)")   # no effect: ask wins
    data["permissions"]["allow"].append("Bash(npm run build:*)")
    data["permissions"]["deny"].append("Bash(ls *)")
    new.write_text(json.dumps(data))
    calls = tmp_path / "calls.txt"
    calls.write_text("npm run build --watch\nls -la\ngit push origin\nnpm run lint\n"
                     "npm run build && curl x\n")
    assert changed(run("policy", "diff", str(CLAUDE), str(new), "--calls", str(calls),
                       "--json")) == {
        "newly_allowed": [("npm run build --watch", "ask", "allow")],
        "newly_refused": [("ls -la", "allow", "deny")],
        "leaks_opened": [],
        "leaks_closed": [],
    }


def test_diff_of_a_codex_rules_change_opens_and_closes_leaks(tmp_path):
    old = tmp_path / "old.rules"
    new = tmp_path / "new.rules"
    old.write_text('prefix_rule(pattern=["git", "status"])\n')
    new.write_text('prefix_rule(pattern=["git", "status"])\n'
                   'prefix_rule(pattern=["rm"], decision="forbidden")\n')
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps({"command": c}) + "\n" for c in
                             ["git status", "rm build.log", "ls | head -1"]))
    result = run("policy", "diff", str(old), str(new), "--calls", str(calls), "--json",
                 "--mode", "never/workspace-write")
    assert changed(result) == {
        "newly_allowed": [], "newly_refused": [("rm build.log", "sandboxed", "deny")],
        "leaks_opened": [], "leaks_closed": [("rm build.log", "sandboxed", "deny")]}


def test_diff_of_an_opencode_change_in_text(tmp_path):
    new = tmp_path / "opencode.json"
    shutil.copy(OPENCODE, new)
    new.write_text(OPENCODE.read_text().replace('"git push *": "deny",\n          "grep',
                                                '"git push *": "allow",\n          "grep'))
    calls = tmp_path / "calls.txt"
    calls.write_text("git push origin main\ngit status\n")
    result = run("policy", "diff", str(OPENCODE), str(new), "--calls", str(calls))
    assert result.exit_code == 0, result.output
    assert "newly allowed: 1" in result.output
    assert "  line 1: git push origin main  deny -> allow by bash 'git push *': allow" \
        in result.output


def test_diff_refuses_two_different_clis():
    result = run("policy", "diff", str(CLAUDE), str(CODEX))
    assert result.exit_code == 2
    assert "compare two versions of one CLI's configuration" in result.output
