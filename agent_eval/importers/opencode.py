"""Read OpenCode sessions in every shape OpenCode writes them.

PATH may be:

* an ``opencode export <id>`` JSON file (``{"info": ..., "messages": [{"info", "parts"}]}``);
* the SQLite ``opencode.db`` of versions 1.2 and later (tables ``session``, ``message``,
  ``part``, each row's JSON in ``data``), or a JSON dump of those rows
  (``{"session": [...], "message": [...], "part": [...]}``);
* the JSON-file storage of versions up to 1.1: a ``storage`` folder (or its parent)
  holding ``session/<project>/<id>.json``, ``message/<session>/<id>.json`` and
  ``part/<message>/<id>.json``;  a folder holding ``opencode.db`` reads the database;
* an ``opencode run --format json`` stream (JSONL of ``tool_use`` / ``text`` events).

Every ``tool`` part is one call.  ``bash`` and ``read`` (``command``, ``filePath``) are
judged as our bash and read tools.  OpenCode's own verdict is kept beside ours: a
``completed`` part ran (``allow``); an ``error`` part whose error is a permission rule or
a rejection (``The user has specified a rule which prevents ...``, ``The user rejected
permission ...``) or invalid arguments is ``deny``; any other error (the tool threw inside
OpenCode: a crash, an abort, a missing file) records no verdict (``None``, the error kept
as the reason), because nothing in the part proves OpenCode let the call run.  OpenCode's ``invalid`` tool wraps a hallucinated tool name: the call
is recorded under the name the model used (``execute_command``), source verdict ``deny``.

Subagents: a session started by a ``task`` call is a session of its own whose parent is
the session of the call (``parent_id`` in the database, ``parentID`` in the JSON files),
and the ``task`` part names the child in ``state.metadata.sessionId``: the import links
the child to its parent and the call to its child (``packages/opencode/src/tool/task.ts``
and ``packages/opencode/src/session/session.sql.ts`` in github.com/anomalyco/opencode).
Sessions are read oldest first, so a parent comes before its children.

Session status: ``error`` when an assistant message records an error (API error, abort),
otherwise ``completed``.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    classify_call,
    dict_field,
    dump_arguments,
    from_millis,
    iter_jsonl,
    load_json_document,
    loads,
    looks_like_jsonl,
    read_text,
)
from agent_eval.transcript import Decision, TurnRecord

PERMISSION_ERROR = re.compile(
    r"rule which prevents you|rejected permission|permission|not allowed|"
    r"arguments provided to the tool are invalid",
    re.IGNORECASE,
)

Message = tuple[dict[str, Any], list[dict[str, Any]]]
"""One message: its ``info`` record and its parts, as ``opencode export`` nests them."""


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield every session found at PATH (a file, a database or a storage folder)."""
    path = Path(path)
    if path.is_dir():
        yield from _read_folder(path, model=model)
        return
    if _is_sqlite(path):
        yield from _read_database(path, model=model)
        return
    text = read_text(path)
    if looks_like_jsonl(text):
        yield from _read_run_stream(path, text, model=model, on_skip=on_skip)
        return
    doc = load_json_document(path, text)
    if isinstance(doc, dict) and isinstance(doc.get("info"), dict) and isinstance(doc.get("messages"), list):
        messages = [(m.get("info"), m.get("parts")) for m in doc["messages"] if isinstance(m, dict)]
        yield session_from_messages(doc["info"], messages, model=model)
        return
    if isinstance(doc, dict) and all(isinstance(doc.get(k), list) for k in ("session", "message", "part")):
        yield from _sessions_from_rows(doc["session"], doc["message"], doc["part"], model=model)
        return
    raise ConfigError(
        "not an OpenCode export, database, storage folder or run stream; "
        "pass `opencode export` output or opencode.db, or pick another FORMAT",
        path=str(path),
    )


