"""Allow-list `patterns`: a program with a fixed prefix followed by plain words.

The engine's addition for rules written the way agent CLIs write them: a pattern only
ever allows the literal words of one simple command; everything around them is the
engine's usual judgement."""

from __future__ import annotations

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy import allowlist_from_dict, judge_command
from agent_eval.policy.wordpatterns import match_words

ALLOWLIST = allowlist_from_dict({
    "name": "patterns", "runner": [],
    "patterns": ["uv run scripts/db_query.py *", "npm run test*", "git status",
                 {"match": "git *", "unless": ["git push *", "git reset --hard*"]}],
})


@pytest.mark.parametrize(("pattern", "words", "expected"), [
    ("git *", ["git"], True),
    ("git *", ["git", "status", "--short"], True),
    ("git status", ["git", "status"], True),
    ("git status", ["git", "status", "-s"], False),
    ("npm run test*", ["npm", "run", "test:unit", "--watch"], True),
    ("npm run test*", ["npm", "run", "build"], False),
    ("git * main", ["git", "push", "origin", "main"], True),
    ("git * main", ["git", "push", "origin"], False),
    ("* --version", ["node", "--version"], True),
    ("scripts/?.py", ["scripts/a.py"], True),
    ("scripts/?.py", ["scripts/ab.py"], False),
    ("ls *", ["ls", "a b"], True),       # a quoted word with a blank is one word
    ("*", [], True),
], ids=repr)
def test_match_words(pattern, words, expected):
    assert match_words(pattern, words) is expected


@pytest.mark.parametrize(("command", "primary"), [
    ('uv run scripts/db_query.py --sql "SELECT 1"', None),
    ("git status", None),
    ("git log --oneline", None),
    ("npm run test:unit --watch", None),
    ("git push origin main", "AE307"),          # excepted by unless
    ("git reset --hard HEAD", "AE307"),
    ("uv run scripts/other.py", "AE307"),
    ("uv run scripts/db_query.py --sql x > out", "AE303"),
    ("uv run scripts/db_query.py --sql x && git status", "AE304"),
    ("uv run scripts/db_query.py --sql $HOME", "AE313"),
    ("uv run scripts/db_query.py --sql $(id)", "AE312"),
    ("timeout 5 git status", "AE306"),
    ("git -c core.pager=x python3 -c 'import os'", "AE308"),  # a second program in the words
    ("git status | head", "AE301"),
], ids=repr)
def test_the_engine_reads_patterns_strictly(command, primary):
    for fast_path in (True, False):
        verdict = judge_command(command, ALLOWLIST, fast_path=fast_path)
        assert verdict.primary == primary, (fast_path, verdict)


def test_an_excepted_command_says_which_exception():
    verdict = judge_command("git push origin main", ALLOWLIST)
    assert verdict.findings[0].message == "git matches `git *` but the policy excepts `git push *`"


@pytest.mark.parametrize("patterns", [[""], ["   "], [{"match": "git *", "unless": [""]}],
                                      [{"match": "x", "extra": 1}]])
def test_an_unusable_pattern_is_a_config_error(patterns):
    with pytest.raises(ConfigError, match=r"patterns\.0\."):
        allowlist_from_dict({"name": "bad", "patterns": patterns})


def test_patterns_change_the_fingerprint():
    plain = allowlist_from_dict({"name": "x", "runner": []})
    assert plain.fingerprint != ALLOWLIST.fingerprint
    assert plain.patterns == []
