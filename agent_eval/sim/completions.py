"""The wire format: a :class:`Reply` rendered the way vLLM answers ``/v1/chat/completions``.

Non-streaming: one ``chat.completion`` object whose message carries ``content``,
``reasoning_content`` *and* ``reasoning`` (vLLM versions differ on the name), parsed
``tool_calls`` with ids ``chatcmpl-tool-<hex>`` and ``usage``.  Streaming: a list of
``chat.completion.chunk`` objects (role, reasoning pieces, content pieces, one tool call
at a time with its id and name first and its arguments in pieces, the finish reason),
then a usage chunk when asked; the server frames them as SSE and appends ``[DONE]``.
Token counts are estimates (about four characters a token).  Pure.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from agent_eval.sim.behaviour import Reply, message_text


@dataclass(frozen=True)
class WireCall:
    """A tool call as it goes on the wire: id, name and the exact argument text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """Everything one answer needs, decided before any byte is sent."""

    id: str
    model: str
    created: int
    reply: Reply
    calls: tuple[WireCall, ...]
    usage: dict[str, int]
    finish: str | None = None  # a finish reason a stack fault forces (``stack.py``)

    @property
    def finish_reason(self) -> str:
        return self.finish or self.reply.finish_reason


def build_completion(
    body: dict[str, Any], reply: Reply, *, model: str, created: int, rng: random.Random,
    malformed: bool = False,
) -> Completion:
    """Give the reply ids and argument text (broken JSON when ``malformed``) and a usage."""
    calls = tuple(
        WireCall(
            id=f"chatcmpl-tool-{rng.getrandbits(128):032x}",
            name=call.tool,
            arguments=malform_arguments(call.arguments_json, rng) if malformed else call.arguments_json,
        )
        for call in reply.calls
    )
    return Completion(
        id=f"chatcmpl-{rng.getrandbits(128):032x}",
        model=model,
        created=created,
        reply=reply,
        calls=calls,
        usage=estimate_usage(body, reply, calls),
    )


def malform_arguments(arguments: str, rng: random.Random) -> str:
    """Argument text that is not valid JSON, in the ways real parsers let through."""
    form = rng.choice(["unclosed", "python", "trailing"])
    if form == "python" and '"' in arguments:
        return arguments.replace('"', "'")
    if form == "trailing":
        return arguments[:-1] + ",}"
    return arguments[:-1]


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def estimate_usage(body: dict[str, Any], reply: Reply, calls: tuple[WireCall, ...]) -> dict[str, int]:
    prompt_chars = sum(len(message_text(m)) + 8 for m in body.get("messages") or [] if isinstance(m, dict))
    prompt_chars += len(json.dumps(body.get("tools") or []))
    completion = estimate_tokens(reply.reasoning) + estimate_tokens(reply.content or "")
    completion += sum(estimate_tokens(c.name + c.arguments) + 4 for c in calls)
    prompt = max(1, prompt_chars // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def render_completion(done: Completion) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": done.reply.content,
        "reasoning_content": done.reply.reasoning,
        "reasoning": done.reply.reasoning,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in done.calls
        ],
    }
    return {
        "id": done.id,
        "object": "chat.completion",
        "created": done.created,
        "model": done.model,
        "choices": [{
            "index": 0, "message": message, "logprobs": None,
            "finish_reason": done.finish_reason, "stop_reason": None,
        }],
        "usage": done.usage,
    }


def render_chunks(done: Completion, *, include_usage: bool, piece_chars: int = 24
                  ) -> list[dict[str, Any]]:
    """The streaming ``chat.completion.chunk`` objects, in order, without ``[DONE]``;
    text goes out in pieces of ``piece_chars`` characters."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": p, "reasoning": p} for p in split_text(done.reply.reasoning, 24)]
    deltas += [{"content": p} for p in split_text(done.reply.content or "", piece_chars)]
    for index, call in enumerate(done.calls):
        deltas.append({"tool_calls": [{
            "index": index, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]})
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
            for p in split_text(call.arguments, 32)
        ]
    chunks = [_chunk(done, delta, None) for delta in deltas]
    chunks.append(_chunk(done, {}, done.finish_reason))
    if include_usage:
        chunks.append({
            "id": done.id, "object": "chat.completion.chunk", "created": done.created,
            "model": done.model, "choices": [], "usage": done.usage,
        })
    return chunks


def _chunk(done: Completion, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": done.id, "object": "chat.completion.chunk", "created": done.created,
        "model": done.model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def split_text(text: str, size: int) -> list[str]:
    """Pieces of about ``size`` characters (the streamed token groups)."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def render_error(status: int, message: str) -> dict[str, Any]:
    """vLLM's error body."""
    kind = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
    return {
        "object": "error", "message": message,
        "type": kind.get(status, "InternalServerError"), "param": None, "code": status,
    }
