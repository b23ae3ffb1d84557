"""Gemini ``generateContent`` (``POST .../models/MODEL:generateContent`` and
``:streamGenerateContent?alt=sse``), as Gemini CLI speaks it, read into and written from
Chat Completions' vocabulary.  Pure.

Checked against google-genai's types (``google/genai/types.py``: ``Content``, ``Part``,
``FunctionCall``, ``FunctionResponse``, ``GenerateContentResponse``,
``GenerateContentResponseUsageMetadata``), the Gemini API reference
(https://ai.google.dev/api/generate-content) and Gemini CLI 0.61's captures
(tests/fixtures/clis/gemini-cli).

The model is in the path, not the body: the chat form carries it as ``model``, and
``stream`` says which of the two methods was called.  Request to chat messages:

- ``systemInstruction`` → a leading ``system`` message (its parts as the content);
- a ``user`` content's ``functionResponse`` parts → one ``tool`` message each (the
  response object serialised), the rest of its parts → a user message;
- a ``model`` content's text parts → the assistant's content (``thought: true`` parts →
  ``reasoning_content``), ``functionCall`` parts → ``tool_calls`` (``args`` serialised);
- tools: each ``functionDeclarations`` entry → a chat function tool (``parameters`` or
  ``parametersJsonSchema``); other tools (``googleSearch``) are kept as sent;
  ``generationConfig``, ``toolConfig``, ... kept as sent.

Call ids: the API's ``functionCall.id`` is optional, servers often leave it out and Gemini
CLI then invents one for its own bookkeeping (``run_shell_command_1795657601847_0``), so a
reply and the history sent back would never agree on ids.  Calls are therefore named by
position, ``NAME#K`` for the K-th call of its turn, in replies and in requests alike, and
a ``functionResponse`` answers the call with its id in the turn before, else the first
unanswered call of its name.

Reply: one ``GenerateContentResponse``, or (``alt=sse``) a stream of them, each holding
the next parts; the one with ``finishReason`` ends it (``STOP`` → ``stop`` or
``tool_calls``, ``MAX_TOKENS`` → ``length``, ``SAFETY`` → ``content_filter``, any other
lower-cased).  A stream with no ``finishReason`` is ``truncated``.  Usage:
``promptTokenCount``, ``candidatesTokenCount`` (+ ``thoughtsTokenCount``),
``cachedContentTokenCount``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_eval.wire.records import (
    ParsedCall,
    ParsedReply,
    arguments_object,
    arguments_text,
    chat_usage,
    dicts,
    mapping,
    sse_objects,
    string,
)

NAME = "gemini"
_PATH = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent)$")
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
          "RECITATION": "content_filter", "PROHIBITED_CONTENT": "content_filter",
          "BLOCKLIST": "content_filter", "SPII": "content_filter"}


def matches(path: str) -> bool:
    return _PATH.search(path) is not None


def call_id(name: str, k: int) -> str:
    return f"{name}#{k}"


# --- requests ----------------------------------------------------------------------------

def read_request(body: dict[str, Any], path: str = "") -> dict[str, Any] | None:
    if not isinstance(body.get("contents"), list):
        return None
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if isinstance(system, dict) and dicts(system.get("parts")):
        messages.append({"role": "system", "content": dicts(system.get("parts"))})
    elif isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    previous: list[dict[str, Any]] = []  # the calls of the last model turn
    for content in dicts(body["contents"]):
        parts = dicts(content.get("parts"))
        if content.get("role") == "model":
            msg, previous = _model_message(parts)
            messages.append(msg)
        else:
            messages.extend(_user_messages(parts, previous))
    chat = {k: v for k, v in body.items() if k not in ("contents", "systemInstruction", "tools")}
    found = _PATH.search(path)
    if found:
        chat.setdefault("model", found["model"])
        chat["stream"] = found["method"] == "streamGenerateContent"
    chat["messages"] = messages
    if isinstance(body.get("tools"), list):
        chat["tools"] = read_tools(body["tools"])
    return chat


def _model_message(parts: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": [p for p in parts if isinstance(p.get("text"), str) and not p.get("thought")],
    }
    thought = "".join(p["text"] for p in parts if isinstance(p.get("text"), str)
                      and p.get("thought"))
    if thought:
        msg["reasoning_content"] = thought
    calls = []
    for k, p in enumerate(p for p in parts if isinstance(p.get("functionCall"), dict)):
        fc = p["functionCall"]
        name = string(fc.get("name"))
        calls.append({"id": call_id(name, k), "type": "function", "wire_id": fc.get("id"),
                      "function": {"name": name, "arguments": arguments_text(fc.get("args", {}))}})
    if calls:
        msg["tool_calls"] = calls
    return msg, calls


def _user_messages(parts: list[dict[str, Any]], previous: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rest = []
    open_calls = list(previous)
    for p in parts:
        fr = p.get("functionResponse")
        if not isinstance(fr, dict):
            rest.append(p)
            continue
        answered = next((c for c in open_calls if fr.get("id") and c.get("wire_id") == fr["id"]),
                        None) or next((c for c in open_calls
                                       if c["function"]["name"] == fr.get("name")), None)
        if answered is not None:
            open_calls.remove(answered)
        response = fr.get("response", {})
        if isinstance(response, dict) and list(response) == ["output"] \
                and isinstance(response["output"], str):
            response = response["output"]  # Gemini CLI's shape: the output as the text
        out.append({"role": "tool", "name": string(fr.get("name")),
                    "tool_call_id": answered["id"] if answered else call_id(
                        string(fr.get("name")), 0),
                    "content": arguments_text(response)})
    if rest or not out:
        out.append({"role": "user", "content": rest})
    return out


def read_tools(tools: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for group in dicts(tools):
        declarations = dicts(group.get("functionDeclarations") or group.get("function_declarations"))
        if not declarations:
            out.append(group)
            continue
        for decl in declarations:
            fn = {k: v for k, v in decl.items() if k not in ("parameters", "parametersJsonSchema")}
            schema = decl.get("parametersJsonSchema", decl.get("parameters"))
            if schema is not None:
                fn["parameters"] = schema
            tool: dict[str, Any] = {"type": "function", "function": fn}
            if "parametersJsonSchema" in decl:
                tool["json_schema"] = True
            out.append(tool)
    return out


def write_request(chat: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(path under the base URL, body)``: the inverse of :func:`read_request`."""
    model = string(chat.get("model")) or "model"
    stream = bool(chat.get("stream"))
    body = {k: v for k, v in chat.items() if k not in ("messages", "tools", "model", "stream")}
    messages = list(dicts(chat.get("messages")))
    if messages and messages[0].get("role") == "system":
        content = messages.pop(0).get("content")
        body["systemInstruction"] = {"parts": content if isinstance(content, list)
                                     else [{"text": string(content)}]}
    contents: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "assistant":
            parts = []
            if m.get("reasoning_content"):
                parts.append({"text": m["reasoning_content"], "thought": True})
            parts += _parts(m.get("content"))
            for call in dicts(m.get("tool_calls")):
                fn = mapping(call.get("function"))
                fc: dict[str, Any] = {"name": string(fn.get("name")),
                                      "args": arguments_object(fn.get("arguments") or "{}")}
                if call.get("wire_id"):
                    fc["id"] = call["wire_id"]
                parts.append({"functionCall": fc})
            contents.append({"role": "model", "parts": parts})
            continue
        if m.get("role") == "tool":
            response = arguments_object(m.get("content") or "{}")
            parts = [{"functionResponse": {
                "name": string(m.get("name")) or string(m.get("tool_call_id")).rpartition("#")[0],
                "response": response if isinstance(response, dict) else {"output": response}}}]
        else:
            parts = _parts(m.get("content"))
        if contents and contents[-1]["role"] == "user":
            contents[-1]["parts"] += parts
        else:
            contents.append({"role": "user", "parts": parts})
    body["contents"] = contents
    if isinstance(chat.get("tools"), list):
        body["tools"] = write_tools(chat["tools"])
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/models/{model}:{method}", body


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return dicts(content)
    return [{"text": content}] if isinstance(content, str) and content else []


