"""check_call, check_command, check_read and render_denial as the orchestrator uses them."""

from __future__ import annotations

import json

import pytest

from agent_eval.policy import (
    Invocation,
    check_call,
    check_command,
    check_read,
    judge_command,
    render_denial,
)

# docs/design.md's real examples, with the class the users gave each one.
CONTEXT_EXAMPLES = [
    ("pipe-grep", 'ls scripts/ | grep -E "search|web"', "AE301"),
    ("curl", "curl -s 'https://api.example.com/search?q=x'", "AE307"),
    ("pkill-or-true", "pkill -f vllm || true", "AE304"),
    ("cd-and", "cd /home/agent/project && uv run scripts/fetch_context.py --agent a", "AE304"),
    ("pipe-jq", "uv run scripts/fetch_context.py --agent a | jq '.attempt.session_id'", "AE301"),
    ("timeout", "timeout 60 uv run scripts/embedding_search.py --query x", "AE306"),
    ("heredoc-into-uv", 'cat << REPORT_EOF | uv run scripts/x.py --value "$(cat)"\nok\nREPORT_EOF',
     "AE305"),
    ("food-management", "uv run scripts/food_management.py --list", "AE309"),
    ("data-query", "uv run scripts/data_query.py --sql 'SELECT 1'", "AE309"),
    ("thought-transfer", "uv run scripts/thought_transfer.py --to parent", "AE309"),
    ("youtube-fetcher", "uv run scripts/youtube_fetcher.py --query talks", "AE309"),
    ("no-agent", "uv run scripts/fetch_context.py --no-agent", "AE310"),
    ("invalid-choice", "uv run scripts/strategy_board.py --command search-videos", "AE311"),
    ("stderr-to-stdout", "uv run scripts/db_query.py --sql 'SELECT 1' 2>&1", "AE302"),
    ("stderr-to-null", "uv run scripts/db_query.py --sql 'SELECT 1' 2>/dev/null", "AE302"),
    ("uv-run-python-c", 'uv run python -c "import json; print(json.dumps({}))"', "AE308"),
]


@pytest.mark.parametrize(("text", "code"), [p[1:] for p in CONTEXT_EXAMPLES],
                         ids=[p[0] for p in CONTEXT_EXAMPLES])
def test_context_example_gets_the_users_class(ralf, text, code):
    verdict = check_call("bash", json.dumps({"command": text}), ralf)
    assert (verdict.decision, verdict.primary) == ("deny", code)


def test_blocked_absolute_read_is_blocked_read_path(ralf):
    verdict = check_call("read", '{"path": "/data/rendered/x.png"}', ralf)
    assert (verdict.decision, verdict.primary) == ("deny", "AE320")


def test_bash_command_called_as_a_tool_is_unknown_tool(ralf):
    verdict = check_call("emit_guidance", '{"to": "parent", "message": "hi"}', ralf)
    assert (verdict.primary, verdict.findings[0].start, verdict.findings[0].end) == ("AE101", 0, 0)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [('{"command": "uv run', "AE102"), ('["uv run scripts/lights.py status"]', "AE102"),
     ("null", "AE102"), ("", "AE102"), ('{"cmd": "ls"}', "AE103"), ('{"command": 5}', "AE103"),
     ('{"command": null}', "AE103")],
    ids=["truncated-json", "array", "null", "empty", "wrong-key", "number", "json-null"],
)
def test_bad_arguments(ralf, arguments, code):
    assert check_call("bash", arguments, ralf).primary == code


def test_arguments_may_be_a_decoded_dict(ralf):
    verdict = check_call("bash", {"command": "uv run scripts/lights.py status"}, ralf)
    assert verdict.invocation == Invocation("lights.py", ("status",))


def test_offered_restricts_the_tools_of_the_session(ralf):
    verdict = check_call("read", '{"path": "notes/a.md"}', ralf, offered=["bash"])
    assert verdict.primary == "AE101"


def test_a_listed_tool_of_kind_other_is_allowed_with_its_declared_keys(permissive):
    assert check_call("web_search", '{"query": "weather", "max_results": 3}', permissive).allowed


def test_a_listed_tool_of_kind_other_is_denied_a_key_it_does_not_declare(permissive):
    verdict = check_call("web_search", '{"q": "weather"}', permissive)
    assert verdict.primary == "AE103"  # its required query is missing
    assert [f.code for f in verdict.findings] == ["AE103", "AE105"]


def test_a_tool_the_session_offers_but_the_allow_list_does_not_list_is_unknown(ralf):
    verdict = check_call("spawn_child", "{}", ralf, offered=["bash", "spawn_child"])
    assert verdict.primary == "AE101"
    assert "not on the allow-list" in verdict.findings[0].message


