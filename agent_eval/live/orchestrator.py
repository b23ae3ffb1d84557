"""The mock orchestrator: play one scenario against a model, judging every tool call.

``run_session`` is the turn loop of one subagent.  It sends the rendered rules and the
task, and for every tool call in every reply it asks the policy engine for a verdict, then
answers the way the real harness would: the canned output of the simulated script (or the
virtual file), or the allow-list's denial text.  Nothing the model emits is executed;
the environment is a dictionary.

A call matching one of the scenario's ``children`` spawns a child session (the nested
orchestrator case), played to its end before the parent continues; the child's records
come back with the parent's, linked by ``parent_key``.  A child template is first filled
with the values its ``bind`` takes from the spawning call (``--stage``, ``--attempt``).

The session ends when
- the model replies without a tool call: ``completed`` if the task closed, else ``abandoned``;
- the handshake's last step is emitted (the stage closes): ``completed`` when every goal
  call was made too, else ``abandoned``;
- a limit (turns, tool calls) is hit: ``stalled``, unless the task had already closed;
  so is the server's context window: a turn after the first that the server refuses as
  too long for its context ends the session ``stalled`` (or ``completed`` if the task had
  closed), with the server's words as the stored reason (:data:`CONTEXT_FULL`); the
  conversation, not a fault, outgrew the window.  A first turn that does not fit is the
  server's setup (its context is shorter than the task) and stays ``error``; a reply the
  model wrote until the window was full ends ``stalled`` on any turn
  (:data:`CONTEXT_FULL_WRITING`): the prompt fitted, the run-away is the model's;
- the model server fails past the client's retries: ``error``, with the reason.  Error
  sessions are excluded from every model rate;
- a reply is cut by the token limit inside a tool call, whose arguments are then
  incomplete JSON, in any server's style (finish reason ``length`` as vLLM and SGLang
  say it, or ``tool_calls`` with the completion tokens at the request's ``max_tokens`` as
  llama-cpp-python says it): ``error`` too, with :data:`TRUNCATED` as the reason.  The
  operator's ``max_tokens`` cut it, not the model: it is a truncation (stack fault
  AE501), counted apart (the run warns), never the model's AE102 malformed arguments.
  The cut call is not judged; a call whose arguments came through whole is judged as usual.

A target with ``stream_parity`` has each turn answered whole and streamed from the same
context (``client.py``); a streamed reply that differs is AE510, and the session goes on
with the whole reply, so its model figures read as a plain whole run's.

Every reply is also read for the other stack faults (``policy/stack.py``, rules AE5xx):
each is kept on the session (``SessionRecord.stack_faults``), never as a model error.
One that leaves nothing of the model's to judge (a ``tool_calls`` finish with no call, a
required tool choice answered with nothing at all, tokens counted for an empty reply, a
name that is not a name, stream deltas that collide, a call in the model's own template
format left in the text: AE511) ends the session ``error`` with :data:`STACK_FAULT`
as the reason; an HTTP 5xx whose body says the parser failed is kept on the ``error``
session it ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from agent_eval.call_recorder import TEXT_CALL_MESSAGE, TEXT_CALL_TOOL, CallRecorder
from agent_eval.call_recorder import text_call as markup_call
from agent_eval.errors import ContextExceeded, HarnessFault
from agent_eval.live.shaping import made_up_call_id
from agent_eval.policy import Verdict
from agent_eval.scenario import LoadedScenario, Suite, instantiate
from agent_eval.scenario.spec import HandshakeCount
from agent_eval.stack_reading import StackReading
from agent_eval.transcript import (
    STACK_FAULT,  # how the reason of a session another stack fault ended starts (error)
    TRUNCATED,  # the reason of a session a truncated reply ended (error, out of every rate)
    CallRecord,
    ExitState,
    HandshakeResult,
    SessionRecord,
    StackFaultRecord,
    TurnRecord,
    assign_next_actions,
    share_messages,
)
from agent_eval.wire.markup import find_tool_markup

MAX_CHILD_DEPTH = 3
# how the stored reason of a session the server's context window ended starts
CONTEXT_FULL = "context window full, the server refused the next turn: "
# ... and of one whose model wrote a reply that filled the window (on any turn)
CONTEXT_FULL_WRITING = "context window full, the model's reply filled it: "
__all__ = ["CONTEXT_FULL", "CONTEXT_FULL_WRITING", "STACK_FAULT", "TEXT_CALL_MESSAGE",
           "TEXT_CALL_TOOL", "TRUNCATED", "ChatModel", "read_reply", "reply_stack_faults",
           "run_session"]
NO_PARSE_OUTPUT = "(no tool call was parsed; the harness ended the turn)"


class ChatModel(Protocol):
    """Anything that answers a chat completion: ``client.ModelClient`` or a scripted model."""

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
        seed_key: str | None = None,
    ) -> Any: ...


@dataclass
class _Progress:
    """What the session has achieved so far, updated by allowed calls only."""

    scenario: LoadedScenario
    state: dict[str, str]
    goal_done: set[int] = field(default_factory=set)
    handshake: HandshakeCount = field(init=False)

    def __post_init__(self) -> None:
        self.handshake = HandshakeCount(self.scenario.spec.handshake)

    @property
    def closed(self) -> bool:
        goal_met = len(self.goal_done) == len(self.scenario.spec.goal)
        return goal_met and self.handshake.done == len(self.handshake.steps)

    @property
    def stage_closed(self) -> bool:
        """The handshake's last step was emitted: the harness ends the subagent here."""
        return self.handshake.completed

    def advance(self, verdict: Verdict) -> None:
        spec = self.scenario.spec
        inv = verdict.invocation
        for i, want in enumerate(spec.goal):
            if i not in self.goal_done and want.matches(inv):
                self.goal_done.add(i)
        self.handshake.advance(inv)

    def handshake_result(self) -> HandshakeResult:
        return self.handshake.result()


