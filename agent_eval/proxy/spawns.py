"""Subagents from traffic: a new conversation whose first user message holds, word for
word, a string argument of a tool call another open session just made (Claude Code's
``Agent`` ``prompt``, Qwen Code's ``agent``, an orchestrator's ``spawn --task "..."``) was
spawned by that call.  Pure.

A first user message (Codex sends its context as one message before the task, so the
first few are read) holds the task when it is the whole message, one of its text
parts (Qwen Code and Claude Code send their ``<system-reminder>`` context as parts before
the task), or what is left of the message or of a part once the CLI's wrappers around the
task are taken off: whole ``<tag>...</tag>`` blocks before or after it (``<system-reminder>``,
``<environment_context>``), as a translator that joins the parts into one string sends
it.  Each of these is looked up by its hash, so linking costs the same whatever the
number of open calls.

Only string values of at least ``MIN_CHARS`` characters are matched (whole values,
surrounding whitespace ignored), so short common strings never link; a call spawns at most
one child; the first open session whose call matches wins.  A harness that rewrites the
task itself before handing it to the subagent (a template with words around it) is not
linked here: the traffic does not show the link then (a CLI that names the parent in a
header is linked by it: ``sessions.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agent_eval.transcript import CallRecord

MIN_CHARS = 24
USER_MESSAGES = 4
"""How many user messages from the start may hold the task (Codex sends its
``<environment_context>`` message first, the task second)."""


def _key(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def string_values(arguments: str) -> list[str]:
    """Top-level string values of a call's JSON arguments long enough to name a task."""
    try:
        args = json.loads(arguments)
    except (ValueError, TypeError, RecursionError):
        return []
    if not isinstance(args, dict):
        return []
    return [v for v in args.values() if isinstance(v, str) and len(v.strip()) >= MIN_CHARS]


def first_user_text(messages: list[Any]) -> str:
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content
                               if isinstance(p, dict) and isinstance(p.get("text"), str))
            return content if isinstance(content, str) else ""
    return ""


_WRAPPER = re.compile(r"\A\s*<([A-Za-z][\w-]*)(?:\s[^<>]*)?>.*?</\1>\s*", re.DOTALL)
MAX_WRAPPERS = 64
"""Blocks taken off either end of one text at most: a bound on a hostile message."""


def unwrapped(text: str) -> str:
    """``text`` without the whole ``<tag>...</tag>`` blocks before and after the rest
    (a CLI's reminders and context around a task); the text itself when nothing is left."""
    rest = text
    for _ in range(MAX_WRAPPERS):
        found = _WRAPPER.match(rest)
        if found is None:
            break
        rest = rest[found.end():]
    for _ in range(MAX_WRAPPERS):
        cut = _trailing_block(rest)
        if cut is None:
            break
        rest = rest[:cut]
    return rest.strip() or text.strip()


def _trailing_block(text: str) -> int | None:
    """Where a whole ``<tag>...</tag>`` block ending ``text`` starts, or None."""
    stripped = text.rstrip()
    end = re.search(r"</([A-Za-z][\w-]*)>\Z", stripped)
    if end is None:
        return None
    start = stripped.rfind("<" + end.group(1), 0, end.start())
    while start != -1:
        after = stripped[start + 1 + len(end.group(1)):start + 2 + len(end.group(1))]
        if after in (">", " ", "\n", "\t"):
            return start
        start = stripped.rfind("<" + end.group(1), 0, start)
    return None


def task_texts(messages: list[Any]) -> list[str]:
    """Where a new conversation may hold a subagent's task (module docstring): of each of
    its first user messages (before any assistant message, at most ``USER_MESSAGES``),
    the whole text, each text part, and each of them unwrapped; distinct, in that order."""
    texts: list[str] = []
    users = 0
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            continue
        if m["role"] == "assistant" or users == USER_MESSAGES:
            break
        users += 1
        content = m.get("content")
        parts = [p["text"] for p in content if isinstance(p, dict)
                 and isinstance(p.get("text"), str)] if isinstance(content, list) else []
        mine = [first_user_text([m]), *parts]
        texts += [*mine, *(unwrapped(t) for t in mine)]
    return [t for t in dict.fromkeys(t.strip() for t in texts) if len(t) >= MIN_CHARS]


class Spawns:
    """Calls that may have spawned a subagent, by the hash of each long string argument."""

    def __init__(self) -> None:
        self._by_text: dict[str, tuple[str, CallRecord]] = {}
        self._of_session: dict[str, list[str]] = {}

    def note(self, session_key: str, call: CallRecord) -> None:
        for value in string_values(call.arguments):
            key = _key(value)
            self._by_text.setdefault(key, (session_key, call))
            self._of_session.setdefault(session_key, []).append(key)

    def claim(self, messages: list[Any]) -> tuple[str, CallRecord] | None:
        """The (parent session key, call) whose argument is this conversation's task."""
        for text in task_texts(messages):
            found = self._by_text.pop(_key(text), None)
            if found is not None:
                return found
        return None

    def forget(self, session_key: str) -> None:
        for key in self._of_session.pop(session_key, []):
            found = self._by_text.get(key)
            if found is not None and found[0] == session_key:
                del self._by_text[key]
