"""What a format reader yields, and the careful file reading every reader shares.

A reader (``openai.py``, ``opencode.py``, ...) only parses: it turns one source file into
:class:`ImportedSession` records and never judges.  It also says, per call, which kind of
tool the source meant (``bash``, ``read`` or ``other``) and pulls out the command or path,
because only the reader knows that Claude Code spells it ``file_path`` and OpenCode
``filePath``.  ``importers/__init__.py`` then maps those kinds onto the allow-list's own
tool names and judges.

Broken input is handled here once:

* a single-document JSON file that does not parse raises ``ConfigError`` naming the file
  and the line (:func:`load_json_document`);
* a JSONL file skips each broken line, reports it through ``on_skip`` (a warning on
  stderr by default) and goes on (:func:`iter_jsonl`);
* an empty file raises ``ConfigError``: there is nothing to import;
* a value of the wrong type (a string where an object is expected, a list for a call's
  arguments) is read as far as it goes by each reader; should a reader still raise on
  one, :func:`guarded` turns that into a ``ConfigError`` naming the file and the line
  (an ``Error:`` line; the sessions read before it are kept);
* every session leaves here well-typed (:func:`tidy`: numbers where the store keeps
  numbers, text where it keeps text), and marked when its file escapes a lone surrogate
  (``"\\ud800"``, text no UTF-8 store can hold: :func:`loads`), so it is stored with
  U+FFFD in its place once judged.

A session is built completely before it is yielded, so a consumer never sees half of one.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# what a source's tool does: shared with the proxy through the call recorder
from agent_eval.call_recorder import (  # noqa: F401 - re-exported for the readers
    BASH_TOOLS,
    COMMAND_KEYS,
    PATH_KEYS,
    READ_TOOLS,
    ToolKind,
    classify_call,
    kind_of_tool,
)
from agent_eval.errors import ConfigError
from agent_eval.transcript import (
    EXIT_STATES,
    LONE_SURROGATE_ESCAPE,
    Decision,
    ExitState,
    TurnRecord,
    as_text,
)

SkipReporter = Callable[[Path, int, str], None]
"""Called as ``on_skip(path, line, reason)`` for each input line a reader had to skip."""

_RECORD: ContextVar[int | None] = ContextVar("agent_eval_import_record", default=None)
"""The line of the JSONL record a reader is reading (``iter_jsonl`` sets it), for the
error :func:`guarded` raises should the reader fail on it; None in a JSON document."""

_LONE_SURROGATES: ContextVar[bool] = ContextVar("agent_eval_import_surrogates", default=False)
"""Whether the file being read escapes a lone surrogate somewhere (:func:`loads`)."""

READER_FAULTS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                 RecursionError)
"""What a reader raises on a value of a type it did not expect (never a ConfigError)."""


@dataclass(slots=True)
class ImportedCall:
    """One tool call as the source recorded it, before our verdict.

    ``tool`` and ``arguments`` are the original name and raw argument text.  ``kind`` and
    ``text`` are the reader's reading of them: a shell command (``bash``) or a file path
    (``read``) that the engine should judge, or ``None`` when the arguments did not carry
    one (the engine then sees the raw arguments and reports them malformed).
    ``source_decision`` is the verdict the source harness recorded itself, if any.
    ``child`` is the id of the session this call spawned (a subagent), when the source
    links them; the import links the stored call to that session.
    """

    tool: str
    arguments: str
    turn_index: int
    kind: ToolKind = "other"
    text: str | None = None
    call_id: str | None = None
    output: str = ""
    source_decision: Decision | None = None
    source_reason: str | None = None
    child: str | None = None


@dataclass(slots=True)
class ImportedSession:
    """One whole session of a source, parsed.  ``id`` is the source's own session id.

    ``parent`` is the id of the session that started this one (a subagent), when the
    source links them.  ``skipped_calls`` counts tool calls the file holds that the reader
    could not turn into calls (each with a reason in ``skipped_reasons``), so an import
    never stores fewer calls than the file holds without saying so.
    """

    id: str
    model: str
    title: str | None = None
    status: ExitState = "completed"
    error: str | None = None
    calls: list[ImportedCall] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    parent: str | None = None
    skipped_calls: int = 0
    skipped_reasons: list[str] = field(default_factory=list)
    lone_surrogates: bool = False  # its file escapes one: stored mended once judged
    workdir: str | None = None  # the folder the CLI ran in, when the file says (Claude
    # Code's `cwd`, Codex's `session_meta.cwd`): a CLI's own rules read paths against it
    client: tuple[str, str] | None = None  # (harness, release) that wrote the file
    mode: str | None = None  # the CLI's mode, when the file says (Codex's turn_context)
    tools: list[Any] | None = None  # the tools its client offered, with their schemas,
    # when the source shows them for the whole session (telemetry's tool definitions);
    # a turn's own request (``TurnRecord.request``) offers them per turn
    settings: dict[str, Any] = field(default_factory=dict)  # the requests' output cap and
    # tool settings, when the file keeps them (``max_tokens``...): read for stack faults

    def skip_call(self, reason: str) -> None:
        """Count one call of the file that could not be read, with why."""
        self.skipped_calls += 1
        if len(self.skipped_reasons) < 5:
            self.skipped_reasons.append(reason)


def warn_skipped(path: Path, line: int, reason: str) -> None:
    """The default ``on_skip``: one warning line on stderr, naming file and line."""
    print(f"Warning: {path}: line {line}: skipped: {reason}", file=sys.stderr)


def read_text(path: Path) -> str:
    """The whole file as text; a missing, unreadable or empty file is a ``ConfigError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found; pass an existing transcript", path=str(path)) from None
    except IsADirectoryError:
        raise ConfigError("is a directory; pass a file", path=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file ({exc.strerror})", path=str(path)) from None
    if not text.strip():
        raise ConfigError("line 1: empty file; nothing to import", path=str(path))
    return text


def loads(text: str | bytes) -> Any:
    """``json.loads``, noting when the JSON escapes a lone surrogate (``"\\ud800"``: text
    that is not UTF-8, which no store can hold): the sessions read from this file then
    leave :func:`guarded` marked, and are stored with U+FFFD in its place once judged
    (``transcript.storable``; the engine judges the text as it came)."""
    value = json.loads(text)
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if LONE_SURROGATE_ESCAPE.search(raw):
        _LONE_SURROGATES.set(True)
    return value


def load_json_document(path: Path, text: str | None = None) -> Any:
    """Parse a single-document JSON file; a syntax error names the file and line."""
    if text is None:
        text = read_text(path)
    _RECORD.set(None)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"line {exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); "
            "the file looks truncated or is not this format",
            path=str(path),
        ) from None
    except RecursionError:
        raise ConfigError("not readable JSON: nested too deep", path=str(path)) from None
    except ValueError as exc:  # an integer of over 4,300 digits (Python's guard)
        raise ConfigError(f"not readable JSON: {exc}", path=str(path)) from None


