"""The session record every source produces: live runs and imported transcripts alike.

A live run (``orchestrator.run_session``) and every importer (``importers/``) build a
:class:`SessionRecord`; the store writes it in one transaction (``store.record_session``);
metrics, reports, the gate and the drill-down read the stored rows back.  Because every
source ends here, every report works the same on live and imported sessions.

Closed vocabularies are ``Literal`` aliases documented once, here:

``ExitState``
    ``completed``  the task closed: the handshake (if any) was emitted in order as
                   allowed calls, or, with no handshake, the model ended with the task done.
    ``stalled``    a limit (turns or tool calls, or the server's context window on a
                   later turn) was hit before the task closed.
    ``abandoned``  the model stopped calling tools with the task still open.
    ``error``      a server or harness fault; excluded from every model rate.

``NextAction`` (set on denied calls only: what the session did right after)
    ``pivot``         the next call was allowed.
    ``retry-denied``  the next call was denied too, with a different call.
    ``repeat``        the next call was identical (same tool, same arguments) and denied.
    ``abandon``       there was no further call in the session.

``Role`` is the chat role of a stored message.  ``SCHEMA_VERSION`` is stamped on every
stored transcript so later readers can migrate old ones.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

SCHEMA_VERSION = 1

ExitState = Literal["completed", "stalled", "abandoned", "error"]

TRUNCATED = "reply cut by the token limit inside a tool call: "
"""How the stored reason of an ``error`` session starts when a reply cut by the token
limit ended it (``live.orchestrator``; ``finish_reason: length``, or a call cut at the
request's ``max_tokens`` whatever the finish reason): a truncation, the operator's
``max_tokens``, not a server fault and never the model's; coverage (``metrics.coverage``)
counts it apart."""
STACK_FAULT = "stack fault "
"""How the stored reason of an ``error`` session starts when another stack fault (AE5xx:
a call the serving stack lost or mangled) ended it; coverage counts it apart."""
EXIT_STATES: tuple[ExitState, ...] = ("completed", "stalled", "abandoned", "error")

NextAction = Literal["pivot", "retry-denied", "repeat", "abandon"]
NEXT_ACTIONS: tuple[NextAction, ...] = ("pivot", "retry-denied", "repeat", "abandon")

Decision = Literal["allow", "deny"]


@dataclass(slots=True)
class FindingRecord:
    """One rule finding on a call: a stable AE code, a message and the span it points at.

    ``start``/``end`` are character offsets into the call's ``command`` (bash) or
    ``command`` holding the path (read); ``0, 0`` when the finding is about the call as a
    whole (an unknown tool, malformed arguments).
    """

    code: str
    message: str
    start: int = 0
    end: int = 0


@dataclass(slots=True)
class CallRecord:
    """One tool call in a model reply, with our verdict and what the model saw back.

    ``arguments`` is the raw argument text exactly as emitted (it may not be JSON).
    ``command`` is the bash command or read path pulled out of the arguments, when there
    is one.  ``source_decision`` / ``source_reason`` keep the verdict the source harness
    recorded itself (imports only), so agreement with ours can be reported.
    """

    index: int  # 0-based position among all calls of the session
    turn_index: int  # index of the assistant turn that carried it
    tool: str
    arguments: str
    decision: Decision
    primary: str | None = None
    findings: list[FindingRecord] = field(default_factory=list)
    command: str | None = None
    call_id: str | None = None
    output: str = ""  # the simulated output or the denial text returned to the model
    next_action: NextAction | None = None
    script: str | None = None  # the allowed script it invoked, e.g. "update_stage_status.py"
    source_decision: Decision | None = None
    source_reason: str | None = None
    child_key: str | None = None  # key of the child session this call spawned
    # under an agent CLI's rules: the strict class of a call its matcher let through
    # that the strict reading of the same rules refuses (docs/policies.md "leaks")
    leak: str | None = None


@dataclass(slots=True)
class TurnRecord:
    """One model reply and its cost.  Times are seconds; tokens are as the server reported."""

    index: int
    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    latency_s: float | None = None
    ttft_s: float | None = None
    decode_tps: float | None = None
    started_at: datetime | None = None
    # the exact request that produced this reply (model, messages, tools, tool_choice,
    # sampling), kept for ``replay``; None when the source did not keep it
    request: dict[str, Any] | None = None


@dataclass(slots=True)
class StackFaultRecord:
    """A stack fault (an AE5xx rule: ``policy/stack.py``) seen on one reply: what the
    serving stack lost or mangled between the model and the wire.  Never a model error:
    counted apart, never in errors/100.  ``raw`` keeps the offending wire text (cut
    arguments, a bad name, an error body); ``ends``: the fault left nothing of the
    model's to judge in its reply (a lost call): it ends a live session (``error``), and a
    relayed or imported one when that reply was its last (``stack_reading.py``)."""

    turn_index: int
    code: str
    message: str
    raw: str = ""
    ends: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn_index, "code": self.code, "message": self.message,
                "raw": self.raw, "ends": self.ends}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StackFaultRecord:
        return cls(int(data.get("turn") or 0), str(data.get("code") or ""),
                   str(data.get("message") or ""), str(data.get("raw") or ""),
                   bool(data.get("ends")))


def stack_fault_codes(stored: Any) -> tuple[tuple[str, bool], ...]:
    """``(code, ended the session)`` of each fault in a stored ``stack_faults`` list
    (anything else reads as none)."""
    if not isinstance(stored, list):
        return ()
    return tuple((str(f.get("code") or ""), bool(f.get("ends")))
                 for f in stored if isinstance(f, dict))


STACK_KEY = "stacks"
"""Where a run's fingerprint keeps each target's serving stack (``live/stackprint.py``):
server, version, chat template hash, the request's tool settings, the operator's notes."""


def run_stacks(fingerprint: Any) -> dict[str, dict[str, Any]]:
    """The stacks a stored run fingerprint holds, by target (empty for older runs)."""
    stacks = fingerprint.get(STACK_KEY) if isinstance(fingerprint, dict) else None
    return {k: v for k, v in (stacks or {}).items() if isinstance(v, dict)}


UPSTREAM_STACK = "(upstream)"
"""The key of a proxy run's one stack: its upstream's, whatever model each session names."""


def target_stack(stacks: Mapping[str, Any], target: str | None) -> dict[str, Any] | None:
    """The stack of ``target`` among a run's :func:`run_stacks`: its own, else the
    upstream's of a proxy run (every session went through it)."""
    found = stacks.get(target) if target is not None else None
    found = found if found is not None else stacks.get(UPSTREAM_STACK)
    return found if isinstance(found, dict) else None


TELEMETRY_EVENTS_TAG = "otlp_events:"
"""Tag prefix of a session ``agent-eval collect`` stored: the telemetry events it was
stitched from (``otlp_events:N``); ``skipped_calls:N`` counts its calls not judgeable."""


def _tag_count(tags: Iterable[str], prefix: str) -> int | None:
    for tag in tags:
        if tag.startswith(prefix) and tag[len(prefix):].isdigit():
            return int(tag[len(prefix):])
    return None


def telemetry_completeness(tags: Iterable[str], calls: int) -> tuple[int, int, int] | None:
    """``(events seen, calls judged, calls not judgeable)`` of a session stored from
    telemetry (its tags, its judged calls); None for a session of any other source."""
    tags = list(tags)
    events = _tag_count(tags, TELEMETRY_EVENTS_TAG)
    if events is None:
        return None
    return events, calls, _tag_count(tags, "skipped_calls:") or 0


def completeness_text(figures: tuple[int, int, int] | None) -> str:
    """What telemetry could prove, in words: "" when there are no figures."""
    if figures is None:
        return ""
    events, judged, not_judged = figures
    return (f"{events} events seen, {judged} calls judged, {not_judged} not judgeable "
            "(arguments cut or absent)")


def stack_line(stack: Mapping[str, Any]) -> str:
    """A stack as one line: ``server llama.cpp · build b6000 · template 3f2a… ·
    max_tokens 512 · parser qwen3_coder``."""
    parts = []
    for key, label in (("server", "server"), ("version", "version"), ("build", "build"),
                       ("owned_by", "owned by"), ("chat_template_sha256", "template"),
                       ("template_markup", "template calls")):
        value = stack.get(key)
        if value:
            parts.append(f"{label} {', '.join(value) if isinstance(value, list) else value}")
    for key, value in (stack.get("request") or {}).items():
        parts.append(f"{key} {_short(value)}")
    for key, value in (stack.get("notes") or {}).items():
        parts.append(f"{key.replace('_', ' ')} {value}")
    return " · ".join(parts) or "unknown"


def stack_mark(stack: Mapping[str, Any]) -> str:
    """A stack in a few characters, for the runs table: what the server calls itself and
    a digest of the whole fingerprint (``llama.cpp 3f2a1c``): two runs through the same
    stack show the same mark, any changed setting another digest."""
    owners = stack.get("owned_by")
    name = stack.get("server") or (owners[0] if isinstance(owners, list) and owners else "")
    digest = hashlib.sha256(json.dumps(stack, sort_keys=True, default=str).encode())
    return f"{str(name).split('/')[0][:16]} {digest.hexdigest()[:6]}".strip()


def _short(value: Any) -> str:
    if isinstance(value, dict):  # a named tool choice
        fn = value.get("function")
        return str(fn.get("name")) if isinstance(fn, dict) else str(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def stack_changes(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """How stack ``b`` differs from stack ``a``, one ``key: old -> new`` each (empty when
    they are the same, or when either is unknown)."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return []
    flat_a, flat_b = _flat(a), _flat(b)
    return [f"{key}: {flat_a.get(key, '–')} -> {flat_b.get(key, '–')}"
            for key in sorted(flat_a.keys() | flat_b.keys())
            if flat_a.get(key) != flat_b.get(key)]


def _flat(stack: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in stack.items():
        if isinstance(value, Mapping) and key in ("request", "notes"):
            out.update({k: _short(v) for k, v in value.items()})
        else:
            out[key] = ", ".join(value) if isinstance(value, list) else _short(value)
    return out


@dataclass(slots=True)
class HandshakeResult:
    """How far the required closing sequence got.  ``required`` 0 means none was asked."""

    required: int = 0
    done: int = 0  # steps emitted in order as allowed calls
    completed: bool = False
    missed_step: str | None = None  # first step not reached, e.g. "update_attempt_outcome.py"


@dataclass(slots=True)
class SessionRecord:
    """One scenario executed once (or one imported session), ready to store.

    ``key`` is unique within a run and stable across ``--resume`` (for live runs it is
    ``target/scenario/repeat`` plus a child suffix).  ``messages`` is the full chat
    transcript as sent to and received from the model (OpenAI message dicts), kept for the
    drill-down; ``turns`` and ``calls`` are the structured view of the same conversation.
    """

    key: str
    target: str
    scenario: str
    repeat: int = 0
    status: ExitState = "completed"
    error: str | None = None  # the fault of an error session; why a context-full one ended
    parent_key: str | None = None
    tags: list[str] = field(default_factory=list)
    handshake: HandshakeResult = field(default_factory=HandshakeResult)
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    source: str = "live"  # "live" or the import format name
    schema_version: int = SCHEMA_VERSION
    # the wire protocol its requests were recorded in (agent_eval.wire: "chat",
    # "responses", "messages", "gemini"), for replay; None: Chat Completions, or unknown
    protocol: str | None = None
    # judged under an agent CLI's rules: whose rules (the agent's name) and how that
    # agent was chosen (policy.sources.Via); None under an agent-eval allow-list
    policy_agent: str | None = None
    policy_agent_via: str | None = None
    # the agent CLI's release and mode its rules were emulated for
    # ("claude-code 2.1.332, mode default"; policy.sources.emulation); None: an allow-list
    policy_emulation: str | None = None
    # what the serving stack lost or mangled (AE5xx), counted apart from model errors
    stack_faults: list[StackFaultRecord] = field(default_factory=list)
    # the tools its client offered, name -> argument schema as offered (every turn's,
    # the last schema of a name kept); stored once per distinct list (tool_lists), the
    # session keeping its hash; None when the source shows none
    offered_tools: dict[str, Any] | None = None


_REPLAY_KEY = re.compile(r"^(?P<key>.*)@turn(?P<turn>\d+)(?:/repeat(?P<repeat>\d+))?$", re.DOTALL)


def replay_key(key: str, turn: int, repeat: int = 0) -> str:
    """The key of a replay session (``agent-eval replay``, live/replay.py): repeat
    ``repeat`` of turn ``turn`` of the original session ``key``, so the reply pairs with
    the original turn by key alone: ``KEY@turnN``, ``KEY@turnN/repeatR`` for R ≥ 1."""
    return f"{key}@turn{turn}" + (f"/repeat{repeat}" if repeat else "")


def parse_replay_key(key: str) -> tuple[str, int, int] | None:
    """``(original session key, turn index, repeat)``; None for a key replay never wrote."""
    m = _REPLAY_KEY.match(key)
    if m is None:
        return None
    return m["key"], int(m["turn"]), int(m["repeat"] or 0)


def share_messages(previous: dict[str, Any] | None, request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with each message it shares with ``previous`` (the session's previous
    turn's request; equal at the same position) being that request's object, and its
    tools too when equal.  A session of n turns then holds each message once, not n
    times, and the store serialises each once (``store/requests.py``).  Pure."""
    if previous is None:
        return request
    before = previous.get("messages") or []
    shared = [old if i < len(before) and (old := before[i]) == message else message
              for i, message in enumerate(request.get("messages") or [])]
    out = dict(request, messages=shared)
    if "tools" in out and out["tools"] == previous.get("tools"):
        out["tools"] = previous["tools"]
    return out


LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""JSON text escaping a UTF-16 surrogate (``"\\ud800"``): the parser joins a pair and
returns a lone one as it is, text that cannot be encoded as UTF-8 and that no store, file
or terminal can hold.  Only records from bytes holding such an escape need
:func:`storable`; the cheap search on the raw bytes says which."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_text(value: Any) -> str:
    """A value as text: a string as it is, ``None`` as ``""``, anything else as its JSON
    (its ``repr`` when not even that)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def storable(value: Any) -> Any:
    """``value`` (text, lists, dicts, and the records of this module, nested) with every
    lone surrogate replaced by U+FFFD; what has none is returned as it is.  Applied when
    a record is stored, after its calls were judged on the text as it came (the engine
    denies a lone surrogate, AE202; U+FFFD in its place could pass)."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, FindingRecord | CallRecord | TurnRecord | HandshakeResult
                  | StackFaultRecord | SessionRecord):
        changes = {}
        for name in value.__slots__:
            old = getattr(value, name)
            new = storable(old)
            if new is not old and new != old:
                changes[name] = new
        return replace(value, **changes) if changes else value
    return value


def assign_next_actions(calls: list[CallRecord]) -> None:
    """Fill ``next_action`` on every denied call from the call that followed it.

    Pure and order-based: calls must be in emission order.  Allowed calls get ``None``.
    """
    for i, call in enumerate(calls):
        if call.decision != "deny":
            call.next_action = None
            continue
        if i + 1 >= len(calls):
            call.next_action = "abandon"
            continue
        nxt = calls[i + 1]
        if nxt.decision == "allow":
            call.next_action = "pivot"
        elif nxt.tool == call.tool and nxt.arguments == call.arguments:
            call.next_action = "repeat"
        else:
            call.next_action = "retry-denied"


# Flat read views of stored rows.  The store returns these; metrics, reports and the gate
# consume them.  They carry only what aggregation needs, so a million of them stay cheap.


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: int
    run_id: int
    target: str
    scenario: str
    repeat: int
    status: ExitState
    error: str | None
    parent_id: int | None
    tags: tuple[str, ...]
    handshake_required: int
    handshake_done: int
    handshake_completed: bool
    handshake_missed_step: str | None
    n_turns: int
    n_messages: int
    n_calls: int
    started_at: datetime | None
    finished_at: datetime | None
    key: str = ""
    policy_agent: str | None = None  # whose agent CLI rules judged it (None: an allow-list)
    # its stack faults as (code, ended the session), from ``sessions.stack_faults``
    stack_faults: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True, slots=True)
class CallRow:
    session_id: int
    run_id: int
    target: str
    scenario: str
    index: int
    turn_index: int
    tool: str
    decision: Decision
    primary: str | None
    next_action: NextAction | None
    script: str | None = None
    command: str | None = None
    source_decision: Decision | None = None
    leak: str | None = None


@dataclass(frozen=True, slots=True)
class TurnRow:
    session_id: int
    run_id: int
    target: str
    index: int
    latency_s: float | None
    ttft_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    decode_tps: float | None
    started_at: datetime | None
