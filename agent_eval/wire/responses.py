"""OpenAI Responses (``POST .../responses``), as Codex CLI and vLLM's ``/v1/responses`` speak
it, read into and written from Chat Completions' vocabulary.  Pure.

Checked against openai-python's types (``src/openai/types/responses/``:
``response_input_item_param.py``, ``response_stream_event.py``, ``response_usage.py``),
Codex 0.169's captures (tests/fixtures/clis/codex) and vLLM's
``vllm/entrypoints/openai/responses/serving.py`` (``store`` is honoured only with
``VLLM_ENABLE_RESPONSES_API_STORE=1``; otherwise ignored).

Request (``input`` items, in order) to chat messages:

- ``instructions`` → a leading ``system`` message; ``input`` as a string → one user
  message;
- ``message`` items (or the easy ``{role, content}`` form) → a message of that role with
  the content as sent (a string or the parts list: ``input_text``/``output_text`` parts
  carry ``text``); assistant messages, ``reasoning`` items and ``function_call`` items in
  a row fold into one assistant message (its text, ``reasoning_content`` from the
  summaries, ``tool_calls`` with the item's ``call_id`` as id);
- ``function_call`` of a namespace tool (Codex's ``multi_agent_v1``) → a call named
  ``namespace.name``; ``custom_tool_call`` → its ``input`` as the argument text;
- ``function_call_output`` (and ``custom_tool_call_output``) → a ``tool`` message for
  ``call_id``;
- tools: ``function`` tools → chat function tools; a ``namespace`` tool's functions →
  chat function tools named ``namespace.name`` (kept with ``"namespace"`` for writing
  back); any other tool (``web_search``, ``custom``) is kept as sent;
- every other field (``model``, ``store``, ``reasoning``, ``include``, ``tool_choice``,
  ``previous_response_id``, ...) is kept as sent.

``previous_response_id`` says the server holds the history: the proxy links such a request
to the session whose reply had that id, and the turn's stored request is the whole
history (that session's messages, then this request's input), so it can be replayed to a
server that never saw the first.

Reply: one ``response`` object, or its stream (``response.created`` ...
``response.output_item.added``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.reasoning_summary_text.delta`` /
``response.reasoning_text.delta``, ``response.output_item.done``, ended by
``response.completed``, ``response.incomplete`` or ``response.failed``; ``error`` is an
upstream error).  A stream without its terminal event is ``truncated``.
"""

from __future__ import annotations

import json
from typing import Any

from agent_eval.wire.records import (
    ParsedCall,
    ParsedReply,
    chat_usage,
    dicts,
    json_object,
    mapping,
    sse_objects,
    string,
    text_of,
)

NAME = "responses"
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def matches(path: str) -> bool:
    return path.endswith("/responses")


# --- requests ----------------------------------------------------------------------------

def read_request(body: dict[str, Any], path: str = "") -> dict[str, Any] | None:
    """The request in Chat Completions' vocabulary; None when it has no ``input``."""
    items = body.get("input")
    if not isinstance(items, str | list):
        return None
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    else:
        messages.extend(input_messages(items))
    chat = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools")}
    chat["messages"] = messages
    if isinstance(body.get("tools"), list):
        chat["tools"] = read_tools(body["tools"])
    return chat


def input_messages(items: list[Any]) -> list[dict[str, Any]]:
    """``input`` items as chat messages (see the module docstring)."""
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message being folded

    def assistant() -> dict[str, Any]:
        nonlocal turn
        if turn is None:
            turn = {"role": "assistant", "content": ""}
            out.append(turn)
        return turn

    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role == "assistant":
            msg = assistant()
            msg["content"] = string(msg["content"]) + text_of(item.get("content"))
        elif kind == "reasoning":
            summary = "".join(text_of([p]) for p in dicts(item.get("summary")))
            summary += "".join(text_of([p]) for p in dicts(item.get("content")))
            msg = assistant()
            if summary:
                msg["reasoning_content"] = msg.get("reasoning_content", "") + summary
        elif kind in _CALLS:
            assistant().setdefault("tool_calls", []).append(_chat_call(item))
        elif kind in _OUTPUTS:
            turn = None
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": string(item.get("call_id")),
                        "content": output if isinstance(output, str | list) else
                        json.dumps(output, ensure_ascii=False)})
        elif kind == "message" and isinstance(role, str):
            turn = None
            out.append({"role": role, "content": item.get("content")
                        if isinstance(item.get("content"), str | list) else ""})
        else:  # web_search_call, item_reference, compaction...: not part of the dialogue
            turn = None
    return out


