"""A real GenAI-convention emitter: the OpenTelemetry Python SDK (opentelemetry-sdk and its
OTLP/HTTP protobuf exporter, 1.45.2 when this was written; the version met is in the
test's id) exports a conversation as the GenAI semantic conventions write it (an
inference span ``chat MODEL`` carrying ``gen_ai.tool.definitions``, one ``execute_tool
TOOL`` span per call with ``gen_ai.tool.call.arguments``, both under
``gen_ai.conversation.id``: open-telemetry/semantic-conventions-genai, docs/gen-ai/
gen-ai-spans.md and execute-tool.md) to a running ``agent-eval collect``; the calls it
stores, their verdicts and findings (schema findings included) equal the proxy's record of
the same conversation."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from importlib.metadata import version

import pytest

from agent_eval.policy import load_allowlist
from agent_eval.proxy import Exchange
from agent_eval.proxy.collect import Collector, CollectServer, serve
from agent_eval.proxy.sessions import Sessions
from agent_eval.scenario.bundled import load_policy

RALF = "allowlists/ralf.yaml"
SDK = version("opentelemetry-sdk")
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}},
          "required": ["query"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
         {"type": "function", "function": {"name": "mcp__docs__search", "parameters": SEARCH}}]
CALLS = [("bash", {"command": "uv run scripts/db_query.py --sql 'select 1'"}),
         ("bash", {"command": "ls scripts/ | grep search"}),
         ("mcp__docs__search", {"query": 3})]


def proxied_record():
    """The proxy's record of the conversation: one request offering TOOLS, one reply."""
    body = json.dumps({"model": "qwen", "tools": TOOLS, "messages": [
        {"role": "system", "content": "You are the research subagent."},
        {"role": "user", "content": "Go."}]}).encode()
    reply = {"model": "qwen", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "tool_calls": [
            {"id": f"call-{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(CALLS)]}}]}
    sessions = Sessions(load_allowlist(RALF))
    sessions.take(Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                           started_at=datetime.now(UTC), status=200,
                           content_type="application/json",
                           response_body=bytearray(json.dumps(reply).encode())), 0.0)
    [record] = sessions.close_all()
    return record


def emit(endpoint: str) -> None:
    """The conversation through the SDK's tracer and OTLP/HTTP (protobuf) exporter."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "genai-app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("genai-app")
    definitions = [{"type": "function", "name": t["function"]["name"],
                    "parameters": t["function"]["parameters"]} for t in TOOLS]
    with tracer.start_as_current_span("chat qwen", kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "qwen", "gen_ai.conversation.id": "conv-sdk",
            "gen_ai.tool.definitions": json.dumps(definitions)}):
        pass
    for i, (name, args) in enumerate(CALLS):
        with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function", "gen_ai.tool.call.id": f"call-{i}",
                "gen_ai.conversation.id": "conv-sdk",
                "gen_ai.tool.call.arguments": json.dumps(args)}):
            pass
    provider.shutdown()


@pytest.mark.parametrize("sdk", [SDK])
def test_the_sdks_genai_spans_are_judged_as_the_proxy_judges_the_same_calls(store, sdk):
    collector = Collector(store, load_policy(RALF), label="genai-sdk")
    server = CollectServer(collector, "127.0.0.1", 0)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(stats=serve(server)), daemon=True)
    thread.start()
    try:
        emit(f"{server.base_url}/v1/traces")
    finally:
        server.shutdown()
        thread.join()
    stats = result["stats"]
    assert (stats.refused, stats.sessions, stats.not_judged) == (0, 1, 0)
    [row] = store.session_rows([stats.run_id])
    collected = store.load_session(row.id).record
    proxied = proxied_record()

    def calls(record):
        return [(c.tool, c.arguments, c.decision, c.primary,
                 sorted((f.code, f.message) for f in c.findings)) for c in record.calls]

    assert calls(collected) == calls(proxied)
    assert [c.primary for c in collected.calls] == [None, "AE301", "AE101"]
    assert "AE108" in {f.code for f in collected.calls[2].findings}
    assert collected.offered_tools == proxied.offered_tools
    assert collected.scenario == "gen_ai:conv-sdk" and collected.target == "qwen"
