"""The conformance corpus played live through the pinned agent CLIs, each judged by
agent-eval's harness verdict for the same rules, release and mode.

Each (CLI, mode) is one recording by ``clis.conformance.record``: the CLI runs confined
(``clis.sandbox``: the unprivileged ``agent-eval-cli`` user, a fresh folder, its own
network namespace reaching one loopback port), unattended in the mode, with the corpus's
rules in its configuration, in front of a scripted model that asks for the corpus's
commands one a turn through the CLI's shell tool, all in one session while the CLI goes
on.  What the CLI did with each (ran, asked, refused) is read from the tool result it
sent back.  The test fails on:

- a command the CLI never answered (the recording is incomplete);
- a disagreement between the CLI and the harness verdict that ``EXPLAINED`` (and
  docs/policies.md) does not list with its reason;
- a real leak (the CLI ran what the strict reading refuses) not flagged;
- an outcome unlike the committed recording (``tests/fixtures/conformance/``, which the
  unit tests and BENCHMARKS.md's table read): the committed table must be what the
  pinned CLI does.

Without root, ``unshare`` or the installed CLIs these tests skip, saying why; with
``CI=true`` they fail.  About 3-25 s of wall time per recording, 4 min in all (237 s for
twenty-six, 2026-11-29; a Codex recording 4-11 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from clis.catalog import CLIS, INSTALL
from clis.conformance import OUT, outcome_of, record
from clis.sandbox import unavailable
from support.conformance_verdicts import agreement, unexplained

LIVE: list[tuple[str, ...]] = [
        ("claude-code", "default"), ("claude-code", "dontAsk"), ("claude-code", "acceptEdits"),
        ("claude-code", "plan"), ("claude-code", "bypassPermissions"), ("claude-code", "auto"),
        ("codex", "never/workspace-write"), ("codex", "on-request/workspace-write"),
        ("codex", "never/read-only"), ("codex", "never/danger-full-access"),
        ("codex", "on-failure/workspace-write"),
        ("gemini-cli", "default"), ("gemini-cli", "yolo"), ("gemini-cli", "autoEdit"),
        ("gemini-cli", "plan"), ("gemini-cli", "default", "toml"), ("gemini-cli", "yolo", "toml"),
        ("qwen-code", "default"), ("qwen-code", "yolo"), ("qwen-code", "auto-edit"),
        ("qwen-code", "default", "core"), ("qwen-code", "plan"), ("qwen-code", "auto"),
        ("qwen-code", "plan", "core"), ("qwen-code", "auto", "core"),
        ("opencode", "build"), ("opencode", "plan")]
"""Every (CLI, mode[, configuration]) with a committed recording (OpenCode's mode is its
agent; a third field names a configuration of ``clis.conformance.CONFIGS``);
``test_every_recording_is_played_live`` keeps the two lists equal."""


def _skip(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def _ensure(name: str) -> None:
    reason = unavailable()
    if reason:
        _skip(reason)
    if not CLIS[name].pin.installed():
        done = subprocess.run(["bash", str(INSTALL), name], capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            _skip(f"{name} is not installed and scripts/ci/agent-clis.sh {name} failed "
                  f"(is the npm registry reachable?): {done.stderr.strip()[-400:]}")


@pytest.mark.parametrize("played", LIVE, ids=["-".join(p) for p in LIVE])
def test_the_pinned_cli_does_what_the_harness_verdict_says(played, tmp_path):
    name, mode, config = (*played, "")[:3]
    _ensure(name)
    recording = record(name, mode, log=sys.stderr, config=config)
    live = recording.as_json()
    (tmp_path / "recorded.json").write_text(json.dumps(live, indent=1))
    unanswered = [c["command"] for c in live["cases"] if c["outcome"] == "none"]
    assert unanswered == [], f"{name} answered no tool result for these ({recording.sessions})"
    found = agreement(live, tmp_path)
    assert unexplained(live, found) == []
    assert found["real_leaks_flagged"] == found["real_leaks"]
    committed = OUT / recording.file_name
    was = {c["command"]: c["outcome"] for c in json.loads(committed.read_text())["cases"]}
    changed = [(c["command"], was.get(c["command"]), c["outcome"]) for c in live["cases"]
               if was.get(c["command"]) != c["outcome"]]
    assert changed == [], f"re-record {committed.name} with python -m clis.conformance"


def test_the_outcome_is_read_from_the_tool_result_as_recorded():
    """Every committed recording's outcome is what ``outcome_of`` reads from the tool
    result kept beside it (the first 240 characters hold what it looks at)."""
    for path in sorted(OUT.glob("*.json")):
        recorded = json.loads(path.read_text())
        for case in recorded["cases"]:
            assert outcome_of(recorded["cli"], case["result"]) == case["outcome"], \
                (path.name, case["command"])


def test_every_recording_is_played_live():
    recorded = set()
    for path in OUT.glob("*.json"):
        data = json.loads(path.read_text())
        recorded.add((data["cli"], data["mode"], data.get("config", "")))
    assert recorded == {(*p, "")[:3] for p in LIVE}
