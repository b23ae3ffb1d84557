"""From relayed exchanges to judged sessions: link, parse, judge, close.  No I/O.

One :class:`Sessions` lives on the recorder's thread.  ``take`` reads one exchange: the
request's JSON, the reply (streamed deltas reassembled), links it to its conversation
(``linking.py``), and judges each tool call of the reply against the allow-list, the
tools offered being those the request sent, through the call recorder an import uses
too (``call_recorder.py``: the client's own tool names and spellings, ``Bash``,
``read {filePath}``, are read as it meant them), so a call relayed and the same call
imported are stored alike.  ``expire`` and
``close_all`` hand back finished :class:`SessionRecord`s, ready for the store, exactly as
a live run or an import builds them, so every report works on them unchanged.

What a proxied session records: every turn with its exact request (``TurnRecord.request``,
the JSON body the client sent), timings and tokens; the reply; every call judged, its
output filled in from the tool message the client sends back next.  Calls of a reply that
did not complete (client abort, upstream error, cut stream) stay in the transcript but are
not judged, so they never count against the model.  Every reply is read for stack faults
(rules AE5xx) as a live run reads it (``stack_reading.py``): a call the serving stack cut
at ``max_tokens`` (whatever the server's finish reason) or mangled is kept in the
transcript, never judged as the model's, and the fault is kept on the session.  A
session's status is ``error`` when its last reply failed upstream or a stack fault lost
it (the reason a live run stores), ``completed`` otherwise: with no scenario there is no
task to call stalled or abandoned.  No handshake is required unless `--protocols` declares one
(scenario/protocols.py).

Under an agent CLI's configuration (``--allowlist opencode.json``...) each session is
judged by one agent's rules, chosen when the session opens (``calls.SessionJudges``): the
agent its client names in the ``x-agent-eval-agent`` header, else the agent whose own
prompt its system prompt holds, else the default agent; the record says which and how.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_eval import wire
from agent_eval.call_recorder import (
    OfferedTools,
    SessionJudge,
    SessionJudges,
    offered_tools,
    text_call,
)
from agent_eval.errors import AgentEvalError
from agent_eval.policy import AllowList
from agent_eval.policy.rules import code_for
from agent_eval.policy.sources import AGENT_HEADER, ResolvedPolicy
from agent_eval.policy.sources.emulation import version_from_headers
from agent_eval.proxy.linking import (
    PARENT_HEADERS,
    Conversation,
    Linker,
    content_text,
    last_assistant,
)
from agent_eval.proxy.parity import ParityAnswer, repeats_itself, twin_body
from agent_eval.proxy.relay import CAPTURE_LIMIT, Exchange
from agent_eval.proxy.replies import ParsedReply, ReplyStatus, decode_body, parse_reply
from agent_eval.proxy.spawns import Spawns, string_values
from agent_eval.scenario.protocols import Protocols, system_prompt_of
from agent_eval.stack_reading import StackReading
from agent_eval.transcript import (
    LONE_SURROGATE_ESCAPE,
    CallRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
    assign_next_actions,
    share_messages,
    storable,
)
from agent_eval.wire.markup import find_tool_markup
from agent_eval.wire.records import token_count, token_figures
from agent_eval.wire.side import SIDE_REQUEST_TAG, side_request_of, tool_less_turn


@dataclass
class SessionState:
    """What the recorder keeps of one open session."""

    target: str
    started_at: datetime
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    statuses: set[str] = field(default_factory=set)
    last_status: ReplyStatus = "complete"
    finished_at: datetime | None = None
    parent_key: str | None = None  # the session whose call spawned this one (spawns.py)
    lone_surrogates: bool = False  # some request or reply escapes one: stored mended
    protocol: str = "chat"  # the wire protocol of its requests (agent_eval.wire)
    judge: SessionJudge | None = None  # whose rules judge its calls (set when it opens)
    side: str | None = None  # the known side request it is (wire/side.py), if one
    offered: OfferedTools = field(default_factory=OfferedTools)  # tools its client offered
    stack: StackReading = field(default_factory=StackReading)  # its stack faults (AE5xx)
    # streamed turns whose whole twin was asked (proxy/parity.py): turn -> request, reply
    parity_wait: dict[int, tuple[dict[str, Any], ParsedReply]] = field(default_factory=dict)


@dataclass
class ProtocolCounts:
    """Exchanges of one protocol: recorded as a turn, or relayed and not recorded (the
    request could not be read as that protocol's)."""

    recorded: int = 0
    not_recorded: int = 0


class ScenarioNames:
    """What a proxy session is called.  A session that plays a task of the bundled suite
    is named by that scenario, found as the simulator finds it (the first user message as
    a task, else a task found whole inside the client's wrapping:
    ``agent_eval.sim.clients.locate``), so the demo's and CI's proxy runs read
    ``lights-dim-office``, not ``system-0f00503c``, and ``compare`` pairs them with
    scenario runs.  Names stay unique per role: a second role (another system prompt)
    playing the same scenario gets ``NAME-<role's 8 hex digits>``.  Any other session
    keeps ``system-`` and its role's 8 hex digits."""

    def __init__(self) -> None:
        self._index: Any = None
        self._roles: dict[str, str] = {}  # scenario name -> the role that took it first

    def name(self, messages: list[dict[str, Any]], role: str) -> str:
        from agent_eval.sim.clients import locate

        found = locate(self._tasks(), messages).scenario
        if found is None:
            return f"system-{role[:8]}"
        owner = self._roles.setdefault(found.name, role)
        return found.name if owner == role else f"{found.name}-{role[:8]}"

    def _tasks(self) -> Any:
        if self._index is None:
            from agent_eval.scenario.bundled import bundled_suite
            from agent_eval.scenario.suite import load_suite
            from agent_eval.sim.behaviour import TaskIndex, index_tasks

            try:
                self._index = index_tasks(load_suite(bundled_suite()).scenarios.values())
            except (OSError, ValueError, AgentEvalError):  # no bundled suite: hashes only
                self._index = TaskIndex({})
        return self._index


class Sessions:
    """Open sessions of one proxy run; see the module docstring."""

    def __init__(self, allowlist: AllowList | ResolvedPolicy, *, idle_s: float = 600.0,
                 protocols: Protocols | None = None,
                 template_markers: frozenset[str] | None = None) -> None:
        """``template_markers``: the call format of the upstream's chat template (or of
        the parser the operator named), read once at start (``upstream.py``): markup in
        that format left in a reply is the parser's (AE511); None: unknown (AE104)."""
        self.template_markers = template_markers
        self.last_turn: tuple[str, SessionState, Exchange, dict[str, Any]] | None = None
        self.parity_unjudged = 0  # twins asked whose answer could not be read against it
        # streamed turns not twinned: "busy" (a twin in flight), "random" (decoding that
        # does not repeat itself: no temperature 0, no seed)
        self.parity_skipped = {"busy": 0, "random": 0}
        self.judges = SessionJudges(allowlist, foreign=True)  # an agent CLI's calls (call_recorder.py)
        self.allowlist = self.judges.allowlist
        self.protocols = protocols  # closing sequences (scenario/protocols.py), if given
        self.linker = Linker(idle_s=idle_s)
        self.unparseable = 0
        self.counts = {name: ProtocolCounts() for name in wire.PROTOCOLS}
        self._responses: dict[str, str] = {}  # Responses reply id -> its session's key
        self.spawns = Spawns()
        self._held: dict[str, list[SessionRecord]] = {}  # closed children of open parents
        self.calls = self.judges.for_session().calls  # the default agent's, or the list's
        self.names = ScenarioNames()

    def take(self, ex: Exchange, now: float) -> None:
        protocol = wire.protocol_of(ex.path) or "chat"
        request = read_request(ex, protocol)
        counts = self.counts[protocol]
        if request is None:
            self.unparseable += 1
            counts.not_recorded += 1
            return
        counts.recorded += 1
        request = self._with_history(request)
        messages = request["messages"]
        reply, status = read_reply(ex, protocol)
        link = self.linker.link(messages, ex.session_headers, now)
        conv = link.conversation
        if conv.state is None:
            model = request.get("model")
            conv.state = SessionState(target=model if isinstance(model, str) and model else "unknown",
                                      started_at=ex.started_at, protocol=protocol,
                                      stack=StackReading(check_ids=protocol in ID_PROTOCOLS))
            named = {k.lower(): v for k, v in ex.session_headers.items()}.get(AGENT_HEADER)
            conv.state.judge = self.judges.for_session(
                named=named, system_prompt=system_prompt_of(messages),
                client=version_from_headers({"User-Agent": ex.user_agent}))
        state: SessionState = conv.state
        if escapes_a_lone_surrogate(ex):
            state.lone_surrogates = True
        if link.new:
            state.side = side_request_of(messages)
            if state.side is None:  # a CLI's side request is nobody's subagent
                self._link_child(conv, messages, ex.session_headers)
        _fill_outputs(state, messages)
        first_call = len(state.calls)
        self._add_turn(state, ex, request, reply, status)
        self.last_turn = (conv.key, state, ex, request)
        for call in state.calls[first_call:]:
            self.spawns.note(conv.key, call)
        if reply is not None and reply.response_id and status == "complete":
            self._responses[reply.response_id] = conv.key
        self.linker.relayed(link, reply if status == "complete" else None)

    def _with_history(self, request: dict[str, Any]) -> dict[str, Any]:
        """A Responses request naming ``previous_response_id`` carries only what is new;
        the server holds the rest.  When the proxy relayed that response, the request is
        read (linked, stored, replayable) as the whole conversation: that session's
        messages, then the new input."""
        previous = request.get("previous_response_id")
        key = self._responses.get(previous) if isinstance(previous, str) else None
        conv = self.linker.open.get(key) if key is not None else None
        if conv is None or conv.state is None:
            return request
        whole = {k: v for k, v in request.items() if k != "previous_response_id"}
        whole["messages"] = [*conv.state.messages, *request["messages"]]
        if "response-id" not in conv.methods:
            conv.methods.append("response-id")
        return whole

    def _link_child(self, conv: Conversation, messages: list[Any],
                    headers: dict[str, str]) -> None:
        """A new session is a subagent of the call whose long string argument is its
        task, word for word (spawns.py).  Failing that, the CLI's headers name its parent:
        Codex's ``x-codex-parent-thread-id`` and OpenCode's ``x-parent-session-id`` the
        parent's own id, Claude Code's ``X-Claude-Code-Session-Id`` the parent's too (under
        another system prompt); of that session's calls not linked yet, the latest whose
        long string argument appears in the child's first user messages (the CLI wraps the
        task in its context) spawned it.  A parent header with no such call still makes
        the session its parent's child; a shared session id alone never does (OpenCode's
        title request shares it, and is nobody's subagent)."""
        state: SessionState = conv.state
        spawned: tuple[str, CallRecord | None] | None = self.spawns.claim(messages)
        if spawned is None:
            spawned = self._spawned_by_header(conv, messages, headers)
        if spawned is not None:
            state.parent_key, call = spawned
            if call is not None:
                call.child_key = conv.key

    def _spawned_by_header(self, conv: Conversation, messages: list[Any],
                           headers: dict[str, str]) -> tuple[str, CallRecord | None] | None:
        lowered = {k.lower(): v for k, v in headers.items()}
        named = next((lowered[h] for h in PARENT_HEADERS if lowered.get(h)), None)
        shared = conv.client_id[0] if conv.client_id else None
        if named is None and shared is None:
            return None
        text = "\n".join(content_text(m.get("content")) for m in messages
                         if isinstance(m, dict) and m.get("role") == "user")[:1_000_000]
        for parent in reversed(list(self.linker.open.values())):
            if parent is conv or parent.state is None or parent.client_id is None:
                continue
            by_name = named is not None and parent.client_id[0].endswith(":" + named)
            if not by_name and parent.client_id[0] != shared:
                continue
            for call in reversed(parent.state.calls):
                if call.child_key is None and any(v.strip() in text
                                                  for v in string_values(call.arguments)):
                    return parent.key, call
            if by_name:
                return parent.key, None
        return None

    def _add_turn(self, state: SessionState, ex: Exchange, request: dict[str, Any],
                  reply: ParsedReply | None, status: ReplyStatus) -> None:
        index = len(state.turns)
        ttft, latency = ex.ttft_s, ex.latency_s
        figures = token_figures(reply.usage if reply is not None else {}, latency, ttft)
        completion = figures.completion_tokens
        shared = share_messages(state.turns[-1].request if state.turns else None, request)
        state.turns.append(TurnRecord(
            index=index, content=reply.content if reply else "",
            reasoning=reply.reasoning if reply else "",
            finish_reason=(reply.finish_reason if reply and status == "complete" else status),
            prompt_tokens=figures.prompt_tokens, completion_tokens=completion,
            reasoning_tokens=figures.reasoning_tokens, cached_tokens=figures.cached_tokens,
            latency_s=latency, ttft_s=ttft, decode_tps=figures.decode_tps,
            started_at=ex.started_at,
            request=shared,
        ))
        state.statuses.add(status)
        state.last_status = status
        state.finished_at = ex.started_at + timedelta(seconds=latency or 0.0)
        state.messages = list(shared["messages"])
        if reply is not None:
            state.messages.append(reply.message())
        if reply is None and status == "upstream-error":  # a parser's 5xx is the stack's
            body = decode_body(bytes(ex.response_body), ex.content_encoding, CAPTURE_LIMIT)
            state.stack.error(index, ex.status, (body or b"").decode("utf-8", "replace"))
        if reply is None or status != "complete":
            return
        faults = state.stack.reply(index, request, finish_reason=reply.finish_reason,
                                   content=reply.content, reasoning=reply.reasoning,
                                   calls=reply.calls, completion_tokens=completion,
                                   stream_faults=reply.stream_faults,
                                   template_markers=self.template_markers)
        lost = {f.code for f in faults if f.ends}
        if CUT_CODE in lost:
            state.statuses.add(CUT_BY_LENGTH)
        offered = offered_tools(request)
        schemas = state.offered.add(request.get("tools"), index)
        calls = state.judge.calls if state.judge is not None else self.calls
        if reply.calls:
            for call in reply.calls:
                if lost - {CUT_CODE} or (lost and not _whole_json(call.arguments)):
                    # what the stack cut or mangled (a truncation at max_tokens, a name
                    # that is not one, deltas that collide) is never the model's AE101 or
                    # AE102: kept in the transcript, never judged; a whole call beside a
                    # cut one is judged (the client runs it)
                    continue
                state.calls.append(calls.record(len(state.calls), index, call.name,
                                                     call.arguments, offered=offered,
                                                     call_id=call.id,
                                                     schema=schemas.get(call.name))[0])
        elif lost:
            return
        elif spans := find_tool_markup(reply.content):
            state.calls.append(text_call(len(state.calls), index, reply.content, spans[0]))

    def parity_twin(self, ready: bool = True) -> tuple[str, int, str, bytes] | None:
        """``(session key, turn, path, body)`` of the whole twin of the turn just taken
        (``proxy/parity.py``), when it was a streamed Chat Completions request answered
        whole, its decoding repeats itself and ``ready`` (no twin in flight); None
        otherwise (a turn that would have been twinned is counted in ``parity_skipped``)."""
        if self.last_turn is None:
            return None
        key, state, ex, request = self.last_turn
        self.last_turn = None
        index = len(state.turns) - 1
        if (state.protocol != "chat" or not request.get("stream") or ex.status != 200
                or state.last_status != "complete"):
            return None
        if not repeats_itself(request) or not ready:
            self.parity_skipped["busy" if repeats_itself(request) else "random"] += 1
            return None
        reply, status = read_reply(ex, "chat")
        if reply is None or status != "complete":
            return None
        state.parity_wait[index] = (request, reply)
        return key, index, ex.path, twin_body(request)

    def parity(self, answer: ParityAnswer) -> bool:
        """Read a twin's answer against the streamed turn it twins (AE510 on that
        session); False, counted, when the session is closed or the answer unreadable."""
        conv = self.linker.open.get(answer.key)
        state = conv.state if conv is not None else None
        waiting = state.parity_wait.pop(answer.turn_index, None) if state else None
        whole = (parse_reply(answer.body, streamed=False)
                 if waiting is not None and answer.status == 200 else None)
        if state is None or waiting is None or whole is None or whole.status != "complete":
            self.parity_unjudged += 1
            return False
        request, streamed = waiting
        state.stack.parity(answer.turn_index, request, _TwinView(whole), _TwinView(streamed))
        return True

    def expire(self, now: float) -> list[SessionRecord]:
        """Sessions idle past the timeout, ready to store together: a subagent whose
        parent is still open waits for it (the store links a family in one batch)."""
        return self._release([c for c in self.linker.expire(now) if c.state is not None])

    def close_all(self) -> list[SessionRecord]:
        return self._release([c for c in self.linker.close_all() if c.state is not None])

    def _release(self, closed: list[Conversation]) -> list[SessionRecord]:
        for conv in closed:
            self.spawns.forget(conv.key)
        if closed:
            gone = {c.key for c in closed}
            self._responses = {r: k for r, k in self._responses.items() if k not in gone}
        ready: list[SessionRecord] = []
        for conv in closed:
            record = self.record(conv)
            if record.parent_key is not None and record.parent_key in self.linker.open:
                self._held.setdefault(record.parent_key, []).append(record)
            else:
                ready.append(record)
                ready.extend(self._family_of(record.key))
        return ready

    def _family_of(self, key: str) -> list[SessionRecord]:
        out: list[SessionRecord] = []
        for child in self._held.pop(key, []):
            out.append(child)
            out.extend(self._family_of(child.key))
        return out

    @property
    def open_count(self) -> int:
        return len(self.linker.open)

    def record(self, conv: Conversation) -> SessionRecord:
        state: SessionState = conv.state
        assign_next_actions(state.calls)
        for call in state.calls:  # a child still open is stored later, linked to us by key
            if call.child_key is not None and call.child_key in self.linker.open:
                call.child_key = None
        failed = state.last_status in ("upstream-error", "unparseable")
        handshake = HandshakeResult()
        if self.protocols is not None:
            calls = state.judge.calls if state.judge is not None else self.calls
            invocations = [calls.judge(c.tool, c.arguments).verdict.invocation
                           for c in state.calls if c.decision == "allow"]
            handshake = self.protocols.handshake(invocations, system_prompt_of(state.messages))
        ended = state.stack.ended_on(len(state.turns) - 1)  # the stack lost its last reply
        record = SessionRecord(
            key=conv.key, target=state.target,
            scenario=self.names.name(state.messages, conv.role or conv.system),
            status="error" if failed or ended else "completed",
            error=f"last reply: {state.last_status}" if failed else ended,
            tags=[*(f"link:{m}" for m in conv.methods),
                  *(f"reply:{s}" for s in sorted(state.statuses) if s != "complete"),
                  *side_tags(state)],
            messages=state.messages, turns=state.turns, calls=state.calls,
            started_at=state.started_at, finished_at=state.finished_at or datetime.now(UTC),
            source="proxy", parent_key=state.parent_key, handshake=handshake,
            protocol=None if state.protocol == "chat" else state.protocol,
            stack_faults=state.stack.faults,
        )
        if state.judge is not None:
            state.judge.stamp(record)
        state.offered.stamp(record)
        # judged on the text as it came (a lone surrogate is AE202); stored as U+FFFD
        return storable(record) if state.lone_surrogates else record


CUT_BY_LENGTH = "length-cut"
"""Tagged ``reply:length-cut``: a reply the token limit cut inside a tool call, in any
server's style (finish reason ``length``, or the completion tokens at the request's
``max_tokens``); the cut call is not judged (a truncation, AE501, never the model's AE102)."""
CUT_CODE = code_for("cut-by-token-limit")
ID_PROTOCOLS = frozenset({"chat", "responses", "messages"})
"""Protocols whose calls carry the server's ids (Gemini's carry none): AE506 is read there."""


class _TwinView:
    """A relayed reply as ``StackReading.parity`` reads one."""

    def __init__(self, reply: ParsedReply) -> None:
        self.finish_reason = reply.finish_reason
        self.content = reply.content
        self.reasoning = reply.reasoning
        self.tool_calls = reply.calls
        self.completion_tokens = token_count(reply.usage.get("completion_tokens"))
        self.stream_faults = reply.stream_faults


def _whole_json(arguments: str) -> bool:
    try:
        json.loads(arguments)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def side_tags(state: SessionState) -> list[str]:
    """``side-request`` (and ``side:<name>`` for a known one) when the session is an agent
    CLI's side request, not a conversation of the stack (``wire/side.py``)."""
    if state.side is not None:
        return [SIDE_REQUEST_TAG, f"side:{state.side}"]
    if len(state.turns) == 1 and tool_less_turn(state.turns[0].request, len(state.calls)):
        return [SIDE_REQUEST_TAG]
    return []


def read_request(ex: Exchange, protocol: str) -> dict[str, Any] | None:
    """The request as a chat request (``agent_eval.wire``), or None when it cannot be read
    (a compressed body is inflated first, never past the capture limit)."""
    if not ex.request_captured_all:  # past the capture limit: relayed whole, not read
        return None
    body = decode_body(bytes(ex.request_body), ex.request_encoding, CAPTURE_LIMIT)
    return wire.read_request(protocol, body, ex.path) if body is not None else None


def escapes_a_lone_surrogate(ex: Exchange) -> bool:
    """Whether the request or the reply escapes a lone surrogate (``"\\ud800"``): then
    the session is stored with U+FFFD in its place, once judged.  Compressed bodies are
    searched inflated (rare: paid for only then)."""
    for raw, coding in ((ex.request_body, ex.request_encoding),
                        (ex.response_body, ex.content_encoding)):
        body = raw if coding in ("", "identity") else decode_body(bytes(raw), coding,
                                                                   CAPTURE_LIMIT)
        if body and LONE_SURROGATE_ESCAPE.search(body):
            return True
    return False


def read_reply(ex: Exchange, protocol: str = "chat") -> tuple[ParsedReply | None, ReplyStatus]:
    """The reply and how it ended (see ``wire.records.ReplyStatus``)."""
    streamed = "text/event-stream" in ex.content_type
    if ex.outcome != "complete":
        partial = wire.parse_reply(protocol, bytes(ex.response_body), streamed=streamed) \
            if ex.status == 200 and ex.response_body else None
        if ex.outcome == "client-abort" and partial is not None \
                and partial.status == "complete":
            # the answer reached its end marker before the client left (Codex closes
            # the stream on ``response.completed``, before the chunked body's end): the
            # model's reply is whole, and judged as any complete one
            return partial, "complete"
        return partial, ex.outcome
    if ex.status >= 400:
        return None, "upstream-error"
    body = decode_body(bytes(ex.response_body), ex.content_encoding, CAPTURE_LIMIT) \
        if ex.captured_all else None
    if body is None:  # over the capture limit, or a body we cannot inflate within it
        return None, "unparseable"
    if streamed and largest_event(body) > EVENT_LIMIT:  # its calls are not judged
        return None, "unparseable"
    reply = wire.parse_reply(protocol, body, streamed=streamed)
    return reply, reply.status


EVENT_LIMIT = 8 * 1024 * 1024
"""Bytes of one server-sent event the recorder reads.  Reading an event costs several
times its size (the text, its lines, the JSON, the strings in it: a 40 MB event took
the recorder to 352 MB), and a real server's events are deltas of a few bytes to a few
KB, so a stream holding a larger event is recorded as ``unparseable`` (its calls are not
judged) instead of read.  The client gets it whole, as sent."""
_EVENT_END = re.compile(rb"\r?\n\r?\n|\r\r")


def largest_event(body: bytes | bytearray) -> int:
    """The size of the largest event of a stream (blank-line framed), in bytes; a body
    no larger than :data:`EVENT_LIMIT` is not scanned (no event in it can be larger)."""
    if len(body) <= EVENT_LIMIT:
        return len(body)
    last = largest = 0
    for end in _EVENT_END.finditer(body):
        largest = max(largest, end.start() - last)
        last = end.end()
    return max(largest, len(body) - last)


def _fill_outputs(state: SessionState, messages: list[Any]) -> None:
    """Tool results the client sends back become the outputs of the calls they answer."""
    k = last_assistant(messages)
    if k is None:
        return
    pending = {c.call_id: c for c in state.calls if c.call_id and not c.output}
    for m in messages[k + 1:]:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") in pending:
            content = m.get("content")
            pending[m["tool_call_id"]].output = content if isinstance(content, str) else \
                json.dumps(content, ensure_ascii=False)
