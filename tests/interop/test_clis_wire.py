"""The pieces of the agent-CLI harness that need no root and no CLI: reading recorded
HTTP/1.1 streams (``clis.wire``) and the scripted upstream's choices (``clis.upstream``).
The CLI tests rely on both to say "relayed byte for byte" and "the shell call ran"."""

from __future__ import annotations

import json

import pytest
from clis.sandbox import Connection
from clis.upstream import (
    SHELL_COMMAND,
    SUBAGENT_MARK,
    Conversation,
    arguments_for,
    plan,
    read_gemini,
    read_responses,
    reply_chat,
    reply_messages,
    reply_responses,
)
from clis.wire import exchanges

REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n"
           b'{"a":1}')
CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n6\r\ndata: \r\n3\r\nab\n\r\n0\r\n\r\n")
SIZED = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_exchanges_split_a_kept_alive_connection_into_its_requests_and_replies() -> None:
    conn = Connection(bytearray(REQUEST + REQUEST.replace(b'{"a":1}', b'{"b":2}')),
                      bytearray(CHUNKED + SIZED), [(0, 1.0), (len(REQUEST), 2.0)])
    got = exchanges(conn)
    assert [(x.request.body, x.response.body, x.started) for x in got] == [
        (b'{"a":1}', b"data: ab\n", 1.0), (b'{"b":2}', b"ok", 2.0)]
    assert got[0].response.header("content-type") == "text/event-stream"


def test_exchanges_keep_a_request_the_connection_never_answered() -> None:
    got = exchanges(Connection(bytearray(REQUEST), bytearray(), [(0, 5.0)]))
    assert len(got) == 1 and got[0].response is None


def test_a_reply_the_connection_cut_is_kept_as_far_as_it_came_and_marked() -> None:
    """A CLI may hang up inside a streamed reply once it has what it waits for (Codex after
    `response.completed`): the bytes it got are the reply, marked incomplete."""
    [got] = exchanges(Connection(bytearray(REQUEST), bytearray(SIZED[:-1]), []))
    assert got.response is not None and not got.response.complete
    assert got.response.body == SIZED.split(b"\r\n\r\n", 1)[1][:-1]


def test_exchanges_refuse_a_request_cut_inside_its_body() -> None:
    with pytest.raises(ValueError, match="ends inside a message"):
        exchanges(Connection(bytearray(REQUEST[:-1]), bytearray(), []))


SHELL = {"type": "object", "properties": {"command": {"type": "string"},
                                          "description": {"type": "string"}},
         "required": ["command", "description"]}


@pytest.mark.parametrize(("tool_results", "expected"), [
    (0, ("bash", {"command": SHELL_COMMAND, "description": "List the project folder"})),
    (1, ("read", {"filePath": "/w/notes.txt"})),
    (2, ("task", None)),
    (3, None),
], ids=["shell", "read", "subagent", "done"])
def test_the_main_conversation_is_a_shell_a_read_a_subagent_then_text(
        tool_results: int, expected: tuple | None) -> None:
    tools = {"bash": SHELL, "read": {"properties": {"filePath": {"type": "string"}}},
             "task": {"properties": {"prompt": {"type": "string"}}}}
    step = plan(Conversation(tools, "do it", tool_results), "/w")
    if expected is None:
        assert step.call is None and step.text
        return
    assert step.call.name == expected[0]
    if expected[1] is not None:
        assert step.call.arguments == expected[1]
    else:
        assert step.call.arguments["prompt"].startswith(SUBAGENT_MARK)


def test_codex_arguments_and_namespaced_subagent_are_read_from_its_request() -> None:
    body = {"tools": [
        {"type": "function", "name": "exec_command",
         "parameters": {"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "namespace", "name": "multi_agent_v1", "tools": [
            {"type": "function", "name": "spawn_agent",
             "parameters": {"properties": {"message": {"type": "string"}}}}]}],
        "input": [{"type": "message", "role": "user", "content": "go"},
                  {"type": "function_call_output", "call_id": "a", "output": "x"},
                  {"type": "function_call_output", "call_id": "b", "output": "y"}]}
    conv = read_responses(body)
    assert conv.tool_results == 2 and conv.namespaces == {"spawn_agent": "multi_agent_v1"}
    step = plan(conv, "/w")
    assert (step.call.name, step.call.namespace) == ("spawn_agent", "multi_agent_v1")
    events = reply_responses({"model": "m"}, step)[0].decode().split("\n\n")
    done = [json.loads(e.split("data: ", 1)[1]) for e in events if "output_item.done" in e]
    assert done[0]["item"]["namespace"] == "multi_agent_v1"
    assert json.loads(done[0]["item"]["arguments"])["message"].startswith(SUBAGENT_MARK)


def test_a_gemini_side_question_gets_json_of_its_schema() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
                "type": "object", "properties": {"next_speaker": {"enum": ["user", "model"]},
                                                 "reasoning": {"type": "string"}},
                "required": ["reasoning", "next_speaker"]}}}
    step = plan(read_gemini(body), "/w")
    assert json.loads(step.text) == {"reasoning": "ok", "next_speaker": "user"}


def test_an_argv_shell_gets_bash_lc() -> None:
    schema = {"properties": {"command": {"type": "array"}}, "required": ["command"]}
    assert arguments_for("shell", schema, "shell", "ls", "/w") == {
        "command": ["bash", "-lc", "ls"]}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_chat_and_messages_replies_carry_the_call(stream: bool) -> None:
    step = plan(Conversation({"Bash": SHELL}, "go", 0), "/w")
    chat, _ = reply_chat({"stream": stream}, step)
    messages, _ = reply_messages({"stream": stream}, step)
    assert b'"Bash"' in chat and b'"Bash"' in messages
    assert SHELL_COMMAND.encode() in chat and SHELL_COMMAND.encode() in messages
