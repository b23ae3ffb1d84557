"""A scripted model server that speaks the four wire protocols the agent CLIs use, and keeps
every request it gets: OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and
Gemini ``generateContent``.  It stands in for a model where the simulator does not speak the
CLI's protocol, and drives every CLI through the same short session.

The session (``plan``), decided from the request alone, as the simulator does: progress is
the number of tool results the request carries.

- main conversation: a shell call, a read call (Codex has no read tool: a second shell call
  reads the file), a subagent call where the CLI offers one, then a final text;
- a subagent (its first user text holds ``SUBAGENT_MARK``): one shell call, then a text;
- anything else (no tools offered: title generators, memory extraction, quota probes, JSON
  side questions) gets a short text, or a JSON object filling the requested schema.

Each tool call's arguments are made from the tool's own JSON schema (``arguments_for``): the
command/path/prompt key the CLI names, its other required keys filled plausibly.

Standard library plus aiohttp (a dependency of agent-eval).  Not a product module: the
simulator learns these protocols later; this is the capture's upstream.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

SUBAGENT_MARK = "SUBAGENT TASK"
READ_FILE = "notes.txt"
READ_TEXT = "The capture notes: this file is read by the agent CLI's read tool.\n"
SHELL_COMMAND = "ls -la"
CHILD_COMMAND = "echo subagent shell call"
SUBAGENT_PROMPT = (f"{SUBAGENT_MARK}: list the files of the project folder with one shell "
                   "command (`echo subagent shell call`), then answer with one sentence.")
FINAL_TEXT = "Done: the shell, read and subagent calls all ran."
CHILD_TEXT = "The subagent ran its shell call."
SIDE_TEXT = "Capture session"

SHELL_TOOLS = ("bash", "Bash", "run_shell_command", "exec_command", "shell", "shell_command",
               "execute_bash")
READ_TOOLS = ("read", "Read", "read_file", "read_many_files")
SUBAGENT_TOOLS = ("task", "Task", "Agent", "agent", "spawn_agent", "invoke_agent",
                  "delegate_to_agent")


@dataclass
class Captured:
    """One request as the upstream received it."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    protocol: str
    reply: bytes = b""
    answer: dict[str, Any] | None = None  # the step answered: {"call": {...}} or {"text": ...}


@dataclass
class Conversation:
    """What ``plan`` needs to know of a request, whatever its protocol."""

    tools: dict[str, dict[str, Any]]  # name -> JSON schema of its arguments
    first_user_text: str
    tool_results: int
    wants_json: dict[str, Any] | None = None  # a response schema (Gemini side questions)
    namespaces: dict[str, str] = field(default_factory=dict)  # Responses: tool -> namespace
    last_output: str = ""  # the text of the last tool result (Codex: the spawned agent's id)


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None  # Responses API: the namespace tool that holds ``name``


@dataclass
class Step:
    text: str | None = None
    call: Call | None = None


# --- what to say -------------------------------------------------------------------------

def plan(conv: Conversation, cwd: str) -> Step:
    if conv.wants_json is not None:
        return Step(text=json.dumps(fill_schema(conv.wants_json)))
    shell = _offered(conv.tools, SHELL_TOOLS)
    if shell is None:
        return Step(text=SIDE_TEXT)
    if SUBAGENT_MARK in conv.first_user_text:
        steps = [Call(shell, arguments_for(shell, conv.tools[shell], "shell", CHILD_COMMAND, cwd))]
    else:
        steps = [Call(shell, arguments_for(shell, conv.tools[shell], "shell", SHELL_COMMAND, cwd))]
        read = _offered(conv.tools, READ_TOOLS)
        if read is not None:
            steps.append(Call(read, arguments_for(read, conv.tools[read], "read",
                                                  f"{cwd}/{READ_FILE}", cwd)))
        else:
            steps.append(Call(shell, arguments_for(shell, conv.tools[shell], "shell",
                                                   f"cat {READ_FILE}", cwd)))
        sub = _offered(conv.tools, SUBAGENT_TOOLS)
        if sub is not None:
            steps.append(Call(sub, arguments_for(sub, conv.tools[sub], "subagent",
                                                 SUBAGENT_PROMPT, cwd),
                              conv.namespaces.get(sub)))
            if sub == "spawn_agent" and "wait_agent" in conv.tools:
                # Codex's spawn returns at once; waiting keeps ``codex exec`` alive until the
                # child has finished (and written its rollout)
                agent = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", conv.last_output)
                steps.append(Call("wait_agent", {"targets": [agent.group(0) if agent else ""],
                                                 "timeout_ms": 30000},
                                  conv.namespaces.get("wait_agent")))
    if conv.tool_results < len(steps):
        return Step(call=steps[conv.tool_results])
    child = SUBAGENT_MARK in conv.first_user_text
    if child and "complete_task" in conv.tools and conv.tool_results == len(steps):
        # Gemini CLI's subagents end by calling complete_task, never with a bare text
        return Step(call=Call("complete_task", {"result": {"response": CHILD_TEXT}}))
    return Step(text=CHILD_TEXT if child else FINAL_TEXT)


