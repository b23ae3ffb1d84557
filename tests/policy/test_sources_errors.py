"""Every unreadable policy source is one `Error:` line naming the file, the field and the
fix, exit code 2; never a traceback, never a policy half read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(("name", "text", "says"), [
    ("opencode.json", '{"permission": {"bash": {"*": "allow",}', "not valid JSON at line 1"),
    ("opencode.json", '{"permission": {"bash": "allow", "bash": "deny"}}', "key 'bash' is given twice"),
    ("opencode.json", '{"permission": {"bash": {"git *": "yes"}}}',
     "permission.bash.'git *': 'yes' is not an action; use allow, ask or deny"),
    ("opencode.json", '{"permission": 3}', "permission: must be an action"),
    ("opencode.json", '{"permissions": [{"action": "shell", "resource": "*"}]}',
     "permissions[0]: each rule needs exactly the string fields action, resource and effect"),
    ("opencode.json", '{"agent": {"x": {"tools": {"bash": "no"}}}}',
     "agent.x.tools: must be an object of tool name to true or false"),
    ("opencode.json", '{"default_agent": "ghost"}', "default_agent: names no agent"),
    ("opencode.json", '["not", "an", "object"]', "must be a JSON object"),
    ("settings.json", '{"permissions": {"allow": [3]}}',
     "permissions.allow[0]: each rule must be a string"),
    ("settings.json", '{"permissions": {"allow": ["Bash(ls *"]}}', "is not a rule"),
    ("settings.json", '{"permissions": {"defaultMode": "yolo"}}',
     "permissions.defaultMode: 'yolo' is not a mode"),
    ("settings.json", '{"permissions": {"deny": "Bash"}}', "permissions.deny: must be a list"),
    ("p.rules", 'prefix_rule(pattern=["a"], decision="maybe")\n', "p.rules:1: decision"),
    ("p.rules", "x = 1\n", "p.rules:1: only prefix_rule"),
    ("p.rules", "prefix_rule(\n", "line 1: not readable as a rules file"),
    ("config.json", '{"model": "x"}', "neither an OpenCode configuration"),
    ("notes.txt", "hello", "not a policy this tool reads"),
], ids=lambda v: v if len(v) < 40 else v[:40])
def test_a_broken_config_is_one_error_line(tmp_path, name, text, says):
    path = tmp_path / name
    if name == "settings.json":
        (tmp_path / ".claude").mkdir()
        path = tmp_path / ".claude" / name
    path.write_text(text)
    for args in (["policy", "audit", str(path)], ["policy", "convert", str(path)],
                 ["check", "--allowlist", str(path), "ls"]):
        line = one_error(run(*args))
        assert says in line and str(path) in line, line


def test_not_utf8_is_refused(tmp_path):
    path = tmp_path / "opencode.json"
    path.write_bytes(b'{"permission": "\xff"}')
    assert "not UTF-8" in one_error(run("policy", "audit", str(path)))


def test_an_unclosed_front_matter_names_the_agent_file(tmp_path):
    folder = tmp_path / ".opencode" / "agent"
    folder.mkdir(parents=True)
    (folder / "x.md").write_text("---\ndescription: x\n")
    (tmp_path / "opencode.json").write_text("{}")
    line = one_error(run("policy", "convert", str(tmp_path / "opencode.json")))
    assert "x.md" in line and "never closed" in line


def test_an_unknown_agent_lists_the_agents():
    path = FIXTURES / "opencode-seed" / "opencode.json"
    line = one_error(run("policy", "audit", str(path), "--agent", "ghost"))
    assert "no agent 'ghost'; its agents: build, plan, orchestrator, email, lights, research" \
        in line
    line = one_error(run("check", "--allowlist", str(path), "--agent", "ghost", "ls"))
    assert "--agent" in line


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--quirks", "bogus", "unknown quirk 'bogus'"),
    ("--workdir", "relative", "must be an absolute folder path"),
    ("--calls", "nowhere-at-all", "is neither a file"),
])
def test_bad_audit_options(option, value, says):
    path = FIXTURES / "codex" / "seed.rules"
    assert says in one_error(run("policy", "audit", str(path), option, value))


def test_a_huge_config_is_refused_before_reading(tmp_path):
    path = tmp_path / "opencode.json"
    path.write_text(json.dumps({"x": "a" * (5 * 1024 * 1024)}))
    assert "more than the" in one_error(run("policy", "audit", str(path)))


def test_a_front_matter_alias_bomb_is_refused(tmp_path):
    folder = tmp_path / ".opencode" / "agent"
    folder.mkdir(parents=True)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    (folder / "bomb.md").write_text("---\n" + "\n".join(lines) + "\n---\nbody\n")
    (tmp_path / "opencode.json").write_text("{}")
    line = one_error(run("policy", "audit", str(tmp_path / "opencode.json")))
    assert "bomb.md" in line and "not valid YAML" in line


def test_a_very_long_command_is_not_emulated_and_never_a_leak():
    from agent_eval.policy.sources import load_policy_source
    from agent_eval.policy.sources.judge import judge_command

    agent = load_policy_source(FIXTURES / "opencode-seed" / "opencode.json").agent("email")
    dual = judge_command(agent, "uv run scripts/email_search.py --q " + "x" * 70000 + " > o")
    assert dual.harness.decision == "ask" and not dual.leak
