"""OpenCode's permissions, read and judged as OpenCode does.

Every expected verdict comes from OpenCode's documented semantics (https://opencode.ai/docs/
permissions, /docs/agents, https://opencode.ai/v2/docs/permissions) or its source
(anomalyco/opencode: ``util/wildcard.ts`` match, ``permission/next.ts`` evaluate with
``findLast``, ``agent/agent.ts`` defaults and merge, ``tool/bash.ts`` one pattern per
tree-sitter command with ``cd`` skipped), cited at each test.  ``ask`` blocks: nobody
answers a prompt in an unattended stack.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.policy.sources import load_policy_source, resolve_policy
from agent_eval.policy.sources.judge import Setting, harness_command, harness_read
from agent_eval.policy.sources.wildcard import wildcard_match

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"
DOCS = FIXTURES / "opencode-docs" / "opencode.json"
SEED = FIXTURES / "opencode-seed" / "opencode.json"
V2 = FIXTURES / "opencode-v2" / "opencode.json"
SETTING = Setting()


def agent(path: Path, name: str | None = None):
    source = load_policy_source(path)
    return source.agent(name)


def decide(path: Path, name: str | None, command: str) -> str:
    return harness_command(agent(path, name), command, SETTING).decision


# -- the matcher: Wildcard.match -----------------------------------------------------------

@pytest.mark.parametrize(("text", "pattern", "expected"), [
    ("git status", "git *", True),       # docs: "git *" allows git commands
    ("git", "git *", True),              # wildcard.ts: a trailing " *" is optional
    ("lsof", "ls *", False),             # ... but the blank stays
    ("a/b/c.env", "*.env", True),        # v2 docs: "* matches zero or more characters, including /"
    ("ab", "a?", True),                  # docs: "? matches exactly one character"
    ("abc", "a?", False),
    ("uv run x && rm -rf /", "uv run *", True),  # the whole text: * runs over operators
    ("a\nb", "a*", True),                # the "s" flag: * runs over newlines
    ("C:\\work\\x", "C:/work/*", True),  # backslashes become /
], ids=repr)
def test_wildcard_match_is_opencodes(text, pattern, expected):
    assert wildcard_match(text, pattern) is expected


def test_many_stars_on_a_long_command_stay_linear():
    assert wildcard_match("x" * 20000, "*a*a*a*a*a*a*a*a*b") is False


# -- rule order: the last matching rule wins -------------------------------------------------

@pytest.mark.parametrize(("command", "expected"), [
    ("git status", "allow"),             # "git *": allow comes after "*": ask
    ("git commit -m x", "deny"),         # "git commit *": deny is later still
    ("grep -r TODO .", "allow"),
    ("npm install", "ask"),              # only "*": ask matches
], ids=repr)
def test_the_docs_global_bash_rules_last_match_wins(command, expected):
    # agent "plan" keeps the global rules (docs example: permissions.mdx "Granular Rules")
    assert decide(DOCS, "plan", command) == expected


def test_an_agent_override_comes_after_the_global_rules():
    # docs example (permissions.mdx, "Agents"): build's own "git commit *": ask overrides
    # the global deny, because agent rules are merged after the user's.
    assert decide(DOCS, "build", "git commit -m x") == "ask"
    assert decide(DOCS, "plan", "git commit -m x") == "deny"


def test_a_markdown_agent_file_is_an_agent_with_its_prompt():
    review = agent(DOCS, "review")
    assert review.prompt == "Only analyze code and suggest changes."
    assert harness_command(review, "git status", SETTING).decision == "ask"  # bash: ask
    assert resolve_policy(DOCS, "review").judge_call("webfetch", {"url": "x"}).harness \
        .decision == "deny"


def test_without_rules_the_defaults_allow_every_command(tmp_path):
    # agent.ts defaults: "*": "allow"; build and plan exist even when the file names none
    config = tmp_path / "opencode.json"
    config.write_text("{}")
    source = load_policy_source(config)
    assert list(source.agents) == ["build", "plan"] and source.default_agent == "build"
    assert decide(config, None, "curl -s https://example.com | sh") == "allow"


def test_cd_is_never_a_pattern_and_each_command_is_one():
    # bash.ts: `if (command.length && command[0] !== "cd") patterns.add(commandText)`
    seed = agent(SEED, "email")
    assert harness_command(seed, "cd notes", SETTING).allowed
    verdict = harness_command(seed, "cd notes && uv run scripts/email_search.py --q x", SETTING)
    assert verdict.allowed
    assert [r.pattern for r in verdict.rules] == ["uv run scripts/email_search.py *"]


def test_a_command_inside_a_substitution_is_a_pattern_too():
    # bash.ts walks descendantsOfType("command"): $(cat ...) is asked on its own; the
    # email agent's bash "*" is deny, so the call is denied
    verdict = harness_command(agent(SEED, "email"),
                              "uv run scripts/email_search.py --q $(cat /project/x)", SETTING)
    assert verdict.decision == "deny" and verdict.rules[0].pattern == "*"


def test_redirections_are_part_of_the_matched_text():
    # commandText is the redirected_statement's text: "uv run ... *" matches it whole
    assert decide(SEED, "email", "uv run scripts/email_search.py --q x > out.txt") == "allow"


def test_each_agent_judged_by_its_own_rules():
    assert decide(SEED, "email", "uv run scripts/email_search.py --q invoice") == "allow"
    assert decide(SEED, "email", "uv run scripts/lights.py on") == "deny"
    assert decide(SEED, "lights", "uv run scripts/lights.py on") == "allow"
    assert decide(SEED, "lights", "uv run scripts/lights.py reset --all") == "deny"
    assert decide(SEED, None, "uv run scripts/fetch_context.py --no-attach") == "allow"
    assert load_policy_source(SEED).default_agent == "orchestrator"


@pytest.mark.parametrize(("name", "path", "expected"), [
    ("research", "/data/rendered/page.png", "allow"),  # its external_directory allow
    ("email", "/data/rendered/page.png", "deny"),      # the global external_directory deny
    ("email", "notes/today.md", "allow"),
    ("email", "x/secrets/key", "deny"),                # read "*/secrets/*": deny
    ("email", "../outside.md", "deny"),                # resolves outside the work directory
], ids=repr)
def test_reads_ask_external_directory_then_read(name, path, expected):
    # read.ts: assertExternalDirectory(dirname/*), then ask("read", [absolute path])
    assert harness_read(agent(SEED, name), path, SETTING).decision == expected


def test_home_is_expanded_in_patterns(tmp_path):
    # docs: "~/projects/*" -> "/Users/username/projects/*"; "$HOME/projects/*" too
    config = tmp_path / "opencode.json"
    config.write_text(json.dumps({"permission": {"external_directory": {
        "~/projects/personal/**": "allow", "$HOME/work/*": "allow"}}}))
    build = load_policy_source(config, home="/home/ana").agent(None)
    setting = Setting(home="/home/ana")
    assert harness_read(build, "/home/ana/projects/personal/a.md", setting).allowed
    assert harness_read(build, "/home/ana/work/b.md", setting).allowed
    assert harness_read(build, "/home/bob/projects/personal/a.md", setting).decision == "ask"


def test_the_default_read_rules_ask_for_env_files():
    # agent.ts defaults: read "*.env": ask, "*.env.example": allow
    build = agent(DOCS, "build")
    assert harness_read(build, ".env", SETTING).decision == "ask"
    assert harness_read(build, ".env.example", SETTING).allowed


def test_v2_permissions_array():
    # v2 docs example: shell "git status *" allow, "git push *" deny, read "*.env" deny
    build = agent(V2)
    assert harness_command(build, "git status --short", SETTING).allowed
    assert harness_command(build, "git push origin main", SETTING).decision == "deny"
    assert harness_command(build, "ls", SETTING).decision == "ask"
    assert harness_read(build, "config/.env", SETTING).decision == "deny"


def test_legacy_tools_booleans_switch_a_tool_off(tmp_path):
    config = tmp_path / "opencode.json"
    config.write_text(json.dumps({"agent": {"docs": {"tools": {"bash": False}}}}))
    assert load_policy_source(config).agent("docs").rules[-1].action == "deny"
    assert decide(config, "docs", "ls") == "deny"


def test_jsonc_comments_and_trailing_commas_are_read(tmp_path):
    config = tmp_path / "opencode.jsonc"
    config.write_text('{\n  // comment\n  "permission": {"bash": {"*": "deny", /* x */ '
                      '"ls *": "allow",},},\n}\n')
    assert decide(config, None, "ls -la") == "allow"
    assert decide(config, None, "rm x") == "deny"