def _offered(tools: dict[str, Any], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in tools), None)


def arguments_for(name: str, schema: dict[str, Any], kind: str, value: str,
                  cwd: str) -> dict[str, Any]:
    """Arguments for ``name`` from its schema: ``value`` under the key that takes it (the
    command, the path, the prompt), every other required key filled."""
    props = schema.get("properties") or {}
    keys = {"shell": ("command", "cmd"),
            "read": ("filePath", "file_path", "absolute_path", "path"),
            "subagent": ("prompt", "message", "task", "objective", "query")}[kind]
    key = next((k for k in keys if k in props), None)
    args: dict[str, Any] = {}
    if key is not None:
        if (props[key].get("type") == "array"):
            args[key] = ["bash", "-lc", value]
        else:
            args[key] = value
    for req in schema.get("required") or []:
        if req in args:
            continue
        args[req] = _plausible(req, props.get(req) or {}, kind, cwd)
    return args


def _plausible(key: str, prop: dict[str, Any], kind: str, cwd: str) -> Any:
    if "enum" in prop:
        return prop["enum"][0]
    lowered = key.lower()
    if lowered in ("description", "title"):
        return {"shell": "List the project folder", "read": "Read the notes",
                "subagent": "Count project files"}[kind]
    if lowered == "agent_name":  # Gemini CLI names its subagents in the system prompt
        return "generalist"
    if "type" in lowered or lowered in ("agent", "name"):
        return "general" if kind == "subagent" else "default"
    if "dir" in lowered or "path" in lowered:
        return cwd
    return fill_schema(prop)


