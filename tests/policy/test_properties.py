"""Properties over generated text: never raises, deterministic, fails closed, fast == full."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.policy_paths import allowlist_named

from agent_eval.policy import check_call, judge_command

RALF = allowlist_named("ralf")
PERMISSIVE = allowlist_named("permissive")

# Pieces that make generated text look like what models write, tricks included.
_PIECES = [
    "uv", "run", "scripts/db_query.py", "scripts/lights.py", "scripts/fetch_context.py",
    "status", "set", "--sql", "--limit", "--agent", "--no-attach", "--room", "--state", "on",
    "researcher", "5", "x", "ls", "cat", "timeout", "env", "python", "-c", "bash", "|", "||",
    "&&", ";", "&", ">", "<", "2>&1", "<<", "EOF", "$(", ")", "(", "`", "$X", "${X}", "'", '"',
    "\\", "\n", "\t", " ", "#", "*", "~", "{", "}", "=", "!", "；", "((",
]
commandish = st.lists(st.sampled_from(_PIECES), max_size=14).map(" ".join)
anytext = st.one_of(st.text(max_size=80), commandish,
                    st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(anytext)
def test_engine_never_raises_and_always_answers(text):
    for allowlist in (RALF, PERMISSIVE):
        verdict = judge_command(text, allowlist)
        assert verdict.decision in ("allow", "deny")
        assert (verdict.decision == "deny") == bool(verdict.findings)
        assert all(0 <= f.start <= f.end <= max(len(text), 16384) for f in verdict.findings)


@SETTINGS
@given(st.text(max_size=40), st.text(max_size=60))
def test_check_call_never_raises_on_any_tool_and_arguments(tool, arguments):
    assert check_call(tool, arguments, RALF).decision in ("allow", "deny")


@SETTINGS
@given(anytext)
def test_engine_is_deterministic(text):
    assert judge_command(text, RALF) == judge_command(text, RALF)


def _unquoted(text: str) -> str:
    """The text with single- and double-quoted parts blanked out (approximation for the
    oracle: backslash-escaped characters are blanked too)."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            out.append("  ")
            i += 2
        elif ch == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j + 1
            out.append(" " * (j - i))
            i = j
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            segment = text[i:j]
            # $( and backticks keep their meaning inside double quotes
            out.append("".join(c if c in "$`(" else " " for c in segment))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_META = re.compile(r"[|;&><`]|\$\(")


@SETTINGS
@given(anytext)
def test_ralf_never_allows_unquoted_shell_metacharacters(text):
    verdict = judge_command(text, RALF)
    if _META.search(_unquoted(text)):
        assert verdict.decision == "deny"


@SETTINGS
@given(anytext)
def test_fast_path_gives_the_full_paths_verdict(text):
    for allowlist in (RALF, PERMISSIVE):
        fast = judge_command(text, allowlist)
        full = judge_command(text, allowlist, fast_path=False)
        assert fast == full


_SAFE_WORD = st.from_regex(r"[A-Za-z0-9_./:=,@%+-]{1,8}", fullmatch=True)
_QUOTED = st.one_of(st.from_regex(r"'[^'\n]{0,10}'", fullmatch=True),
                    st.from_regex(r'"[^"$`\\!\n]{0,10}"', fullmatch=True))
# a word may glue several pieces together: it''s, "a"'b', x"y"z
_PIECES = st.lists(st.one_of(_SAFE_WORD, _QUOTED), min_size=1, max_size=3).map("".join)
plain = st.lists(_PIECES, min_size=1, max_size=8).map(" ".join)
runner_call = st.tuples(
    st.sampled_from(["uv run scripts/db_query.py --sql", "uv run scripts/email_read.py --id",
                     "uv run scripts/embedding_search.py --query", "ls"]),
    plain,
).map(" ".join)


@SETTINGS
@given(st.one_of(plain, runner_call))
def test_fast_path_equals_full_path_on_plain_commands(text):
    for allowlist in (RALF, PERMISSIVE):
        assert judge_command(text, allowlist) == judge_command(text, allowlist, fast_path=False)


@pytest.mark.parametrize("command", [
    "uv run scripts/db_query.py --sql 'it''s'",
    "uv run scripts/db_query.py --sql 'a'\"b\"'c'",
    "uv run scripts/email_read.py --id 'a''b''c'",
])
def test_adjacent_quoted_pieces_get_the_same_verdict_on_both_paths(command):
    fast = judge_command(command, RALF)
    assert fast.decision == "allow"
    assert judge_command(command, RALF, fast_path=False) == fast
