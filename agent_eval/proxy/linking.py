"""Sessions from traffic: which conversation does a request continue?  Pure (no I/O).

A chat completion request carries the whole conversation so far, but no session id
unless the client adds one.  The rule, in layers, first match wins; the layer that
linked a request is kept on the session (tag ``link:<method>``):

``client-id``     a header the client sends names the conversation: ``X-Agent-Eval-Session``
                  (an override, taken as is), else Claude Code's
                  ``X-Claude-Code-Session-Id``, Codex's ``thread-id`` (its ``session-id`` is
                  the parent's in a subagent), OpenCode's ``X-Session-Id``, Codex's
                  ``session-id``, each paired with the system prompt's hash, because a
                  harness can give its subagents the parent's id (docs/clients.md).
``retry``         the request equals (normalised) the previous request of a waiting
                  session whose reply did not complete (an error, an abort, a cut stream).
``continuation``  the request's last assistant message is a reply this proxy relayed to
                  a waiting session with the same system prompt: same tool-call ids and
                  same content hash (text, tool names and arguments, JSON re-serialised
                  canonically, so re-serialised arguments still match).  A text-only
                  reply ("Done.") is common, so when several waiting sessions fit, the
                  rest of the context decides (the one whose previous request the
                  request extends, else the one with the same first user message); when
                  none of them matches the context either, the request starts a new
                  session: a join is never guessed across system prompts or
                  conversation roots.
``call-ids``      the same tool-call ids, content rewritten (a placeholder for malformed
                  arguments, ``null`` content): trusted only when the ids belong to one
                  waiting session with the same conversation root (system prompt and first
                  user message), so ids a server repeats (``bash:0``) never cross-link.
``prefix``        the messages before the last assistant message equal, after
                  normalisation, the previous request of one waiting session (what the
                  client sent last time, so its own rewrites cancel out).
``new``           none of the above: a new session (every request without an assistant
                  message starts one, so N identical conversations in parallel are N).

The system prompt is the leading ``system``/``developer`` messages (Claude Code also
sends ``system`` entries mid-conversation: they are context, not the prompt), compared
after normalisation.  A session's role (its scenario name, ``system-`` and 8 hex digits)
hashes the same prompt with the working folder, the home folder and dates replaced by
placeholders (:func:`role_hash`), so two nights of the same stack in different folders
pair by role in ``compare``.

A waiting session is one whose last reply has not been continued yet; a request claims
it, so of N identical conversations each continuation takes a different one.  Two
identical conversations are told apart only by what differs on the wire (server
tool-call ids, usually random); when nothing differs, which of them a continuation joins
is arbitrary, yet the count and the calls of each stay right.  A session closes after
``idle_s`` seconds without a request, or when the proxy stops.

Normalisation drops what clients are known to rewrite: tool-call ids (prefix layer),
``reasoning``/``reasoning_content`` and other extra fields, ``null`` vs ``""`` content,
surrounding whitespace, argument key order and spacing; arguments that are not a JSON
object become ``?``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from agent_eval.proxy.replies import ParsedReply

OVERRIDE_HEADER = "x-agent-eval-session"
CLIENT_HEADERS = ("x-claude-code-session-id", "thread-id", "x-session-id", "session-id")
"""Headers an agent CLI names its conversation by, strongest first (docs/clients.md):
Codex's ``thread-id`` before its ``session-id``, which a subagent shares with its parent."""
PARENT_HEADERS = ("x-codex-parent-thread-id", "x-parent-session-id")
"""Headers a subagent's requests name its parent's conversation by (Codex, OpenCode)."""


