"""Sessions of real agent CLIs as the proxy stores them (tests/fixtures/clis): each
subagent linked to the call that spawned it when the task sits among the CLI's context
parts or inside its reminders, with the CLI's session headers and without them (a
translator in front drops them); each CLI's side request tagged, not taken for a
conversation or a subagent."""

from __future__ import annotations

import json

import pytest
from support.cliwire import SUBAGENT_PROMPT, allowlist, exchanges
from support.factories import add_run

from agent_eval.proxy.sessions import Sessions
from agent_eval.proxy.spawns import Spawns, task_texts, unwrapped
from agent_eval.transcript import CallRecord

SPAWNER = {"opencode": "task", "qwen-code": "agent", "claude-code": "Agent",
           "codex": "multi_agent_v1.spawn_agent", "gemini-cli": "invoke_agent"}
CHILD_SHELL = {"opencode": "bash", "qwen-code": "run_shell_command", "claude-code": "Bash",
               "codex": "exec_command", "gemini-cli": "run_shell_command"}


def record(cli: str, *, headers: bool = True):
    sessions = Sessions(allowlist(), idle_s=60)
    for n, ex in enumerate(exchanges(cli)):
        if not headers:
            ex.session_headers = {}
        sessions.take(ex, float(n))
    return sessions.close_all()


def conversations(records):
    return [r for r in records if "side-request" not in r.tags]


@pytest.mark.parametrize("headers", [True, False], ids=["headers", "no-headers"])
@pytest.mark.parametrize("cli", sorted(SPAWNER))
def test_the_subagent_is_linked_to_the_call_that_spawned_it(cli: str, headers: bool) -> None:
    records = conversations(record(cli, headers=headers))
    assert len(records) == 2, [(r.key, r.tags) for r in records]
    [main] = [r for r in records if r.parent_key is None]
    [child] = [r for r in records if r.parent_key is not None]
    assert child.parent_key == main.key
    [spawner] = [c for c in main.calls if c.tool == SPAWNER[cli]]
    assert spawner.child_key == child.key
    assert [(c.tool, c.command) for c in child.calls][:1] == [
        (CHILD_SHELL[cli], "echo subagent shell call")]


def test_qwen_code_sends_the_task_as_the_last_of_three_text_parts() -> None:
    """The captured child request: two ``<system-reminder>`` parts, then the task."""
    child = json.loads((exchanges("qwen-code")[4].request_body).decode())
    [first_user] = [m for m in child["messages"] if m["role"] == "user"][:1]
    texts = [p["text"] for p in first_user["content"]]
    assert len(texts) == 3 and texts[-1] == SUBAGENT_PROMPT
    assert all(t.startswith("<system-reminder>") for t in texts[:2])
    # the three parts joined are not the task: only the part (or the unwrapped whole) is
    assert SUBAGENT_PROMPT in task_texts(child["messages"])


def _spawned(messages) -> str | None:
    spawns = Spawns()
    spawns.note("proxy/1", CallRecord(index=0, turn_index=0, tool="agent",
                                      arguments=json.dumps({"prompt": SUBAGENT_PROMPT}),
                                      decision="allow"))
    found = spawns.claim(messages)
    return found[0] if found else None


REMINDER = "<system-reminder>\nToday's date is Thursday, November 26, 2026.\n</system-reminder>"


@pytest.mark.parametrize("content", [
    SUBAGENT_PROMPT,
    [{"type": "text", "text": REMINDER}, {"type": "text", "text": SUBAGENT_PROMPT}],
    f"{REMINDER}\n{REMINDER}\n\n{SUBAGENT_PROMPT}\n",
    f"{SUBAGENT_PROMPT}\n<system-reminder attr=\"x\">be brief</system-reminder>",
    [{"type": "text", "text": f"{REMINDER}{SUBAGENT_PROMPT}"}],
], ids=["whole", "one-part-of-two", "joined-after-reminders", "reminder-after",
        "one-part-wrapped"])
def test_a_task_wrapped_in_reminders_or_among_parts_links(content) -> None:
    assert _spawned([{"role": "system", "content": "You are a subagent."},
                     {"role": "user", "content": content}]) == "proxy/1"


