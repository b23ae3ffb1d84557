"""Judge a call's arguments against the JSON schema its client offered for the tool; pure.

A client (an agent CLI, a framework) offers its tools with their argument schemas: the
proxy sees them in each request's ``tools``, an import in the logged requests, the
telemetry path in the GenAI conventions' ``gen_ai.tool.definitions``.  Whether or not the
allow-list lists a tool, a call that breaks its own tool's schema would be refused by the
tool itself (Claude Code validates input against the tool's schema, an MCP server its
``inputSchema``): :func:`schema_problems` names each break as a ``schema-mismatch``
(AE108), the model's error.  A schema that is itself broken (its root not an object
schema, a ``$ref`` that does not resolve inside it) is the client's fault: the call is
not checked against it, :func:`broken_schema` says why, and the session records it as a
``broken-tool-schema`` stack fault (AE512), never the model's.

What is checked, the JSON Schema keywords every emitter uses for tool arguments:
``type`` (a name or a list; Gemini's upper-case names read alike; ``integer`` is a whole
number, a boolean is never a number), ``required``, ``properties``,
``additionalProperties: false`` (and a schema for the extra keys), ``enum``, ``const``,
``items``, ``anyOf`` / ``oneOf`` (one branch must hold), ``allOf`` and local ``$ref``
(``#/$defs/...``, ``#/definitions/...``).  Other keywords (formats, lengths, patterns)
are not judged: fewer findings, never an allow the engine would not give.  At most
:data:`MAX_PROBLEMS` breaks are listed per call and the walk stops at :data:`MAX_DEPTH`.

MCP tools are named by the clients ``mcp__SERVER__TOOL`` (Claude Code, Codex) or
``SERVER__TOOL`` (Gemini CLI, for a name two servers share; Codex before it prefixed
``mcp__``): :func:`mcp_server` reads the server back for per-server reports.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

MAX_PROBLEMS = 8
"""Breaks listed per call (the call is refused at the first)."""

MAX_DEPTH = 32
"""Deepest schema nesting walked (a ``$ref`` cycle ends here, as a broken schema)."""

_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def offered_schemas(tools: Any) -> dict[str, Any]:
    """Each offered tool's name and argument schema, in the order offered, from a request's
    ``tools`` in any of the shapes clients send: Chat Completions
    ``{type: function, function: {name, parameters}}``, the Responses API's and the GenAI
    conventions' flat ``{name, parameters}``, Anthropic's ``{name, input_schema}``, MCP's
    ``{name, inputSchema}``.  A tool offered with no schema maps to None (nothing to
    check); entries without a name are skipped."""
    out: dict[str, Any] = {}
    if not isinstance(tools, list):
        return out
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        inner = tool.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else tool
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = next((fn[k] for k in ("parameters", "input_schema", "inputSchema",
                                       "parametersJsonSchema") if k in fn), None)
        out[name] = schema
    return out


def canonical(value: Any) -> str:
    """A schema (or tool list) as canonical JSON text: keys sorted, so the same schema
    reads alike whoever sent it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def tools_hash(tools: Mapping[str, Any]) -> str:
    """The SHA-256 of an offered tool list (names and schemas, keys sorted): the same list
    hashes alike in every session, so a drift between sessions shows as a new hash."""
    text = canonical(dict(tools))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def mcp_server(tool: str) -> str | None:
    """The MCP server a tool name names (module docstring), else None."""
    if not isinstance(tool, str):
        return None
    name = tool.removeprefix("mcp__")
    server, sep, rest = name.partition("__")
    if not sep or not server or not rest or (name == tool and not server.isidentifier()):
        return None
    return server


def broken_schema(schema: Any) -> str | None:
    """Why an offered schema cannot be a tool's argument schema, or None when it can be
    (None too for no schema at all: a tool offered without one)."""
    if schema is None:
        return None
    if not isinstance(schema, dict):
        return f"its schema is a JSON {_json_type(schema)}, not an object schema"
    kind = schema.get("type")
    if kind is not None and _names(kind) != ["object"]:
        return f"its schema's root has type {json.dumps(kind)}, not \"object\""
    for ref in _refs(schema, 0):
        if _resolve(schema, ref) is None:
            return f"its schema's $ref {ref!r} does not resolve inside the schema"
    return None