@pytest.mark.parametrize(
    ("command", "invocation"),
    [
        ("uv run scripts/fetch_context.py --no-attach --agent researcher",
         Invocation("fetch_context.py", (), (("--no-attach", ()), ("--agent", ("researcher",))))),
        ("uv run scripts/update_stage_status.py --stage s2 --status=awaiting_eval",
         Invocation("update_stage_status.py", (), (("--stage", ("s2",)),
                                                    ("--status", ("awaiting_eval",))))),
        ("uv run scripts/ralf_spawn.py step_evaluator --stage s2",
         Invocation("ralf_spawn.py", (), (("--stage", ("s2",)),), ("step_evaluator",))),
        ("uv run scripts/calendar.py create --title T --start 9 --attendee a --attendee 'b c'",
         Invocation("calendar.py", ("create",), (("--title", ("T",)), ("--start", ("9",)),
                                                 ("--attendee", ("a", "b c"))))),
        ('uv run scripts/db_query.py --sql "SELECT * FROM t WHERE a = \'x|y\'"',
         Invocation("db_query.py", (), (("--sql", ("SELECT * FROM t WHERE a = 'x|y'",)),))),
    ],
    ids=["bare-flag-then-value", "equals-form", "positional-choice", "repeatable-subcommand",
         "quoted-pipe-in-sql"],
)
def test_allowed_runner_call_carries_its_exact_invocation(ralf, command, invocation):
    verdict = check_command(command, ralf)
    assert verdict.allowed and verdict.invocation == invocation


def test_alias_is_resolved_to_the_spec_name(permissive):
    verdict = check_command("uv run scripts/embedding_search.py --query x -k 3", permissive)
    assert verdict.invocation.flags == (("--query", ("x",)), ("--top-k", ("3",)))


def test_allowed_plain_program_has_no_invocation(permissive):
    verdict = check_command("ls -la notes/", permissive)
    assert verdict.allowed and verdict.invocation is None


@pytest.mark.parametrize("command", ["/bin/ls", "\\ls", "env curl", "bash -c 'ls'", "command ls",
                                     "ls$IFS-la", "$(echo cat) x", "'ls'", "l\\\ns -la"])
@pytest.mark.parametrize("name", ["ralf", "permissive"])
def test_spelling_tricks_are_never_allowed(name, command):
    from support.policy_paths import allowlist_named

    assert check_command(command, allowlist_named(name)).decision == "deny"


def test_finding_span_points_at_the_pipe_and_its_filter(ralf):
    command = 'ls scripts/ | grep -E "search|web"'
    pipe = next(f for f in check_command(command, ralf).findings if f.code == "AE301")
    assert command[pipe.start:pipe.end] == '| grep -E "search|web"'


def test_finding_span_points_at_the_unknown_flag(ralf):
    command = "uv run scripts/fetch_context.py --no-agent"
    flag = next(f for f in check_command(command, ralf).findings if f.code == "AE310")
    assert command[flag.start:flag.end] == "--no-agent"
    assert "did you mean" in flag.message


def test_length_cap_is_invalid_bytes(ralf):
    command = "uv run scripts/email_read.py --id " + "7" * 16384
    verdict = check_command(command, ralf)
    assert verdict.primary == "AE202" and verdict.findings[0].start == 16384


def test_deep_nesting_is_denied_not_raised(ralf):
    command = "uv run scripts/email_read.py --id " + "$(" * 3000 + "x" + ")" * 3000
    assert check_command(command, ralf).primary == "AE312"


def test_quoted_heredoc_delimiter_is_a_heredoc_not_a_parse_error(ralf):
    verdict = check_command("uv run scripts/db_query.py --sql - << 'EOF'\nSELECT 1\nEOF", ralf)
    assert verdict.primary == "AE305"


def test_full_width_semicolon_is_not_a_chain(ralf):
    verdict = check_command("uv run scripts/email_read.py --id 4；ls", ralf)
    assert verdict.invocation.flag("--id") == "4；ls"


def test_fast_path_and_full_path_agree_on_an_allowed_call(ralf):
    command = "uv run scripts/lights.py set --room kitchen --state on"
    assert judge_command(command, ralf) == judge_command(command, ralf, fast_path=False)


def test_check_command_returns_the_cached_verdict_for_the_same_text(ralf):
    command = "uv run scripts/lights.py status --room hall"
    assert check_command(command, ralf) is check_command(command, ralf)


def test_cache_is_keyed_by_allow_list(ralf, permissive):
    assert not check_command("ls", ralf).allowed
    assert check_command("ls", permissive).allowed


@pytest.mark.parametrize(
    ("path", "normal"),
    [("notes/plan.md", "notes/plan.md"), ("./docs/a/../b.md", "docs/b.md"),
     ("reports//run1/summary.md", "reports/run1/summary.md")],
    ids=["plain", "dot-dot-inside", "double-slash"],
)
def test_allowed_read_carries_the_normalised_path(ralf, path, normal):
    verdict = check_read(path, ralf)
    assert verdict.allowed and verdict.path == normal


def test_render_denial_fills_the_primary_finding(ralf):
    text = render_denial(check_command("ls | head", ralf), ralf)
    assert text.startswith("Permission denied by the allow-list (AE301 pipe-to-filter): "
                           "output piped into head.")


def test_render_denial_of_an_allowed_call_is_empty(ralf):
    assert render_denial(check_command("uv run scripts/lights.py status", ralf), ralf) == ""
