"""`policy convert`: an agent's rules as an agent-eval allow-list, and what cannot be said.

The converted allow-list must judge every plain command exactly as the CLI's rules do
(read strictly), so the engine on it agrees with the strict verdict over the red-team
corpus; what it cannot express is listed, never silently widened.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.policy import check_command, load_allowlist
from agent_eval.policy.sources import convert_agent, load_policy_source
from agent_eval.policy.sources.judge import Setting, strict_command

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"
CONFIGS = [FIXTURES / "opencode-seed" / "opencode.json",
           FIXTURES / "opencode-docs" / "opencode.json",
           FIXTURES / "opencode-v2" / "opencode.json",
           FIXTURES / "claude-code" / ".claude" / "settings.json",
           FIXTURES / "codex" / "development.rules",
           FIXTURES / "codex" / "seed.rules",
           FIXTURES / "gemini-cli" / ".gemini" / "settings.json",
           FIXTURES / "qwen-code" / ".qwen" / "settings.json"]
CORPUS = Path(__file__).resolve().parents[2] / "agent_eval" / "data" / "redteam" / \
    "leak-probes.jsonl"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def corpus_commands() -> list[str]:
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    return [r["command"] for r in rows if "command" in r]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_converted_allowlist_agrees_with_the_strict_reading(config):
    source = load_policy_source(config)
    setting = Setting()
    for agent in source.agents.values():
        allowlist = convert_agent(agent, config_name=config.stem).allowlist()
        for command in corpus_commands():
            converted = check_command(command, allowlist).allowed
            strict = strict_command(agent, command, setting).allowed
            assert converted == strict, (agent.name, command)


def test_the_seed_agents_convert_to_their_own_patterns():
    source = load_policy_source(CONFIGS[0])
    lights = convert_agent(source.agent("lights"), config_name="opencode").data
    assert lights["name"] == "opencode-lights"
    assert lights["runner"] == []
    assert lights["patterns"] == [{"match": "uv run scripts/lights.py *",
                                   "unless": ["uv run scripts/lights.py reset*"]}]
    research = convert_agent(source.agent("research"), config_name="opencode").data
    assert "/data/rendered/" in research["read"]["roots"]
    assert research["read"]["allow_absolute"] is True


def test_what_cannot_be_expressed_is_said(tmp_path):
    config = tmp_path / "opencode.json"
    config.write_text(json.dumps({"permission": {"bash": {"*": "deny", "git *main": "allow",
                                                           "echo \"hi\"": "allow"}}}))
    notes = convert_agent(load_policy_source(config).agent(None), config_name="x").notes
    assert any("inside a word matches only within that word" in n for n in notes)
    assert any("quotes or backslashes" in n for n in notes)


def test_codex_alternatives_become_one_pattern_each():
    data = convert_agent(load_policy_source(CONFIGS[4]).agent(None), config_name="dev").data
    matches = [p["match"] for p in data["patterns"]]
    assert "cargo test *" in matches and "just bazel-test *" in matches
    assert [t["name"] for t in data["tools"]] == ["shell_command", "exec_command"]


def test_policy_convert_prints_yaml_that_loads(tmp_path):
    result = run("policy", "convert", str(CONFIGS[0]), "--agent", "email")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# agent email of ")
    path = tmp_path / "email.yaml"
    path.write_text(result.stdout)
    allowlist = load_allowlist(path)
    assert check_command("uv run scripts/email_search.py --q x", allowlist).allowed
    assert check_command("uv run scripts/email_search.py --q x 2>&1", allowlist).primary == "AE302"
    checked = run("check", "--allowlist", str(path), "uv run scripts/lights.py on")
    assert checked.exit_code == 1 and checked.output.startswith("deny AE307")


def test_policy_convert_writes_one_file_per_agent(tmp_path):
    out = tmp_path / "out"
    result = run("policy", "convert", str(CONFIGS[0]), "--out", str(out))
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["opencode-build.yaml", "opencode-email.yaml", "opencode-lights.yaml",
                     "opencode-orchestrator.yaml", "opencode-plan.yaml", "opencode-research.yaml"]
    for path in out.iterdir():
        assert yaml.safe_load(path.read_text())["runner"] == []
        load_allowlist(path)
    assert "cannot be expressed exactly" in (out / "opencode-email.yaml").read_text()