def schema_problems(schema: Any, arguments: Any) -> list[str]:
    """Each way ``arguments`` (the decoded call) breaks ``schema``; [] when it holds, or
    when the schema is absent or broken (:func:`broken_schema` reports that)."""
    if schema is None or broken_schema(schema) is not None or not isinstance(arguments, dict):
        return []
    out: list[str] = []
    _check(schema, schema, arguments, "", out, 0)
    return out[:MAX_PROBLEMS]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _names(kind: Any) -> list[str]:
    kinds = kind if isinstance(kind, list) else [kind]
    return [k.lower() for k in kinds if isinstance(k, str)]


def _refs(node: Any, depth: int) -> Iterable[str]:
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                yield from _refs(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value, depth + 1)


def _resolve(root: dict[str, Any], ref: str) -> Any:
    """The node a local ``$ref`` points at (JSON pointer), None when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None  # a remote reference: nothing the client sent holds it
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _where(path: str) -> str:
    return path or "the arguments"


def _check(root: dict[str, Any], schema: Any, value: Any, path: str, out: list[str],
           depth: int) -> None:
    if len(out) >= MAX_PROBLEMS or depth > MAX_DEPTH or not isinstance(schema, dict):
        return
    if isinstance(schema.get("$ref"), str):
        _check(root, _resolve(root, schema["$ref"]), value, path, out, depth + 1)
    kinds = _names(schema.get("type"))
    actual = _json_type(value)
    if kinds and actual not in kinds and not (actual == "integer" and "number" in kinds):
        out.append(f"{_where(path)}: a {actual}, the schema wants {' or '.join(kinds)}")
        return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        shown = ", ".join(json.dumps(v) for v in schema["enum"][:8])
        out.append(f"{_where(path)}: {json.dumps(value)[:60]} is not one of {shown}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{_where(path)}: must be {json.dumps(schema['const'])[:60]}")
    for sub in schema.get("allOf") or ():
        _check(root, sub, value, path, out, depth + 1)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches and not any(
                not _broken_by(root, b, value, path, depth) for b in branches):
            out.append(f"{_where(path)}: fits none of the {len(branches)} forms of {key}")
    if isinstance(value, dict):
        _object(root, schema, value, path, out, depth)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(root, schema["items"], item, f"{path}[{i}]", out, depth + 1)


def _broken_by(root: dict[str, Any], schema: Any, value: Any, path: str, depth: int) -> bool:
    found: list[str] = []
    _check(root, schema, value, path, found, depth + 1)
    return bool(found)


def _object(root: dict[str, Any], schema: dict[str, Any], value: dict[str, Any], path: str,
            out: list[str], depth: int) -> None:
    declared, listed = schema.get("properties"), schema.get("required")
    properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
    required: list[Any] = listed if isinstance(listed, list) else []
    for key in required:
        if isinstance(key, str) and key not in value:
            out.append(f"{path + '.' if path else ''}{key}: required, absent")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key in properties:
            _check(root, properties[key], item, where, out, depth + 1)
        elif extra is False:
            out.append(f"{where}: not a key of the schema (additionalProperties is false)")
        elif isinstance(extra, dict):
            _check(root, extra, item, where, out, depth + 1)


def tool_drift(lists: list[tuple[str, dict[str, Any], int]]) -> dict[str, int]:
    """Tool name -> how many different schemas the lists offered it with, for the tools
    offered with more than one (added or dropped tools are not counted here)."""
    seen: dict[str, set[str]] = {}
    for _h, tools, _n in lists:
        for name, schema in tools.items():
            seen.setdefault(name, set()).add(canonical(schema))
    return {name: len(v) for name, v in sorted(seen.items()) if len(v) > 1}
