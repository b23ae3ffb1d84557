"""Each client version in tests/fixtures/clients/ imports with exactly its hand-counted
calls, commands taken from where the client put them.

The counts and how they were made are in each folder's MANIFEST.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.importers import read_sessions, read_tagged_sessions
from agent_eval.importers.detect import guess_format

CLIENTS = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")
CLAUDE_21 = CLIENTS / "claude-code" / "2.1.39-spotter"
CLAUDE_SID = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
CLAUDE_CHILD = f"{CLAUDE_SID}:agent-aac57f5"
SPOTTER = "/home/USER/projects/spotter-worktrees/spotter-4te"
CODEX_0125 = "codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
CODEX_0128 = "codex/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
SKILLS = "/Users/Sample_User/.codex/plugins/cache/openai-curated/superpowers/63976030/skills"
CODEX_092 = "codex/rollout-2026-01-29T09-56-59-019c08f8-5a47-7a61-8993-d5882309292e.jsonl"
CODEX_092_SEARCH = "codex/rollout-2026-01-30T14-16-50-019c0f0c-9c5d-7081-99a9-f4829741831a.jsonl"
TF = "/home/edouard/test-framework"
MINI_227 = "mini-swe-agent/2.2.7-pr814/sqlfluff__sqlfluff-2419.traj.json"
MINI_CONSTRUCTED = CLIENTS.parent / "constructed" / "mini-swe-agent-2.2.8-toolcall.traj.json"
CODEX_089_CONSTRUCTED = CLIENTS.parent / "constructed" / "codex-0.89-shapes.jsonl"

OH_V1 = "openhands/v1.49.1-sdk/5db134a6233f4ff9b88fc4f3e1e07c66"
SWE_GPT4 = ("swe-agent/gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1/"
            "6e44b9__sweagenttestrepo-1c2844.traj")
MARSHMALLOW_EDIT = ('edit 1:1\nfrom marshmallow.fields import TimeDelta\nfrom datetime import timedelta\n\n'
                    'td_field = TimeDelta(precision="milliseconds")\n\nobj = dict()\n'
                    'obj["td_field"] = timedelta(milliseconds=345)\n\nprint(td_field.serialize("td_field", obj))\n'
                    'end_of_edit')
ROUND = "return int(round(value.total_seconds() / base_unit.total_seconds()))  # round to nearest int"

# (format, file under tests/fixtures/clients, hand-counted calls, the commands in order:
#  the shell command or read path, None for other tools)
CASES = [
    ("mini-swe-agent", "mini-swe-agent/github_issue-06cb414f.traj.json", 10, None),
    ("mini-swe-agent", "mini-swe-agent/github_issue-1ce8e917.traj.json", 10, None),
    ("mini-swe-agent", "mini-swe-agent/local-12300cf4.traj.json", 2,
     ["echo 'hello world'", "echo NANO_SWE_AGENT_FINAL_OUTPUT"]),
    ("mini-swe-agent", "mini-swe-agent/local-1ce8e917.traj.json", 2,
     ["echo 'hello world'", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]),
    ("mini-swe-agent", MINI_227, 41, None),
    ("swe-agent", "swe-agent/v0.7.0-networking_1.traj", 4, None),
    ("swe-agent", "swe-agent/v0.1.0-marshmallow-code__marshmallow-1867.traj", 11,
     ["create reproduce.py", MARSHMALLOW_EDIT, "python reproduce.py", "ls -F", 'find_file "fields.py" src',
      "open src/marshmallow/fields.py 1474", f"edit 1475:1475\n{ROUND}\nend_of_edit",
      f"edit 1475:1475\n        {ROUND}\nend_of_edit", "python reproduce.py", "rm reproduce.py", "submit"]),
    ("swe-agent", "swe-agent/function_calling_simple.traj", 5,
     ["find_file missing_colon.py", 'open "tests/missing_colon.py"',
      "edit 'def division(a: float, b: float) -> float' 'def division(a: float, b: float) -> float:'",
      "python tests/missing_colon.py", "submit"]),
    ("swe-agent", SWE_GPT4, 5, None),
    ("claude-code", "claude-code/claude_with_rejection.jsonl", 4, None),
    ("claude-code", "claude-code/2.1.38-spotter/tool_heavy.jsonl", 6,
     ["mix phx.server", "tail -5 /tmp/claude-1000/-home-marco-projects-spotter/tasks/bae407b.output",
      None, None, "/home/marco/projects/spotter/assets/js/app.js", None]),
    ("codex", "codex/rollout-0.77-golden.jsonl", 1, ["ls -la"]),
    ("codex", "codex/rollout-0.77-escalation.jsonl", 4,
     ["echo 'Hello World' > test.txt", "printf 'Goodbye World\n' > test.txt", "cat test.txt", "rm test.txt"]),
    ("codex", CODEX_0125, 4,
     [f"sed -n '1,180p' {SKILLS}/using-superpowers/SKILL.md", None,
      f"sed -n '1,220p' {SKILLS}/brainstorming/SKILL.md && sed -n '1,220p' {SKILLS}/test-driven-development/SKILL.md",
      None]),
    ("codex", CODEX_0128, 3, None),
    ("codex", CODEX_092, 4,
     ["ls", f"ls {TF}/_bmad/cis/agents", f"cat {TF}/_bmad/cis/agents/brainstorming-coach.md",
      f"cat {TF}/_bmad/cis/config.yaml"]),
    ("codex", CODEX_092_SEARCH, 5, [None] * 5),
    ("openhands", "openhands/basic@964478c2.json", 2, None),
    ("openhands", "openhands/basic_interactions@964478c2.json", 1, None),
    ("openhands", "openhands/wrong_initial_state@9aeabc4d.json", 4,
     ["/workspace", "mv /workspace/game_2048.py /workspace/2048.py", "/workspace", None]),
    ("openhands", "openhands/basic_gui_mode@21402a75.json", 4,
     ["mkdir -p /workspace/todo-app", None, None, "cd /workspace/todo-app && python3 -m http.server 8000"]),
    ("openhands", OH_V1, 5, ["echo hello > notes.txt", "/fixture/workspace/notes.txt", "notes.txt", None, None]),
]


@pytest.mark.parametrize(("fmt", "rel", "count", "commands"), CASES, ids=[c[1] for c in CASES])
def test_each_client_file_imports_its_hand_counted_calls(fmt, rel, count, commands):
    [session] = read_sessions(fmt, CLIENTS / rel)
    assert len(session.calls) == count
    assert session.skipped_calls == 0
    if commands is not None:
        assert [c.text for c in session.calls] == commands


@pytest.mark.parametrize(("fmt", "rel"), [(c[0], c[1]) for c in CASES], ids=[c[1] for c in CASES])
def test_each_client_file_is_detected_as_its_format(fmt, rel):
    assert guess_format(CLIENTS / rel) == fmt


def test_mini_swe_agent_bare_list_commands_come_from_the_fenced_block():
    [session] = read_sessions("mini-swe-agent", CLIENTS / "mini-swe-agent/github_issue-1ce8e917.traj.json")
    assert session.calls[1].text == "ls -la"
    assert session.calls[2].text == "ls -la tests/"
    assert all(c.source_decision is None for c in session.calls)  # no format errors, no verdicts


def test_mini_swe_agent_2_2_7_real_file_takes_each_command_from_its_bash_tool_call():
    """Real 2.2.7 run (deepseek-chat, SWE-bench Lite sqlfluff-2419): 41 replies, one
    ``bash`` tool call each; the command is the call's ``arguments.command``, not the
    reply's prose, and its output the ``role: tool`` message with the same id."""
    [session] = read_sessions("mini-swe-agent", CLIENTS / MINI_227)
    assert (session.id, session.model, session.status) == (
        "sqlfluff__sqlfluff-2419", "deepseek/deepseek-chat", "completed")
    assert len(session.turns) == 41 and [c.turn_index for c in session.calls] == list(range(41))
    assert [c.text for c in session.calls[:3]] == [
        'find . -type f -name "*.py" | grep -i "l060" | head -20',
        "cat ./src/sqlfluff/rules/L060.py",
        'grep -r "Use.*instead" ./src/sqlfluff/rules/ | head -10']
    assert [c.text for c in session.calls[-3:]] == [
        "git diff -- ./src/sqlfluff/rules/L060.py > patch.txt", "cat patch.txt",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt"]
    assert session.calls[19].text.startswith("cat > test_l060.py << 'EOF'\nimport sqlfluff\n")
    assert (session.calls[0].call_id, session.calls[40].call_id) == (
        "call_00_DWuPj6lu5KzoLnXB0Rb4ItZo", "call_00_8Q3hXC9QJyOcAevzeiitpRCu")
    assert all(c.tool == "bash" and c.kind == "bash" and c.source_decision is None for c in session.calls)
    # 40 results by tool_call_id; the submit is answered by the `exit` message, not a tool result
    assert all(c.output.startswith("<returncode>") for c in session.calls[:40])
    assert session.calls[40].output == ""


def test_mini_swe_agent_2_tool_calls_keep_ids_outputs_and_format_errors():
    """Constructed file (tests/fixtures/constructed/README.md): parallel calls and format
    errors, which the real 2.2.7 trajectories found do not hold."""
    [session] = read_sessions("mini-swe-agent", MINI_CONSTRUCTED)
    assert session.model == "openai/gpt-5-mini"
    assert [c.call_id for c in session.calls[:3]] == ["call_1", "call_2", "call_3"]
    assert session.calls[1].output.startswith("<returncode>1</returncode>")
    assert [c.turn_index for c in session.calls] == [0, 1, 1, 2, 3, 4]
    assert [(c.tool, c.source_decision) for c in session.calls[3:5]] == [("bash", "deny"), ("python", "deny")]
    assert [c.source_decision for c in session.calls if c.text] == [None] * 4


def test_swe_agent_model_comes_from_the_replay_config_or_the_run_folder(tmp_path):
    [session] = read_sessions("swe-agent", CLIENTS / SWE_GPT4)
    assert session.model == "gpt-4o"  # replay_config.agent.model.name
    folder = tmp_path / "gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1"
    folder.mkdir()
    (folder / "x.traj").write_bytes((CLIENTS / "swe-agent/v0.7.0-networking_1.traj").read_bytes())
    [session] = read_sessions("swe-agent", folder / "x.traj")
    assert session.model == "gpt4"


def test_swe_agent_history_only_file_reads_the_assistant_actions():
    [session] = read_sessions("swe-agent", CLIENTS / "swe-agent/function_calling_simple.traj")
    assert session.calls[0].output.startswith('Found 1 matches for "missing_colon.py"')
    assert session.calls[2].text.startswith("edit 'def division(a: float, b: float) -> float'")


def test_claude_code_2_1_parallel_calls_form_one_turn_and_do_not_crash():
    """Real 2.1.39 files: reply msg_01Cwyj7R... is six assistant lines, each Read's
    result written before the next Read; the subagent's replies interleave the same way."""
    sessions = list(read_sessions("claude-code", CLAUDE_21))
    assert [s.id for s in sessions] == [CLAUDE_SID, CLAUDE_CHILD]
    parent, child = sessions
    reads = ["mix.exs", "lib/spotter/application.ex", "config/config.exs", "config/dev.exs",
             "config/test.exs", "config/runtime.exs"]
    assert [(c.tool, c.text) for c in parent.calls] == [
        ("Bash", "bd show spotter-4te"), ("Bash", "bd ready"), ("Bash", "bd show spotter-4te.1"),
        ("Bash", "bd update spotter-4te.1 --status in_progress"),
        *[("Read", f"{SPOTTER}/{name}") for name in reads], ("Task", None), ("Skill", None)]
    assert [c.turn_index for c in parent.calls] == [0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 4, 4]
    assert len(parent.turns) == 5
    replies = [m for m in parent.messages if m.get("role") == "assistant" and m.get("tool_calls")]
    assert [len(m["tool_calls"]) for m in replies] == [2, 1, 1, 6, 2]
    assert replies[3]["tool_calls"][0]["id"] == "toolu_01Ub9KFAAhuZu7bZznKrVXnn"
    assert [c.source_decision for c in parent.calls] == ["allow"] * 12
    assert all(c.output for c in parent.calls)
    assert (parent.status, parent.model, parent.skipped_calls) == ("completed", "claude-opus-4-6", 0)
    assert (child.parent, child.model, len(child.calls)) == (CLAUDE_SID, "claude-sonnet-4-5-20250929", 12)
    assert [c.tool for c in child.calls] == ["WebSearch"] * 6 + ["WebFetch"] * 6
    assert [c.turn_index for c in child.calls] == [0] * 6 + [1] * 6


def test_claude_code_subagent_session_is_stored_as_a_child_of_its_session(store):
    from agent_eval.importers.recording import record_import
    from agent_eval.policy import load_allowlist

    summary = record_import(store, "auto", CLAUDE_21, load_allowlist(RALF))
    assert (summary.sessions, summary.calls) == (2, 24)
    rows = {r.key: r for r in store.session_rows([summary.run_id])}
    assert rows[CLAUDE_CHILD].parent_id == rows[CLAUDE_SID].id


def test_codex_0_89_shapes_exec_command_local_shell_and_rejection():
    """Constructed file (tests/fixtures/constructed/README.md): a ``local_shell_call`` argv
    and a command the user rejected, in the 0.89 rollout shape; the real 0.89 rollouts
    found (no licence, MANIFEST) hold neither."""
    path = CODEX_089_CONSTRUCTED
    assert guess_format(path) == "codex"
    [session] = read_sessions("codex", path)
    assert (session.id, session.model, session.status) == ("019bf5bc", "gpt-5.2-codex", "completed")
    assert [(c.tool, c.kind, c.text, c.source_decision) for c in session.calls] == [
        ("exec_command", "bash", "rg -n TODO src", "allow"),
        ("local_shell", "bash", "ls -la | head -3", "deny"),
        ("shell", "bash", "git commit -m 'fix it'", "allow"),
        ("apply_patch", "other", None, "allow"),
    ]
    assert session.calls[2].output == "1 file changed"


def test_codex_unified_exec_polls_are_calls_of_their_own_with_the_output():
    """Real 0.125 rollout: ``exec_command`` returns a session id while the command runs and
    ``write_stdin`` with empty ``chars`` collects its output; both are calls, the poll is
    not a shell command.  The 0.128 Codex Desktop rollout has no ``turn_context``."""
    [session] = read_sessions("codex", CLIENTS / CODEX_0125)
    assert (session.model, session.status, len(session.turns)) == ("gpt-5.5", "completed", 5)
    assert [c.tool for c in session.calls] == ["exec_command", "write_stdin"] * 2
    assert "Process running with session ID 48230" in session.calls[0].output
    assert "Process exited with code 0" in session.calls[1].output
    assert "name: using-superpowers" in session.calls[1].output
    [desktop] = read_sessions("codex", CLIENTS / CODEX_0128)
    assert (desktop.model, [c.turn_index for c in desktop.calls]) == ("unknown", [0, 1, 1])


def test_codex_rollout_cut_before_an_output_is_an_error_session():
    [session] = read_sessions("codex", CLIENTS / "codex/rollout-0.77-escalation.jsonl")
    assert session.status == "error"
    assert [c.source_decision for c in session.calls] == ["allow", None, "allow", None]


def test_openhands_verdicts_tools_and_model():
    [session] = read_sessions("openhands", CLIENTS / "openhands/wrong_initial_state@9aeabc4d.json")
    assert session.model == "claude-3-5-sonnet-20241022"
    assert [(c.tool, c.kind) for c in session.calls] == [
        ("str_replace_editor", "read"), ("execute_bash", "bash"), ("str_replace_editor", "read"), ("finish", "other")]
    assert [c.source_decision for c in session.calls] == ["allow", "allow", "allow", None]


def test_openhands_v1_conversation_folder_reads_calls_task_and_model_where_the_sdk_wrote_them():
    """Real SDK 1.49.1 conversation folder (software-agent-sdk test fixture, scripted LLM):
    the arguments are the model's ``tool_call.arguments`` (an MCP tool's too), a
    ``file_editor`` ``view`` is a read of its path, the user's ``MessageEvent`` is the task,
    the model is ``base_state.json``'s, and the call of an unknown tool (answered by an
    ``AgentErrorEvent``) is a call with no verdict of OpenHands."""
    [session] = read_sessions("openhands", CLIENTS / OH_V1)
    assert (session.id, session.model, session.status) == ("5db134a6233f4ff9b88fc4f3e1e07c66", "test-model", "completed")
    assert [(c.tool, c.kind, c.source_decision) for c in session.calls] == [
        ("terminal", "bash", "allow"), ("file_editor", "read", "allow"), ("read_file", "read", "allow"),
        ("no_such_tool", "other", None), ("finish", "other", "allow")]
    assert [json.loads(c.arguments) for c in session.calls][1:4] == [
        {"command": "view", "path": "/fixture/workspace/notes.txt"}, {"path": "notes.txt"}, {}]
    assert session.calls[1].output.startswith("Here's the result of running `cat -n` on /fixture/workspace/notes.txt")
    assert session.calls[3].source_reason.startswith("tool error in openhands: Tool 'no_such_tool' not found.")
    assert [m for m in session.messages if m["role"] == "user"] == [{"role": "user", "content": "hello"}]


def test_openhands_rejected_action_is_the_source_deny(tmp_path):
    events = [
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "rm -rf /", "confirmation_state": "rejected"},
         "timestamp": "2025-01-27T22:45:13"},
        {"id": 2, "source": "user", "observation": "user_rejected", "cause": 1, "content": "no"},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    [session] = read_sessions("auto", path)
    assert [(c.text, c.source_decision) for c in session.calls] == [("rm -rf /", "deny")]


