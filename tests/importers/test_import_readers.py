"""Each reader parses the real fixtures and sessions into the calls a person reads there.

Values below were read by hand from the files of the real-data corpora (tests/support/real_corpora.py)."""

from __future__ import annotations

import pytest

from agent_eval.importers import read_sessions

OPENCODE = "format-fixtures/opencode-1.18.34"
CLAUDE = "format-fixtures/claude-code-2.1.330"

OPENCODE_CALLS = [
    ("bash", "bash", "ls -la | head -5 && echo done", "allow"),
    ("read", "read", "/tmp/ocproj/hello.txt", "allow"),
    ("bash", "bash", "rm -rf build", "deny"),
    ("read", "read", "/etc/hostname", "deny"),
    ("execute_command", "other", None, "deny"),
    ("bash", "bash", "cat missing_file.txt", "allow"),
]

CLAUDE_CALLS = [
    ("Bash", "bash", "ls -la | head -5 && echo done", "allow"),
    ("Read", "read", "/tmp/ccproj/hello.txt", "allow"),
    ("Bash", "bash", "rm -rf build", "deny"),
    ("Bash", "bash", "curl -s http://127.0.0.1:9/x", "deny"),
    ("Read", "read", "/etc/hostname", "deny"),
    ("execute_command", "other", None, "deny"),
    ("Bash", "bash", "cat missing_file.txt", "allow"),
]


def _calls(session):
    return [(c.tool, c.kind, c.text, c.source_decision) for c in session.calls]


def test_opencode_export_yields_the_six_calls_with_opencode_verdicts(corpora):
    [session] = read_sessions("opencode", corpora / OPENCODE / "opencode-export.json")
    assert (session.id, session.model, session.title) == (
        "ses_dff8461d3ffeDr7la2xY78gPRB", "fake-model", "Fake session title")
    assert _calls(session) == OPENCODE_CALLS
    assert len(session.turns) == 7


def test_opencode_keeps_the_permission_rule_as_the_source_reason(corpora):
    [session] = read_sessions("opencode", corpora / OPENCODE / "opencode-export.json")
    assert session.calls[2].source_reason.startswith("The user has specified a rule which prevents")
    assert "unavailable tool 'execute_command'" in session.calls[4].source_reason


def test_opencode_output_is_the_tool_result_the_model_saw(corpora):
    [session] = read_sessions("opencode", corpora / OPENCODE / "opencode-export.json")
    assert session.calls[5].output == "cat: missing_file.txt: No such file or directory\n"


@pytest.mark.parametrize("shape", ["db-rows-json", "sqlite-db", "storage-folder"])
def test_opencode_every_storage_shape_gives_the_same_session(corpora, opencode_db, opencode_storage, shape):
    path = {
        "db-rows-json": corpora / OPENCODE / "opencode-db-rows.session-message-part.json",
        "sqlite-db": opencode_db,
        "storage-folder": opencode_storage,
    }[shape]
    sessions = {s.id: s for s in read_sessions("opencode", path)}
    assert _calls(sessions["ses_dff8461d3ffeDr7la2xY78gPRB"]) == OPENCODE_CALLS


def test_opencode_database_holds_the_auto_rejected_second_session(opencode_db):
    sessions = {s.id: s for s in read_sessions("opencode", opencode_db)}
    rejected = sessions["ses_dff83fa70ffe085d8z6P2XC0FI"]
    assert _calls(rejected) == [("bash", "bash", "ls -la | head -5 && echo done", "deny")]
    assert rejected.calls[0].source_reason == "The user rejected permission to use this specific tool call."


def test_opencode_run_stream_yields_the_rejected_call(corpora):
    [session] = read_sessions("opencode", corpora / OPENCODE / "opencode-run-format-json.ask-auto-rejected.jsonl")
    assert _calls(session) == [("bash", "bash", "ls -la | head -5 && echo done", "deny")]


@pytest.mark.parametrize("name", ["transcript.jsonl", "stream-json.jsonl"])
def test_claude_code_yields_the_seven_calls_with_claude_verdicts(corpora, name):
    [session] = read_sessions("claude-code", corpora / CLAUDE / name)
    assert (session.id, session.model) == ("2273631c-d877-4b73-9d08-5649fc35d532", "claude-sonnet-4-5")
    assert _calls(session) == CLAUDE_CALLS
    assert session.status == "completed"


