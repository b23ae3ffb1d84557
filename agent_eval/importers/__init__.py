"""Transcript imports: sessions recorded by other harnesses, judged by our engine.

One module per source format parses files into :class:`ImportedSession` records (pure
parsing, no judging).  :func:`import_sessions` then judges every call with
``agent_eval.policy.check_call`` and yields ready-to-store :class:`SessionRecord`s, so
every report, gate and drill-down works on imported sessions as on live ones.

Formats (``FORMATS``)::

    openai          chat-completions messages: a JSON list, an object with `messages`,
                    or JSONL of {"id", "model", "messages"} sessions
    opencode        `opencode export` JSON, opencode.db (1.2+), storage/ folder (<= 1.1),
                    `opencode run --format json` stream
    claude-code     ~/.claude/projects/*/*.jsonl transcripts, stream-json output
    mini-swe-agent  trajectories of 0.x (a bare list of messages), 1.x and 2.0-2.2
                    (.traj.json; text actions or `tool_calls`, format errors)
    swe-agent       SWE-agent 0.x and 1.x .traj trajectories (`trajectory` or `history`)
    call-records    flat JSONL, one call a line (e.g. a corpus of real agent tool calls)
    codex           Codex CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl, 0.3x-0.89+)
    openhands       OpenHands event streams (trajectory JSON, events/ folder, V1 events)
    qwen-code       ~/.qwen/projects/<cwd>/chats/*.jsonl and their subagents/ files
    gemini-cli      ~/.gemini/tmp/<project>/chats/session-*.jsonl (and .json) and subagents

``auto`` (or no FORMAT) tells the format of each file (:mod:`.auto`, :mod:`.detect`), so
a folder mixing formats imports in one run.  A folder is read a file at a time; a file
its reader refuses is reported and skipped, never the end of the import.

Claude Code: 1.x, 2.0 and 2.1 (parallel tool calls written as separate lines, subagent
files); OpenCode 1.1 storage folder to 1.18 database.  aider is not a format: its
``.aider.chat.history.md`` is Markdown prose, and the commands it ran (``/run``, shell
blocks the user accepted) are not recorded as structured tool calls, so there is nothing
to count or judge exactly.

Tool mapping: the reader says whether a source tool runs a shell command or reads a file
(``Bash``/``bash``/``shell``, ``Read``/``read``/``view``) and pulls out the command or
path (``command``, ``file_path``, ``filePath``).  The engine then sees the allow-list's
own bash or read tool with ``{"command": ...}`` / ``{"path": ...}`` (the argument names
the allow-list declares); the record keeps the source's tool name and raw arguments.  A
shell call whose arguments carry no command (a harness format error) reaches the engine
with its raw arguments and is reported malformed.  Any other tool name stays as it is,
so a tool the allow-list does not offer is AE101.  An agent CLI's own tools
(``run_shell_command``, ``exec_command``, ``read_file`` ...) are judged by their tool
profiles (``policy/profiles.py``), as the proxy judges them.

Subagents: where the files keep the link (OpenCode, Claude Code, Codex, Qwen Code, Gemini
CLI: each reader's docstring says where), a subagent session is stored as a child of its
parent and the spawning call is linked to it (:func:`import_families`).  A file that
holds tool calls of which its reader found none is refused, naming the format it looks
like (``source.refuse_no_calls``): never an import of call-less sessions.

Session status: ``completed`` unless the source recorded a harness or API error, or the
transcript was cut before the result of its last call (both ``error``: excluded from
model rates), or a step/cost limit ended it (``stalled``), or its last reply was lost by
the serving stack (``error``, the reason a live run stores: :func:`read_stack`, for the
formats that keep the server's replies).  Each reader's docstring gives
its exact mapping.  No handshake is asked of imported sessions (``required`` 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, get_args

from agent_eval.call_recorder import (
    TEXT_CALL_TOOL,
    CallRecorder,
    OfferedTools,
    SessionJudges,
    text_call,
)
from agent_eval.errors import ConfigError
from agent_eval.importers import (
    call_records,
    claude_code,
    codex,
    gemini_cli,
    mini_swe_agent,
    openai,
    opencode,
    openhands,
    qwen_code,
    swe_agent,
)
from agent_eval.importers.auto import FileReporter, read_tagged
from agent_eval.importers.detect import guess_format
from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    guarded,
    refuse_no_calls,
)
from agent_eval.policy import AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.policy.verdict import Invocation
from agent_eval.scenario.protocols import Protocols, system_prompt_of
from agent_eval.stack_reading import StackReading
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    assign_next_actions,
    storable,
)
from agent_eval.wire.markup import find_tool_markup

ImportFormat = Literal["openai", "opencode", "claude-code", "mini-swe-agent", "swe-agent", "call-records",
                       "codex", "openhands", "qwen-code", "gemini-cli"]

Reader = Callable[..., Iterator[ImportedSession]]

FORMATS: dict[str, Reader] = {
    "openai": openai.read_sessions,
    "opencode": opencode.read_sessions,
    "claude-code": claude_code.read_sessions,
    "mini-swe-agent": mini_swe_agent.read_sessions,
    "swe-agent": swe_agent.read_sessions,
    "call-records": call_records.read_sessions,
    "codex": codex.read_sessions,
    "openhands": openhands.read_sessions,
    "qwen-code": qwen_code.read_sessions,
    "gemini-cli": gemini_cli.read_sessions,
}
AUTO = "auto"
"""The FORMAT that tells each file's format itself."""
MISREAD = {("openai", "mini-swe-agent"), ("openai", "openhands"), ("openai", "swe-agent"),
           ("claude-code", "qwen-code")}
