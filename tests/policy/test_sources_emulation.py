"""Modes and releases are part of the harness verdict (policy/sources/emulation.py).

Built from what the real CLIs did, each run unattended with one command per conversation
(docs/policies.md, "Modes and releases"): Codex under approval ``never`` runs a command no
rule matches inside its sandbox; Claude Code's pinned release asks for a ``cd DIR &&``
chain, a pipe into ``tee``, an output redirection and ``VAR=1 cmd``, and runs read-only
commands with no rule; the old releases' quirks stay for the old versions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.policy.sources import Setting, judge_command, load_policy_source
from agent_eval.policy.sources.emulation import (
    PINNED,
    check_mode,
    emulation_for,
    version_from_headers,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"
SEED_RULES = FIXTURES / "codex" / "seed.rules"


def codex(mode: str | None = None):
    return load_policy_source(SEED_RULES).agent(None), Setting(mode=mode)


def claude(tmp_path: Path, allow: list[str], mode: str | None = None):
    folder = tmp_path / ".claude"
    folder.mkdir(exist_ok=True)
    permissions: dict = {"allow": allow}
    if mode:
        permissions["defaultMode"] = mode
    (folder / "settings.json").write_text(json.dumps({"permissions": permissions}))
    return load_policy_source(folder / "settings.json").agent(None)


@pytest.mark.parametrize(("command", "decision", "leak"), [
    ("ls -la", "sandboxed", "AE307"),                       # no rule: ran in the sandbox
    ("ls > out.txt", "sandboxed", "AE303"),                 # the whole bash -lc argv
    ("echo $(whoami)", "sandboxed", "AE312"),
    ("uv run scripts/db_query.py --sql x", "allow", None),  # an allow rule: runs outside
    ("git push origin main", "deny", None),                 # prompt rule: never rejects it
    ("uv run python -c 'print(1)'", "deny", None),          # forbidden
    ("rm -rf build", "deny", None),                         # dangerous, nobody to ask
], ids=["unmatched", "redirect", "substitution", "allow-rule", "prompt-rule", "forbidden",
        "dangerous"])
def test_codex_never_workspace_write_runs_unmatched_commands_sandboxed(command, decision, leak):
    agent, setting = codex("never/workspace-write")
    dual = judge_command(agent, command, setting)
    assert (dual.harness.decision, dual.leak_class) == (decision, leak)


CONFORMANCE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"


@pytest.mark.parametrize(("command", "outcome", "decision"), [
    ("uname -s", "ran", "sandboxed"),                   # no rule: runs in the sandbox
    ("echo conform > out.txt", "ran", "sandboxed"),
    ("echo conform", "ran", "allow"),                   # an allow rule
    ("git push origin main", "refused", "ask"),         # prompt rule: nobody answers
    ("curl http://127.0.0.1:9/", "refused", "deny"),    # forbidden
], ids=["unmatched", "redirect", "allow-rule", "prompt-rule", "forbidden"])
def test_codex_on_failure_is_judged_as_the_pinned_release_ran_it(command, outcome, decision,
                                                                 tmp_path):
    """Codex 0.169.0 started with approval ``on-failure`` (no warning) and did what it does
    under ``on-request``: the recorded cases, judged under the recording's own rules."""
    recorded = json.loads((CONFORMANCE / "codex-0.169.0-on-failure_workspace-write.json")
                          .read_text())
    assert {c["command"]: c["outcome"] for c in recorded["cases"]}[command] == outcome
    (tmp_path / "default.rules").write_text(recorded["rules"])
    agent = load_policy_source(tmp_path / "default.rules", home="/home/agent").agent(None)
    setting = Setting(workdir="/home/agent/project", home="/home/agent",
                      version=PINNED["codex"], mode="on-failure/workspace-write")
    assert check_mode("codex", setting.mode) == "on-failure/workspace-write"
    assert judge_command(agent, command, setting).harness.decision == decision


def test_codex_modes_change_what_an_unmatched_command_gets():
    agent, _ = codex()
    verdicts = {mode: judge_command(agent, cmd, Setting(mode=mode)).harness.decision
                for mode, cmd in [("untrusted/workspace-write", "ls -la"),
                                  ("on-request/read-only", "make build"),
                                  ("never/danger-full-access", "rm -rf build")]}
    assert verdicts == {"untrusted/workspace-write": "allow",   # known safe
                        "on-request/read-only": "sandboxed",
                        "never/danger-full-access": "allow"}     # no sandbox to fall back on
    assert judge_command(agent, "make build", Setting(mode="untrusted/read-only")) \
        .harness.decision == "ask"


def test_codex_reads_its_mode_from_the_config_toml_beside_the_rules(tmp_path):
    rules = tmp_path / ".codex" / "rules"
    rules.mkdir(parents=True)
    (rules / "default.rules").write_text(SEED_RULES.read_text())
    (tmp_path / ".codex" / "config.toml").write_text(
        'approval_policy = "untrusted"\nsandbox_mode = "workspace-write"\n')
    agent = load_policy_source(rules).agent(None)
    assert Setting().emulation(agent).describe() == \
        f"codex {PINNED['codex']}, mode untrusted/workspace-write"
    assert judge_command(agent, "make", Setting()).harness.decision == "ask"


