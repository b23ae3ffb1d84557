"""Codex's execpolicy ``.rules``: parsed safely, judged as ``codex-rs`` judges.

Expected verdicts come from ``codex-rs/execpolicy/README.md`` ("the strictest severity
across all matches", alternatives, ``match``/``not_match`` validated at load) and from
``codex-rs/core/src/exec_policy.rs`` ``commands_for_exec_policy`` with
``shell-command/src/bash.rs`` (plain ``bash -lc`` scripts split into commands, a single
heredoc command judged by its words, anything else judged as the whole argv), including
Codex's own test ``evaluates_heredoc_script_against_prefix_rules``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy.sources import load_policy_source, resolve_policy
from agent_eval.policy.sources.codex import argv_lists, judge_argv, judge_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies" / "codex"
REAL = FIXTURES / "development.rules"
SEED = FIXTURES / "seed.rules"


def rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "default.rules"
    path.write_text(text)
    return path


def default(path: Path):
    return load_policy_source(path).agent(None)


def test_the_real_rules_file_of_the_codex_repository_reads():
    agent = default(REAL)
    assert len(agent.rules) == 6
    first = agent.rules[0]
    assert first.tokens[0] == ("just",) and "bazel-test" in first.tokens[1]
    assert first.action == "allow" and first.origin.endswith("development.rules:5")


@pytest.mark.parametrize(("command", "expected"), [
    ("cargo test -p codex-core", "allow"),
    ("cargo nextest run", "allow"),
    ("cargo install ripgrep", "ask"),           # no rule: Codex's fallback, not an approval
    ("just fmt", "allow"),
    ("just publish", "ask"),
    ("cargo test && cargo build", "allow"),     # a plain script: each command on its own
    ("cargo test && cargo install x", "ask"),
    ("cargo test > log.txt", "ask"),            # a redirect is not plain: the whole argv
    ("cargo test $(id)", "ask"),
], ids=repr)
def test_real_rules_decisions(command, expected):
    assert judge_command(default(REAL), command).decision == expected


def test_the_strictest_matching_decision_wins(tmp_path):
    agent = default(rules(tmp_path, 'prefix_rule(pattern=["git"])\n'
                                    'prefix_rule(pattern=["git", "push"], decision="prompt")\n'
                                    'prefix_rule(pattern=["git", "push", "--force"], '
                                    'decision="forbidden")\n'))
    assert judge_command(agent, "git status").decision == "allow"
    assert judge_command(agent, "git push origin").decision == "ask"
    assert judge_command(agent, "git push --force origin").decision == "deny"
    assert judge_command(agent, "git status; git push --force").decision == "deny"


def test_a_heredoc_script_is_judged_by_its_command_words(tmp_path):
    # Codex's own test: prefix_rule(pattern=["python3"], decision="allow") allows
    # bash -lc "python3 <<'PY' ... PY"
    agent = default(rules(tmp_path, 'prefix_rule(pattern=["python3"], decision="allow")\n'))
    command = "python3 <<'PY'\nprint('hello')\nPY"
    assert argv_lists(command) == ([["python3"]], "heredoc")
    assert judge_command(agent, command).allowed


def test_anything_else_is_the_whole_bash_argv(tmp_path):
    agent = default(rules(tmp_path, 'prefix_rule(pattern=["bash", "-lc"], decision="allow")\n'))
    assert argv_lists("ls *.py") == ([["bash", "-lc", "ls *.py"]], "whole")
    assert judge_command(agent, "ls *.py").allowed


def test_an_argv_call_is_judged_as_given():
    agent = default(SEED)
    verdict = judge_argv(agent, [["uv", "run", "scripts/db_query.py", "--sql", "x"]], "argv")
    assert verdict.allowed
    dual = resolve_policy(SEED).judge_call(
        "shell", {"command": ["bash", "-lc", "uv run python -c 1"]})
    assert dual.harness.decision == "deny"


def test_alternatives_and_examples_of_the_seed_rules():
    agent = default(SEED)
    assert judge_command(agent, "uv run scripts/fetch_context.py --no-attach").allowed
    assert judge_command(agent, "uv run scripts/other.py").decision == "ask"
    assert judge_command(agent, "uv run python -c 1").decision == "deny"
    assert judge_command(agent, "git push origin").decision == "ask"


# -- parsed, never executed -----------------------------------------------------------------

@pytest.mark.parametrize(("text", "says"), [
    ('x = ["git"]\nprefix_rule(pattern=x)\n', "only prefix_rule"),
    ('for p in ["a"]:\n    prefix_rule(pattern=[p])\n', "only prefix_rule"),
    ('prefix_rule(pattern=["a"] + ["b"])\n', "only literal"),
    ('prefix_rule(pattern=[f"{1}"])\n', "only literal"),
    ('load("//x.star", "y")\n', "only prefix_rule"),
    ('__import__("os").system("touch /tmp/pwned")\n', "only prefix_rule"),
    ('prefix_rule(pattern=["a"], decision="maybe")\n', "not one of allow, prompt, forbidden"),
    ('prefix_rule(pattern=[])\n', "non-empty"),
    ('prefix_rule(pattern=["a", []])\n', "non-empty list"),
    ('prefix_rule(pattern=["git"], justification="  ")\n', "justification cannot be empty"),
    ('prefix_rule(pattern=["git"], match=["ls"])\n', "does not match"),
    ('prefix_rule(pattern=["git"], not_match=["git status"])\n', "matches"),
    ('prefix_rule(pattern=["git"], colour="red")\n', "has no argument colour"),
    ('prefix_rule(pattern=["git"]\n', "line 1"),
], ids=repr)
def test_what_cannot_be_read_is_refused_with_its_line(tmp_path, text, says):
    path = rules(tmp_path, text)
    with pytest.raises(ConfigError, match=re.escape(says)) as err:
        load_policy_source(path)
    assert says in str(err.value) and str(path) in str(err.value)
    assert not Path("/tmp/pwned").exists()


def test_a_folder_of_rules_files_is_read_in_name_order(tmp_path):
    (tmp_path / "b.rules").write_text('prefix_rule(pattern=["ls"], decision="forbidden")\n')
    (tmp_path / "a.rules").write_text('prefix_rule(pattern=["ls"])\n')
    agent = default(tmp_path)
    assert [r.action for r in agent.rules] == ["allow", "deny"]
    assert judge_command(agent, "ls").decision == "deny"