def content_text(content: Any) -> str:
    """Message text: a string, or the text parts of a list of parts, stripped."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str)).strip()
    return ""


def canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return "?"
    if not isinstance(arguments, dict):
        return "?"
    try:
        return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "?"


def _calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def normal_message(message: Any) -> list[Any]:
    """What of a message survives client rewrites (see the module docstring)."""
    if not isinstance(message, dict):
        return ["?"]
    calls = []
    for call in _calls_of(message):
        fn = call.get("function")
        if not isinstance(fn, dict):
            fn = {}
        calls.append([fn.get("name"), canonical_arguments(fn.get("arguments"))])
    return [message.get("role"), content_text(message.get("content")), calls]


def digest(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_digests(messages: list[Any]) -> list[str]:
    """One digest per normalised message, computed once per request: every hash below
    is a hash of these, so a 50k-token conversation is serialised once, not per layer."""
    return [digest(normal_message(m)) for m in messages]


def prefix_hash(digests: list[str]) -> str:
    return hashlib.sha256("".join(digests).encode()).hexdigest()


def reply_key(message: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """(tool-call ids, content hash) of an assistant message, relayed or sent back."""
    ids = tuple(str(c.get("id") or "") for c in _calls_of(message))
    return ids, digest(normal_message(dict(message, role="assistant")))


SYSTEM_ROLES = ("system", "developer")


def leading_system(messages: list[Any]) -> int:
    """How many messages open the conversation as its system prompt."""
    n = 0
    for m in messages:
        if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES):
            break
        n += 1
    return n


def system_hash(messages: list[Any], digests: list[str]) -> str:
    """The hash of the system prompt: the leading system/developer messages."""
    return prefix_hash(digests[:leading_system(messages)])[:12]


_CWD = (re.compile(r"<cwd>\s*([^<\n]+?)\s*</cwd>"),
        re.compile(r"[Ww]orking [Dd]irectory(?: is)?:?\s*`?(/[^\s`'\"]+)"),
        re.compile(r"working in the directory:?\s*`?(/[^\s`'\"]+)"),
        re.compile(r"[Cc]urrent (?:working )?(?:directory|folder)(?: is)?:?\s*`?(/[^\s`'\"]+)"))
_HOME = re.compile(r"(?<![\w.-])/(?:home|Users)/[^/\s`'\"]+|(?<![\w.-])/root(?=/|\b)")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? "
                   r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? \d{4}\b")


def working_folder(messages: list[Any]) -> str | None:
    """The folder the client works in, as its prompt or first user message says it
    (``Working directory: /x``, ``<cwd>/x</cwd>``, ...), or None."""
    seen = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        text = content_text(m.get("content"))
        for pattern in _CWD:
            found = pattern.search(text)
            if found and len(found.group(1)) > 1:
                return found.group(1).rstrip("/.,;")
        if m.get("role") == "user":
            seen += 1
            if seen >= 3:  # the environment block comes first, if at all
                break
    return None


def normal_prompt(text: str, folder: str | None) -> str:
    """A system prompt with what differs between two runs of the same stack replaced:
    the working folder (also in the ``-home-me-project`` spelling some CLIs use for
    per-project folders), the home folder, and dates."""
    if folder:
        text = text.replace(folder, "<cwd>").replace(folder.replace("/", "-"), "<cwd>")
    text = _HOME.sub("<home>", text)
    text = text.replace("-home-", "-<home>-")
    return _DATE.sub("<date>", text)


def role_hash(messages: list[Any], digests: list[str]) -> str:
    """The system prompt's hash as :func:`system_hash` computes it, over the prompt
    normalised by :func:`normal_prompt`: equal to ``system_hash`` when nothing was
    replaced, so roles named before this normalisation keep their names."""
    n = leading_system(messages)
    folder = working_folder(messages)
    out = list(digests[:n])
    for i, m in enumerate(messages[:n]):
        text = content_text(m.get("content"))
        normal = normal_prompt(text, folder)
        if normal != text:
            out[i] = digest(normal_message(dict(m, content=normal)))
    return prefix_hash(out)[:12]


def root_hash(messages: list[Any], digests: list[str]) -> str:
    """System prompt(s) and the first user message: what a conversation starts from."""
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return prefix_hash(digests[:i + 1])
    return prefix_hash(digests)


def last_assistant(messages: list[Any]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], dict) and messages[i].get("role") == "assistant":
            return i
    return None


@dataclass
class Conversation:
    """One session as the linker tracks it; ``state`` is the recorder's (turns, calls)."""

    key: str
    system: str
    root: str
    role: str = ""  # role_hash: names the session's scenario
    methods: list[str] = field(default_factory=list)
    client_id: tuple[str, str] | None = None  # (header:value, system hash or "")
    last_seen: float = 0.0
    waiting: tuple[tuple[str, ...], str] | None = None  # reply_key of its last reply
    prefix: str | None = None  # prefix_hash of its last request
    retry: bool = False  # its last reply did not complete: the same request again joins it
    state: Any = None


@dataclass
class Link:
    conversation: Conversation
    method: str
    new: bool
    digests: list[str] = field(default_factory=list)  # of the request's messages