def _chat_call(item: dict[str, Any]) -> dict[str, Any]:
    name = string(item.get("name")) or ("local_shell" if item.get("type") == "local_shell_call"
                                        else "")
    namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else ""
    if namespace:
        name = f"{namespace}.{name}"
    if item.get("type") == "custom_tool_call":
        arguments = string(item.get("input"))
    elif item.get("type") == "local_shell_call":
        arguments = json.dumps(item.get("action"), ensure_ascii=False)
    else:
        sent = item.get("arguments")
        arguments = sent if isinstance(sent, str) else json.dumps(sent)
    call: dict[str, Any] = {"id": string(item.get("call_id")) or string(item.get("id")), "type": "function",
            "function": {"name": name, "arguments": arguments}}
    if item.get("type") != "function_call":
        call["wire_type"] = item.get("type")
    if namespace:
        call["namespace"] = namespace
    return call


def read_tools(tools: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function":
            out.append(_chat_tool(tool, None))
        elif tool.get("type") == "namespace":
            for inner in dicts(tool.get("tools")):
                out.append(_chat_tool(inner, string(tool.get("name"))))
        else:
            out.append(tool)
    return out


def _chat_tool(tool: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    fn = {k: v for k, v in tool.items() if k not in ("type",)}
    name = string(tool.get("name"))
    fn["name"] = f"{namespace}.{name}" if namespace else name
    chat: dict[str, Any] = {"type": "function", "function": fn}
    if namespace:
        chat["namespace"] = namespace
    return chat


def write_request(chat: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(path under the base URL, body)``: the inverse of :func:`read_request` (the
    instructions go as a leading ``system`` message item; the semantics are the same)."""
    body = {k: v for k, v in chat.items() if k not in ("messages", "tools")}
    body.pop("previous_response_id", None)  # the stored history is whole
    body["input"] = output_items(chat.get("messages") or [])
    if isinstance(chat.get("tools"), list):
        body["tools"] = write_tools(chat["tools"])
    return "/responses", body


def output_items(messages: list[Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m in dicts(messages):
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": string(m.get("tool_call_id")),
                          "output": m.get("content") if isinstance(m.get("content"), str | list)
                          else ""})
        elif role == "assistant":
            if m.get("reasoning_content"):
                items.append({"type": "reasoning", "summary": [
                    {"type": "summary_text", "text": m["reasoning_content"]}]})
            text = text_of(m.get("content"))
            if text:
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": text}]})
            for call in dicts(m.get("tool_calls")):
                items.append(_wire_call(call))
        elif isinstance(role, str):
            items.append({"type": "message", "role": role, "content": m.get("content")
                          if isinstance(m.get("content"), str | list) else ""})
    return items


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    fn = mapping(call.get("function"))
    name, arguments = string(fn.get("name")), string(fn.get("arguments"))
    item: dict[str, Any] = {"type": "function_call", "call_id": string(call.get("id")),
                            "name": name, "arguments": arguments}
    if call.get("wire_type") == "custom_tool_call":
        item = {"type": "custom_tool_call", "call_id": item["call_id"], "name": name,
                "input": arguments}
    elif isinstance(call.get("namespace"), str) and call["namespace"]:
        item.update(namespace=call["namespace"], name=name.removeprefix(call["namespace"] + "."))
    return item


def write_tools(tools: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    spaces: dict[str, dict[str, Any]] = {}
    for tool in dicts(tools):
        fn = tool.get("function")
        if tool.get("type") != "function" or not isinstance(fn, dict):
            out.append(tool)
            continue
        namespace = tool.get("namespace")
        inner = dict(fn, type="function")
        if isinstance(namespace, str) and namespace:
            inner["name"] = string(fn.get("name")).removeprefix(namespace + ".")
            if namespace not in spaces:
                spaces[namespace] = {"type": "namespace", "name": namespace, "tools": []}
                out.append(spaces[namespace])
            spaces[namespace]["tools"].append(inner)
        else:
            out.append(inner)
    return out


# --- replies -----------------------------------------------------------------------------

def parse_reply(text: str, *, streamed: bool) -> ParsedReply:
    if not streamed:
        obj = json_object(text)
        if obj is None or not isinstance(obj.get("output"), list):
            return ParsedReply(status="unparseable")
        return _from_response(obj)
    return _parse_stream(text)


def _from_response(obj: dict[str, Any]) -> ParsedReply:
    """A whole ``response`` object (or the one ``response.completed`` carries)."""
    reply = ParsedReply(model=string(obj.get("model")) or None,
                        response_id=string(obj.get("id")) or None)
    content, reasoning = [], []
    for item in dicts(obj.get("output")):
        kind = item.get("type")
        if kind == "message":
            content.append("".join(text_of([p]) for p in dicts(item.get("content"))
                                   if p.get("type") in ("output_text", "text", None)))
        elif kind == "reasoning":
            reasoning.append("".join(text_of([p]) for p in dicts(item.get("summary"))))
            reasoning.append("".join(text_of([p]) for p in dicts(item.get("content"))))
        elif kind in _CALLS:
            call = _chat_call(item)
            reply.calls.append(ParsedCall(call["id"] or None, call["function"]["name"],
                                          call["function"]["arguments"],
                                          call.get("namespace")))
    reply.content, reply.reasoning = "".join(content), "".join(reasoning)
    reply.usage = _usage(obj.get("usage"))
    status = obj.get("status")
    if status == "failed":
        reply.status = "upstream-error"
    elif status == "incomplete":
        details = obj.get("incomplete_details")
        why = string(details.get("reason")) if isinstance(details, dict) else ""
        reply.finish_reason = {"max_output_tokens": "length",
                               "content_filter": "content_filter"}.get(why, why or "incomplete")
    elif status in ("completed", None):
        reply.finish_reason = "tool_calls" if reply.calls else "stop"
    else:  # in_progress, queued: not an end
        reply.status = "truncated"
    return reply


def _usage(usage: Any) -> dict[str, Any]:
    if not isinstance(usage, dict):
        return {}
    inp = usage.get("input_tokens_details")
    out = usage.get("output_tokens_details")
    return chat_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                      cached=inp.get("cached_tokens") if isinstance(inp, dict) else None,
                      reasoning=out.get("reasoning_tokens") if isinstance(out, dict) else None)


def _parse_stream(text: str) -> ParsedReply:
    """Fold the events; a terminal event's ``response`` is the whole answer, when sent."""
    items: dict[Any, dict[str, Any]] = {}  # output_index (or item id) -> item so far
    order: list[Any] = []
    model = response_id = None
    seen = False
    for _, event in sse_objects(text):
        if not isinstance(event, dict):
            continue
        seen = True
        kind = event.get("type")
        response = event.get("response") if isinstance(event.get("response"), dict) else None
        if response is not None:
            model = string(response.get("model")) or model
            response_id = string(response.get("id")) or response_id
        if kind in ("response.completed", "response.incomplete", "response.failed") \
                and response is not None:
            if not dicts(response.get("output")) and items:  # a server that sends no output
                response = dict(response, output=[items[k] for k in order])
            return _from_response(response)
        if kind == "error":
            return ParsedReply(status="upstream-error", model=model, response_id=response_id)
        key = event.get("output_index", event.get("item_id"))
        if kind in ("response.output_item.added", "response.output_item.done") \
                and isinstance(event.get("item"), dict):
            if key not in items:
                order.append(key)
            items[key] = dict(event["item"])
        elif key in items:
            _fold_delta(items[key], kind, event)
    reply = _from_response({"output": [items[k] for k in order], "status": "in_progress",
                            "model": model, "id": response_id})
    reply.status = "truncated" if seen or "data:" in text else "unparseable"
    return reply


def _fold_delta(item: dict[str, Any], kind: Any, event: dict[str, Any]) -> None:
    delta = string(event.get("delta"))
    if kind == "response.function_call_arguments.delta":
        item["arguments"] = string(item.get("arguments")) + delta
    elif kind == "response.custom_tool_call_input.delta":
        item["input"] = string(item.get("input")) + delta
    elif kind == "response.output_text.delta":
        parts = item.setdefault("content", [])
        parts.append({"type": "output_text", "text": delta})
    elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        item.setdefault("summary", []).append({"type": "summary_text", "text": delta})


def render_reply(reply: ParsedReply, *, stream: bool, created: int) -> list[dict[str, Any]]:
    """The reply as Responses sends it: one ``response`` object (``stream`` False) or its
    events in order (the caller frames each as ``event: TYPE`` / ``data: JSON``)."""
    rid = reply.response_id or "resp_0"
    output: list[dict[str, Any]] = []
    if reply.reasoning:
        output.append({"type": "reasoning", "id": f"rs_{rid}", "summary": [
            {"type": "summary_text", "text": reply.reasoning}]})
    if reply.content:
        output.append({"type": "message", "id": f"msg_{rid}", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": reply.content, "annotations": []}]})
    for n, call in enumerate(reply.calls):
        item = _wire_call({"id": call.id, "namespace": call.namespace,
                           "function": {"name": call.name, "arguments": call.arguments}})
        output.append({"id": f"fc_{rid}_{n}", **item, "status": "completed"})
    usage = reply.usage
    final = {"id": rid, "object": "response", "created_at": created, "model": reply.model,
             "status": "completed", "output": output, "usage": {
                 "input_tokens": usage.get("prompt_tokens", 0),
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": usage.get("completion_tokens", 0),
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": usage.get("total_tokens", 0)}}
    if not stream:
        return [final]
    base = dict(final, status="in_progress", output=[], usage=None)
    events: list[dict[str, Any]] = [{"type": "response.created", "response": base},
                                    {"type": "response.in_progress", "response": base}]
    for index, item in enumerate(output):
        empty = dict(item, status="in_progress")
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "function_call":
            empty["arguments"] = ""
            events += [{"type": "response.output_item.added", "output_index": index,
                        "item": empty},
                       *({"type": "response.function_call_arguments.delta", **where,
                          "delta": piece} for piece in _pieces(item["arguments"])),
                       {"type": "response.function_call_arguments.done", **where,
                        "arguments": item["arguments"]}]
        elif item["type"] == "message":
            empty["content"] = []
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            events += [{"type": "response.output_item.added", "output_index": index,
                        "item": empty},
                       {"type": "response.content_part.added", **where, "content_index": 0,
                        "part": part},
                       *({"type": "response.output_text.delta", **where, "content_index": 0,
                          "delta": piece} for piece in _pieces(text)),
                       {"type": "response.output_text.done", **where, "content_index": 0,
                        "text": text},
                       {"type": "response.content_part.done", **where, "content_index": 0,
                        "part": dict(part, text=text)}]
        else:
            text = item["summary"][0]["text"]
            empty["summary"] = []
            events += [{"type": "response.output_item.added", "output_index": index,
                        "item": empty},
                       *({"type": "response.reasoning_summary_text.delta", **where,
                          "summary_index": 0, "delta": piece} for piece in _pieces(text))]
        events.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    events.append({"type": "response.completed", "response": final})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


def _pieces(text: str, size: int = 32) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
