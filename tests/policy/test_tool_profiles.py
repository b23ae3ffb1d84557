"""The agent CLIs' tool profiles: every key the real CLIs offer is declared, an allow-list
switches a profile off or adds one, and `policy profiles` lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.policy_paths import allowlist_named

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.policy import check_call, load_allowlist
from agent_eval.policy.allowlist import AllowList
from agent_eval.policy.profiles import BUILTIN

CLIS = Path(__file__).resolve().parents[1] / "fixtures" / "clis"
RALF = allowlist_named("ralf")


def offered_tools(cli: str) -> dict[str, dict]:
    """Every tool the CLI offered in its captured requests, name -> JSON Schema."""
    tools: dict[str, dict] = {}
    for entry in json.loads((CLIS / cli / "tools.json").read_text(encoding="utf-8")):
        tools.update(entry["tools"] or {})
    return tools


@pytest.mark.parametrize("cli", ["opencode", "qwen-code", "codex", "claude-code", "gemini-cli"])
def test_each_profile_tool_declares_every_key_the_cli_offers_it_with(cli):
    offered = offered_tools(cli)
    profiled = {t.name: t for t in BUILTIN[cli].tools if t.name in offered}
    kinds = {t.kind for t in profiled.values()}
    assert "bash" in kinds  # every CLI's shell tool was captured and is profiled
    for name, spec in profiled.items():
        keys = set((offered[name] or {}).get("properties", {}))
        assert keys <= set(spec.arguments), (name, keys - set(spec.arguments))
        required = set((offered[name] or {}).get("required") or ())
        assert {k for k, a in spec.arguments.items() if a.required} <= required | {
            spec.judged_key}, name


def test_a_cli_call_is_judged_by_its_profile_only_when_it_comes_from_a_cli():
    call = '{"command": "uv run scripts/lights.py status", "description": "lights"}'
    assert check_call("Bash", call, RALF, profiles=True).decision == "allow"
    assert check_call("Bash", call, RALF).primary == "AE101"  # the harness offers `bash`
    assert check_call("bash", call, RALF).primary == "AE105"  # its `bash` takes no description
    assert check_call("bash", call, RALF, profiles=True).decision == "allow"  # OpenCode's


def test_an_allowlist_switches_a_profile_off_and_its_tools_are_unknown():
    off = AllowList.model_validate({**RALF.model_dump(), "profiles": {"codex": False}})
    verdict = check_call("exec_command", '{"cmd": "uv run scripts/lights.py status"}', off,
                         profiles=True)
    assert verdict.primary == "AE101"
    assert "exec_command" not in off.profile_tools and "Bash" in off.profile_tools


def test_an_allowlist_adds_its_own_profile(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nextends: " + str(Path(__file__).resolve().parents[2] / "allowlists"
                                      / "ralf.yaml") + "\n"
        "profiles:\n  my-harness:\n    tools:\n      - name: sh\n        kind: bash\n"
        "        arguments:\n          script: {holds: command, required: true}\n"
        "          nice: {holds: value, type: integer}\n", encoding="utf-8")
    mine = load_allowlist(path)
    assert check_call("sh", '{"script": "uv run scripts/lights.py status", "nice": 5}', mine,
                      profiles=True).decision == "allow"
    assert check_call("sh", '{"script": "ls /"}', mine, profiles=True).primary == "AE307"
    assert check_call("sh", '{"script": "uv run scripts/lights.py status", "cwd": "/"}', mine,
                      profiles=True).primary == "AE105"


def test_switching_off_a_profile_that_does_not_exist_is_one_clear_error():
    with pytest.raises(ValueError, match="no built-in profile 'claude' to switch off"):
        AllowList(name="x", profiles={"claude": False})


def test_a_profile_error_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nprofiles:\n  claude: false\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no built-in profile 'claude'") as err:
        load_allowlist(path)
    assert "bad.yaml" in str(err.value) and "claude-code" in str(err.value)


def test_policy_profiles_lists_each_cli_tool_with_its_keys():
    result = CliRunner().invoke(main, ["policy", "profiles", "--allowlist", "ralf"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  Bash (bash): command*:command, description:string, timeout:number, " \
           "run_in_background:AE107, dangerouslyDisableSandbox:AE106" in lines
    assert "  shell (bash): command*:argv, workdir:workdir, timeout_ms:number, " \
           "with_escalated_permissions:AE106, justification:string" in lines
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == list(BUILTIN)


def test_policy_profiles_json_says_what_an_allowlist_switched_off(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("name: a\nprofiles:\n  openhands: false\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["policy", "profiles", "--allowlist", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["switched_off"] == ["openhands"]
    assert list(data["profiles"]) == ["opencode", "qwen-code", "codex", "claude-code",
                                      "gemini-cli"]


def test_a_call_whose_name_both_have_is_held_to_the_argument_cap_before_any_parse():
    """`bash` is both the allow-list's tool and OpenCode's: choosing between them reads the
    keys, through the same capped decode as the judging (never an uncapped json.loads)."""
    from agent_eval.policy.calls import arguments_cap

    huge = '{"command": "uv run scripts/lights.py status", "description": "' + "x" * (
        arguments_cap(RALF) + 1) + '"}'
    verdict = check_call("bash", huge, RALF, profiles=True)
    assert verdict.primary == "AE202"
    assert "longer than the cap" in verdict.findings[0].message
