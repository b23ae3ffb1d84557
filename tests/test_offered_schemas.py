"""Every call against the schema its client offered (policy/schemas.py, AE108), a broken
schema as the client's fault (AE512), the offered tool list kept once per session: on
proxied, imported and telemetry traffic alike."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from support.factories import add_run

from agent_eval.importers import Judge
from agent_eval.importers.openai import session_from_messages
from agent_eval.importers.otlp import Stitcher, imported_session, tool_events
from agent_eval.policy import load_allowlist
from agent_eval.policy.schemas import (
    broken_schema,
    mcp_server,
    offered_schemas,
    schema_problems,
    tool_drift,
    tools_hash,
)
from agent_eval.proxy import Exchange
from agent_eval.proxy.collect import Collector
from agent_eval.proxy.recorder import record_from_json, record_to_json
from agent_eval.proxy.sessions import Sessions
from agent_eval.scenario.bundled import load_policy

RALF = "allowlists/ralf.yaml"
GOOD = "uv run scripts/db_query.py --sql 'select 1'"

SEARCH = {"type": "object", "properties": {"query": {"type": "string"},
                                           "limit": {"type": "integer"}},
          "required": ["query"], "additionalProperties": False}
BASH = {"type": "object", "properties": {"command": {"type": "string"}},
        "required": ["command"], "additionalProperties": False}
BROKEN = {"type": "object", "properties": {"q": {"$ref": "#/$defs/Query"}}}


def chat_tool(name: str, schema) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


TOOLS = [chat_tool("bash", BASH), chat_tool("mcp__docs__search", SEARCH),
         chat_tool("mcp__wiki__lookup", BROKEN)]

CALLS = [("bash", {"command": GOOD}),  # holds its schema and the allow-list: allowed
         ("bash", {"command": GOOD, "cwd": "/"}),  # a key the schema closes out
         ("mcp__docs__search", {"query": 3}),  # an MCP tool, wrong type
         ("mcp__docs__search", {"query": "invoice"}),  # holds: only AE101 (not listed)
         ("mcp__wiki__lookup", {"q": 1})]  # broken schema: not checked, the client's fault


def codes(call) -> tuple[str | None, set[str]]:
    return call.primary, {f.code for f in call.findings}


EXPECTED = [(None, set()), ("AE105", {"AE105", "AE108"}), ("AE101", {"AE101", "AE108"}),
            ("AE101", {"AE101"}), ("AE101", {"AE101"})]


# the schema walk


@pytest.mark.parametrize(("arguments", "found"), [
    ({"query": "x"}, []),
    ({"query": "x", "limit": 5.0}, []),  # a whole double is an integer in JSON
    ({}, ["query: required, absent"]),
    ({"query": 3}, ["query: a integer, the schema wants string"]),
    ({"query": "x", "limit": True}, ["limit: a boolean, the schema wants integer"]),
    ({"query": "x", "verbose": 1},
     ["verbose: not a key of the schema (additionalProperties is false)"]),
])
def test_arguments_are_checked_against_required_types_and_closed_keys(arguments, found):
    assert schema_problems(SEARCH, arguments) == found


def test_refs_enums_unions_and_nested_items_are_followed():
    schema = {"type": "object", "$defs": {"Mode": {"enum": ["fast", "slow"]}},
              "properties": {"mode": {"$ref": "#/$defs/Mode"},
                             "ids": {"type": "array", "items": {"type": "integer"}},
                             "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                             "kind": {"type": "STRING"}}}  # Gemini writes types upper-case
    assert schema_problems(schema, {"mode": "fast", "ids": [1, 2], "when": None,
                                    "kind": "a"}) == []
    assert schema_problems(schema, {"mode": "warp", "ids": [1, "2"], "when": 3}) == [
        'mode: "warp" is not one of "fast", "slow"',
        "ids[1]: a string, the schema wants integer",
        "when: fits none of the 2 forms of anyOf"]


@pytest.mark.parametrize(("schema", "why"), [
    (None, None), (SEARCH, None), ({}, None),
    ({"type": "array", "items": {}}, 'its schema\'s root has type "array", not "object"'),
    ("object", "its schema is a JSON string, not an object schema"),
    (BROKEN, "its schema's $ref '#/$defs/Query' does not resolve inside the schema"),
    ({"type": "object", "properties": {"a": {"$ref": "https://x.invalid/s.json"}}},
     "its schema's $ref 'https://x.invalid/s.json' does not resolve inside the schema"),
])
def test_a_schema_that_cannot_be_an_argument_schema_says_why(schema, why):
    assert broken_schema(schema) == why
    if why is not None:  # never checked against: the client's fault, not the model's
        assert schema_problems(schema, {"anything": 1}) == []


@pytest.mark.parametrize(("name", "server"), [
    ("mcp__docs__search", "docs"), ("mcp__github__create_issue", "github"),
    ("docs__search", "docs"), ("Bash", None), ("run_shell_command", None),
    ("__format_error__", None), ("mcp__", None)])
def test_mcp_tools_are_read_back_to_their_server_as_the_clients_name_them(name, server):
    assert mcp_server(name) == server


def test_every_client_shape_of_a_tool_list_yields_its_schemas():
    shapes = [chat_tool("a", SEARCH), {"type": "function", "name": "b", "parameters": SEARCH},
              {"name": "c", "input_schema": SEARCH}, {"name": "d", "inputSchema": SEARCH},
              {"name": "e"}, {"description": "no name"}]
    assert offered_schemas(shapes) == {"a": SEARCH, "b": SEARCH, "c": SEARCH, "d": SEARCH,
                                       "e": None}


def test_the_hash_of_a_tool_list_ignores_key_order_and_sees_a_changed_schema():
    assert tools_hash({"a": SEARCH, "b": BASH}) == tools_hash({"b": BASH, "a": dict(
        reversed(list(SEARCH.items())))})
    assert tools_hash({"a": SEARCH}) != tools_hash({"a": {**SEARCH, "required": []}})


# proxied traffic


def exchange(messages: list, calls: list[tuple[str, dict]], tools=TOOLS) -> Exchange:
    body = json.dumps({"model": "qwen", "messages": messages, "tools": tools}).encode()
    reply = {"model": "qwen", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "tool_calls": [
            {"id": f"call-{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)]}}]}
    return Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                    started_at=datetime.now(UTC), status=200, content_type="application/json",
                    response_body=bytearray(json.dumps(reply).encode()), ttft_s=0.1,
                    latency_s=0.5)


def proxied(system: str = "You are the research subagent.", tools=TOOLS):
    sessions = Sessions(load_allowlist(RALF))
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Go."}]
    sessions.take(exchange(messages, CALLS, tools), 0.0)
    [record] = sessions.close_all()
    return record


def test_proxied_calls_are_judged_against_their_own_offered_schema():
    record = proxied()
    assert [codes(c) for c in record.calls] == EXPECTED
    [bad] = [f for f in record.calls[2].findings if f.code == "AE108"]
    assert bad.message == "query: a integer, the schema wants string"


def test_a_broken_offered_schema_is_the_clients_stack_fault_once_never_the_models():
    record = proxied()
    assert [(f.code, f.turn_index, f.ends) for f in record.stack_faults] == [
        ("AE512", 0, False)]
    assert "mcp__wiki__lookup" in record.stack_faults[0].message
    assert "AE108" not in codes(record.calls[4])[1]


def test_the_offered_list_rides_the_record_and_the_journal():
    record = proxied()
    assert record.offered_tools == {"bash": BASH, "mcp__docs__search": SEARCH,
                                    "mcp__wiki__lookup": BROKEN}
    again = record_from_json(json.loads(json.dumps(record_to_json(record))))
    assert again.offered_tools == record.offered_tools
    assert again.stack_faults == record.stack_faults


def test_the_store_keeps_each_list_once_and_shows_schema_drift_between_sessions(store,
                                                                                 tmp_path):
    changed = [TOOLS[0], chat_tool("mcp__docs__search", {**SEARCH, "required": ["query",
                                                                                 "limit"]})]
    records = [replace(proxied(name), key=name) for name in ("one", "two")]
    records.append(replace(proxied("three", changed), key="three"))
    run = add_run(store, label="drift", kind="proxy", suite="proxy", targets=("qwen",),
                  base_url="proxy")
    for r in records:
        store.record_session(run, r)
    lists = store.offered_tool_lists(run)
    assert [(h, n) for h, _, n in lists] == [(tools_hash(records[0].offered_tools), 2),
                                             (tools_hash(records[2].offered_tools), 1)]
    assert tool_drift(lists) == {"mcp__docs__search": 2}
    from agent_eval.store.schema import tool_lists
    with store.engine.connect() as conn:
        assert len(conn.execute(tool_lists.select()).all()) == 2
    sid = store.find_session(run, records[2].key)
    assert sid is not None
    assert store.load_session(sid).record.offered_tools == records[2].offered_tools
    # shown: the report's index lists both lists and names the tool that changed ...
    from click.testing import CliRunner

    from agent_eval.cli import main as cli
    from agent_eval.report.writing import write_report

    index = write_report(store, [run], tmp_path, workers=0).read_text()
    assert 'id="tool-list-table"' in index
    assert "<code>mcp__docs__search</code> (2 schemas)" in index
    # ... and `show` names the tools a session was offered and its list's hash
    shown = CliRunner().invoke(cli, ["show", str(sid), "--db", store.url],
                               env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert (f"offered tools (2, list {tools_hash(records[2].offered_tools)[:12]}): bash, "
            "mcp__docs__search") in " ".join(shown.output.split())


# imported traffic


def test_imported_calls_are_judged_against_the_schemas_the_log_kept():
    messages = [{"role": "system", "content": "You are the research subagent."},
                {"role": "user", "content": "Go."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{i}", "type": "function",
                     "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, (n, a) in enumerate(CALLS)]}]
    session = session_from_messages(messages, id="s", model="qwen",
                                    request={"model": "qwen", "tools": TOOLS})
    record = Judge(load_policy(RALF)).session(session, key="s", source="openai")
    assert [codes(c) for c in record.calls] == EXPECTED
    assert [f.code for f in record.stack_faults] == ["AE512"]
    assert set(record.offered_tools or {}) == {"bash", "mcp__docs__search", "mcp__wiki__lookup"}


# telemetry


def _attr(key: str, value) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def genai_trace(definitions_as_text: bool = True) -> dict:
    definitions = [{"type": "function", "name": t["function"]["name"],
                    "parameters": t["function"]["parameters"]} for t in TOOLS]
    chat = {"traceId": "t1", "spanId": "s0", "name": "chat qwen", "attributes": [
        _attr("gen_ai.operation.name", "chat"), _attr("gen_ai.conversation.id", "conv-1"),
        _attr("gen_ai.tool.definitions", json.dumps(definitions))]}
    spans = [chat] + [
        {"traceId": "t1", "spanId": f"s{i + 1}", "name": f"execute_tool {name}", "attributes": [
            _attr("gen_ai.operation.name", "execute_tool"), _attr("gen_ai.tool.name", name),
            _attr("gen_ai.conversation.id", "conv-1"),
            _attr("gen_ai.tool.call.arguments", json.dumps(args))]}
        for i, (name, args) in enumerate(CALLS)]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def test_telemetry_calls_are_judged_against_the_genai_tool_definitions():
    stitcher = Stitcher()
    stitcher.add(tool_events("traces", genai_trace()))
    [open_session] = stitcher.close_all()
    assert open_session.events == 1 + len(CALLS)
    record = Judge(load_policy(RALF)).session(imported_session(open_session), key="k",
                                              source="otlp")
    assert [codes(c) for c in record.calls] == EXPECTED
    assert [f.code for f in record.stack_faults] == ["AE512"]


def test_the_receiver_stores_the_offered_list_and_the_schema_findings(store):
    collector = Collector(store, load_policy(RALF))
    status, _ = collector.receive("/v1/traces", "application/json", "",
                                  json.dumps(genai_trace()).encode())
    assert status == 200
    stats = collector.close()
    [(_, tools, n)] = store.offered_tool_lists(stats.run_id)
    assert n == 1 and set(tools) == {"bash", "mcp__docs__search", "mcp__wiki__lookup"}


def test_mcp_calls_are_reported_per_server_in_the_store_and_the_report(store, tmp_path):
    from agent_eval.report.writing import write_report

    run = add_run(store, [proxied()], label="mcp", kind="proxy", suite="proxy",
                  targets=("qwen",), base_url="proxy")
    rows = store.mcp_servers([run])
    assert [(r.server, r.tools, r.calls, r.denied, r.schema_mismatches) for r in rows] == [
        ("docs", 1, 2, 2, 1), ("wiki", 1, 1, 1, 0)]
    index = write_report(store, [run], tmp_path, workers=0).read_text()
    assert 'id="mcp-table"' in index and "<td>docs</td>" in index


def test_rescore_and_replay_judge_against_the_same_offered_schemas():
    """A stored session judged again (rescore) keeps its schema findings: from each turn's
    stored request, else the session's offered list (telemetry's); replay's judging of a
    new reply to a stored request checks them too."""
    from types import SimpleNamespace

    from agent_eval.call_recorder import CallRecorder, offered_tool_schemas, offered_tools
    from agent_eval.importers.rescore import rejudge_session
    from agent_eval.live.replay import judge_reply

    calls = CallRecorder(load_allowlist(RALF), foreign=True)
    record = proxied()
    assert [codes(c) for c in rejudge_session(record, calls).calls] == EXPECTED
    stitcher = Stitcher()
    stitcher.add(tool_events("traces", genai_trace()))
    collected = Judge(load_policy(RALF)).session(imported_session(stitcher.close_all()[0]),
                                                 key="k", source="otlp")
    assert [codes(c) for c in rejudge_session(collected, calls).calls] == EXPECTED
    request = record.turns[0].request
    reply = SimpleNamespace(tool_calls=[SimpleNamespace(name=n, arguments=json.dumps(a),
                                                        id=f"c{i}")
                                        for i, (n, a) in enumerate(CALLS)], markup=None)
    judged = judge_reply(reply, calls, offered_tools(request),
                         offered_tool_schemas(request["tools"]))
    assert [codes(c) for c in judged] == EXPECTED