@pytest.mark.parametrize(("allow", "command", "decision"), [
    (["Bash(cd:*)"], "cd /some/path && python3 script.py", "ask"),
    (["Bash(echo *)"], "echo x | tee out.txt", "ask"),
    (["Bash(ls *)"], "ls -la > files.txt", "ask"),
    (["Bash(ls *)"], "FOO=1 ls -la", "ask"),
    ([], "ls -la", "allow"),                    # read-only: no rule needed
    ([], "timeout 5 cat notes.txt", "allow"),   # also behind a wrapper
    ([], "git status", "allow"),
    ([], "rm notes.txt", "ask"),
], ids=["cd-chain", "tee", "redirect", "assignment", "read-only", "wrapped-read-only",
        "git-status", "rm"])
def test_claude_codes_pinned_release(tmp_path, allow, command, decision):
    dual = judge_command(claude(tmp_path, allow), command, Setting())
    assert dual.harness.decision == decision


@pytest.mark.parametrize(("allow", "command", "quirk"), [
    (["Bash(cd:*)"], "cd /some/path && python3 script.py", "cd-chain"),
    (["Bash(echo *)"], "echo x | tee out.txt", "whole-command-prefix"),
    (["Bash(ls *)"], "ls -la > files.txt", None),
    (["Bash(ls *)"], "FOO=1 ls -la", None),
], ids=["cd-chain", "tee", "redirect", "assignment"])
def test_an_older_release_keeps_its_quirks(tmp_path, allow, command, quirk):
    dual = judge_command(claude(tmp_path, allow), command, Setting(version="2.1.0"))
    assert (dual.harness.decision, dual.harness.quirk) == ("allow", quirk)
    assert dual.leak


def test_an_older_release_asks_for_a_read_only_command_with_no_rule(tmp_path):
    assert judge_command(claude(tmp_path, []), "ls -la", Setting(version="2.1.0")) \
        .harness.decision == "ask"


@pytest.mark.parametrize(("mode", "command", "decision"), [
    ("dontAsk", "ls -la", "allow"),             # read-only: runs in dontAsk too
    ("dontAsk", "make", "deny"),
    ("dontAsk", "echo a | tee out.txt", "deny"),  # what would ask is refused
    ("plan", "ls -la", "allow"),
    ("plan", "make", "deny"),
    ("acceptEdits", "mkdir out", "allow"),
    ("bypassPermissions", "make", "allow"),
])
def test_claude_code_modes(tmp_path, mode, command, decision):
    agent = claude(tmp_path, [])
    assert judge_command(agent, command, Setting(mode=mode)).harness.decision == decision
    assert judge_command(claude(tmp_path, [], mode), command, Setting()).harness.decision \
        == decision  # the same mode from permissions.defaultMode


def test_the_emulated_behaviours_follow_the_version():
    pinned = emulation_for("claude-code", None, "default", None)
    old = emulation_for("claude-code", "1.0.130", "default", None)
    assert pinned.version == PINNED["claude-code"]
    assert {"read-only-unasked", "redirect-asks", "assignment-asks"} <= pinned.behaviours
    assert not {"cd-chain", "whole-command-prefix"} & pinned.behaviours
    assert {"cd-chain", "whole-command-prefix", "redirect-stripped"} <= old.behaviours
    assert "redirect-stripped" not in emulation_for("claude-code", "1.0.100", "default",
                                                    None).behaviours


@pytest.mark.parametrize(("agent", "found"), [
    ("claude-cli/2.1.332 (external, cli)", ("claude-code", "2.1.332")),
    ("codex_cli_rs/0.169.0 (Debian 12; x86_64) xterm", ("codex", "0.169.0")),
    ("opencode/1.18.33 ai-sdk/provider-utils", ("opencode", "1.18.33")),
    ("python-httpx/0.28", None),
])
def test_the_release_comes_from_the_clients_user_agent(agent, found):
    assert version_from_headers({"user-agent": agent}) == found


@pytest.mark.parametrize(("harness", "mode"), [("claude-code", "yolo"),
                                               ("codex", "never"), ("codex", "always/none"),
                                               ("opencode", "plan")])
def test_a_mode_the_cli_does_not_have_is_one_clear_error(harness, mode):
    with pytest.raises(ConfigError, match="--mode"):
        check_mode(harness, mode)


# -- the corpus's second round on Claude Code 2.1.332 (tests/fixtures/conformance) ---------

