"""The session files five agent CLIs wrote (tests/fixtures/clis/<cli>/sessions, each
folder's README names the CLI, its version, licence and how the session was captured)
import with every executed shell call stored with its command and the verdict
`agent-eval check` gives that command, every call judged, and the subagent session linked
to its parent and to the call that spawned it, as the CLI had them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.importers import import_families, read_sessions
from agent_eval.importers.detect import guess_format
from agent_eval.importers.reading import ImportedSession, refuse_no_calls
from agent_eval.importers.recording import record_import
from agent_eval.policy import check_call, check_command, check_read, load_allowlist

ROOT = Path(__file__).resolve().parents[2]
CLIS = ROOT / "tests" / "fixtures" / "clis"
ALLOWLISTS = {"clis": CLIS / "allowlist.yaml", "ralf": ROOT / "allowlists" / "ralf.yaml"}
NOTES = "/home/agent/project/notes.txt"
QWEN_PROJECT = CLIS / "qwen-code/sessions/.qwen/projects/-home-agent-project"
QWEN_MAIN = QWEN_PROJECT / "chats/3dfc6049-43e7-4a67-97a6-f1a5e56d7903.jsonl"
GEMINI_CHATS = CLIS / "gemini-cli/sessions/.gemini/tmp/project/chats"
GEMINI_MAIN = GEMINI_CHATS / "session-2026-11-26T01-46-42ad2056.jsonl"

# cli: (format, session files, [(session id, [(tool, command or read path or None), ...],
#       index of the call that spawned the next session or None)]) -- from the fixture READMEs
CASES = {
    "opencode": ("opencode", "opencode/sessions/.local/share/opencode/opencode.db", [
        ("ses_dea78ff33ffe21VEOs6yBgKXu2",
         [("bash", "ls -la"), ("read", NOTES), ("task", None)], 2),
        ("ses_dea78ca54ffeUR0ycpKgna67yJ", [("bash", "echo subagent shell call")], None),
    ]),
    "qwen-code": ("qwen-code", "qwen-code/sessions", [
        ("3dfc6049-43e7-4a67-97a6-f1a5e56d7903",
         [("run_shell_command", "ls -la"), ("read_file", NOTES), ("agent", None)], 2),
        ("3dfc6049-43e7-4a67-97a6-f1a5e56d7903:agent-general-purpose-call_00000006capture",
         [("run_shell_command", "echo subagent shell call")], None),
    ]),
    "codex": ("codex", "codex/sessions", [
        ("01a21587-e6ba-74f1-8ec6-bcab14c3bb85",
         [("exec_command", "ls -la"), ("exec_command", "cat notes.txt"),
          ("multi_agent_v1.spawn_agent", None), ("multi_agent_v1.wait_agent", None)], 2),
        ("01a21587-e7f0-7f53-9eff-0f6adc09283d", [("exec_command", "echo subagent shell call")], None),
    ]),
    "claude-code": ("claude-code", "claude-code/sessions", [
        ("5806a914-0673-4b23-90b0-25413ad9e10f", [("Bash", "ls -la"), ("Read", NOTES), ("Agent", None)], 2),
        ("5806a914-0673-4b23-90b0-25413ad9e10f:agent-a4962adcabb5a07ea",
         [("Bash", "echo subagent shell call")], None),
    ]),
    "gemini-cli": ("gemini-cli", "gemini-cli/sessions", [
        ("42ad2056-0ecd-4c1a-b4d1-5ed9962af41a",
         [("run_shell_command", "ls -la"), ("read_file", NOTES), ("invoke_agent", None)], 2),
        ("fb154eb6-9d08-43d5-9063-146f5c8fc16e",
         [("run_shell_command", "echo subagent shell call"), ("complete_task", None)], None),
    ]),
}
SHELL = {"bash", "run_shell_command", "exec_command", "Bash"}


def _families(cli: str, allowlist: str = "clis", fmt: str | None = None):
    name, rel, _ = CASES[cli]
    return list(import_families(fmt or name, CLIS / rel, load_allowlist(ALLOWLISTS[allowlist])))


@pytest.mark.parametrize("fmt", ["named", "auto"])
@pytest.mark.parametrize("cli", list(CASES))
def test_each_cli_session_imports_every_call_with_its_command(cli, fmt):
    [family] = _families(cli, fmt=None if fmt == "named" else "auto")
    expected = CASES[cli][2]
    assert [r.key for r in family] == [sid for sid, _, _ in expected]
    for record, (_, calls, _) in zip(family, expected, strict=True):
        assert [(c.tool, c.command) for c in record.calls] == calls
        assert record.source == CASES[cli][0]
        assert record.status == "completed"
        assert record.target == "capture-model"


@pytest.mark.parametrize("allowlist", list(ALLOWLISTS))
@pytest.mark.parametrize("cli", list(CASES))
def test_every_call_is_judged_as_check_judges_it(cli, allowlist):
    """A shell call's verdict is `agent-eval check COMMAND`'s (and check_call's with the
    CLI's tool profiles); a read's is the check of its path; nothing is stored unjudged."""
    rules = load_allowlist(ALLOWLISTS[allowlist])
    [family] = _families(cli, allowlist)
    for record in family:
        for call in record.calls:
            verdict = check_call(call.tool, call.arguments, rules, profiles=True)
            assert (call.decision, call.primary) == (verdict.decision, verdict.primary), call.tool
            assert [f.code for f in call.findings] == [f.code for f in verdict.findings]
            assert call.decision in ("allow", "deny")
            if call.tool in SHELL:
                checked = check_command(call.command, rules)
                assert (call.decision, call.primary) == (checked.decision, checked.primary)
            elif call.command is not None:
                checked = check_read(call.command, rules)
                assert (call.decision, call.primary) == (checked.decision, checked.primary)
    shells = [c for r in family for c in r.calls if c.tool in SHELL]
    assert shells and all(c.decision == "deny" and c.primary == "AE307" for c in shells[:1])


@pytest.mark.parametrize("cli", list(CASES))
def test_the_subagent_is_linked_to_its_parent_and_its_spawning_call(cli):
    [(parent, child)] = [tuple(f) for f in _families(cli)]
    spawning = CASES[cli][2][0][2]
    assert child.parent_key == parent.key
    assert parent.calls[spawning].child_key == child.key
    assert [c.index for c in parent.calls if c.child_key] == [spawning]
    assert parent.parent_key is None


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("cli", list(CASES))
def test_the_stored_run_keeps_the_sessions_children_and_verdicts(cli, store):
    name, rel, expected = CASES[cli]
    summary = record_import(store, name, CLIS / rel, load_allowlist(ALLOWLISTS["clis"]))
    rows = sorted(store.session_rows([summary.run_id]), key=lambda r: r.id)
    assert len(rows) == 2
    parent, child = (store.load_session(r.id) for r in rows)
    assert (parent.record.key, child.record.key) == (expected[0][0], expected[1][0])
    assert child.parent_id == parent.id and parent.parent_id is None
    assert parent.child_links == ((expected[0][2], child.id),)
    stored = [(c.tool, c.command, c.decision) for c in parent.record.calls + child.record.calls]
    assert [(t, c) for t, c, _ in stored] == [*expected[0][1], *expected[1][1]]
    assert all(d in ("allow", "deny") for _, _, d in stored)


def test_qwen_code_memory_session_is_one_call_less_session():
    """The text-only Qwen Code session (its memory-extraction request is not written to
    the chat file): read, with no calls, and not refused."""
    [session] = read_sessions("qwen-code", CLIS / "qwen-code-memory/sessions")
    assert (session.id, session.model, len(session.calls)) == (
        "ef04d7a5-64b7-4d7e-a546-cf2db7ebebbe", "capture-model", 0)
    assert session.messages[0]["content"].startswith("Run the shell command `ls -la`")


@pytest.mark.parametrize(("path", "fmt"), [
    (QWEN_MAIN, "qwen-code"),
    (QWEN_PROJECT / "subagents/3dfc6049-43e7-4a67-97a6-f1a5e56d7903/"
     "agent-general-purpose-call_00000006capture.jsonl", "qwen-code"),
    (CLIS / "qwen-code-memory/sessions", "qwen-code"),
    (GEMINI_MAIN, "gemini-cli"),
    (GEMINI_CHATS / "42ad2056-0ecd-4c1a-b4d1-5ed9962af41a/fb154eb6-9d08-43d5-9063-146f5c8fc16e.jsonl",
     "gemini-cli"),
    (CLIS / "claude-code/sessions", "claude-code"),
    (CLIS / "codex/sessions", "codex"),
], ids=lambda v: v if isinstance(v, str) else v.name)
def test_each_cli_file_is_detected_as_its_format(path, fmt):
    assert guess_format(path) == fmt


def test_a_qwen_code_file_named_as_claude_code_is_an_error_naming_qwen_code(tmp_path):
    """It used to import as Claude Code with 0 calls and exit 0."""
    result = CliRunner().invoke(main, ["import", "claude-code", str(QWEN_MAIN), "--allowlist",
                                       str(ALLOWLISTS["clis"]), "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert str(QWEN_MAIN) in result.output and "(try: qwen-code)" in result.output
    assert "imported" not in result.output


def test_a_file_holding_calls_its_reader_found_none_of_is_an_error_naming_the_format():
    """Whatever the reader: call-less sessions from a file that writes tool calls are
    refused, naming the file and the format it looks like."""
    empty = iter([ImportedSession(id="s", model="m")])
    with pytest.raises(Exception, match=r"holds tool calls, but the claude-code reader found none in it; "
                                        r"is this a claude-code file\? \(try: qwen-code\)") as err:
        list(refuse_no_calls(empty, QWEN_MAIN, "claude-code", "qwen-code"))
    assert err.value.path == str(QWEN_MAIN)


def test_call_less_sessions_of_a_file_without_calls_are_kept():
    memory = next((CLIS / "qwen-code-memory/sessions").rglob("*.jsonl"))
    sessions = [ImportedSession(id="s", model="m")]
    assert list(refuse_no_calls(iter(sessions), memory, "qwen-code", "qwen-code")) == sessions


def test_gemini_cli_log_replays_updates_sets_and_rewinds(tmp_path):
    """A reply rewritten with its calls replaces the first write in place; ``$rewindTo``
    drops the message and all after it (chatRecordingService.ts's loadConversation)."""
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": "rm -rf /tmp/x"},
            "status": "success", "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                                                                  "response": {"output": "ok"}}}]}
    lines = [
        {"sessionId": "s1", "projectHash": "h", "startTime": "2026-11-26T01:00:00Z", "kind": "main"},
        {"id": "u1", "timestamp": "2026-11-26T01:00:01Z", "type": "user", "content": [{"text": "go"}]},
        {"id": "g1", "timestamp": "2026-11-26T01:00:02Z", "type": "gemini", "content": "", "model": "m"},
        {"id": "g1", "timestamp": "2026-11-26T01:00:02Z", "type": "gemini", "content": "", "model": "m",
         "toolCalls": [call]},
        {"id": "g2", "timestamp": "2026-11-26T01:00:03Z", "type": "gemini", "content": "",
         "toolCalls": [{**call, "id": "c2", "args": {"command": "ls"}}]},
        {"$rewindTo": "g2"},
        {"$set": {"summary": "the title"}},
    ]
    path = tmp_path / "session-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    [session] = read_sessions("gemini-cli", path)
    assert (session.id, session.model, session.title) == ("s1", "m", "the title")
    assert [(c.call_id, c.text, c.output, c.source_decision) for c in session.calls] == [
        ("c1", "rm -rf /tmp/x", "ok", "allow")]
    assert len(session.turns) == 1


def test_gemini_cli_legacy_json_session_file_reads_the_same(tmp_path):
    lines = [json.loads(line) for line in GEMINI_MAIN.read_text().splitlines() if line.strip()]
    messages: dict[str, dict] = {}
    for line in lines[1:]:
        if "id" in line:
            messages[line["id"]] = line
    path = tmp_path / "session-legacy.json"
    path.write_text(json.dumps({**lines[0], "messages": list(messages.values())}))
    assert guess_format(path) == "gemini-cli"
    [session] = read_sessions("gemini-cli", path)
    assert [c.text for c in session.calls] == ["ls -la", NOTES, None]


def test_qwen_code_tool_result_status_is_its_own_verdict():
    [main_session, child] = read_sessions("qwen-code", CLIS / "qwen-code/sessions")
    assert [c.source_decision for c in main_session.calls] == ["allow"] * 3
    assert main_session.calls[0].output.startswith("Command: ls -la\n")
    assert child.parent == main_session.id and child.model == "capture-model"


def test_claude_code_2_1_39_task_call_is_linked_to_its_subagent_file():
    """The older spelling of the subagent tool (``Task``), in the real 2.1.39 project of
    tests/fixtures/clients: its result line names the subagent (``toolUseResult.agentId``)."""
    sid = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    [family] = import_families("claude-code", ROOT / "tests/fixtures/clients/claude-code/2.1.39-spotter",
                               load_allowlist(ALLOWLISTS["ralf"]))
    parent, child = family
    assert [(c.index, c.tool, c.child_key) for c in parent.calls if c.child_key] == [
        (10, "Task", f"{sid}:agent-aac57f5")]
    assert (child.key, child.parent_key) == (f"{sid}:agent-aac57f5", sid)


def test_every_import_format_is_documented_and_offered_by_the_command():
    from agent_eval.cli.imports import TRANSCRIPT_FORMATS
    from agent_eval.importers import FORMATS

    guide = (ROOT / "docs" / "import.md").read_text()
    clients = (ROOT / "docs" / "clients.md").read_text()
    assert set(TRANSCRIPT_FORMATS) == {"auto", *FORMATS}
    for fmt in FORMATS:
        assert f"| `{fmt}` |" in guide, fmt
    for cli in CASES:
        assert f"| `{CASES[cli][0]}` |" in clients, cli


def test_a_claude_code_agent_call_cut_before_its_result_is_linked_through_the_meta_file(tmp_path):
    """The transcript ends before the ``Agent`` call's result line (no ``agentId``): the
    subagent's ``.meta.json`` (``toolUseId``) still names the call."""
    import shutil

    src = CLIS / "claude-code/sessions/.claude/projects/-home-agent-project"
    project = tmp_path / "-home-agent-project"
    shutil.copytree(src, project)
    main_file = project / "5806a914-0673-4b23-90b0-25413ad9e10f.jsonl"
    lines = main_file.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"agentId": "a4962adcabb5a07ea"' in line)
    main_file.write_text("".join(lines[:cut]))
    [(parent, child)] = [tuple(f) for f in import_families(
        "claude-code", project, load_allowlist(ALLOWLISTS["clis"]))]
    assert parent.calls[2].tool == "Agent" and parent.calls[2].child_key == child.key
    assert child.key.endswith(":agent-a4962adcabb5a07ea")


def test_sessions_whose_children_never_come_are_all_stored_unlinked(tmp_path):
    """More spawning sessions than are held waiting for their children (HELD_FAMILIES),
    none of whose children is in the file: every session comes out once, unlinked."""
    from agent_eval.importers import HELD_FAMILIES

    count = HELD_FAMILIES + 6
    sessions = [{"id": f"ses_{i:03}", "time_created": i, "data": "{}"} for i in range(count)]
    messages = [{"id": f"msg_{i:03}", "session_id": f"ses_{i:03}", "time_created": i,
                 "data": json.dumps({"role": "assistant", "modelID": "m"})} for i in range(count)]
    parts = [{"id": f"prt_{i:03}", "message_id": f"msg_{i:03}", "data": json.dumps(
        {"type": "tool", "tool": "task", "callID": f"c{i}", "state": {
            "status": "completed", "input": {"prompt": "p"}, "metadata": {"sessionId": f"gone_{i}"}}})}
        for i in range(count)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps({"session": sessions, "message": messages, "part": parts}))
    records = [r for family in import_families("opencode", path, load_allowlist(ALLOWLISTS["clis"]))
               for r in family]
    assert sorted(r.key for r in records) == [f"ses_{i:03}" for i in range(count)]
    assert all(c.child_key is None for r in records for c in r.calls)