def write_tools(tools: list[Any]) -> list[dict[str, Any]]:
    declarations, out = [], []
    for tool in dicts(tools):
        fn = tool.get("function")
        if tool.get("type") != "function" or not isinstance(fn, dict):
            out.append(tool)
            continue
        decl = {k: v for k, v in fn.items() if k != "parameters"}
        if "parameters" in fn:
            decl["parametersJsonSchema" if tool.get("json_schema") else "parameters"] = \
                fn["parameters"]
        declarations.append(decl)
    return ([{"functionDeclarations": declarations}] if declarations else []) + out


# --- replies -----------------------------------------------------------------------------

def parse_reply(text: str, *, streamed: bool) -> ParsedReply:
    if streamed:
        chunks = [e for _, e in sse_objects(text) if isinstance(e, dict)]
    else:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return ParsedReply(status="unparseable")
        chunks = dicts(value) if isinstance(value, list) else (
            [value] if isinstance(value, dict) else [])  # a JSON array: the non-SSE stream
    if not chunks:  # a stream cut inside its first event is cut, not garbage
        return ParsedReply(status="truncated" if streamed and "data:" in text else "unparseable")
    if any("error" in c and "candidates" not in c for c in chunks):
        return ParsedReply(status="upstream-error")
    return _fold(chunks)