"""(FORMAT named, format found) pairs where the named reader would read the file without
error but miss its calls: refused up front, naming the right format."""
assert tuple(FORMATS) == get_args(ImportFormat)

__all__ = [
    "FORMATS",
    "ImportFormat",
    "ImportedCall",
    "ImportedSession",
    "Judge",
    "import_families",
    "import_sessions",
    "read_sessions",
    "read_tagged_sessions",
]


def read_sessions(
    fmt: str, path: str | Path, *, model: str | None = None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Parse ``path`` as ``fmt`` (or ``auto``); an unknown format or a missing path is a
    ``ConfigError``."""
    return (session for _, session in read_tagged_sessions(fmt, path, model=model, on_skip=on_skip))


def read_tagged_sessions(
    fmt: str, path: str | Path, *, model: str | None = None, on_skip: SkipReporter | None = None,
    on_file: FileReporter | None = None,
) -> Iterator[tuple[str, ImportedSession]]:
    """``(format, session)`` for each session at ``path``, read as ``fmt`` or ``auto``."""
    if fmt != AUTO and fmt not in FORMATS:
        raise ConfigError(
            f"unknown import format {fmt!r}: use one of {', '.join(FORMATS)} or {AUTO}", field="FORMAT"
        )
    path = Path(path)
    if not path.exists():
        raise ConfigError("file not found; pass an existing transcript file or folder", path=str(path))
    if fmt != AUTO and not path.is_dir():
        guess = refuse_misread(fmt, path)
        sessions = guarded(FORMATS[fmt](path, model=model, on_skip=on_skip), path, fmt)
        return ((fmt, s) for s in refuse_no_calls(sessions, path, fmt, guess))
    return read_tagged(FORMATS, None if fmt == AUTO else fmt, path, model=model, on_skip=on_skip,
                       on_file=on_file)


def refuse_misread(fmt: str, path: Path) -> str | None:
    """ConfigError when ``fmt``'s reader would read ``path`` without error but miss its
    calls; else the format ``path`` looks like (None: not recognisable)."""
    found = guess_format(path)
    if (fmt, found) in MISREAD:
        raise ConfigError(
            f"this is a {found} file, which the {fmt} reader would read without its calls; "
            f"is this {'an' if fmt[0] in 'aeio' else 'a'} {fmt} file? (try: {found})", path=str(path))
    return found


def import_sessions(
    fmt: str,
    path: str | Path,
    allowlist: AllowList | ResolvedPolicy,
    *,
    model: str | None = None,
    on_skip: SkipReporter | None = None,
    on_file: FileReporter | None = None,
    protocols: Protocols | None = None,
    template_markers: frozenset[str] | None = None,
) -> Iterator[SessionRecord]:
    """Parse ``path`` as ``fmt`` (or ``auto``) and judge every call; yield one whole
    record per session, its ``source`` the format it was read as (the records of
    :func:`import_families`, one after another)."""
    for family in import_families(fmt, path, allowlist, model=model, on_skip=on_skip,
                                  on_file=on_file, protocols=protocols,
                                  template_markers=template_markers):
        yield from family


HELD_FAMILIES = 64
"""Sessions waiting for a child the file links them to: past this many, the oldest is
given up on (stored without the link), so memory stays flat whatever the input."""


def import_families(
    fmt: str,
    path: str | Path,
    allowlist: AllowList | ResolvedPolicy,
    *,
    model: str | None = None,
    on_skip: SkipReporter | None = None,
    on_file: FileReporter | None = None,
    protocols: Protocols | None = None,
    template_markers: frozenset[str] | None = None,
) -> Iterator[list[SessionRecord]]:
    """The judged sessions of :func:`import_sessions`, a family at a time: a session
    whose call spawned a subagent session (``ImportedCall.child``) is held until that
    child is read, and both are yielded together, so they are stored in one batch with
    the call linked to its child (``CallRecord.child_key``) and the child to its parent
    (``parent_key``).  Any other session is a family of one.

    ``model`` overrides the model name the source recorded (it becomes the target).
    Session keys are the source session ids, made unique within the import; a subagent
    session links to its parent when the parent was imported before it, and a call to
    its child when the child follows it (a child the files do not hold leaves the call
    unlinked).  A session whose file held calls the reader could not read carries the
    tag ``skipped_calls:N``.  With ``protocols``, each session's handshake is checked
    against them.  ``template_markers``: the call format the stack notes name (AE511).
    """
    judge = Judge(allowlist, protocols, template_markers)
    seen: dict[str, int] = {}
    keys: dict[str, str] = {}  # source session id -> the key it was stored under
    held: dict[int, tuple[list[SessionRecord], set[str]]] = {}  # family -> records, children awaited
    waiting: dict[str, tuple[int, CallRecord]] = {}  # child id -> (family, the spawning call)
    for source, session in read_tagged_sessions(fmt, path, model=model, on_skip=on_skip, on_file=on_file):
        key = session.id
        count = seen.get(key, 0)
        seen[key] = count + 1
        if count:
            key = f"{key}#{count + 1}"
        record = judge.session(session, key=key, source=source)
        if session.lone_surrogates:  # judged as it came (AE202); stored as U+FFFD
            record = storable(record)
        if session.parent is not None and session.parent in keys:
            record.parent_key = keys[session.parent]
        keys[session.id] = key
        family_id, call = waiting.pop(session.id, (None, None))
        if family_id is not None and call is not None and family_id in held:
            call.child_key = key
            members, awaited = held[family_id]
            members.append(record)
            awaited.discard(session.id)
        else:
            family_id = id(record)
            members, awaited = [record], set()
        judged = [c for c in record.calls if c.tool != TEXT_CALL_TOOL]  # not markup's AE104
        for imported, stored in zip(session.calls, judged, strict=True):
            if imported.child is None:
                continue
            if imported.child in keys:  # the child came first: it is stored already
                stored.child_key = keys[imported.child]
            else:
                waiting[imported.child] = (family_id, stored)
                awaited.add(imported.child)
        if awaited:
            held[family_id] = (members, awaited)
            while len(held) > HELD_FAMILIES:
                yield _release(held, next(iter(held)), waiting)
        elif family_id in held:
            yield _release(held, family_id, waiting)
        else:
            yield members
    while held:
        yield _release(held, next(iter(held)), waiting)


def _release(held: dict[int, tuple[list[SessionRecord], set[str]]], family_id: int,
             waiting: dict[str, tuple[int, CallRecord]]) -> list[SessionRecord]:
    """The records of a held family, its calls whose child never came left unlinked."""
    members, awaited = held.pop(family_id)
    for child in awaited:
        waiting.pop(child, None)
    return members


def session_tags(session: ImportedSession) -> list[str]:
    """The tags an imported session is stored with: its title, its skipped calls."""
    tags = [f"title:{session.title}"] if session.title else []
    if session.skipped_calls:
        tags.append(f"skipped_calls:{session.skipped_calls}")
    return tags


WIRE_REPLY_FORMATS = frozenset({"openai"})
"""Formats whose turns are the server's Chat Completions replies as sent (finish reason,
usage, ``tool_calls``): read for stack faults.  Elsewhere a turn is the harness's own view
of a reply: mini-swe-agent's calls are parsed out of the text (``stop`` beside them is no
fault), an agent CLI splits one reply into several lines and says finish reasons in its
vendor's words; the same checks would find faults the stack never made."""


