"""Optional OpenTelemetry export of proxied sessions (``agent-eval proxy --otel-endpoint``).

For users whose traces already live in an OpenTelemetry backend: each stored session
becomes one trace, each turn a ``chat {model}`` span and each tool call of a turn an
``execute_tool {tool}`` span under it, with the GenAI semantic conventions' attribute
names (``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.tool.*``, ``gen_ai.conversation.id``) and the verdict as ``agent_eval.*``
attributes.  Spans are made when the session is written to the store (after its idle
timeout, or a journal replay), off the request path, and sent in batches over OTLP/HTTP
by the SDK's exporter.

Never exported: request headers (the relay never hands them to the recorder, except the
session-id headers), prompts, replies, tool arguments and outputs (the semantic
conventions make content opt-in; the store has it).

Needs the ``otel`` extra (``pip install 'agent-eval[otel]'``): opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.transcript import CallRecord, SessionRecord, TurnRecord

log = logging.getLogger("agent_eval.proxy")

SERVICE_NAME = "agent-eval-proxy"


def check_otel(endpoint: str) -> None:
    """The operator's mistakes, before anything starts: a bad URL, a missing extra."""
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"{endpoint!r} is not an http(s) URL (an OTLP/HTTP traces URL such "
                          "as http://127.0.0.1:4318/v1/traces)", field="--otel-endpoint")
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError("needs OpenTelemetry, which is not installed: "
                          "pip install 'agent-eval[otel]'", field="--otel-endpoint") from None


class SessionTracer:
    """Sessions to spans, batched to one OTLP/HTTP endpoint; ``shutdown`` flushes."""

    def __init__(self, endpoint: str, *, service: str = SERVICE_NAME) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        self.tracer = self.provider.get_tracer("agent_eval.proxy")

    def export(self, records: list[SessionRecord]) -> None:
        from opentelemetry import trace

        for record in records:
            for turn in record.turns:
                start, end = _turn_times(turn)
                span = self.tracer.start_span(
                    f"chat {record.target}", kind=trace.SpanKind.CLIENT, start_time=_ns(start),
                    attributes=turn_attributes(record, turn))
                context = trace.set_span_in_context(span)
                for call in record.calls:
                    if call.turn_index == turn.index:
                        child = self.tracer.start_span(
                            f"execute_tool {call.tool}", context=context,
                            kind=trace.SpanKind.INTERNAL, start_time=_ns(end),
                            attributes=call_attributes(record, call))
                        child.end(end_time=_ns(end))
                span.end(end_time=_ns(end))

    def shutdown(self) -> None:
        self.provider.shutdown()


PROVIDERS = {"chat": "openai", "responses": "openai", "messages": "anthropic",
             "gemini": "gcp.gemini"}
"""The GenAI semantic conventions' ``gen_ai.provider.name`` of each wire protocol."""


def turn_attributes(record: SessionRecord, turn: TurnRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        # the wire protocol (GenAI conventions' provider names): what the client spoke
        "gen_ai.provider.name": PROVIDERS.get(record.protocol or "chat", "openai"),
        "gen_ai.request.model": record.target,
        "gen_ai.conversation.id": record.key,
        "agent_eval.turn.index": turn.index,
        "agent_eval.session.scenario": record.scenario,
        "agent_eval.session.status": record.status,
    }
    if turn.finish_reason:
        out["gen_ai.response.finish_reasons"] = [turn.finish_reason]
    for key, value in (("gen_ai.usage.input_tokens", turn.prompt_tokens),
                       ("gen_ai.usage.output_tokens", turn.completion_tokens),
                       ("agent_eval.usage.cached_tokens", turn.cached_tokens),
                       ("agent_eval.ttft_s", turn.ttft_s),
                       ("agent_eval.decode_tps", turn.decode_tps)):
        if value is not None:
            out[key] = value
    return out


def call_attributes(record: SessionRecord, call: CallRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": record.key,
        "agent_eval.decision": call.decision,
        "agent_eval.findings": sorted({f.code for f in call.findings}),
    }
    for key, value in (("gen_ai.tool.call.id", call.call_id),
                       ("agent_eval.class", call.primary),
                       ("agent_eval.script", call.script),
                       ("agent_eval.next_action", call.next_action)):
        if value is not None:
            out[key] = value
    return out


def _turn_times(turn: TurnRecord) -> tuple[datetime | None, datetime | None]:
    if turn.started_at is None:
        return None, None
    return turn.started_at, turn.started_at + timedelta(seconds=turn.latency_s or 0.0)


def _ns(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1e9)


class TracedStore:
    """A store that also exports the sessions it has written; everything else delegates.

    Export failures are logged and never fail the write: the store is the record."""

    def __init__(self, store: Any, endpoint: str) -> None:
        self._store = store
        self.tracer = SessionTracer(endpoint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def record_sessions(self, run_id: int, records: list[SessionRecord]) -> Any:
        result = self._store.record_sessions(run_id, records)
        try:
            self.tracer.export(records)
        except Exception as exc:  # an exporter bug must not cost the stored sessions
            log.warning("OpenTelemetry export failed: %s", exc)
        return result

    def close(self) -> None:
        try:
            self.tracer.shutdown()
        finally:
            self._store.close()
