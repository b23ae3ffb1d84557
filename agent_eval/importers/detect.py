"""Guess which import format a file is, from its content, to suggest the right FORMAT.

Used only after an import found nothing to import (or its reader refused the file), so
the error can say ``(try: claude-code)``.  The guess never decides how a file is read:
the operator names the format and the reader of that format alone parses it.

The guess is cheap and conservative: it looks at the keys of the first few JSONL lines,
or the top-level keys of a single JSON document (files up to ``MAX_DOCUMENT_BYTES``),
and answers ``None`` rather than guess from weak evidence.
"""

from __future__ import annotations

import json
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
    except (json.JSONDecodeError, RecursionError):
        return _guess_jsonl(path)
    return guess_document(doc)


def guess_document(doc: Any) -> str | None:
    """The format a parsed single JSON document looks like (pure)."""
    if isinstance(doc, list):
        if doc and all(isinstance(m, dict) and "role" in m for m in doc[:5]):
            return "openai"
        if doc and isinstance(doc[0], dict) and _chat_list(doc[0].get("messages", doc[0].get("traj"))):
            return "openai"
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("trajectory"), list):
        return "swe-agent"
    if all(isinstance(doc.get(k), list) for k in ("session", "message", "part")):
        return "opencode"
    messages = doc.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        if "parts" in messages[0] and isinstance(messages[0].get("info"), dict):
            return "opencode"
        info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
        if str(doc.get("trajectory_format", "")).startswith("mini-swe-agent") or "mini_version" in info:
            return "mini-swe-agent"
    if _chat_list(messages) or _chat_list(doc.get("traj")):
        return "openai"
    return None


def guess_line(obj: Any) -> str | None:
    """The format one parsed JSONL line looks like (pure)."""
    if not isinstance(obj, dict):
        return None
    if "tool" in obj and ("session_id" in obj or "source_repo" in obj):
        return "call-records"
    if _chat_list(obj.get("messages")):
        return "openai"
    if isinstance(obj.get("part"), dict) or (obj.get("type") in OPENCODE_EVENT_TYPES and "sessionID" in obj):
        return "opencode"
    if obj.get("type") in CLAUDE_LINE_TYPES and ("sessionId" in obj or "session_id" in obj or "uuid" in obj):
        return "claude-code"
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
            except (json.JSONDecodeError, RecursionError):
                continue
            if guess is not None:
                return guess
    return None


def _guess_folder(path: Path) -> str | None:
    if any((path / p).exists() for p in ("opencode.db", "storage/opencode.db", "session", "storage/session")):
        return "opencode"
    first = next(iter(sorted(path.rglob("*.jsonl"))), None)
    return _guess_jsonl(first) if first is not None else None


def _chat_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and "role" in m for m in value[:5]
    )