def read_stack(session: ImportedSession, source: str,
               template_markers: frozenset[str] | None = None) -> StackReading:
    """The stack faults of an imported session's replies (``stack_reading.py``), read with
    the request settings the file kept; a reply a fault lost has its calls taken out of
    ``session.calls`` (kept in the transcript, never judged as the model's).  Call ids
    are not checked: a transcript's may be its harness's own.  ``template_markers``: the
    call format the operator's stack notes name (``import --stack-parser``): markup in
    it left in a reply's text is the parser's (AE511)."""
    stack = StackReading(check_ids=False)
    if source not in WIRE_REPLY_FORMATS:
        return stack
    by_turn: dict[int, list[ImportedCall]] = {}
    for call in session.calls:
        by_turn.setdefault(call.turn_index, []).append(call)
    lost: set[int] = set()
    for turn in session.turns:
        calls = by_turn.get(turn.index, [])
        faults = stack.reply(
            turn.index, {**session.settings, **(turn.request or {})},
            finish_reason=turn.finish_reason, content=turn.content, reasoning=turn.reasoning,
            calls=[_WireView(c) for c in calls], completion_tokens=turn.completion_tokens,
            template_markers=template_markers)
        if any(f.ends for f in faults):
            lost.add(turn.index)
    if lost:
        session.calls = [c for c in session.calls if c.turn_index not in lost]
    return stack