class Linker:
    """Finds the conversation each request belongs to and tracks the open ones."""

    def __init__(self, idle_s: float = 600.0, key_prefix: str = "proxy") -> None:
        self.idle_s = idle_s
        self.key_prefix = key_prefix
        self._numbers = count(1)
        self.open: dict[str, Conversation] = {}
        self._by_client: dict[tuple[str, str], Conversation] = {}
        self._by_reply: dict[tuple[tuple[str, ...], str], list[Conversation]] = {}
        self._by_ids: dict[tuple[str, ...], list[Conversation]] = {}
        self._by_prefix: dict[str, list[Conversation]] = {}
        self._by_retry: dict[str, list[Conversation]] = {}

    def link(self, messages: list[Any], headers: dict[str, str], now: float) -> Link:
        """The conversation ``messages`` continues (claimed) or a new one."""
        digests = message_digests(messages)
        conv, method, new = self._find(messages, digests, headers, now)
        return Link(conv, method, new, digests)

    def _find(self, messages: list[Any], digests: list[str], headers: dict[str, str],
              now: float) -> tuple[Conversation, str, bool]:
        system = system_hash(messages, digests)
        client_id = _client_id(headers, system)
        if client_id is not None:
            found = self._by_client.get(client_id)
            if found is not None:
                return self._claim(found, "client-id", now), "client-id", False
            conv = self._new(messages, digests, system, now, "client-id")
            conv.client_id = client_id
            self._by_client[client_id] = conv
            return conv, "client-id", True
        found = _first(self._by_retry.get(prefix_hash(digests)))
        if found is not None:
            return self._claim(found, "retry", now), "retry", False
        k = last_assistant(messages)
        if k is None:
            return self._new(messages, digests, system, now, "new"), "new", True
        rkey = reply_key(messages[k])
        root = root_hash(messages, digests)
        found = self._continued(self._by_reply.get(rkey), system, root,
                                prefix_hash(digests[:k]))
        if found is not None:
            return self._claim(found, "continuation", now), "continuation", False
        if any(rkey[0]):
            same = [c for c in self._by_ids.get(rkey[0], []) if c.root == root]
            if len(same) == 1 and len(self._by_ids[rkey[0]]) == 1:
                return self._claim(same[0], "call-ids", now), "call-ids", False
        found = _first(self._by_prefix.get(prefix_hash(digests[:k])))
        if found is not None:
            return self._claim(found, "prefix", now), "prefix", False
        return self._new(messages, digests, system, now, "new"), "new", True

    @staticmethod
    def _continued(candidates: list[Conversation] | None, system: str, root: str,
                   before: str) -> Conversation | None:
        """The waiting session a request continues, among those whose last reply it
        carries: same system prompt always; of several, the one whose previous request
        this one extends (``before``: the messages before the reply), else the one with
        the same conversation root; none of those: None (a new session, never a guess).
        Sessions alike in all of that are identical conversations: the oldest is taken."""
        fits = [c for c in candidates or () if c.system == system]
        for narrowed in ([c for c in fits if c.prefix == before],
                         [c for c in fits if c.root == root]):
            if narrowed:
                return narrowed[0]
        return None

    def relayed(self, link: Link, reply: ParsedReply | None) -> None:
        """After a reply: the session waits for the request that continues it."""
        conv = link.conversation
        if conv.client_id is not None:
            return
        conv.prefix = prefix_hash(link.digests)
        self._by_prefix.setdefault(conv.prefix, []).append(conv)
        if reply is None or reply.status != "complete":
            conv.retry = True
            self._by_retry.setdefault(conv.prefix, []).append(conv)
        if reply is not None:
            conv.waiting = reply_key(reply.message())
            self._by_reply.setdefault(conv.waiting, []).append(conv)
            if any(conv.waiting[0]):
                self._by_ids.setdefault(conv.waiting[0], []).append(conv)

    def expire(self, now: float) -> list[Conversation]:
        """Close and return the sessions idle for longer than ``idle_s``."""
        old = [c for c in self.open.values() if now - c.last_seen > self.idle_s]
        for conv in old:
            self.close(conv)
        return old

    def close_all(self) -> list[Conversation]:
        convs = list(self.open.values())
        for conv in convs:
            self.close(conv)
        return convs

    def close(self, conv: Conversation) -> None:
        self._unindex(conv)
        self.open.pop(conv.key, None)
        if conv.client_id is not None:
            self._by_client.pop(conv.client_id, None)

    def _new(self, messages: list[Any], digests: list[str], system: str, now: float,
             method: str) -> Conversation:
        conv = Conversation(key=f"{self.key_prefix}/{next(self._numbers)}", system=system,
                            root=root_hash(messages, digests), role=role_hash(messages, digests),
                            methods=[method], last_seen=now)
        self.open[conv.key] = conv
        return conv

    def _claim(self, conv: Conversation, method: str, now: float) -> Conversation:
        self._unindex(conv)
        conv.last_seen = now
        if method not in conv.methods:
            conv.methods.append(method)
        return conv

    def _unindex(self, conv: Conversation) -> None:
        if conv.waiting is not None:
            _remove(self._by_reply, conv.waiting, conv)
            _remove(self._by_ids, conv.waiting[0], conv)
        if conv.prefix is not None:
            _remove(self._by_prefix, conv.prefix, conv)
            _remove(self._by_retry, conv.prefix, conv)
        conv.waiting = conv.prefix = None
        conv.retry = False


def _client_id(headers: dict[str, str], system: str) -> tuple[str, str] | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    if lowered.get(OVERRIDE_HEADER):
        return (OVERRIDE_HEADER + ":" + lowered[OVERRIDE_HEADER], "")
    for name in CLIENT_HEADERS:
        if lowered.get(name):
            return (f"{name}:{lowered[name]}", system)
    return None


def _first(convs: list[Conversation] | None) -> Conversation | None:
    return convs[0] if convs else None


def _remove(index: dict[Any, list[Conversation]], key: Any, conv: Conversation) -> None:
    convs = index.get(key)
    if convs is None:
        return
    try:
        convs.remove(conv)
    except ValueError:
        return
    if not convs:
        del index[key]