@dataclass
class _Session:
    """One session in play: what it was started with, what its turns have built so far,
    and the children it spawned."""

    scenario: LoadedScenario
    model: ChatModel
    suite: Suite | None
    target: str
    repeat: int
    key: str
    depth: int
    record: SessionRecord
    progress: _Progress
    calls: CallRecorder
    offered: list[str]
    messages: list[dict[str, Any]]
    stack: StackReading = field(default_factory=StackReading)  # its stack faults
    children: list[SessionRecord] = field(default_factory=list)


async def run_session(
    scenario: LoadedScenario,
    model: ChatModel,
    *,
    target: str,
    suite: Suite | None = None,
    repeat: int = 0,
    key: str | None = None,
    parent_key: str | None = None,
    depth: int = 0,
) -> list[SessionRecord]:
    """Play ``scenario`` once against ``model``.  Returns the session's record first, then
    the records of every child session it spawned (each with ``parent_key`` set).

    Never raises for anything the model does; a ``HarnessFault`` from the model ends the
    session with status ``error``.  ``suite`` resolves child scenarios by name.
    """
    spec = scenario.spec
    key = key or f"{target}/{spec.name}/{repeat}"
    record = _new_record(scenario, key, target, repeat, parent_key)
    tools = scenario.tool_schemas()
    session = _Session(
        scenario, model, suite, target, repeat, key, depth, record,
        progress=_Progress(scenario, dict(spec.environment.state)),
        calls=CallRecorder(scenario.allowlist, policy=scenario.policy),
        offered=[*spec.tools, *(t.name for t in spec.extra_tools)],
        messages=[{"role": "system", "content": scenario.system_prompt()},
                  {"role": "user", "content": spec.task}],
    )
    status: ExitState | None = None
    for turn_index in range(spec.limits.turns):
        started = _now()
        try:
            reply = await model.complete(session.messages, tools, seed_key=key)
        except ContextExceeded as exc:
            if exc.writing:  # the model's own reply ran to the end of the window
                status = "stalled"
                record.error = f"{CONTEXT_FULL_WRITING}{exc.server_message}"
            elif turn_index == 0:  # the task alone does not fit: the server's setup
                status, record.error = "error", str(exc)
            else:  # the conversation outgrew the window: a limit, like the turns
                status = "stalled"
                record.error = f"{CONTEXT_FULL}{exc.server_message}"
            break
        except HarnessFault as exc:
            status, record.error = "error", str(exc)
            session.stack.error(turn_index, exc.status, exc.server_message or str(exc))
            break
        assistant = await _take_reply(session, reply, turn_index, started)
        if (ended := session.stack.ended_on(turn_index)) is not None:
            status, record.error = "error", ended
            break
        if not reply.tool_calls:
            if reply.markup:
                record.calls.append(text_call(len(record.calls), turn_index, reply))
            status = "completed" if session.progress.closed else "abandoned"
            break
        if (status := await _answer_calls(session, reply, assistant, turn_index)) is not None:
            break
        if session.progress.stage_closed:
            status = "completed" if session.progress.closed else "abandoned"
            break
    return _finish(session, status)


