"""Tell which import format a file is, from its content.

``agent-eval import auto`` (or ``import PATH`` without FORMAT) reads each file with the
reader of the format found here.  With a named FORMAT the guess only words the error of
an import that found nothing (``(try: claude-code)``), refuses a file another reader
would misread (a mini-swe-agent bare list read as ``openai``), and passes over the files
of a folder that are plainly another format.

The guess is cheap and conservative: it looks at the keys of the first few JSONL lines,
or the top-level keys of a single JSON document (files up to ``MAX_DOCUMENT_BYTES``),
and answers ``None`` rather than guess from weak evidence.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MAX_DOCUMENT_BYTES = 64 << 20
"""A single JSON document larger than this is not parsed again just to guess."""
JSONL_LINES = 20
"""How many JSONL lines are looked at."""

CLAUDE_LINE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "result", "attachment", "queue-operation",
     "file-history-snapshot"}
)
OPENCODE_EVENT_TYPES = frozenset({"step_start", "step_finish", "tool_use", "text", "reasoning", "error"})
CODEX_LINE_TYPES = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted"})
QWEN_LINE_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
MINI_FENCE = re.compile(r"```(?:bash|mswea_bash_command)\s*\n")


def guess_format(path: str | Path) -> str | None:
    """The import format ``path`` looks like, or None when no format is recognisable."""
    path = Path(path)
    try:
        if path.is_dir():
            return _guess_folder(path)
        with path.open("rb") as fh:
            head = fh.read(16)
        if head == b"SQLite format 3\x00":
            return "opencode"
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            return _guess_jsonl(path)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return _guess_jsonl(path)
    return guess_document(doc)


def guess_document(doc: Any) -> str | None:
    """The format a parsed single JSON document looks like (pure)."""
    if isinstance(doc, list):
        return _guess_list(doc)
    if not isinstance(doc, dict):
        return None
    if _gemini_record(doc):
        return "gemini-cli"
    if isinstance(doc.get("trajectory"), list):
        return "swe-agent"
    history = doc.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict) and "agent" in history[0]:
        return "swe-agent"
    if _openhands_events(doc.get("events")) or _openhands_events([doc]):
        return "openhands"
    if all(isinstance(doc.get(k), list) for k in ("session", "message", "part")):
        return "opencode"
    messages = doc.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        if "parts" in messages[0] and isinstance(messages[0].get("info"), dict):
            return "opencode"
        info = doc.get("info")
        if not isinstance(info, dict):
            info = {}
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent") or "mini_version" in info:
            return "mini-swe-agent"
    if _chat_list(messages) or _chat_list(doc.get("traj")):
        return "openai"
    return None


def _guess_list(doc: list[Any]) -> str | None:
    """The format a document that is one JSON array looks like."""
    if _openhands_events(doc):
        return "openhands"
    if doc and all(isinstance(m, dict) and "role" in m for m in doc[:5]):
        return "mini-swe-agent" if _mini_bare_list(doc) else "openai"
    if doc and isinstance(doc[0], dict) and _chat_list(doc[0].get("messages", doc[0].get("traj"))):
        return "openai"
    return None


def guess_line(obj: Any) -> str | None:
    """The format one parsed JSONL line looks like (pure)."""
    if not isinstance(obj, dict):
        return None
    if not isinstance(obj.get("type"), str | None):  # a list or object: no format's line
        return None
    if "tool" in obj and ("session_id" in obj or "source_repo" in obj):
        return "call-records"
    if _chat_list(obj.get("messages")):
        return "openai"
    if isinstance(obj.get("part"), dict) or (obj.get("type") in OPENCODE_EVENT_TYPES and "sessionID" in obj):
        return "opencode"
    if _qwen_record(obj):
        return "qwen-code"
    if _gemini_record(obj):
        return "gemini-cli"
    if obj.get("type") in CLAUDE_LINE_TYPES and ("sessionId" in obj or "session_id" in obj or "uuid" in obj):
        return "claude-code"
    if obj.get("type") in CODEX_LINE_TYPES and isinstance(obj.get("payload"), dict):
        return "codex"
    if "instructions" in obj and "id" in obj and "timestamp" in obj and "type" not in obj:
        return "codex"
    if _openhands_events([obj]):
        return "openhands"
    return None


def _guess_jsonl(path: Path) -> str | None:
    seen = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            seen += 1
            if seen > JSONL_LINES:
                break
            try:
                guess = guess_line(json.loads(line))
            except (ValueError, RecursionError):
                continue
            if guess is not None:
                return guess
    return None


def guess_whole_folder(path: Path) -> str | None:
    """The format of a folder that is read as one thing (an OpenCode storage folder or
    database, the events folder of an OpenHands conversation), else None."""
    if any((path / p).exists() for p in ("opencode.db", "storage/opencode.db", "session", "storage/session")):
        return "opencode"
    events = path / "events" if (path / "events").is_dir() else path
    first = next(iter(sorted(events.glob("*.json"))), None) if events.name == "events" else None
    if first is not None and guess_format(first) == "openhands":
        return "openhands"
    return None


def _guess_folder(path: Path) -> str | None:
    whole = guess_whole_folder(path)
    if whole is not None:
        return whole
    first = next(iter(sorted(path.rglob("*.jsonl"))), None)
    return _guess_jsonl(first) if first is not None else None


def _qwen_record(obj: dict[str, Any]) -> bool:
    """A Qwen Code session record: Claude Code's envelope (``uuid``, ``sessionId``, a
    ``type``) around a Gemini ``Content`` (``message.parts``), or a record only Qwen Code
    writes (``tool_result``, a ``system`` record with ``systemPayload``)."""
    if obj.get("type") not in QWEN_LINE_TYPES or "sessionId" not in obj or "uuid" not in obj:
        return False
    message = obj.get("message")
    return (isinstance(message, dict) and isinstance(message.get("parts"), list)) \
        or obj.get("type") == "tool_result" or "systemPayload" in obj


def _gemini_record(obj: dict[str, Any]) -> bool:
    """A Gemini CLI session log record: the metadata (``sessionId`` with ``projectHash``),
    a ``$set`` or ``$rewindTo`` update, or a message of Gemini CLI's own types."""
    if "sessionId" in obj and "projectHash" in obj:
        return True
    if isinstance(obj.get("$set"), dict) or isinstance(obj.get("$rewindTo"), str):
        return True
    return obj.get("type") == "gemini" and isinstance(obj.get("id"), str) and "timestamp" in obj


def _openhands_events(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    head = [e for e in value[:20] if isinstance(e, dict)]
    return bool(head) and all("source" in e or "kind" in e for e in head) and any(
        ("action" in e or "observation" in e) and "id" in e or str(e.get("kind", "")).endswith("Event")
        for e in head
    )


def _mini_bare_list(doc: list[Any]) -> bool:
    """A list of chat messages whose replies carry one fenced bash action and no tool calls:
    the early mini-swe-agent trajectory (pure)."""
    replies = [m for m in doc if isinstance(m, dict) and m.get("role") == "assistant"]
    if not replies or any(m.get("tool_calls") for m in replies):
        return False
    fenced = sum(1 for m in replies if isinstance(m.get("content"), str) and MINI_FENCE.search(m["content"]))
    return fenced * 2 > len(replies)


def _chat_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and "role" in m for m in value[:5]
    )
