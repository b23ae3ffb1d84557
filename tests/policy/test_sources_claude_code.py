"""Claude Code's permission rules, judged as its documentation and its reports say.

Documented semantics: https://code.claude.com/docs/en/permissions ("Rules are evaluated in
order: deny, then ask, then allow"; "Bash(ls *) matches ls -la but not lsof"; the legacy
``:*`` suffix; "Claude Code is aware of shell operators (like &&)"; Read rules follow
the gitignore specification).  Quirks: the public reports named in
``agent_eval/policy/sources/claude_code.py``, each with its exact command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.policy.sources import load_policy_source, resolve_policy
from agent_eval.policy.sources.claude_code import bash_rule_matches, judge_command, judge_read
from agent_eval.policy.sources.emulation import emulation_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "policies" / "claude-code" / \
    ".claude" / "settings.json"
NONE = frozenset()
PINNED_BEHAVIOURS = emulation_for("claude-code", None, "auto", None).behaviours


def settings(tmp_path: Path, permissions: dict) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"permissions": permissions}))
    return path


def main_agent(path: Path):
    return load_policy_source(path).agent(None)


@pytest.mark.parametrize(("spec", "command", "expected"), [
    ("ls *", "ls -la", True),          # docs: the space before * is a word boundary
    ("ls *", "ls", True),              # ... and the trailing " *" is optional
    ("ls *", "lsof", False),
    ("ls*", "lsof", True),
    ("npm run test:*", "npm run test:unit", False),  # legacy prefix: word boundary
    ("npm run test:*", "npm run test --watch", True),
    ("npm run test:*", "npm run test", True),
    ("npm run lint", "npm run lint", True),          # exact
    ("npm run lint", "npm run lint --fix", False),
    ("git * main", "git push origin main", True),    # * anywhere
    ("", "anything at all", True),                   # bare Bash
], ids=repr)
def test_bash_rule_specifiers(spec, command, expected):
    assert bash_rule_matches(spec, command) is expected


def test_deny_then_ask_then_allow_whatever_the_specificity(tmp_path):
    # docs: a broad deny Bash(aws *) blocks aws s3 ls although Bash(aws s3 ls) is allowed
    agent = main_agent(settings(tmp_path, {"allow": ["Bash(aws s3 ls)"], "deny": ["Bash(aws *)"]}))
    assert judge_command(agent, "aws s3 ls", quirks=NONE).decision == "deny"
    agent = main_agent(settings(tmp_path, {"allow": ["Bash(git push:*)"],
                                           "ask": ["Bash(git push --force:*)"]}))
    assert judge_command(agent, "git push --force origin", quirks=NONE).decision == "ask"
    assert judge_command(agent, "git push origin", quirks=NONE).decision == "allow"


def test_every_part_of_a_compound_command_needs_a_rule():
    # docs: "a prefix match rule like Bash(safe-cmd *) won't give it permission to run the
    # command safe-cmd && other-cmd"
    agent = main_agent(FIXTURE)
    assert judge_command(agent, "git diff && ls -la", quirks=NONE).decision == "allow"
    assert judge_command(agent, "git diff && rm -rf x", quirks=NONE).decision == "ask"
    assert judge_command(agent, "git diff && curl -s x", quirks=NONE).decision == "deny"


def test_wrappers_assignments_and_redirections_are_removed_before_matching():
    agent = main_agent(FIXTURE)
    assert judge_command(agent, "timeout 30 git diff HEAD", quirks=NONE).allowed
    assert judge_command(agent, "FOO=1 nice -n 5 git diff", quirks=NONE).allowed
    assert judge_command(agent, "git diff > /tmp/diff.txt", quirks=NONE).allowed
    assert judge_command(agent, "env git diff", quirks=NONE).decision == "ask"  # not listed


def test_command_substitution_asks():
    assert judge_command(main_agent(FIXTURE), "git diff $(cat refs)", quirks=NONE).decision \
        == "ask"


def test_a_write_into_a_protected_directory_asks(tmp_path):
    agent = main_agent(settings(tmp_path, {"allow": ["Bash"]}))
    assert judge_command(agent, "echo '...' >> .claude/file", quirks=NONE).decision == "ask"
    assert judge_command(agent, "echo x > ./.git/hooks/pre-commit", quirks=NONE).decision \
        == "ask"
    assert judge_command(agent, "echo x > notes.txt", quirks=NONE).allowed


# -- the three reports, exact commands ------------------------------------------------------

def test_cd_rule_admitted_a_chained_command(tmp_path):
    # https://github.com/anthropics/claude-code/issues/28784: allow ["Bash(cd:*)"]
    agent = main_agent(settings(tmp_path, {"allow": ["Bash(cd:*)"]}))
    command = "cd /some/path && python3 script.py"
    verdict = judge_command(agent, command)
    assert (verdict.decision, verdict.quirk) == ("allow", "cd-chain")
    assert judge_command(agent, command, quirks=NONE).decision == "ask"


def test_echo_rule_admitted_a_chained_ls(tmp_path):
    # https://github.com/anthropics/claude-code/issues/4956: allow ["Bash(echo *)"]
    agent = main_agent(settings(tmp_path, {"allow": ["Bash(echo *)"]}))
    verdict = judge_command(agent, 'echo "test" && ls')
    assert (verdict.decision, verdict.quirk) == ("allow", "whole-command-prefix")
    assert judge_command(agent, 'echo "test"').allowed
    assert judge_command(agent, "ls").decision == "ask"
    assert judge_command(agent, 'echo "test" && ls', quirks=NONE).decision == "ask"


def test_bash_c_hid_a_protected_write(tmp_path):
    # https://github.com/anthropics/claude-code/issues/43085
    agent = main_agent(settings(tmp_path, {"allow": ["Bash"]}))
    wrapped = "bash -c 'echo \"...\" >> .claude/file'"
    verdict = judge_command(agent, wrapped)
    assert (verdict.decision, verdict.quirk) == ("allow", "inline-shell-unseen")
    assert judge_command(agent, wrapped, quirks=NONE).decision == "ask"


def test_cd_chain_skipped_ask_rules_of_later_parts(tmp_path):
    # https://github.com/anthropics/claude-code/issues/59498: ask ["Bash(git push:*)"]
    agent = main_agent(settings(tmp_path, {"allow": ["Bash(cd:*)"],
                                           "ask": ["Bash(git push:*)"]}))
    assert judge_command(agent, "cd /different/path && git push --dry-run").allowed
    assert judge_command(agent, "echo test && git push --dry-run").decision == "ask"


# -- reads, modes, agents -------------------------------------------------------------------

@pytest.mark.parametrize(("path", "expected"), [
    ("src/app.py", "allow"),                     # the work directory needs no rule
    (".env", "deny"),                            # Read(./.env)
    ("config/.env", "allow"),                    # ./.env is anchored to the directory
    (".env.local", "deny"),                      # Read(./.env.*)
    ("secrets/deep/key.pem", "deny"),            # Read(./secrets/**)
    ("/etc/passwd", "ask"),                      # outside: asks
    ("/home/user/.zshrc", "allow"),              # Read(~/.zshrc)
    ("/docs/guide.md", "allow"),                 # additionalDirectories "../docs/"
], ids=repr)
def test_read_rules(path, expected):
    agent = main_agent(FIXTURE)
    assert judge_read(agent, path, workdir="/project", home="/home/user").decision == expected


def test_default_mode_decides_unmatched_commands(tmp_path):
    bypass = main_agent(settings(tmp_path, {"defaultMode": "bypassPermissions",
                                            "deny": ["Bash(rm:*)"]}))
    assert judge_command(bypass, "ls", quirks=NONE).allowed
    assert judge_command(bypass, "rm -rf x", quirks=NONE).decision == "deny"
    dont = main_agent(settings(tmp_path, {"defaultMode": "dontAsk"}))
    assert judge_command(dont, "ls", quirks=NONE).decision == "deny"


def test_an_agent_file_keeps_the_settings_and_restricts_the_tools():
    source = load_policy_source(FIXTURE)
    assert list(source.agents) == ["main", "code-reviewer"]
    reviewer = source.agent("code-reviewer")
    assert reviewer.tools == ("Read", "Grep", "Glob", "Bash")
    assert reviewer.rules == source.agent("main").rules
    resolved = resolve_policy(FIXTURE, "code-reviewer")
    assert resolved.judge_call("Bash", {"command": "git diff"}).harness.allowed
    edit = resolved.judge_call("Edit", {"file_path": "a.py"})
    assert edit.harness.decision == "deny" and edit.strict.primary == "AE101"
    assert [t.name for t in resolved.allowlist.tools][:2] == ["Bash", "Read"]


def test_bypass_permissions_runs_substitutions_and_protected_writes(tmp_path):
    """Recorded on the pinned release (tests/fixtures/conformance/
    claude-code-2.1.332-bypassPermissions.json): in ``bypassPermissions`` a command
    substitution and a write into ``.git`` or ``.claude`` ran unasked; only an ``ask`` rule
    (``git push``) and a ``deny`` rule (``curl``) still stopped a command."""
    agent = main_agent(settings(tmp_path, {"defaultMode": "bypassPermissions",
                                           "ask": ["Bash(git push:*)"],
                                           "deny": ["Bash(curl:*)"]}))
    for command in ("echo $(uname -s)", "echo `uname -s`", 'echo "$(ls)"',
                    "echo x > .git/conform", "echo x > .claude/conform",
                    "bash -c 'echo x > .git/conform'"):
        assert judge_command(agent, command, quirks=NONE).decision == "allow", command
    assert judge_command(agent, "git push origin main", quirks=NONE).decision == "ask"
    assert judge_command(agent, "curl http://127.0.0.1:9/", quirks=NONE).decision == "deny"


def test_auto_mode_unattended_runs_what_accept_edits_runs(tmp_path):
    """Recorded on the pinned release (tests/fixtures/conformance/
    claude-code-2.1.332-auto.json), unattended against a model endpoint of its own: the
    auto mode's classifier does not run ("Auto mode is unavailable: its safety check does
    not run for this session, so Bash was not run"), and every command ran or stopped as
    under ``acceptEdits``: a redirection into a file of the working folder ran, one into
    ``.git`` or ``~`` did not."""
    agent = main_agent(settings(tmp_path, {"defaultMode": "auto", "allow": ["Bash(echo *)",
                                                                            "Bash(ls *)"]}))
    for command in ("echo conform > out.txt", "ls -la > files.txt", "echo x > .codex/conform"):
        assert judge_command(agent, command, quirks=PINNED_BEHAVIOURS,
                             workdir="/home/agent/project"
                             ).decision == "allow", command
    for command in ("echo x > .git/conform", "echo x >> ~/.bashrc", "FOO=1 ls"):
        assert judge_command(agent, command, quirks=PINNED_BEHAVIOURS,
                             workdir="/home/agent/project"
                             ).decision == "ask", command
