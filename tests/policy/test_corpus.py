"""Every real command of the real-data corpora is judged without an exception and denied
by ralf.

None of these real commands is a `uv run scripts/...` call of the ralf allow-list, so an
allow would be a hole in the engine.  The corpora are not in the repository: set
``$AGENT_EVAL_CORPORA`` to run these (tests/support/real_corpora.py); otherwise they skip saying so.
"""

from __future__ import annotations

import json
from collections import Counter

from support.policy_paths import allowlist_named
from support.real_corpora import need

from agent_eval.policy import judge_command

SHELL = "shell-corpus.txt"
MULTILINE = "agent-multiline-commands.jsonl"


def _judge_all(commands):
    ralf = allowlist_named("ralf")
    allowed, primaries = [], Counter()
    for number, command in commands:
        verdict = judge_command(command, ralf)
        primaries[verdict.primary] += 1
        if verdict.allowed:
            allowed.append((number, command))
    return allowed, primaries


def test_shell_corpus_is_judged_and_never_allowed():
    lines = need(SHELL).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(lines) == 49_499
    allowed, primaries = _judge_all(enumerate(lines, 1))
    assert allowed == []
    assert primaries["AE301"] > 1000 and primaries["AE307"] > 10_000


def test_agent_multiline_commands_are_judged_and_never_allowed():
    lines = need(MULTILINE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1_632
    allowed, primaries = _judge_all((n, json.loads(line)) for n, line in enumerate(lines, 1))
    assert allowed == []
    assert primaries["AE305"] > 100
