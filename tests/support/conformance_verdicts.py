"""agent-eval's harness verdict beside what a real CLI did with the conformance corpus.

Shared by the unit test on the committed recordings (``tests/policy/test_conformance.py``)
and the interop test that records the pinned CLIs live (``tests/interop/
test_conformance_live.py``).  A recording is the JSON ``clis.conformance`` writes: the CLI,
its release, its mode, the rules it ran under and, per command, what it did (``ran``,
``asked``, ``refused``).  The harness verdict agrees when it is ``allow`` or
``sandboxed`` for a command the CLI ran, ``ask`` or ``deny`` for one it did not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_eval.policy.sources import AgentPolicy, Setting, judge_command, load_policy_source

WORKDIR, HOME = "/home/agent/project", "/home/agent"

EXPLAINED: dict[tuple[str, str], str] = {
    # (cli, command): why the emulation says otherwise (each listed in docs/policies.md)
}


def agent_for(recorded: dict[str, Any], folder: Path) -> AgentPolicy:
    """The agent the recording's rules make, read from a configuration written into
    ``folder`` the way the CLI had it."""
    cli, rules = recorded["cli"], recorded["rules"]
    if cli == "claude-code":
        path = folder / ".claude" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"permissions": rules}))
    elif cli == "codex":
        path = folder / "default.rules"
        path.write_text(rules)
    elif cli == "gemini-cli":
        path = folder / ".gemini" / "settings.json"
        (path.parent / "policies").mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rules["settings"]))
        for name, text in rules["policies"].items():
            (path.parent / "policies" / name).write_text(text)
    elif cli == "opencode":  # the recording's mode is the agent (`opencode run --agent`)
        path = folder / "opencode.json"
        path.write_text(json.dumps(rules))
        return load_policy_source(path, home=HOME).agent(recorded["mode"])
    elif cli == "qwen-code":
        path = folder / ".qwen" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rules))
    else:
        raise ValueError(f"no configuration for {cli}")
    return load_policy_source(path, home=HOME).agent(None)


def agreement(recorded: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Per case: the CLI's outcome, the harness verdict, whether they agree, the leak the
    strict reading flags; and the counts BENCHMARKS.md's table gives."""
    agent = agent_for(recorded, folder)
    mode = "default" if recorded["cli"] == "opencode" else recorded["mode"]
    setting = Setting(workdir=WORKDIR, home=HOME, version=recorded["version"], mode=mode)
    rows = []
    for case in recorded["cases"]:
        dual = judge_command(agent, case["command"], setting)
        ran = case["outcome"] == "ran"
        rows.append({**case, "harness": dual.harness.decision,
                     "agrees": dual.harness.allowed == ran, "leak": dual.leak_class,
                     "real_leak": ran and not dual.strict.allowed})
    return {"rows": rows, "cases": len(rows), "agree": sum(r["agrees"] for r in rows),
            "ran": sum(r["outcome"] == "ran" for r in rows),
            "real_leaks": sum(r["real_leak"] for r in rows),
            "real_leaks_flagged": sum(r["real_leak"] and r["leak"] is not None for r in rows),
            "false_leaks": sum(r["leak"] is not None and r["outcome"] != "ran" for r in rows)}


def unexplained(recorded: dict[str, Any], found: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(command, what the CLI did, the harness verdict) of each disagreement the docs do
    not list."""
    return [(r["command"], r["outcome"], r["harness"]) for r in found["rows"]
            if not r["agrees"] and (recorded["cli"], r["command"]) not in EXPLAINED]
