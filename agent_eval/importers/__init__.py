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
    mini-swe-agent  .traj.json trajectories (bash actions, format errors)
    swe-agent       SWE-agent 0.x .traj trajectories (ACI commands and bash)
    call-records    flat JSONL, one call a line (e.g. a corpus of real agent tool calls)

Tool mapping: the reader says whether a source tool runs a shell command or reads a file
(``Bash``/``bash``/``shell``, ``Read``/``read``/``view``) and pulls out the command or
path (``command``, ``file_path``, ``filePath``).  The engine then sees the allow-list's
own bash or read tool with ``{"command": ...}`` / ``{"path": ...}`` (the argument names
the allow-list declares); the record keeps the source's tool name and raw arguments.  A
shell call whose arguments carry no command (a harness format error) reaches the engine
with its raw arguments and is reported malformed.  Any other tool name stays as it is,
so a tool the allow-list does not offer is AE101.

Session status: ``completed`` unless the source recorded a harness or API error, or the
transcript was cut before the result of its last call (both ``error``: excluded from
model rates), or a step/cost limit ended it (``stalled``).  Each reader's docstring gives
its exact mapping.  No handshake is asked of imported sessions (``required`` 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, get_args

from agent_eval.errors import ConfigError
from agent_eval.importers import (
    call_records,
    claude_code,
    mini_swe_agent,
    openai,
    opencode,
    swe_agent,
)
from agent_eval.importers.source import ImportedCall, ImportedSession, SkipReporter
from agent_eval.policy import AllowList, Verdict, check_call
from agent_eval.transcript import (
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    assign_next_actions,
)

ImportFormat = Literal["openai", "opencode", "claude-code", "mini-swe-agent", "swe-agent", "call-records"]

Reader = Callable[..., Iterator[ImportedSession]]

FORMATS: dict[str, Reader] = {
    "openai": openai.read_sessions,
    "opencode": opencode.read_sessions,
    "claude-code": claude_code.read_sessions,
    "mini-swe-agent": mini_swe_agent.read_sessions,
    "swe-agent": swe_agent.read_sessions,
    "call-records": call_records.read_sessions,
}
assert tuple(FORMATS) == get_args(ImportFormat)

__all__ = [
    "FORMATS",
    "ImportFormat",
    "ImportedCall",
    "ImportedSession",
    "Judge",
    "import_sessions",
    "read_sessions",
]


def read_sessions(
    fmt: str, path: str | Path, *, model: str | None = None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Parse ``path`` as ``fmt``; an unknown format or a missing path is a ``ConfigError``."""
    reader = FORMATS.get(fmt)
    if reader is None:
        raise ConfigError(
            f"unknown import format {fmt!r}: use one of {', '.join(FORMATS)}", field="FORMAT"
        )
    path = Path(path)
    if not path.exists():
        raise ConfigError("file not found; pass an existing transcript file or folder", path=str(path))
    return reader(path, model=model, on_skip=on_skip)


def import_sessions(
    fmt: str,
    path: str | Path,
    allowlist: AllowList,
    *,
    model: str | None = None,
    on_skip: SkipReporter | None = None,
) -> Iterator[SessionRecord]:
    """Parse ``path`` as ``fmt`` and judge every call; yield one whole record per session.

    ``model`` overrides the model name the source recorded (it becomes the target).
    Session keys are the source session ids, made unique within the import.
    """
    judge = Judge(allowlist)
    seen: dict[str, int] = {}
    for session in read_sessions(fmt, path, model=model, on_skip=on_skip):
        key = session.id
        count = seen.get(key, 0)
        seen[key] = count + 1
        if count:
            key = f"{key}#{count + 1}"
        yield judge.session(session, key=key, source=fmt)


class Judge:
    """Judges imported calls under one allow-list, remembering verdicts of repeated calls.

    ``check_call`` is pure, so a verdict for the same (tool, arguments) can be reused;
    real transcripts repeat commands (``python reproduce.py``) often enough to matter.
    """

    CACHE_LIMIT = 50_000

    def __init__(self, allowlist: AllowList) -> None:
        self.allowlist = allowlist
        self.bash = next((t for t in allowlist.tools if t.kind == "bash"), None)
        self.read = next((t for t in allowlist.tools if t.kind == "read"), None)
        self._cache: dict[tuple[str, str], Verdict] = {}

    def session(self, session: ImportedSession, *, key: str, source: str) -> SessionRecord:
        """The stored form of ``session``: every call judged, next actions filled."""
        calls = [self.call(c, i) for i, c in enumerate(session.calls)]
        assign_next_actions(calls)
        return SessionRecord(
            key=key,
            target=session.model,
            scenario=session.id,
            status=session.status,
            error=session.error,
            tags=[f"title:{session.title}"] if session.title else [],
            handshake=HandshakeResult(),
            messages=session.messages,
            turns=session.turns,
            calls=calls,
            started_at=session.started_at,
            finished_at=session.finished_at,
            source=source,
        )

    def call(self, call: ImportedCall, index: int) -> CallRecord:
        """One judged call; the record keeps the source's tool name and raw arguments."""
        tool, arguments = self.engine_view(call)
        verdict = self.verdict(tool, arguments)
        invocation = verdict.invocation
        return CallRecord(
            index=index,
            turn_index=call.turn_index,
            tool=call.tool,
            arguments=call.arguments,
            decision=verdict.decision,
            primary=verdict.primary,
            findings=[FindingRecord(f.code, f.message, f.start, f.end) for f in verdict.findings],
            command=call.text,
            call_id=call.call_id,
            output=call.output,
            script=invocation.script if invocation is not None else None,
            source_decision=call.source_decision,
            source_reason=call.source_reason,
        )

    def engine_view(self, call: ImportedCall) -> tuple[str, str | dict[str, str]]:
        """The (tool name, arguments) the engine judges for a source call."""
        spec = self.bash if call.kind == "bash" else self.read if call.kind == "read" else None
        if spec is None:
            return call.tool, call.arguments
        if call.text is None:
            return spec.name, call.arguments
        argument = spec.argument or ("command" if call.kind == "bash" else "path")
        return spec.name, {argument: call.text}

    def verdict(self, tool: str, arguments: str | dict[str, str]) -> Verdict:
        """``check_call``'s verdict, from the cache when the same call was judged before."""
        key = (tool, arguments) if isinstance(arguments, str) else (tool, *arguments.items())
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = check_call(tool, arguments, self.allowlist)
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = verdict
        return verdict
