"""Read OpenAI chat-completions transcripts: ``tool_calls`` on assistant messages and
``role: tool`` results.

Accepted shapes (the reader tells them apart by content, not by file name):

* a JSON list of chat messages: one session, id = the file name;
* a JSON object with ``messages`` (or tau-bench's ``traj``): one session, id from
  ``id`` / ``task_id`` + ``trial``, model from ``model``;
* a JSON list of such objects: one session each;
* a JSONL file, one session object ``{"id", "model", "messages": [...]}`` a line.  A
  broken line is skipped and reported; the whole sessions around it still import.

A message may keep the server's ``finish_reason`` and ``usage``, and a session object the
request's ``max_tokens`` (:data:`SETTINGS`): then its replies are read for stack faults
as a live run reads them (a call cut at ``max_tokens`` is AE501, not the model's AE102).

Results are paired with the tool messages that directly follow the assistant message:
by ``tool_call_id`` when the ids are distinct, by position when they repeat (tau-bench
gpt-4o reuses ids within a session).  The source records no permission layer, so no
source verdict is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    classify_call,
    iter_jsonl,
    load_json_document,
    looks_like_jsonl,
    read_text,
    text_of,
    warn_skipped,
)
from agent_eval.transcript import TurnRecord


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield every session of an OpenAI-format file, each complete."""
    path = Path(path)
    text = read_text(path)
    if looks_like_jsonl(text):
        for line, obj in iter_jsonl(path, text, on_skip=on_skip):
            if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
                (on_skip or warn_skipped)(path, line, "not a session object with `messages`")
                continue
            yield _with_settings(session_from_messages(
                obj["messages"], id=str(obj.get("id") or f"{path.stem}:{line}"),
                model=model or _model_of(obj), title=obj.get("title"), request=_request_of(obj),
            ), obj)
        return
    doc = load_json_document(path, text)
    if isinstance(doc, list) and (not doc or _is_message(doc[0])):
        yield session_from_messages(doc, id=path.stem, model=model or "unknown")
        return
    docs = doc if isinstance(doc, list) else [doc]
    for n, obj in enumerate(docs):
        messages = obj.get("messages", obj.get("traj")) if isinstance(obj, dict) else None
        if not isinstance(messages, list):
            raise ConfigError(
                f"item {n}: expected a list of chat messages or an object with `messages`",
                path=str(path),
            )
        yield _with_settings(session_from_messages(
            messages, id=_id_of(obj, path.stem if len(docs) == 1 else f"{path.stem}:{n}"),
            model=model or _model_of(obj), title=obj.get("title"), request=_request_of(obj),
        ), obj)


SETTINGS = ("max_tokens", "max_completion_tokens", "tool_choice", "parallel_tool_calls",
            "stream")
"""Request fields a session object may keep beside its messages, read for stack faults
(``stack_reading.py``): a call cut at ``max_tokens`` is the stack's truncation."""


def _with_settings(session: ImportedSession, obj: Any) -> ImportedSession:
    if isinstance(obj, dict):
        session.settings = {k: obj[k] for k in SETTINGS if k in obj}
    return session


def _request_of(obj: Any) -> dict[str, Any] | None:
    """What every request of a session object shared besides its messages, when the file
    kept the tools offered (``tools``, and ``tool_choice`` and the model when given):
    then each turn's exact context can be rebuilt and replayed (``agent-eval replay``).
    A session without its tools keeps no request: a turn is never replayed without them."""
    if not isinstance(obj, dict) or not isinstance(obj.get("tools"), list) or not obj["tools"]:
        return None
    shared: dict[str, Any] = {}
    if isinstance(obj.get("model"), str):
        shared["model"] = obj["model"]
    shared["tools"] = obj["tools"]
    if "tool_choice" in obj:
        shared["tool_choice"] = obj["tool_choice"]
    return shared


