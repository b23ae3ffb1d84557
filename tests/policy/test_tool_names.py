"""Tool names are one list: the shell and read tools of every harness are the same set
for the call recorder (imports, the proxy, rescore) and for the agent CLIs' judges."""

from __future__ import annotations

import json
from pathlib import Path

from agent_eval import call_recorder
from agent_eval.policy import profiles
from agent_eval.policy.sources import judge, resolve_policy


def test_the_recorder_and_the_agent_cli_judges_read_one_list_of_tool_names():
    assert call_recorder.BASH_TOOLS is judge.BASH_TOOLS is profiles.BASH_TOOLS
    assert call_recorder.READ_TOOLS is judge.READ_TOOLS is profiles.READ_TOOLS


def test_codex_shell_tools_are_shell_tools_for_the_recorder_too():
    """The recorder's list lacked Codex's shell_command and exec_command."""
    for tool in ("shell_command", "exec_command"):
        assert call_recorder.kind_of_tool(tool) == "bash"
    assert call_recorder.classify_call("shell_command", {"command": "ls -la"}) == ("bash", "ls -la")
    # an argv shell has no text to rename onto the allow-list's shell: judged as emitted
    assert call_recorder.kind_of_tool("local_shell") == "other"


def test_an_agent_cli_judges_another_harness_shell_tool_as_its_command(tmp_path: Path):
    """The judges' list lacked ``terminal`` (the OpenHands SDK's shell) and ``ReadFile``:
    such a call was asked about as an unknown tool instead of judged by the CLI's rules
    for commands and reads."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"permissions": {"allow": ["Bash(git diff:*)"]}}))
    resolved = resolve_policy(path)
    dual = resolved.judge_call("terminal", {"command": "git diff"})
    assert (dual.kind, dual.text, dual.harness.decision) == ("bash", "git diff", "allow")
    read = resolved.judge_call("ReadFile", {"path": "a.py"})
    assert (read.kind, read.text) == ("read", "a.py")