def fill_schema(schema: dict[str, Any]) -> Any:
    """A small value that satisfies ``schema`` (first enum value, required keys)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if isinstance(kind, str):
        kind = kind.lower()
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: fill_schema(props.get(k) or {}) for k in required}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "user" if "speaker" in json.dumps(schema) else "ok"


# --- reading requests --------------------------------------------------------------------

def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(p.get("text") if isinstance(p, dict) else p) for p in content
                         if not isinstance(p, dict) or "text" in p)
    return ""


def read_chat(body: dict[str, Any]) -> Conversation:
    tools = {t["function"]["name"]: t["function"].get("parameters") or {}
             for t in body.get("tools") or [] if t.get("type") == "function"}
    messages = body.get("messages") or []
    users = [m for m in messages if m.get("role") == "user"]
    return Conversation(tools, "\n".join(_text_of(m.get("content")) for m in users[:3]),
                        sum(1 for m in messages if m.get("role") == "tool"))


def read_responses(body: dict[str, Any]) -> Conversation:
    tools, namespaces = {}, {}
    for t in body.get("tools") or []:
        if t.get("type") == "function":
            tools[t["name"]] = t.get("parameters") or {}
        elif t.get("type") == "namespace":  # Codex: a group of functions under one name
            for inner in t.get("tools") or []:
                tools[inner["name"]] = inner.get("parameters") or {}
                namespaces[inner["name"]] = t["name"]
        elif t.get("type") in ("custom", "local_shell") and "name" in t:
            tools[t["name"]] = {}
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    users = [i for i in items if i.get("role") == "user"]
    outputs = [i.get("output") for i in items if str(i.get("type", "")).endswith("_output")]
    return Conversation(tools, "\n".join(_text_of(i.get("content")) for i in users),
                        len(outputs), namespaces=namespaces,
                        last_output=json.dumps(outputs[-1]) if outputs else "")


def read_messages(body: dict[str, Any]) -> Conversation:
    tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or []
             if "name" in t}
    messages = body.get("messages") or []
    results = 0
    users = []
    for m in messages:
        content = m.get("content")
        if m.get("role") != "user":
            continue
        if isinstance(content, list):
            results += sum(1 for b in content if isinstance(b, dict)
                           and b.get("type") == "tool_result")
        users.append(_text_of(content))
    return Conversation(tools, "\n".join(users[:3]), results)


def read_gemini(body: dict[str, Any]) -> Conversation:
    tools = {}
    for group in body.get("tools") or []:
        for decl in group.get("functionDeclarations") or []:
            tools[decl["name"]] = (decl.get("parametersJsonSchema") or decl.get("parameters")
                                   or {})
    contents = body.get("contents") or []
    results = sum(1 for c in contents for p in c.get("parts") or [] if "functionResponse" in p)
    users = [_text_of(c.get("parts")) for c in contents if c.get("role") == "user"]
    config = body.get("generationConfig") or {}
    schema = None
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    return Conversation(tools, "\n".join(users[:3]), results, schema)


# --- writing replies ---------------------------------------------------------------------

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids):08d}capture"


def _sse(events: list[dict[str, Any]], *, named: bool) -> bytes:
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def reply_chat(body: dict[str, Any], step: Step) -> tuple[bytes, str]:
    cid, model, created = _id("chatcmpl-"), body.get("model", "capture"), int(time.time())
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    calls = []
    if step.call:
        calls = [{"index": 0, "id": _id("call_"), "type": "function",
                  "function": {"name": step.call.name,
                               "arguments": json.dumps(step.call.arguments)}}]
    finish = "tool_calls" if calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        return json.dumps({"id": cid, "object": "chat.completion", "created": created,
                           "model": model, "choices": [{"index": 0, "message": message,
                                                        "finish_reason": finish}],
                           "usage": usage}).encode(), "application/json"

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    chunks = [chunk({"role": "assistant", "content": ""})]
    if step.text:
        chunks.append(chunk({"content": step.text}))
    for c in calls:
        args = c["function"]["arguments"]
        chunks.append(chunk({"tool_calls": [{**c, "function": {"name": c["function"]["name"],
                                                                "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}))
    chunks.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({"id": cid, "object": "chat.completion.chunk", "created": created,
                       "model": model, "choices": [], "usage": usage})
    return _sse(chunks, named=False) + b"data: [DONE]\n\n", "text/event-stream"


def reply_responses(body: dict[str, Any], step: Step) -> tuple[bytes, str]:
    rid, model = _id("resp_"), body.get("model", "capture")
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": base},
                                    {"type": "response.in_progress", "response": base}]
    if step.call:
        item = {"type": "function_call", "id": _id("fc_"), "call_id": _id("call_"),
                "name": step.call.name, "arguments": "", "status": "in_progress"}
        if step.call.namespace:
            item["namespace"] = step.call.namespace
        args = json.dumps(step.call.arguments)
        done = {**item, "arguments": args, "status": "completed"}
        events += [{"type": "response.output_item.added", "output_index": 0, "item": item},
                   {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                    "output_index": 0, "delta": args},
                   {"type": "response.function_call_arguments.done", "item_id": item["id"],
                    "output_index": 0, "arguments": args},
                   {"type": "response.output_item.done", "output_index": 0, "item": done}]
    else:
        mid, text = _id("msg_"), step.text or ""
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress",
                "content": []}
        done = {**item, "status": "completed", "content": [{**part, "text": text}]}
        where = {"item_id": mid, "output_index": 0, "content_index": 0}
        events += [{"type": "response.output_item.added", "output_index": 0, "item": item},
                   {"type": "response.content_part.added", **where, "part": part},
                   {"type": "response.output_text.delta", **where, "delta": text},
                   {"type": "response.output_text.done", **where, "text": text},
                   {"type": "response.content_part.done", **where,
                    "part": {**part, "text": text}},
                   {"type": "response.output_item.done", "output_index": 0, "item": done}]
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 120}
    events.append({"type": "response.completed",
                   "response": {**base, "status": "completed", "output": [done], "usage": usage}})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return _sse(events, named=True), "text/event-stream"


def reply_messages(body: dict[str, Any], step: Step) -> tuple[bytes, str]:
    mid, model = _id("msg_"), body.get("model", "capture")
    blocks: list[dict[str, Any]] = []
    if step.text:
        blocks.append({"type": "text", "text": step.text})
    if step.call:
        blocks.append({"type": "tool_use", "id": _id("toolu_"), "name": step.call.name,
                       "input": step.call.arguments})
    stop = "tool_use" if step.call else "end_turn"
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    if not body.get("stream"):
        return json.dumps({"id": mid, "type": "message", "role": "assistant", "model": model,
                           "content": blocks, "stop_reason": stop, "stop_sequence": None,
                           "usage": usage}).encode(), "application/json"
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]}}]
        else:
            events += [{"type": "content_block_start", "index": i,
                        "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}}]
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20}},
               {"type": "message_stop"}]
    return _sse(events, named=True), "text/event-stream"


def reply_gemini(body: dict[str, Any], step: Step, *, stream: bool) -> tuple[bytes, str]:
    parts: list[dict[str, Any]] = []
    if step.text:
        parts.append({"text": step.text})
    if step.call:
        parts.append({"functionCall": {"name": step.call.name, "args": step.call.arguments}})
    answer = {"candidates": [{"content": {"role": "model", "parts": parts},
                              "finishReason": "STOP", "index": 0}],
              "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20,
                                "totalTokenCount": 120},
              "modelVersion": "capture", "responseId": _id("gemini-")}
    if not stream:
        return json.dumps(answer).encode(), "application/json"
    return f"data: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream"


# --- the server --------------------------------------------------------------------------

def route_of(path: str) -> tuple[str, Any, Any] | None:
    """(protocol, request reader, reply writer) for a POST path; the reader is None for
    the token-count endpoints, whose writer takes the body."""
    if path.endswith("/chat/completions"):
        return "chat", read_chat, reply_chat
    if path.endswith("/responses"):
        return "responses", read_responses, reply_responses
    if path.endswith("/messages/count_tokens"):
        return "messages", None, lambda body: json.dumps({"input_tokens": 100}).encode()
    if path.endswith("/messages"):
        return "messages", read_messages, reply_messages
    if path.endswith(":countTokens"):
        return "gemini", None, lambda body: json.dumps({"totalTokens": 100}).encode()
    if path.endswith((":streamGenerateContent", ":generateContent")):
        return "gemini", read_gemini, reply_gemini
    return None


@dataclass
class CaptureUpstream:
    """The server's state: every request, in arrival order."""

    cwd: str
    captured: list[Captured] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        path = request.path
        captured = Captured(request.method, path, request.query_string,
                            list(request.headers.items()), raw, "other")
        self.captured.append(captured)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if request.method == "GET":
            if path.endswith("/models"):
                return web.json_response({"object": "list", "data": [
                    {"id": "capture", "object": "model", "created": 0, "owned_by": "capture"}]})
            return web.json_response({"error": {"message": f"no {path} here"}}, status=404)
        route = route_of(path)
        if route is None:
            return web.json_response({"error": {"message": f"no {path} here"}}, status=404)
        captured.protocol, read, write = route
        if read is None:  # a token count
            payload, kind = write(body), "application/json"
        else:
            step = plan(read(body), self.cwd)
            captured.answer = ({"call": {"name": step.call.name, "arguments": step.call.arguments,
                                         "namespace": step.call.namespace}}
                               if step.call else {"text": step.text})
            if captured.protocol == "gemini":
                payload, kind = write(body, step, stream="stream" in path)
            else:
                payload, kind = write(body, step)
        captured.reply = payload
        return web.Response(body=payload, headers={"Content-Type": kind})


@contextmanager
def serve_capture(cwd: str) -> Iterator[tuple[int, CaptureUpstream]]:
    """Run a ``CaptureUpstream`` on a free loopback port in a thread: ``(port, upstream)``."""
    upstream = CaptureUpstream(cwd)
    with serve_handler(upstream.handle, 256 * 1024 * 1024, "capture-upstream") as port:
        yield port, upstream


@contextmanager
def serve_handler(handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
                  max_size: int, name: str) -> Iterator[int]:
    """Serve every path with ``handle`` on a free loopback port, in a thread of its own:
    the port; stopped on leaving."""
    app = web.Application(client_max_size=max_size)
    app.router.add_route("*", "/{tail:.*}", handle)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, sock).start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()
    started.wait(10)
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