def session_from_messages(
    messages: list[Any], *, id: str, model: str, title: str | None = None,
    request: dict[str, Any] | None = None,
) -> ImportedSession:
    """One session from a list of OpenAI chat messages (pure).  With ``request`` (what
    every request shared: model, tools, tool_choice), each turn keeps its request: the
    messages before its reply plus those."""
    session = ImportedSession(id=id, model=model, title=title)
    turn = -1
    i = 0
    while i < len(messages):
        msg = messages[i]
        i += 1
        if not isinstance(msg, dict):
            continue
        session.messages.append(msg)
        if msg.get("role") != "assistant":
            continue
        turn += 1
        session.turns.append(
            TurnRecord(
                index=turn,
                content=text_of(msg.get("content")),
                reasoning=str(msg.get("reasoning_content") or msg.get("reasoning") or ""),
                finish_reason=msg.get("finish_reason"),
                prompt_tokens=_usage(msg, "prompt_tokens"),
                completion_tokens=_usage(msg, "completion_tokens"),
                request=({"model": request.get("model", model),
                          "messages": session.messages[:-1]}
                         | {k: v for k, v in request.items() if k != "model"})
                if request is not None else None,
            )
        )
        raw_calls = msg.get("tool_calls")
        if raw_calls and not isinstance(raw_calls, list):
            session.skip_call(f"turn {turn}: `tool_calls` is not a list of calls")
        calls = _calls_of(msg, turn)
        results: list[dict[str, Any]] = []
        while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") in ("tool", "function"):
            results.append(messages[i])
            session.messages.append(messages[i])
            i += 1
        _pair_results(calls, results)
        session.calls.extend(calls)
    return session


def _calls_of(msg: dict[str, Any], turn: int) -> list[ImportedCall]:
    raw_calls = msg.get("tool_calls")
    if not isinstance(raw_calls, list):  # a string or an object is not a list of calls
        raw_calls = []
    if not raw_calls and isinstance(msg.get("function_call"), dict):
        raw_calls = [{"function": msg["function_call"]}]
    calls = []
    for raw in raw_calls:
        fn = raw.get("function") if isinstance(raw, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        name = str(fn.get("name") or "")
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments) if arguments is not None else ""
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        kind, text = classify_call(name, parsed)
        calls.append(
            ImportedCall(tool=name, arguments=arguments, turn_index=turn, kind=kind,
                         text=text, call_id=_id(raw.get("id")) if isinstance(raw, dict) else None)
        )
    return calls


def _pair_results(calls: list[ImportedCall], results: list[dict[str, Any]]) -> None:
    ids = [c.call_id for c in calls]
    by_id = len(set(ids)) == len(ids) and all(ids)
    if by_id:
        index = {c.call_id: c for c in calls}
        unmatched = []
        for res in results:
            call = index.get(_id(res.get("tool_call_id")))
            if call is None:
                unmatched.append(res)
            else:
                call.output = text_of(res.get("content"))
        if not unmatched:
            return
    for call, res in zip(calls, results, strict=False):
        call.output = text_of(res.get("content"))


def _usage(msg: dict[str, Any], name: str) -> int | None:
    """A token count of the message's ``usage``, when the logger kept the server's."""
    usage = msg.get("usage")
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if type(value) is int else None


def _id(value: Any) -> str | None:
    """A call id as text (a number written as one too); None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value if isinstance(value, str) else None


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value


def _model_of(obj: Any) -> str:
    if isinstance(obj, dict):
        for key in ("model", "model_name"):
            if isinstance(obj.get(key), str):
                return obj[key]
    return "unknown"


def _id_of(obj: Any, fallback: str) -> str:
    if not isinstance(obj, dict):
        return fallback
    if obj.get("id") is not None:
        return str(obj["id"])
    if obj.get("task_id") is not None:
        trial = obj.get("trial")
        return f"task{obj['task_id']}" + (f"-trial{trial}" if trial is not None else "")
    return fallback