def _fold(chunks: list[dict[str, Any]]) -> ParsedReply:
    reply = ParsedReply()
    content: list[str] = []
    reasoning: list[str] = []
    finish: str | None = None
    names: list[str] = []
    for chunk in chunks:
        reply.model = string(chunk.get("modelVersion")) or reply.model
        reply.response_id = string(chunk.get("responseId")) or reply.response_id
        if isinstance(chunk.get("usageMetadata"), dict):
            meta = chunk["usageMetadata"]
            completion = meta.get("candidatesTokenCount")
            thoughts = meta.get("thoughtsTokenCount")
            if isinstance(completion, int) and isinstance(thoughts, int):
                completion += thoughts
            reply.usage = chat_usage(meta.get("promptTokenCount"), completion,
                                     cached=meta.get("cachedContentTokenCount"),
                                     reasoning=thoughts)
        candidates = dicts(chunk.get("candidates"))
        if not candidates:
            feedback = chunk.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                finish = "content_filter"
            continue
        first = candidates[0]
        body = mapping(first.get("content"))
        for part in dicts(body.get("parts")):
            if isinstance(part.get("text"), str):
                (reasoning if part.get("thought") else content).append(part["text"])
            fc = part.get("functionCall")
            if isinstance(fc, dict):
                name = string(fc.get("name"))
                reply.calls.append(ParsedCall(call_id(name, len(names)), name,
                                              arguments_text(fc.get("args", {}))))
                names.append(name)
        if isinstance(first.get("finishReason"), str) and first["finishReason"]:
            finish = first["finishReason"]
    reply.content, reply.reasoning = "".join(content), "".join(reasoning)
    if finish is None:
        reply.status = "truncated"
    elif finish == "STOP" and reply.calls:
        reply.finish_reason = "tool_calls"
    else:
        reply.finish_reason = FINISH.get(finish, finish.lower())
    return reply


def render_reply(reply: ParsedReply, *, stream: bool, created: int = 0) -> list[dict[str, Any]]:
    """The reply as Gemini sends it: one ``GenerateContentResponse`` (``stream`` False), or
    the chunks of its stream (text in pieces, each call whole, the last with the finish
    reason and usage; the caller frames each as ``data: JSON``)."""
    parts: list[dict[str, Any]] = []
    if reply.reasoning:
        parts.append({"text": reply.reasoning, "thought": True})
    if reply.content:
        parts.append({"text": reply.content})
    for call in reply.calls:
        parts.append({"functionCall": {"name": call.name,
                                       "args": arguments_object(call.arguments)}})
    finish = "MAX_TOKENS" if reply.finish_reason == "length" else "STOP"
    usage = {"promptTokenCount": reply.usage.get("prompt_tokens", 0),
             "candidatesTokenCount": reply.usage.get("completion_tokens", 0),
             "totalTokenCount": reply.usage.get("total_tokens", 0)}
    tail = {"modelVersion": reply.model, "responseId": reply.response_id}
    whole = {"candidates": [{"content": {"role": "model", "parts": parts},
                             "finishReason": finish, "index": 0}],
             "usageMetadata": usage, **tail}
    if not stream:
        return [whole]
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [p]}, "index": 0}], **tail}
        for p in parts[:-1]]
    last = parts[-1:] if parts else []
    chunks.append({"candidates": [{"content": {"role": "model", "parts": last},
                                   "finishReason": finish, "index": 0}],
                   "usageMetadata": usage, **tail})
    return chunks