def iter_jsonl(
    path: Path, text: str | None = None, *, on_skip: SkipReporter | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each JSON line; broken lines (bad JSON, not
    UTF-8, nested too deep) are skipped and reported, blank lines ignored.

    Without ``text`` the file is read a line at a time, so memory stays flat however
    large the file; an empty (or missing, unreadable) file is a ``ConfigError``.
    """
    report = on_skip or warn_skipped
    lines: Iterable[str | bytes] = text.splitlines() if text is not None else _file_lines(path)
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                report(path, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
                continue
        else:
            line = raw
        if not line.strip():
            continue
        try:
            value = loads(line)
        except json.JSONDecodeError as exc:
            report(path, number, f"not valid JSON ({exc.msg})")
            continue
        except RecursionError:
            report(path, number, "JSON nested too deep")
            continue
        except ValueError as exc:  # an integer of over 4,300 digits (Python's guard)
            report(path, number, f"not readable JSON ({exc})")
            continue
        _RECORD.set(number)  # the record a reader is on, should it fail on it (guarded)
        yield number, value


def _file_lines(path: Path) -> Iterator[bytes]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise ConfigError("file not found; pass an existing transcript", path=str(path)) from None
    except IsADirectoryError:
        raise ConfigError("is a directory; pass a file", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file ({exc.strerror})", path=str(path)) from None
    with fh:
        empty = True
        for line in fh:
            if empty and line.strip():
                empty = False
            yield line
        if empty:
            raise ConfigError("line 1: empty file; nothing to import", path=str(path))


def looks_like_jsonl(text: str) -> bool:
    """True when the text is several JSON values, one a line, rather than one document."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    first, _, rest = stripped.partition("\n")
    if not rest.strip():
        return False
    try:
        json.loads(first)
    except (ValueError, RecursionError):
        return False
    return True


def dump_arguments(value: Any) -> str:
    """Raw argument text for a parsed argument object (sources that store objects)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def text_of(value: Any) -> str:
    """Flatten a tool result (string, list of text blocks, object) to the text shown."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict):
                if "text" in item:
                    parts.append(str(item["text"]))
                elif item.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(json.dumps(item, ensure_ascii=False))
            else:
                parts.append(str(item))
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False)