def with_text_calls(calls: list[CallRecord], session: ImportedSession,
                    stack: StackReading) -> list[CallRecord]:
    """``calls`` with one AE104 call for each reply that holds tool-call markup in its
    text and no call, as the proxy judges the same reply relayed: unless a stack fault
    lost that reply (AE511: the markup is the template's own format, its parser's fault)."""
    lost = {f.turn_index for f in stack.faults if f.ends}
    called = {c.turn_index for c in calls}
    text = [text_call(0, t.index, t.content, spans[0]) for t in session.turns
            if t.index not in lost and t.index not in called
            and (spans := find_tool_markup(t.content or ""))]
    if not text:
        return calls
    merged = sorted(calls + text, key=lambda c: c.turn_index)  # stable: a turn's order kept
    for i, c in enumerate(merged):
        c.index = i
    return merged


class _WireView:
    """An imported call as ``stack_reading`` reads one (id, name, arguments)."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self, call: ImportedCall) -> None:
        self.id, self.name, self.arguments = call.call_id, call.tool, call.arguments


class Judge:
    """Judges imported sessions under one allow-list through the call recorder
    (``call_recorder.py``), as the proxy judges the same calls relayed: the source's tool names
    and spellings are read as its harness meant them, and verdicts of repeated calls are
    reused (real transcripts repeat commands such as ``python reproduce.py`` often).
    Under an agent CLI's configuration each session is judged by the agent its system
    prompt names (``calls.SessionJudges``)."""

    def __init__(self, allowlist: AllowList | ResolvedPolicy,
                 protocols: Protocols | None = None,
                 template_markers: frozenset[str] | None = None) -> None:
        self.judges = SessionJudges(allowlist, foreign=True)
        self.template_markers = template_markers  # the stack notes' call format (AE511)
        self.allowlist = self.judges.allowlist
        self.protocols = protocols  # closing sequences to check (scenario/protocols.py)
        self.calls = self.judges.for_session().calls

    def session(self, session: ImportedSession, *, key: str, source: str) -> SessionRecord:
        """The stored form of ``session``: every call judged, next actions filled."""
        judge = self.judges.for_session(system_prompt=system_prompt_of(session.messages),
                                        workdir=session.workdir, client=session.client,
                                        mode=session.mode)
        stack = read_stack(session, source, self.template_markers)
        offered = OfferedTools()  # the tools the client offered, with their schemas
        base = offered.add(session.tools, 0) if session.tools else {}
        by_turn = {t.index: offered.add(t.request.get("tools"), t.index)
                   for t in session.turns if isinstance(t.request, dict)}
        # with the tools known, the calls are judged as the proxy judges them: against the
        # names offered (AE101 for another) and each tool's own schema (AE108)
        judged = [self.judged(c, i, judge.calls, schemas=by_turn.get(c.turn_index) or base)
                  for i, c in enumerate(session.calls)]
        calls = [record for record, _ in judged]
        if source in WIRE_REPLY_FORMATS:
            calls = with_text_calls(calls, session, stack)
        assign_next_actions(calls)
        handshake = HandshakeResult()
        if self.protocols is not None:
            handshake = self.protocols.handshake(
                [inv for record, inv in judged if record.decision == "allow"],
                system_prompt_of(session.messages))
        ended = stack.ended_on(len(session.turns) - 1) if session.status != "error" else None
        record = SessionRecord(
            key=key,
            target=session.model,
            scenario=session.id,
            status="error" if ended else session.status,
            error=ended or session.error,
            tags=session_tags(session),
            handshake=handshake,
            messages=session.messages,
            turns=session.turns,
            calls=calls,
            started_at=session.started_at,
            finished_at=session.finished_at,
            source=source,
            policy_agent=judge.agent,
            policy_agent_via=judge.via,
            policy_emulation=judge.emulation,
            stack_faults=stack.faults,
        )
        offered.stamp(record)
        return record

    def call(self, call: ImportedCall, index: int) -> CallRecord:
        """One judged call; the record keeps the source's tool name and raw arguments."""
        return self.judged(call, index)[0]

    def judged(self, call: ImportedCall, index: int, calls: CallRecorder | None = None, *,
               schemas: dict[str, str | None] | None = None
               ) -> tuple[CallRecord, Invocation | None]:
        """One judged call and the script invocation the engine parsed from it;
        ``schemas``: the tools its client offered with their argument schemas
        (``calls.OfferedTools``), when the source shows them."""
        record, verdict = (calls or self.calls).record(
            index, call.turn_index, call.tool, call.arguments, kind=call.kind, text=call.text,
            call_id=call.call_id, output=call.output, source_decision=call.source_decision,
            source_reason=call.source_reason, offered=list(schemas) if schemas else None,
            schema=schemas.get(call.tool) if schemas else None)
        return record, verdict.invocation
