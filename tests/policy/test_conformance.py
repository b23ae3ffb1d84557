"""The harness verdict against what the real CLIs did: the conformance corpus.

``tests/fixtures/conformance/*.json`` were recorded from the pinned CLIs in their sandbox
(``tests/interop/clis/conformance.py``): each command of the corpus run once, unattended
in the mode named, under the rules kept in the file, and what the CLI did read from the
tool result it sent back (``ran``, ``asked``, ``refused``).  Here agent-eval's harness
verdict for the same rules, release and mode must say the same: ``allow`` or
``sandboxed`` when the CLI ran the command, ``ask`` or ``deny`` when it did not.  A
disagreement fails unless :data:`EXPLAINED` lists it, and docs/policies.md gives its
reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.conformance_verdicts import EXPLAINED, agreement, unexplained

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted((ROOT / "tests" / "fixtures" / "conformance").glob("*.json"))
DOCS = ROOT / "docs" / "policies.md"


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_the_harness_verdict_is_what_the_real_cli_did(path, tmp_path):
    recorded = json.loads(path.read_text())
    found = agreement(recorded, tmp_path)
    assert unexplained(recorded, found) == []
    assert found["real_leaks_flagged"] == found["real_leaks"]


def test_the_recordings_cover_the_categories():
    categories = {c["category"] for path in RECORDED
                  for c in json.loads(path.read_text())["cases"]}
    assert {"unmatched", "read-only", "chain", "pipe", "substitution", "redirection",
            "heredoc", "wrapper", "assignment", "cd", "glob", "variable", "background",
            "subshell", "absolute-path", "flags-reordered", "protected"} <= categories
    assert {json.loads(p.read_text())["cli"] for p in RECORDED} == {
        "claude-code", "codex", "gemini-cli", "qwen-code", "opencode"}


def test_every_explained_disagreement_is_in_the_docs():
    docs = DOCS.read_text()
    for (cli, command), reason in EXPLAINED.items():
        assert f"`{command}`" in docs and reason, (cli, command)