@pytest.mark.parametrize("content", [
    f"Please do this: {SUBAGENT_PROMPT}",  # words around the task: a template, not linked
    f"{SUBAGENT_PROMPT} Also check the logs.",
    "<system-reminder>unclosed " + SUBAGENT_PROMPT,
], ids=["prefixed-by-words", "followed-by-words", "unclosed-wrapper"])
def test_a_task_with_words_around_it_is_not_linked(content) -> None:
    assert _spawned([{"role": "user", "content": content}]) is None


def test_unwrapping_keeps_a_message_that_is_only_a_wrapper() -> None:
    env = "<environment_context>\n  <cwd>/home/agent/project</cwd>\n</environment_context>"
    assert unwrapped(env) == env
    assert unwrapped(f"{env}\n\nList the files.") == "List the files."


def test_a_hostile_message_of_many_wrappers_is_unwrapped_in_bounded_steps() -> None:
    text = "<a>x</a>" * 100_000 + SUBAGENT_PROMPT
    assert unwrapped(text) != SUBAGENT_PROMPT  # 64 blocks at most are taken off
    assert _spawned([{"role": "user", "content": "<b>" * 50_000}]) is None


def test_opencode_title_request_is_a_side_request_not_a_session() -> None:
    records = record("opencode")
    [title] = [r for r in records if "side-request" in r.tags]
    assert title.tags[-2:] == ["side-request", "side:title"]
    assert title.parent_key is None and title.calls == [] and len(title.turns) == 1
    assert len(conversations(records)) == 2


def test_qwen_code_memory_extraction_is_a_side_request_though_it_offers_tools() -> None:
    records = record("qwen-code-memory")
    [side] = [r for r in records if "side-request" in r.tags]
    assert "side:memory-extraction" in side.tags
    assert len(side.turns[0].request["tools"]) == 6
    [main] = conversations(records)
    assert main.turns[0].request["tools"] and "side-request" not in main.tags


@pytest.mark.parametrize("cli", ["qwen-code", "claude-code", "codex", "gemini-cli"])
def test_no_session_of_a_cli_without_side_requests_is_tagged_one(cli: str) -> None:
    assert all("side-request" not in r.tags for r in record(cli))


def test_a_one_turn_tool_less_request_is_a_side_request_and_a_tooled_one_is_not() -> None:
    from datetime import UTC, datetime

    from agent_eval.proxy.relay import Exchange

    def one(body: dict) -> list[str]:
        sessions = Sessions(allowlist(), idle_s=60)
        answer = {"choices": [{"message": {"role": "assistant", "content": "A title"},
                               "finish_reason": "stop"}]}
        sessions.take(Exchange(path="/v1/chat/completions",
                               request_body=json.dumps(body).encode(), session_headers={},
                               started_at=datetime.now(UTC), status=200,
                               content_type="application/json",
                               response_body=bytearray(json.dumps(answer).encode())), 0.0)
        [r] = sessions.close_all()
        return r.tags

    messages = [{"role": "system", "content": "Summarise the topic in five words."},
                {"role": "user", "content": "Fix the flaky test in ci."}]
    assert one({"model": "m", "messages": messages}) == ["link:new", "side-request"]
    bash = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    assert one({"model": "m", "messages": messages, "tools": bash}) == ["link:new"]


def test_side_requests_are_stored_listed_and_left_out_of_the_run_figures(store) -> None:
    """OpenCode's run stored: three sessions, the title request listed by its tag, and the
    run's figures count the main session and its subagent only."""
    from agent_eval.store import SessionFilter
    from agent_eval.store.aggregates import summarize_sql

    records = record("opencode")
    run_id = add_run(store, records, label="opencode", kind="proxy", suite="",
                     targets=("capture-model",), base_url="http://x/v1")
    listed = store.list_sessions(SessionFilter(run_id=run_id, tag="side-request"),
                                 sort="id", limit=50, offset=0)
    assert [r.tags[-1] for r in listed.rows] == ["side:title"]
    [figures] = summarize_sql(store.engine, [run_id]).values()
    assert (figures.sessions, figures.side_requests, figures.calls) == (2, 1, 4)
    assert sum(figures.exit_states.values()) == 2
    assert figures.speed.turns == 6  # the title request's turn is not among them
    [by_tag] = [s for k, s in summarize_sql(store.engine, [run_id], by="tag").items()
                if k == "side-request"]
    assert (by_tag.sessions, by_tag.side_requests) == (0, 1)