def _new_record(scenario: LoadedScenario, key: str, target: str, repeat: int,
                parent_key: str | None) -> SessionRecord:
    """The session's record as it starts; under an agent CLI's rules, it names whose
    rules judge the session and the emulation that reads them."""
    spec = scenario.spec
    record = SessionRecord(
        key=key, target=target, scenario=spec.name, repeat=repeat, parent_key=parent_key,
        tags=list(spec.tags), started_at=_now(),
    )
    if scenario.policy is not None:
        record.policy_agent = scenario.policy.agent_name
        record.policy_agent_via = scenario.policy.via
        if scenario.policy.agent is not None:
            record.policy_emulation = scenario.policy.setting.emulation(
                scenario.policy.agent).describe()
    return record


async def _take_reply(session: _Session, reply: Any, turn_index: int,
                      started: datetime) -> dict[str, Any]:
    """Keep one reply (its turn on the record, its assistant message in the conversation)
    and read it for stack faults.  Returns the assistant message."""
    record = session.record
    turn = turn_record(turn_index, reply, started)
    if record.turns and turn.request is not None:  # each message held (and stored) once
        turn.request = share_messages(record.turns[-1].request, turn.request)
    record.turns.append(turn)
    assistant = assistant_message(reply, turn_index)
    session.messages.append(assistant)
    markers = None
    if not reply.tool_calls and (reply.markup or find_tool_markup(reply.reasoning or "")):
        ask = getattr(session.model, "template_markers", None)  # AE511 or AE104: whose format
        markers = await ask() if ask is not None else None
    read_reply(session.stack, reply, turn_index, markers)
    if getattr(reply, "parity", None) is not None:  # stream parity (AE510)
        session.stack.parity(turn_index, reply.request, reply, reply.parity)
    return assistant


async def _answer_calls(session: _Session, reply: Any, assistant: dict[str, Any],
                        turn_index: int) -> ExitState | None:
    """Judge the reply's tool calls in order and answer each in the conversation: its
    simulated output if allowed, else the denial.  ``stalled`` when a call comes past
    the tool-call limit (it is not judged), else None."""
    record = session.record
    for out, sent in zip(reply.tool_calls, assistant["tool_calls"], strict=True):
        if len(record.calls) >= session.scenario.spec.limits.tool_calls:
            return "stalled"
        call, verdict = session.calls.record(len(record.calls), turn_index, out.name,
                                             out.arguments, offered=session.offered,
                                             call_id=out.id)
        record.calls.append(call)
        if verdict.allowed:
            call.output = await _simulate(session, call, verdict)
        session.messages.append(
            {"role": "tool", "tool_call_id": sent["id"], "content": call.output})
    return None


def _finish(session: _Session, status: ExitState | None) -> list[SessionRecord]:
    """End the session: out of turns it is ``stalled``, and stalled by any limit it is
    ``completed`` if the task had closed.  Returns its record, then its children's."""
    record, progress = session.record, session.progress
    record.stack_faults = session.stack.faults
    if status is None or (status == "stalled" and progress.closed):
        status = "completed" if progress.closed else "stalled"
    record.status = status
    record.handshake = progress.handshake_result()
    record.messages = session.messages
    record.finished_at = _now()
    assign_next_actions(record.calls)
    return [record, *session.children]