def from_millis(value: Any) -> datetime | None:
    """A datetime from epoch milliseconds (OpenCode), or None."""
    if isinstance(value, int | float) and value > 0:
        try:
            return datetime.fromtimestamp(value / 1000, tz=UTC)
        except (OverflowError, OSError, ValueError):  # past year 9999: not a time
            return None
    return None


def from_iso(value: Any) -> datetime | None:
    """A datetime from an ISO 8601 string (Claude Code), or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def guarded(sessions: Iterator[ImportedSession], path: Path, fmt: str) -> Iterator[ImportedSession]:
    """A reader's sessions, each :func:`tidy`; a reader that raises on a record it did not
    expect (a string where an object belongs) becomes a ``ConfigError`` naming the file
    and the line of the record, so the import says one ``Error:`` line, keeps the whole
    sessions read before it and marks its run failed, instead of a traceback."""
    token, lone = _RECORD.set(None), _LONE_SURROGATES.set(False)
    try:
        while True:
            try:
                session = next(sessions)
            except StopIteration:
                return
            except READER_FAULTS as exc:
                line = _RECORD.get()
                where = f"line {line}: " if line else ""
                detail = str(exc).splitlines()[0][:120] if str(exc) else ""
                raise ConfigError(
                    f"{where}a record the {fmt} reader cannot read ({type(exc).__name__}"
                    f"{': ' + detail if detail else ''}); fix or remove it and import again",
                    path=str(path)) from None
            session.lone_surrogates = _LONE_SURROGATES.get()
            yield tidy(session)
    finally:
        _RECORD.reset(token)
        _LONE_SURROGATES.reset(lone)


CALL_MARKERS = re.compile(
    rb'"functionCall"\s*:\s*\{|"toolCalls"\s*:\s*\[\s*\{|"tool_calls"\s*:\s*\[\s*\{|'
    rb'"type"\s*:\s*"(?:tool_use|function_call|local_shell_call|custom_tool_call)"')
"""How a tool call is written in the JSON of every format read here (Gemini parts, Gemini
CLI, chat messages, Claude Code blocks, Responses items): a file holding one holds calls."""
MARKER_CHUNK = 1 << 20


def holds_tool_calls(path: Path) -> bool:
    """Whether the text of ``path`` writes a tool call in any format read here (a cheap
    scan, made only when a reader found no call in it; a database is not scanned)."""
    try:
        with path.open("rb") as fh:
            if fh.read(16) == b"SQLite format 3\x00":
                return False
            fh.seek(0)
            tail = b""
            while chunk := fh.read(MARKER_CHUNK):
                if CALL_MARKERS.search(tail + chunk):
                    return True
                tail = chunk[-64:]
    except OSError:
        return False
    return False


def refuse_no_calls(sessions: Iterator[ImportedSession], path: Path, fmt: str,
                    guess: str | None) -> Iterator[ImportedSession]:
    """``sessions`` as they come, but a file that holds tool calls of which the reader
    found none is a ``ConfigError`` naming the file and the format to try (``guess``, the
    format the file looks like), never an import of call-less sessions.  Sessions are
    held back only until the first call."""
    held: list[ImportedSession] = []
    calls = False
    for session in sessions:
        if calls:
            yield session
        elif session.calls or session.skipped_calls:
            calls = True
            yield from held
            held.clear()
            yield session
        else:
            held.append(session)
    if not calls and held and path.is_file() and holds_tool_calls(path):
        try_ = (f"is this {'an' if fmt[0] in 'aeio' else 'a'} {fmt} file? (try: {guess})"
                if guess not in (None, fmt) else "name the FORMAT it is: agent-eval import FORMAT PATH")
        raise ConfigError(f"holds tool calls, but the {fmt} reader found none in it; {try_}",
                          path=str(path))
    yield from held


_INT_MAX = 2**63 - 1


def tidy(session: ImportedSession) -> ImportedSession:
    """``session`` with every field of the type the store keeps: a count that is not a
    whole number (or does not fit 64 bits) becomes None, a time that is not a finite
    number None, a text that is not text its JSON, a status or source verdict outside
    the vocabulary the default.  Readers copy values from files as they find them; this
    is where a list in ``finish_reason`` or ``10**30`` in ``prompt_tokens`` stops."""
    s = session
    s.id, s.model = as_text(s.id) or "session", as_text(s.model) or "unknown"
    s.title, s.error = _maybe_text(s.title), _maybe_text(s.error)
    s.parent = _maybe_text(s.parent)
    if s.status not in EXIT_STATES:
        s.status = "completed"
    s.started_at = s.started_at if isinstance(s.started_at, datetime) else None
    s.finished_at = s.finished_at if isinstance(s.finished_at, datetime) else None
    s.messages = [m for m in s.messages if isinstance(m, dict)]
    for turn in s.turns:
        turn.content, turn.reasoning = as_text(turn.content), as_text(turn.reasoning)
        turn.finish_reason = _maybe_text(turn.finish_reason)
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"):
            value = getattr(turn, name)
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT_MAX
            setattr(turn, name, value if ok else None)
        for name in ("latency_s", "ttft_s", "decode_tps"):
            value = getattr(turn, name)
            ok = isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and abs(value) < 1e12
            setattr(turn, name, float(value) if ok else None)
        if not isinstance(turn.started_at, datetime):
            turn.started_at = None
        if turn.request is not None and not isinstance(turn.request, dict):
            turn.request = None
    for call in s.calls:
        call.tool, call.arguments, call.output = as_text(call.tool), as_text(call.arguments), \
            as_text(call.output)
        call.text, call.call_id = _maybe_text(call.text), _maybe_text(call.call_id)
        call.source_reason, call.child = _maybe_text(call.source_reason), _maybe_text(call.child)
        if call.source_decision not in ("allow", "deny"):
            call.source_decision = None
        if call.kind not in ("bash", "read", "other"):
            call.kind = "other"
        if not isinstance(call.turn_index, int) or isinstance(call.turn_index, bool):
            call.turn_index = 0
    return s


def _maybe_text(value: Any) -> str | None:
    return None if value is None else as_text(value)


def dict_field(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is a JSON object, else an empty one (a reader's lenient view)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def list_field(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` when it is a JSON array, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, list) else []
