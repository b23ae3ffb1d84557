"""Stitching never crosses conversations (agent_eval/proxy/linking.py): the continuation
layer compares the system prompt and the rest of the context, not only the reply; the
CLIs' session headers pair with the prompt; a session's role ignores the working folder."""

from __future__ import annotations

from agent_eval.proxy.linking import Linker, message_digests, normal_prompt, role_hash
from agent_eval.proxy.replies import ParsedReply

DONE = ParsedReply(content="Done.", finish_reason="stop")


def turn(linker: Linker, messages: list, reply: ParsedReply | None, headers=None, now=0.0):
    link = linker.link(messages, headers or {}, now)
    linker.relayed(link, reply)
    return link


def test_two_conversations_with_the_same_text_only_reply_never_share_a_session():
    """The three-request reproduction: two conversations under different system prompts
    both answered "Done."; the second one's next request joined the first's session."""
    linker = Linker()
    a = [{"role": "system", "content": "You are the memory extraction agent."},
         {"role": "user", "content": "Extract the durable facts."}]
    b = [{"role": "system", "content": "You are a coding agent in the terminal."},
         {"role": "user", "content": "Extract the durable facts."}]
    first = turn(linker, a, DONE, now=0.0)
    second = turn(linker, b, DONE, now=1.0)
    third = linker.link([*b, DONE.message(), {"role": "user", "content": "And now?"}], {}, 2.0)
    assert first.conversation is not second.conversation
    assert third.conversation is second.conversation and third.method == "continuation"


def test_the_same_reply_under_the_same_prompt_goes_to_the_conversation_it_extends():
    linker = Linker()
    system = {"role": "system", "content": "You are the research subagent."}
    one = [system, {"role": "user", "content": "Summarise stage S1."}]
    two = [system, {"role": "user", "content": "Summarise stage S2."}]
    first = turn(linker, one, DONE)
    second = turn(linker, two, DONE, now=1.0)
    again = linker.link([*two, DONE.message(), {"role": "user", "content": "More."}], {}, 2.0)
    assert again.conversation is second.conversation is not first.conversation


def test_a_reply_no_waiting_conversation_of_that_context_had_starts_a_session():
    linker = Linker()
    system = {"role": "system", "content": "You are the research subagent."}
    turn(linker, [system, {"role": "user", "content": "Summarise stage S1."}], DONE)
    other = linker.link([system, {"role": "user", "content": "Something else entirely."},
                         DONE.message(), {"role": "user", "content": "More."}], {}, 1.0)
    assert other.new and other.method == "new"


def test_claude_code_system_entries_mid_conversation_are_not_its_system_prompt():
    linker = Linker()
    system = {"role": "system", "content": "You are Claude Code."}
    task = {"role": "user", "content": "List the files."}
    headers = {"x-claude-code-session-id": "5806a914"}
    first = turn(linker, [system, task], DONE, headers)
    later = linker.link([system, task, DONE.message(),
                         {"role": "system", "content": "<system-reminder>todo list</system-reminder>"},
                         {"role": "user", "content": "next"}], headers, 1.0)
    assert later.conversation is first.conversation and later.method == "client-id"


def test_codex_threads_are_conversations_and_the_shared_session_id_is_not():
    linker = Linker()
    system = {"role": "developer", "content": "You are Codex."}
    parent = turn(linker, [system, {"role": "user", "content": "main task"}], DONE,
                  {"session-id": "S", "thread-id": "S"})
    child = turn(linker, [system, {"role": "user", "content": "sub task"}], DONE,
                 {"session-id": "S", "thread-id": "T"})
    assert child.new and child.conversation is not parent.conversation


def test_a_role_ignores_the_working_folder_home_and_date():
    def role(folder: str, day: str) -> str:
        messages = [{"role": "system", "content": f"You work in {folder}. Today is {day}. "
                     f"Memory: /home/me/.qwen/projects/{folder.replace('/', '-')}/memory"},
                    {"role": "user", "content": f"<cwd>{folder}</cwd>\nList the files."}]
        return role_hash(messages, message_digests(messages))

    assert role("/home/me/night1", "2026-11-25") == role("/srv/ci/night2", "2026-11-26")
    assert role("/home/me/night1", "2026-11-25") != role_hash(
        [{"role": "system", "content": "Another prompt."}],
        message_digests([{"role": "system", "content": "Another prompt."}]))
    assert normal_prompt("Working directory: /a/b", "/a/b") == "Working directory: <cwd>"
