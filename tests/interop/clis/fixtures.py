"""Write one capture (``capture.Capture``) as a fixture folder of tests/fixtures/clis/:

    README.md        the CLI, version, licence, command line, date, what happened
    exchanges/NN.request.json   each request body exactly as the CLI sent it
    exchanges/NN.response.sse|json  each reply body exactly as the CLI received it
    exchanges/NN.meta.json      method, target, request headers, status, reply headers,
                                the role of the request, the calls the reply carried,
                                whether the proxy relayed both bodies byte for byte
    tools.json       every tool set the CLI offered: names and argument schemas
    events.jsonl     the CLI's own JSON event stream (stdout)
    sessions/        the session files the CLI wrote, paths relative to its HOME

Claude Code is not open source: its system prompt, tool descriptions and reminder texts
are replaced by ``[Claude Code text: N chars, sha256 …]`` (``redact_prose``) in its
bodies and files, which keeps every structure (blocks, keys, schemas, ids) and records
the original body's hash and length in the meta.  The other CLIs' files are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from .capture import PROMPT, Capture
from .catalog import CLIS_DIR
from .upstream import CHILD_TEXT, FINAL_TEXT, READ_TEXT, SUBAGENT_MARK, route_of
from .wire import Message

SESSION_FILES = {  # per CLI: globs under its HOME
    "opencode": [".local/share/opencode/opencode.db"],
    "qwen-code": [".qwen/projects/**/*.jsonl", ".qwen/projects/**/*.meta.json"],
    "codex": [".codex/sessions/**/*.jsonl"],
    "claude-code": [".claude/projects/**/*.jsonl", ".claude/projects/**/*.meta.json"],
    "gemini-cli": [".gemini/tmp/**/chats/**/*.json*"],
}
REDACTED = {"claude-code"}
OURS = (SUBAGENT_MARK, PROMPT, FINAL_TEXT, CHILD_TEXT, READ_TEXT.strip())


def redact_prose(value: Any) -> Any:
    """Every string of Claude Code's own prose (system prompt, descriptions, reminders,
    notifications) replaced by its length and hash, whatever its key; keys, ids, schemas,
    short labels, our prompts, the model's arguments and the tools' outputs kept."""
    if isinstance(value, dict):
        return {k: redact_prose(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_prose(v) for v in value]
    if isinstance(value, str) and _is_prose(value):
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        return f"[Claude Code text: {len(value)} chars, sha256 {digest}]"
    return value


def _is_prose(text: str) -> bool:
    if "<system-reminder>" in text:
        return True
    if text in OURS or len(text) <= 80 or " " not in text:
        return False
    if text.lstrip().startswith("{"):
        try:
            json.loads(text)  # a tool call's arguments, a JSON field
            return False
        except ValueError:
            pass
    ours_inside = READ_TEXT.strip() in text or ("drwx" in text and "notes.txt" in text)
    return not (ours_inside and len(text) < 2000)


def _redact_bytes(body: bytes) -> bytes:
    try:
        data = json.loads(body)
    except ValueError:
        return body
    return json.dumps(redact_prose(data), ensure_ascii=False, indent=1).encode()


def _redact_sse(body: bytes) -> bytes:
    lines = []
    for line in body.decode(errors="replace").split("\n"):
        if line.startswith("data: ") and line[6:].startswith("{"):
            line = "data: " + json.dumps(redact_prose(json.loads(line[6:])))
        lines.append(line)
    return "\n".join(lines).encode()


def system_text(body: dict[str, Any]) -> str:
    """The system prompt of a request in any of the four protocols."""
    if isinstance(body.get("messages"), list) and body["messages"] and "system" not in body:
        first = body["messages"][0]
        if first.get("role") in ("system", "developer"):
            return _text(first.get("content"))
    if "system" in body:
        return _text(body["system"])
    if "instructions" in body:
        return _text(body["instructions"])
    if isinstance(body.get("input"), list):
        for item in body["input"]:
            if item.get("role") in ("system", "developer"):
                return _text(item.get("content"))
    if "systemInstruction" in body:
        return _text((body["systemInstruction"] or {}).get("parts"))
    return ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(p.get("text", "")) if isinstance(p, dict) else str(p)
                         for p in content)
    return ""


def tool_schemas(body: dict[str, Any]) -> dict[str, Any]:
    """name -> argument schema of every tool a request offers (any protocol)."""
    out: dict[str, Any] = {}
    for tool in body.get("tools") or []:
        if "function" in tool:
            out[tool["function"]["name"]] = tool["function"].get("parameters")
        elif "functionDeclarations" in tool:
            for decl in tool["functionDeclarations"]:
                out[decl["name"]] = decl.get("parametersJsonSchema") or decl.get("parameters")
        elif tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                out[f"{tool['name']}.{inner['name']}"] = inner.get("parameters")
        elif "input_schema" in tool:
            out[tool["name"]] = tool["input_schema"]
        elif "name" in tool:
            out[tool["name"]] = tool.get("parameters") or {"type": tool.get("type")}
        else:
            out[str(tool.get("type"))] = {"type": tool.get("type")}
    return out


def _strip_descriptions(schema: Any) -> Any:
    """The schema without its prose (a property *named* description is kept)."""
    if isinstance(schema, dict):
        return {k: _strip_descriptions(v) for k, v in schema.items()
                if not (k == "description" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_descriptions(v) for v in schema]
    return schema


SESSION_HEADERS = ("x-session-id", "x-session-affinity", "x-parent-session-id",
                   "x-claude-code-session-id", "session-id", "thread-id",
                   "x-codex-parent-thread-id", "x-openai-subagent", "x-codex-window-id",
                   "x-client-request-id", "x-opencode-session", "x-agent-eval-session")


def _role(target: str, body: dict[str, Any], system: str, main_system: str) -> str:
    """``main``, ``subagent`` (its first user messages hold the subagent prompt and not the
    main prompt) or ``side: <the start of its system prompt>``."""
    route = route_of(target.split("?", 1)[0])
    users = route[1](body).first_user_text if route and route[1] else ""
    if SUBAGENT_MARK in users and PROMPT not in users:
        return "subagent"
    if system == main_system:
        return "main"
    return "side: " + " ".join(system.split())[:90]


def write_fixtures(run: Capture, out: Path) -> dict[str, Any]:
    """(Re)write ``out`` from ``run``; return the summary the README is made of."""
    name = run.cli.name
    redact = name in REDACTED
    shutil.rmtree(out, ignore_errors=True)
    (out / "exchanges").mkdir(parents=True)
    pairs = run.relayed()
    identical = bool(pairs) and all(
        twin is not None and mine.response is not None and twin.response is not None
        and mine.response.body == twin.response.body for mine, twin in pairs)
    answers = list(run.upstream.captured) if run.upstream is not None else []
    rows, tool_sets = [], {}
    main_system = None
    for n, (mine, twin) in enumerate(pairs):
        req, resp = mine.request, mine.response
        body = _json(req)
        system = system_text(body) if isinstance(body, dict) else ""
        if main_system is None and isinstance(body, dict) and body.get("tools"):
            main_system = system
        role = (_role(req.target, body, system, main_system or "")
                if isinstance(body, dict) else "other")
        tools = tool_schemas(body) if isinstance(body, dict) else {}
        key = json.dumps(sorted(tools))
        tool_sets.setdefault(key, {"first_exchange": n, "roles": set(), "tools": {
            k: _strip_descriptions(v) for k, v in tools.items()}})["roles"].add(role)
        kind = "sse" if resp and "event-stream" in (resp.header("content-type") or "") else "json"
        req_bytes = _redact_bytes(req.body) if redact else req.body
        (out / "exchanges" / f"{n:02d}.request.json").write_bytes(req_bytes)
        if resp is not None:
            resp_bytes = (_redact_sse(resp.body) if kind == "sse" else _redact_bytes(resp.body)) \
                if redact else resp.body
            (out / "exchanges" / f"{n:02d}.response.{kind}").write_bytes(resp_bytes)
        session = {k: v for k, v in req.headers if k.lower() in SESSION_HEADERS}
        meta = {
            "method": req.method, "target": req.target, "role": role,
            "request_headers": req.headers,
            "status": resp.status if resp else None,
            "response_headers": resp.headers if resp else None,
            "session_headers": session, "tools_offered": sorted(tools),
            "relayed_identically": {
                "request": twin is not None,
                "response": bool(twin and resp and twin.response
                                 and resp.body == twin.response.body)},
            "request_sha256": hashlib.sha256(req.body).hexdigest(),
            "request_bytes": len(req.body),
            "redacted": redact,
        }
        answered = next((a for a in answers if a.body == req.body), None)
        if answered is not None:
            answers.remove(answered)
            meta["reply"] = answered.answer
        (out / "exchanges" / f"{n:02d}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        rows.append({"n": n, "target": f"{req.method} {req.target}", "role": role,
                     "session": session, "tools": len(tools),
                     "reply": meta.get("reply"), "bytes": len(req.body)})
    tools_json = [{"first_exchange": v["first_exchange"], "roles": sorted(v["roles"]),
                   "tools": v["tools"]} for v in tool_sets.values()]
    (out / "tools.json").write_text(json.dumps(tools_json, indent=1) + "\n")
    events = run.outcome.stdout
    if redact:
        events = "\n".join(json.dumps(redact_prose(json.loads(line))) if line.startswith("{")
                           else line for line in events.splitlines()) + "\n"
    (out / "events.jsonl").write_text(events)
    files = _copy_sessions(run, out / "sessions", redact)
    summary = {"rows": rows, "identical": identical, "exchanges": len(pairs),
               "upstream_exchanges": len(run.upstream_exchanges()), "files": files,
               "exit": run.outcome.returncode,
               "proxy": _proxy_line(run)}
    _copy_licence(run, out)
    (out / "README.md").write_text(readme(run, summary))
    return summary


def _json(message: Message) -> Any:
    try:
        return json.loads(message.decoded_body())
    except ValueError:
        return None


def _proxy_line(run: Capture) -> str:
    lines = [ln for ln in run.proxy_said.splitlines() if ln.startswith("run ")]
    return lines[-1] if lines else "(the proxy printed no exit line)"


def _copy_sessions(run: Capture, dest: Path, redact: bool) -> list[str]:
    copied = []
    for pattern in SESSION_FILES[run.cli.name]:
        for path in sorted(run.home.glob(pattern)):
            rel = path.relative_to(run.home)
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".db":
                _copy_sqlite(path, target)
            elif redact and path.suffix == ".jsonl":
                target.write_text("".join(
                    json.dumps(redact_prose(json.loads(line)), ensure_ascii=False) + "\n"
                    for line in path.read_text().splitlines() if line.strip()))
            else:
                shutil.copyfile(path, target)
            copied.append(str(rel))
    return copied


def _copy_sqlite(source: Path, target: Path) -> None:
    """One self-contained file (the WAL folded in), compacted."""
    with sqlite3.connect(source) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with sqlite3.connect(source) as db:
        db.execute("VACUUM INTO ?", (str(target),))


def _copy_licence(run: Capture, out: Path) -> None:
    folder = CLIS_DIR / run.cli.pin.folder / "node_modules" / run.cli.pin.package
    licence = folder / "LICENSE"
    if licence.is_file() and run.cli.name not in REDACTED:
        shutil.copyfile(licence, out / "LICENSE")


def readme(run: Capture, summary: dict[str, Any]) -> str:
    cli, inv = run.cli, run.invocation
    env = " ".join(f"{k}={v}" for k, v in sorted(inv.env.items()) if k != "PATH")
    argv = " ".join(json.dumps(a) if " " in a else a for a in inv.argv)
    lines = [
        f"# {cli.name} {cli.pin.version}: one captured session",
        "",
        f"- CLI: npm `{cli.pin.package}@{cli.pin.version}`, licence: {cli.licence}"
        + (" (its text is redacted from these files: see below)" if cli.name in REDACTED
           else " (LICENSE beside this file, where the package ships one)"),
        f"- protocol: {cli.protocol}; date: {run.started}; captured by "
        "`tests/interop/clis/capture.py` (see ../README.md) in front of "
        + ("`agent-eval sim-server`" if run.upstream_kind == "sim"
           else "the scripted upstream `tests/interop/clis/upstream.py`"),
        f"- command line (inside the sandbox, cwd /home/agent/project, HOME /home/agent): "
        f"`{argv}`",
        f"- environment (besides HOME, USER, PATH, LANG, TERM, TMPDIR): `{env}`",
        f"- exit status {summary['exit']}; {summary['exchanges']} exchanges sent, "
        f"{summary['upstream_exchanges']} reached the upstream; every body relayed byte for "
        f"byte by `agent-eval proxy`: **{'yes' if summary['identical'] else 'NO'}**",
        f"- the proxy's exit line: `{summary['proxy']}`",
        "",
        "| # | request | role | tools | session headers | the upstream answered |",
        "|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        session = ", ".join(f"`{k}`" for k in row["session"]) or "none"
        lines.append(f"| {row['n']:02d} | `{row['target']}` | {row['role']} | {row['tools']} "
                     f"| {session} | {_answer(row['reply'])} |")
    lines += ["", "Session files (`sessions/`, relative to the CLI's HOME):", ""]
    lines += [f"- `{f}`" for f in summary["files"]] or ["- none"]
    if cli.name in REDACTED:
        lines += ["", "Claude Code is proprietary (© Anthropic PBC, all rights reserved), so "
                  "every prose string of its own (system prompt, tool and parameter "
                  "descriptions, reminders) is replaced by its length and a hash, in the "
                  "bodies, the event stream and the session files; structure, keys, ids, "
                  "schemas, commands and our prompts are unchanged. `NN.meta.json` keeps the "
                  "original body's length and SHA-256."]
    return "\n".join(lines) + "\n"


def _answer(reply: Any) -> str:
    if not reply:
        return ""
    if reply.get("call"):
        call = reply["call"]
        args = json.dumps(call["arguments"])
        return f"call `{call['name']}` `{args[:70]}{'…' if len(args) > 70 else ''}`"
    return f"text `{(reply.get('text') or '')[:40]}`"
