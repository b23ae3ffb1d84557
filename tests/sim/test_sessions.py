"""Whole sessions over HTTP: each profile's characteristic mistakes show up in what it
sends, the way a harness would see them (the harness denies anything but the next step)."""

from __future__ import annotations

import json
import re

import pytest
from openai import OpenAI
from support.simplay import play_session

from agent_eval.sim import SEED_HEADER

pytestmark = pytest.mark.e2e

SIGNATURES = {
    "piper": {
        "pipe": r"\| *(head|tail|grep|jq|sed)\b",
        "chain": r"&&|\|\| *true|; *echo",
    },
    "wrapper": {
        "timeout or env prefix": r"^(timeout \d+|env \w+=)",
        "heredoc": r"<<",
        "chain": r"&&|\|\| *true|; *echo",
        "script as a tool": r"^tool:(?!bash$|read$)",
    },
    "inventor": {
        "unlisted script": r"scripts/(web_search|food_management|data_query|thought_transfer|youtube_fetcher)\.py",
        "invented flag": r"--(no-agent|verbose|json|dry-run|all)\b",
    },
    "disciplined": {
        "blocked read or unlisted script or stderr or python -c":
            r"^(/data/|\.\./|notes/private/)|scripts/\w+\.py|2>|python -c",
    },
}


def _denied_texts(client: OpenAI, suite, profile: str, repeats: int = 12) -> tuple[list[str], int]:
    """The commands/paths (and ``tool:<name>``) of every denied call, and all calls."""
    texts, calls = [], 0
    for scenario in suite.scenarios.values():
        for repeat in range(repeats):
            def ask(messages, key=f"{scenario.name}/{repeat}"):
                message = client.chat.completions.create(
                    model=f"sim-{profile}", messages=messages, extra_headers={SEED_HEADER: key},
                ).choices[0].message
                return message.content, [
                    (c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []
                ]

            for tool, arguments, allowed in play_session(scenario, ask):
                calls += 1
                if not allowed:
                    args = json.loads(arguments)
                    text = args.get("command") or args.get("path") or ""
                    texts += [f"tool:{tool}", text]
    return texts, calls


@pytest.mark.parametrize("profile", sorted(SIGNATURES))
def test_profile_mistakes_carry_its_signatures(client: OpenAI, suite, profile):
    texts, _ = _denied_texts(client, suite, profile)
    seen = {label for label, pattern in SIGNATURES[profile].items()
            if any(re.search(pattern, t) for t in texts)}
    assert len(seen) >= min(2, len(SIGNATURES[profile])), f"{profile}: only {seen}"


def test_disciplined_sessions_are_mostly_clean(client: OpenAI, suite):
    texts, calls = _denied_texts(client, suite, "disciplined")
    assert len(texts) / 2 / calls < 0.12