def test_claude_code_reads_a_projects_folder(corpora):
    sessions = list(read_sessions("claude-code", corpora / CLAUDE))
    assert [len(s.calls) for s in sessions] == [7, 7]


def test_claude_code_keeps_the_rejection_reason_code(corpora):
    [session] = read_sessions("claude-code", corpora / CLAUDE / "transcript.jsonl")
    assert session.calls[3].source_reason.startswith("rule:cliArg: Permission to use Bash")
    assert session.calls[4].source_reason.startswith("workingDir: ")


def test_claude_code_exit_code_1_is_a_tool_that_ran(corpora):
    [session] = read_sessions("claude-code", corpora / CLAUDE / "transcript.jsonl")
    assert session.calls[6].output == "Exit code 1\ncat: missing_file.txt: No such file or directory"
    assert session.calls[6].source_decision == "allow"


MINI = "sessions/mini-swe-agent__gemini-3-pro-preview__django__django-16661.traj.json"


def test_mini_swe_agent_yields_one_call_per_reply(corpora):
    [session] = read_sessions("mini-swe-agent", corpora / MINI)
    assert (session.id, session.model, session.status) == (
        "django__django-16661", "google/gemini-3-pro-preview", "completed")
    assert len(session.calls) == 22
    assert session.calls[0].text == 'ls -R | grep ":$" | head -n 5 && find . -name "*admin*" | head -n 5'
    assert session.calls[-1].text == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def test_mini_swe_agent_format_errors_are_source_denials_without_a_command(corpora):
    [session] = read_sessions("mini-swe-agent", corpora / MINI)
    errors = [(c.turn_index, c.text, c.source_decision) for c in session.calls if c.source_decision]
    assert errors == [(9, None, "deny"), (15, None, "deny")]
    assert session.calls[9].output.startswith("Please always provide EXACTLY ONE action")


def test_mini_swe_agent_output_is_the_observation(corpora):
    [session] = read_sessions("mini-swe-agent", corpora / MINI)
    assert session.calls[2].output == "<returncode>0</returncode>\n<output>\n439:    def lookup_allowed(self, lookup, value):\n</output>"


TAU = "sessions/tau-bench__gpt-4o__airline-task0-trial0.json"


def test_openai_tau_bench_yields_the_eight_function_calls(corpora):
    [session] = read_sessions("openai", corpora / TAU, model="gpt-4o")
    assert [c.tool for c in session.calls] == [
        "get_user_details", "search_direct_flight", "search_onestop_flight", "calculate",
        "book_reservation", "think", "calculate", "book_reservation"]
    assert (session.id, session.model) == ("task0-trial0", "gpt-4o")


def test_openai_repeated_call_ids_pair_results_by_position(corpora):
    [session] = read_sessions("openai", corpora / TAU)
    assert session.calls[0].output.startswith('{"name": {"first_name": "Mia"')
    assert session.calls[2].output.startswith('[[{"flight_number": "HAT057"')
    assert session.calls[3].output == "255.0"
    assert session.calls[6].output == "55.0"


def test_swe_agent_trajectory_yields_each_action(corpora):
    [session] = read_sessions("swe-agent", corpora / "sessions/swe-agent__gpt4__pydicom__pydicom-1458.traj")
    assert len(session.calls) == 12
    assert (session.calls[0].text, session.calls[-1].text) == ("create reproduce_bug.py", "submit")
    assert session.status == "completed"


def test_call_records_group_the_real_corpus_into_its_sessions(corpora):
    sessions = list(read_sessions("call-records", corpora / "real-tool-calls.jsonl"))
    assert len(sessions) == 763
    # 15,610 records, of which 229 are harness-injected `exit_cost` actions, not model calls
    assert sum(len(s.calls) for s in sessions) == 15_610 - 229
    mini = next(s for s in sessions if s.id == "django__django-16661")
    assert len(mini.calls) == 22


def test_claude_code_summary_line_without_session_id_titles_the_session(corpora, tmp_path):
    text = (corpora / CLAUDE / "transcript.jsonl").read_text()
    path = tmp_path / "other-name.jsonl"
    path.write_text('{"type": "summary", "summary": "List and read files", "leafUuid": "x"}\n' + text)
    [session] = read_sessions("claude-code", path)
    assert (session.title, len(session.calls)) == ("List and read files", 7)
