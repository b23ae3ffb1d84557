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

from agent_eval.policy.sources import Setting, judge_command, load_policy_source

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted((ROOT / "tests" / "fixtures" / "conformance").glob("*.json"))
DOCS = ROOT / "docs" / "policies.md"

EXPLAINED: dict[tuple[str, str], str] = {
    # (cli, command): why the emulation says otherwise (listed in docs/policies.md)
}


def agent_for(recorded: dict, tmp_path: Path):
    if recorded["cli"] == "claude-code":
        settings = tmp_path / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"permissions": recorded["rules"]}))
        return load_policy_source(settings).agent(None)
    rules = tmp_path / "default.rules"
    rules.write_text(recorded["rules"])
    return load_policy_source(rules).agent(None)


def agreement(recorded: dict, tmp_path: Path) -> dict:
    """Per case: the CLI's outcome, the harness verdict, the strict one; and the counts."""
    agent = agent_for(recorded, tmp_path)
    setting = Setting(workdir="/home/agent/project", home="/home/agent",
                      version=recorded["version"], mode=recorded["mode"])
    rows = []
    for case in recorded["cases"]:
        dual = judge_command(agent, case["command"], setting)
        ran = case["outcome"] == "ran"
        rows.append({**case, "harness": dual.harness.decision, "agrees":
                     dual.harness.allowed == ran, "leak": dual.leak_class,
                     "real_leak": ran and not dual.strict.allowed})
    return {"rows": rows, "cases": len(rows), "agree": sum(r["agrees"] for r in rows),
            "real_leaks": sum(r["real_leak"] for r in rows),
            "real_leaks_flagged": sum(r["real_leak"] and r["leak"] is not None for r in rows),
            "false_leaks": sum(r["leak"] is not None and r["outcome"] != "ran" for r in rows)}


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_the_harness_verdict_is_what_the_real_cli_did(path, tmp_path):
    recorded = json.loads(path.read_text())
    found = agreement(recorded, tmp_path)
    wrong = [(r["command"], r["outcome"], r["harness"]) for r in found["rows"]
             if not r["agrees"] and (recorded["cli"], r["command"]) not in EXPLAINED]
    assert wrong == []
    assert found["real_leaks_flagged"] == found["real_leaks"]


def test_the_recordings_cover_the_categories():
    categories = {c["category"] for path in RECORDED
                  for c in json.loads(path.read_text())["cases"]}
    assert {"unmatched", "read-only", "chain", "pipe", "substitution", "redirection",
            "heredoc", "wrapper", "assignment", "cd", "glob", "variable", "background",
            "subshell", "absolute-path", "flags-reordered", "protected"} <= categories
    assert {json.loads(p.read_text())["cli"] for p in RECORDED} >= {"claude-code", "codex"}


def test_every_explained_disagreement_is_in_the_docs():
    docs = DOCS.read_text()
    for (cli, command), reason in EXPLAINED.items():
        assert f"`{command}`" in docs and reason, (cli, command)