def session_from_messages(info: dict[str, Any], messages: list[tuple[Any, Any]], *,
                          model: str | None) -> ImportedSession:
    """One session from its info record and its messages in order (pure); each message is
    its ``(info, parts)`` as the file has it, either possibly not an object or array."""
    time = dict_field(info, "time")
    session = ImportedSession(
        id=str(info.get("id") or "session"), model="unknown", title=info.get("title"),
        started_at=from_millis(time.get("created")), finished_at=from_millis(time.get("updated")),
        parent=info.get("parent_id") or info.get("parentID"),
    )
    found_model: str | None = None
    for msg_info, parts in messages:
        msg_info = msg_info if isinstance(msg_info, dict) else {}  # as the file has it:
        parts = [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        role = msg_info.get("role")
        texts = [str(p.get("text") or "") for p in parts if p.get("type") == "text" and not p.get("synthetic")]
        if role != "assistant":
            session.messages.append({"role": role or "user", "content": "\n".join(texts)})
            continue
        found_model = found_model or msg_info.get("modelID")
        if isinstance(msg_info.get("error"), dict):
            err = msg_info["error"]
            session.status = "error"
            session.error = f"opencode: {err.get('name') or 'error'}"
        session.turns.append(_turn(len(session.turns), msg_info, parts, "\n".join(texts)))
        out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
        results = []
        for part in parts:
            if part.get("type") != "tool":
                continue
            call = call_from_part(part, session.turns[-1].index)
            session.calls.append(call)
            out.setdefault("tool_calls", []).append(
                {"id": call.call_id, "type": "function", "function": {"name": call.tool, "arguments": call.arguments}}
            )
            results.append({"role": "tool", "tool_call_id": call.call_id, "content": call.output})
        session.messages.append(out)
        session.messages.extend(results)
    session.model = model or found_model or _session_model(info) or "unknown"
    return session


def call_from_part(part: dict[str, Any], turn: int) -> ImportedCall:
    """One call from an OpenCode ``tool`` part, with OpenCode's own verdict (pure)."""
    state = dict_field(part, "state")
    tool = str(part.get("tool") or "")
    args = state.get("input")
    status = state.get("status")
    decision: Decision | None = None
    reason: str | None = None
    output = ""
    if tool == "invalid" and isinstance(args, dict):
        tool = str(args.get("tool") or "invalid")
        decision, reason = "deny", str(args.get("error") or "invalid tool")
        output = str(state.get("output") or state.get("error") or "")
        args = {}
    elif status == "completed":
        decision, output = "allow", str(state.get("output") or "")
    elif status == "error":
        output = str(state.get("error") or "")
        if PERMISSION_ERROR.search(output):
            decision, reason = "deny", output[:300]
        else:
            reason = f"tool error in opencode: {output[:300]}"
    kind, text = classify_call(tool, args)
    metadata = dict_field(state, "metadata")
    child = metadata.get("sessionId") if tool == "task" else None
    return ImportedCall(
        tool=tool, arguments=dump_arguments(args if args is not None else {}), turn_index=turn,
        kind=kind, text=text, call_id=part.get("callID"), output=output,
        source_decision=decision, source_reason=reason,
        child=child if isinstance(child, str) else None,
    )


def _turn(index: int, info: dict[str, Any], parts: list[dict[str, Any]], content: str) -> TurnRecord:
    tokens = dict_field(info, "tokens")
    cache = dict_field(tokens, "cache")
    time = dict_field(info, "time")
    created, completed = time.get("created"), time.get("completed")
    latency = (completed - created) / 1000 if isinstance(created, int) and isinstance(completed, int) else None
    return TurnRecord(
        index=index, content=content,
        reasoning="\n".join(str(p.get("text") or "") for p in parts if p.get("type") == "reasoning"),
        finish_reason=info.get("finish"), prompt_tokens=tokens.get("input"),
        completion_tokens=tokens.get("output"), reasoning_tokens=tokens.get("reasoning"),
        cached_tokens=cache.get("read"), latency_s=latency, started_at=from_millis(created),
    )


def _session_model(info: dict[str, Any]) -> str | None:
    model = info.get("model")
    if isinstance(model, dict):
        return model.get("id") or model.get("modelID")
    return model if isinstance(model, str) else None


def _sessions_from_rows(
    sessions: Iterable[dict[str, Any]], messages: Iterable[dict[str, Any]],
    parts: Iterable[dict[str, Any]], *, model: str | None,
) -> Iterator[ImportedSession]:
    """Sessions from the rows of the 1.2+ database (or a JSON dump of them)."""
    parts_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(parts, key=lambda r: str(r.get("id"))):
        parts_of[str(row.get("message_id"))].append({**_data(row), "id": row.get("id")})
    messages_of: dict[str, list[Message]] = defaultdict(list)
    for row in sorted(messages, key=lambda r: (r.get("time_created") or 0, str(r.get("id")))):
        info = {**_data(row), "id": row.get("id"), "sessionID": row.get("session_id")}
        messages_of[str(row.get("session_id"))].append((info, parts_of.get(str(row.get("id")), [])))
    for row in sorted(sessions, key=lambda r: (_number(r.get("time_created")), str(r.get("id")))):
        info = {k: v for k, v in row.items() if k not in ("time_created", "time_updated")}
        info["time"] = {"created": row.get("time_created"), "updated": row.get("time_updated")}
        yield session_from_messages(info, messages_of.get(str(row.get("id")), []), model=model)


def _number(value: Any) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _data(row: dict[str, Any]) -> dict[str, Any]:
    data = row.get("data")
    if isinstance(data, str):
        try:
            data = loads(data)
        except (ValueError, RecursionError):
            data = {}
    return data if isinstance(data, dict) else {}


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _read_database(path: Path, *, model: str | None) -> Iterator[ImportedSession]:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open the OpenCode database ({exc})", path=str(path)) from None
    con.row_factory = sqlite3.Row
    try:
        rows = {t: [dict(r) for r in con.execute(f"SELECT * FROM {t}")] for t in ("session", "message", "part")}
    except sqlite3.Error as exc:
        raise ConfigError(
            f"not an OpenCode 1.2+ database ({exc}); expected tables session, message, part",
            path=str(path),
        ) from None
    finally:
        con.close()
    yield from _sessions_from_rows(rows["session"], rows["message"], rows["part"], model=model)


def _read_folder(path: Path, *, model: str | None) -> Iterator[ImportedSession]:
    for candidate in (path / "opencode.db", path / "storage" / "opencode.db"):
        if candidate.is_file():
            yield from _read_database(candidate, model=model)
            return
    storage = path if (path / "session").is_dir() else path / "storage"
    if not (storage / "session").is_dir():
        raise ConfigError(
            "no OpenCode data here: expected opencode.db or storage/session, storage/message, "
            "storage/part", path=str(path),
        )
    for file in sorted((storage / "session").rglob("*.json")):
        info = load_json_document(file)
        sid = str(info.get("id") or file.stem)
        messages: list[Message] = []
        for mfile in sorted((storage / "message" / sid).glob("*.json")):
            minfo = load_json_document(mfile)
            parts = [load_json_document(p) for p in sorted((storage / "part" / str(minfo.get("id") or mfile.stem)).glob("*.json"))]
            messages.append((minfo, parts))
        messages.sort(key=lambda m: ((m[0].get("time") or {}).get("created") or 0, str(m[0].get("id"))))
        yield session_from_messages(info, messages, model=model)


def _read_run_stream(path: Path, text: str, *, model: str | None, on_skip: SkipReporter | None) -> Iterator[ImportedSession]:
    """``opencode run --format json``: parts arrive as events; group them per session and
    per message, in order."""
    by_session: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for _, event in iter_jsonl(path, text, on_skip=on_skip):
        part = event.get("part") if isinstance(event, dict) else None
        if not isinstance(part, dict):
            continue
        sid = str(event.get("sessionID") or part.get("sessionID") or path.stem)
        by_session.setdefault(sid, {}).setdefault(str(part.get("messageID")), []).append(part)
    for sid, msgs in by_session.items():
        messages = [({"id": mid, "role": "assistant"}, parts) for mid, parts in msgs.items()]
        yield session_from_messages({"id": sid}, messages, model=model)