def _claude_agent(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(echo *)", "Bash(ls *)"]}}))
    return load_policy_source(settings).agent(None)


def _decision(agent, command, version=None, mode="default"):
    setting = Setting(workdir="/home/agent/project", home="/home/agent", version=version,
                      mode=mode)
    return judge_command(agent, command, setting).harness.decision


def test_xargs_of_a_read_only_command_runs_unasked(tmp_path):
    agent = _claude_agent(tmp_path)
    assert _decision(agent, "xargs echo < notes.txt") == "allow"  # recorded: ran
    assert _decision(agent, "xargs echo < notes.txt", mode="dontAsk") == "allow"
    assert _decision(agent, "xargs rm < notes.txt") == "ask"


def test_a_brace_expansion_asks_on_the_pinned_release_only(tmp_path):
    agent = _claude_agent(tmp_path)
    assert _decision(agent, "echo {a,b}") == "ask"  # recorded: "Brace expansion"
    assert _decision(agent, "echo {a,b}", mode="dontAsk") == "deny"
    assert _decision(agent, "echo '{a,b}'") == "allow"
    assert _decision(agent, "echo ${HOME}") == "allow"
    assert _decision(agent, "echo {a,b}", version="2.1.300") == "allow"


def test_a_read_only_command_on_a_path_outside_asks_whatever_rule(tmp_path):
    agent = _claude_agent(tmp_path)
    assert _decision(agent, "ls ~") == "ask"  # recorded: "ls in '/home/agent' was blocked"
    assert _decision(agent, "ls /etc") == "ask"
    assert _decision(agent, "ls ..") == "ask"
    assert _decision(agent, "ls .git") == "allow"  # recorded: ran
    assert _decision(agent, "grep -r conform .") == "allow"  # recorded: ran
    assert _decision(agent, "grep root /etc/passwd") == "ask"


def test_accept_edits_accepts_a_redirection_into_the_working_directory(tmp_path):
    agent = _claude_agent(tmp_path)
    assert _decision(agent, "echo conform > out.txt", mode="acceptEdits") == "allow"  # ran
    assert _decision(agent, "echo conform > out.txt") == "ask"
    assert _decision(agent, "echo x > /etc/conform", mode="acceptEdits") == "ask"
    assert _decision(agent, "echo x > .git/conform", mode="acceptEdits") == "ask"  # protected
    assert _decision(agent, "echo x >> ~/.bashrc", mode="acceptEdits") == "ask"  # recorded


RETIRED = ('approval_policy = "untrusted" is no longer supported; remove this setting')
"""What Codex 0.169.0 printed, exit 1, before any model call, for ``-c
approval_policy="untrusted"`` (tried in the conformance sandbox)."""


def test_codex_untrusted_on_the_pinned_release_is_one_clear_error(tmp_path):
    """The pinned Codex refuses approval ``untrusted`` at start: ``policy audit`` says so in
    one Error line quoting it, from --mode or from the config.toml beside the rules; an
    older release (--cli-version 0.148.0) is still emulated with it."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    def run(*args: str):
        return CliRunner().invoke(main, ["policy", "audit", *args])

    done = run(str(SEED_RULES), "--mode", "untrusted/workspace-write")
    assert done.exit_code == 2
    lines = [line for line in done.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: --mode: "), done.output
    assert f"Codex {PINNED['codex']} refuses approval untrusted" in lines[0]
    assert RETIRED in lines[0] and "0.149.0" in lines[0]
    rules = tmp_path / ".codex" / "rules"
    rules.mkdir(parents=True)
    (rules / "default.rules").write_text(SEED_RULES.read_text())
    (tmp_path / ".codex" / "config.toml").write_text('approval_policy = "untrusted"\n')
    done = run(str(rules))
    assert done.exit_code == 2 and RETIRED in done.output, done.output
    done = run(str(SEED_RULES), "--mode", "untrusted/workspace-write", "--cli-version", "0.148.0")
    assert done.exit_code == 0, done.output
    assert "emulated: codex 0.148.0, mode untrusted/workspace-write" in done.output


@pytest.mark.parametrize("args", [["explain", str(SEED_RULES), "ls"],
                                  ["diff", str(SEED_RULES), str(SEED_RULES)]],
                         ids=["explain", "diff"])
def test_codex_untrusted_is_the_same_error_in_explain_and_diff(args):
    from click.testing import CliRunner

    from agent_eval.cli import main

    done = CliRunner().invoke(main, ["policy", *args, "--mode", "untrusted/workspace-write"])
    assert done.exit_code == 2
    assert done.output.startswith("Error: --mode: ") and RETIRED in done.output
    assert len(done.output.strip().splitlines()) == 1


def test_codex_on_failure_on_the_pinned_release_is_audited_not_refused():
    """Codex 0.169.0 starts with approval ``on-failure`` (recorded): unlike ``untrusted``,
    ``policy audit`` and ``explain`` emulate it."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    done = CliRunner().invoke(main, ["policy", "audit", str(SEED_RULES), "--mode",
                                     "on-failure/workspace-write"])
    assert done.exit_code == 0 and "Error:" not in done.output, done.output
    assert f"emulated: codex {PINNED['codex']}, mode on-failure/workspace-write" in done.output
    done = CliRunner().invoke(main, ["policy", "explain", str(SEED_RULES), "ls -la", "--mode",
                                     "on-failure/workspace-write"])
    assert done.exit_code == 0 and "harness: sandboxed" in done.output, done.output