def test_import_auto_reads_a_mixed_folder_and_reports_each_format(tmp_path):
    result = CliRunner().invoke(main, ["import", str(CLIENTS), "--allowlist", RALF, "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    total = sum(c[2] for c in CASES) + 24  # + the Claude Code 2.1.39 session and its subagent
    assert result.stdout.splitlines()[0].startswith(f"run 1: imported 24 sessions, {total} calls")
    assert ("  formats found: claude-code: 4 sessions, 34 calls, codex: 6 sessions, 21 calls, "
            "mini-swe-agent: 5 sessions, 65 calls, openhands: 5 sessions, 16 calls, "
            "swe-agent: 4 sessions, 25 calls") in result.stdout.splitlines()
    assert "Traceback" not in result.output


def test_named_format_on_a_mixed_folder_reads_only_its_files_and_names_the_others(tmp_path):
    result = CliRunner().invoke(main, ["import", "codex", str(CLIENTS), "--allowlist", RALF,
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run 1: imported 6 sessions, 21 calls")
    assert "looks like mini-swe-agent, not codex; skipped" in result.stderr
    # an OpenHands conversation folder is one unit: passed over whole, base_state.json not misread
    assert f"{CLIENTS / OH_V1}: folder looks like openhands, not codex; skipped" in result.stderr
    assert "base_state.json" not in result.stderr


def test_bare_list_read_as_openai_is_refused_naming_mini_swe_agent(tmp_path):
    path = CLIENTS / "mini-swe-agent/github_issue-06cb414f.traj.json"
    result = CliRunner().invoke(main, ["import", "openai", str(path), "--allowlist", RALF,
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("is this an openai file? (try: mini-swe-agent)")


def test_show_displays_an_imported_session(tmp_path):
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(main, ["import", "auto", str(CLAUDE_21), "--allowlist", RALF, "--db", db]).exit_code == 0
    result = runner.invoke(main, ["show", "1", "--db", db])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "status completed" in out and "calls 12" in out
    assert "$ bd show spotter-4te" in out
    assert "AE307 disallowed-program  source: allow  DISAGREES" in out
    assert "child sessions 2" in out
    child = runner.invoke(main, ["show", "2", "--db", db])
    assert "parent session 1" in child.output and "calls 12" in child.output


def test_format_without_a_path_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["import", "codex", "--allowlist", RALF, "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert "missing PATH: agent-eval import codex PATH" in result.output


def test_claude_code_2_0_file_keeps_claude_codes_own_verdicts():
    [session] = read_sessions("claude-code", CLIENTS / "claude-code/claude_with_rejection.jsonl")
    assert [(c.tool, c.source_decision) for c in session.calls] == [
        ("Read", "allow"), ("Edit", "deny"), ("Edit", "allow"), ("Bash", "deny")]
    assert session.calls[1].source_reason.startswith("The user doesn't want to proceed with this tool use.")
    assert session.model == "claude-sonnet-4-20250514"


def test_openhands_events_folder_reads_as_one_session(tmp_path):
    events = json.loads((CLIENTS / "openhands/basic_gui_mode@21402a75.json").read_text())
    folder = tmp_path / "sessions" / "abc123" / "events"
    folder.mkdir(parents=True)
    for event in events:
        (folder / f"{event['id']}.json").write_text(json.dumps(event))
    for path in (folder, folder.parent, tmp_path / "sessions" / "abc123"):
        [(fmt, session)] = list(read_tagged_sessions("auto", path))
        assert (fmt, session.id, len(session.calls)) == ("openhands", "abc123", 4)
    assert [c.text for c in read_sessions("openhands", folder).__next__().calls][0] == "mkdir -p /workspace/todo-app"


def test_mini_swe_agent_2_import_judges_the_commands_not_the_prose(tmp_path):
    """Claude Code 2.x tool-call files stored the prose as the command, every call AE102,
    and a meaningless 31/31 agreement.  Now only the two format errors carry a verdict
    (constructed file: the real 2.2.7 one has no format error)."""
    path = MINI_CONSTRUCTED
    result = CliRunner().invoke(main, ["import", "mini-swe-agent", str(path), "--allowlist", RALF,
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "run 1: imported 1 sessions, 6 calls (openai/gpt-5-mini: 1)"
    assert "  agreement with source verdicts: 2/2" in lines



def test_codex_web_search_call_is_a_call_of_its_own():
    """Real 0.92 rollout (EdouardZemb/test-framework, MIT): one turn of five built-in web
    searches, no output item after any.  Before, the import stored 0 calls for it."""
    [session] = read_sessions("codex", CLIENTS / CODEX_092_SEARCH)
    assert (session.id, session.model, session.status, session.skipped_calls) == (
        "019c0f0c-9c5d-7081-99a9-f4829741831a", "gpt-5.2-codex", "completed", 0)
    assert [(c.tool, c.kind, c.text, c.source_decision, c.turn_index) for c in session.calls] == [
        ("web_search", "other", None, "allow", 0)] * 5
    assert [json.loads(c.arguments) for c in session.calls][2:4] == [
        {"type": "open_page", "url": "https://github.com/rust-starter/rust-starter"},
        {"type": "search", "query": "skanehira rust-cli-template cargo generate command"}]


def test_codex_0_92_shell_command_is_the_command_string():
    """Real 0.92 rollout: ``function_call`` ``shell_command`` with ``{"command": STRING,
    "workdir": ...}`` (the shape of Codex 0.8x-0.9x); the output is the
    ``function_call_output`` text with its exit code."""
    [session] = read_sessions("codex", CLIENTS / CODEX_092)
    assert (session.model, session.status, len(session.turns)) == ("gpt-5.2-codex", "completed", 6)
    assert [c.turn_index for c in session.calls] == [1, 2, 3, 4]
    assert session.calls[0].output.startswith("Exit code: 0\nWall time: 0.1 seconds\nOutput:\n_bmad\n")
    assert all(c.source_decision == "allow" for c in session.calls)


SHOW_CASES = [
    # (format, file, the task line, how a command's line begins, its verdict line): one real file per format
    ("codex", CODEX_0125, "task: show tools", "$ sed -n '1,180p'",
     "deny  exec_command  AE307 disallowed-program  source: allow  DISAGREES"),
    ("mini-swe-agent", "mini-swe-agent/local-1ce8e917.traj.json", None, "$ echo 'hello world'",
     "deny  bash  AE307 disallowed-program"),
    ("swe-agent", "swe-agent/function_calling_simple.traj", None, "$ find_file missing_colon.py",
     "deny  swe-agent-shell  AE307 disallowed-program"),
    ("openhands", "openhands/wrong_initial_state@9aeabc4d.json",
     "task: Please rename game_2048.py to 2048.py", "$ mv /workspace/game_2048.py /workspace/2048.py",
     "deny  execute_bash  AE307 disallowed-program  source: allow  DISAGREES"),
    ("openhands", OH_V1, "task: hello", "$ echo hello > notes.txt", "deny  terminal  AE303 output-redirect  source: allow  DISAGREES"),
    ("claude-code", "claude-code/claude_with_rejection.jsonl", "task: Help me refactor the database module",
     "$ /home/testuser/rejection-project/src/db.py",
     "deny  Read  AE320 blocked-read-path  source: allow  DISAGREES"),
]


@pytest.mark.parametrize(("fmt", "rel", "task", "command", "verdict"), SHOW_CASES,
                         ids=[(c.values if hasattr(c, "values") else c)[1] for c in SHOW_CASES])
def test_show_prints_an_imported_session_of_each_format_like_a_live_one(tmp_path, fmt, rel, task, command, verdict):
    """``show`` on an imported session gives the header, the task the user
    typed (not the client's injected instructions), each command and both verdicts."""
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    imported = runner.invoke(main, ["import", fmt, str(CLIENTS / rel), "--allowlist", RALF, "--db", db])
    assert imported.exit_code == 0, imported.output
    [session] = read_sessions(fmt, CLIENTS / rel)
    result = runner.invoke(main, ["show", "1", "--db", db])
    assert result.exit_code == 0, result.output
    lines = [line.strip("│ ").rstrip() for line in result.output.splitlines()]
    assert f"calls {len(session.calls)}" in result.output
    if task is not None:
        assert task in lines
    assert any(line.startswith(command) for line in lines)
    assert verdict in lines


def test_codex_reader_refuses_a_json_document_that_is_not_a_rollout(tmp_path):
    """A pretty-printed JSON file (an OpenHands base_state.json) has no JSONL line: before,
    ``import codex`` stored an empty session with 88 broken lines skipped."""
    path = CLIENTS / OH_V1 / "base_state.json"
    result = CliRunner().invoke(main, ["import", "codex", str(path), "--allowlist", RALF,
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2, result.output
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert line == (f"Error: {path}: not a Codex rollout: none of its 88 lines is a JSON object "
                    "(a pretty-printed JSON document?); pick its FORMAT or use auto")
    assert "run 1" not in result.stdout