async def _simulate(session: _Session, call: CallRecord, verdict: Verdict) -> str:
    """The output an allowed call gets.  Only reads the scenario's simulated environment."""
    spec = session.scenario.spec
    tool = session.scenario.allowlist.tool(call.tool)
    progress = session.progress
    progress.advance(verdict)
    if tool is None or tool.kind == "other":
        extra = next((t for t in spec.extra_tools if t.name == call.tool), None)
        return extra.output if extra else '{"ok": true}'
    if tool.kind == "read":
        path = verdict.path or ""
        if path in spec.environment.files:
            return spec.environment.files[path]
        return f"Error: file not found: {path}"
    inv = verdict.invocation
    output = spec.environment.default_output
    for canned in spec.environment.outputs:
        if canned.match.matches(inv):
            progress.state.update(canned.effects)
            output = canned.output
            break
    suite, key, children = session.suite, session.key, session.children
    for spawn in spec.children:
        if spawn.on.matches(inv) and suite is not None and session.depth < MAX_CHILD_DEPTH:
            child_sc = instantiate(suite.scenarios[spawn.scenario], spawn.values(inv))
            child_key = f"{key}/{spawn.scenario}#{len(children)}"
            records = await run_session(
                child_sc, session.model, target=session.target, suite=suite,
                repeat=session.repeat, key=child_key, parent_key=key, depth=session.depth + 1,
            )
            children.extend(records)
            call.child_key = child_key
            output = (f"Spawned {spawn.scenario} (session {child_key}); "
                      f"it finished with status {records[0].status}.")
            break
    return output


def read_reply(stack: StackReading, reply: Any, turn_index: int,
               template_markers: frozenset[str] | None = None) -> list[StackFaultRecord]:
    """The stack faults of one reply, read into ``stack`` with the request's tool settings
    as the client sent them (``template_markers``: the model's template format, AE511)."""
    return stack.reply(turn_index, getattr(reply, "request", None),
                       finish_reason=reply.finish_reason, content=reply.content or "",
                       reasoning=reply.reasoning or "", calls=reply.tool_calls,
                       completion_tokens=reply.completion_tokens,
                       stream_faults=getattr(reply, "stream_faults", None) or (),
                       template_markers=template_markers)


def reply_stack_faults(reply: Any, turn_index: int,
                       earlier_ids: set[str] | frozenset[str] = frozenset()
                       ) -> list[StackFaultRecord]:
    """The stack faults of one reply on its own (``earlier_ids``: the call ids of the
    session's earlier replies)."""
    stack = StackReading()
    stack.seen_ids.update(earlier_ids)
    return read_reply(stack, reply, turn_index)


def text_call(index: int, turn_index: int, reply: Any) -> CallRecord:
    """Tool-call markup the server did not parse (AE104): counted as one erroneous call."""
    return markup_call(index, turn_index, reply.content, reply.markup[0], NO_PARSE_OUTPUT)


def assistant_message(reply: Any, turn_index: int) -> dict[str, Any]:
    """The reply as the transcript keeps it: ``content`` is a string (``""`` beside tool
    calls, never ``null``), ids are the server's or made up unique, reasoning rides along
    as ``reasoning_content`` (the client sends it back only when the target asks)."""
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if getattr(reply, "reasoning", ""):
        msg["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        msg["tool_calls"] = [
            {"id": tc.id or made_up_call_id(turn_index, i), "type": "function",
             "function": {"name": tc.name, "arguments": tc.arguments}}
            for i, tc in enumerate(reply.tool_calls)
        ]
    return msg


def turn_record(index: int, reply: Any, started: datetime) -> TurnRecord:
    return TurnRecord(
        index=index, content=reply.content or "", reasoning=reply.reasoning or "",
        finish_reason=reply.finish_reason, prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens, reasoning_tokens=reply.reasoning_tokens,
        cached_tokens=reply.cached_tokens, latency_s=reply.latency_s, ttft_s=reply.ttft_s,
        decode_tps=reply.decode_tps, started_at=started,
        request=getattr(reply, "request", None),
    )


def _now() -> datetime:
    return datetime.now(UTC)
