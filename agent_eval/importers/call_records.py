"""Read flat call records: one JSON object per tool call, the shape of
a corpus of real agent tool calls (fields ``source_repo``, ``model``,
``session_id``, ``turn``, ``tool``, ``command``, ``args_json``, ``result_status``,
``result_excerpt``).

Consecutive records with the same ``(source_repo, model, session_id)`` form one session.
Tool names map as follows: ``bash`` (mini-swe-agent), ``swe-agent-shell`` (SWE-agent)
and ``tmux_keystrokes`` (Terminus, one trailing Enter dropped) are judged as bash
commands; ``__format_error__`` (a reply the harness could not parse into one action) is
a call with the raw reply as its arguments and the source verdict ``deny``;
``__harness__`` actions were injected by the harness, not the model, and are left out of
the calls; every other name (tau-bench functions) is kept with its JSON arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.importers.reading import (
    ImportedCall,
    ImportedSession,
    SkipReporter,
    iter_jsonl,
    warn_skipped,
)

SHELL_TOOLS = frozenset({"bash", "swe-agent-shell", "tmux_keystrokes"})
FORMAT_ERROR = "__format_error__"
HARNESS = "__harness__"


def read_sessions(
    path: Path, *, model: str | None, on_skip: SkipReporter | None = None
) -> Iterator[ImportedSession]:
    """Yield one session per run of consecutive records of the same session."""
    path = Path(path)
    current: ImportedSession | None = None
    key: tuple[Any, ...] | None = None
    for line, rec in iter_jsonl(path, on_skip=on_skip):
        if not isinstance(rec, dict) or "tool" not in rec:
            (on_skip or warn_skipped)(path, line, "not a call record with `tool`")
            continue
        rec_key = (rec.get("source_repo"), rec.get("model"), rec.get("session_id"))
        if current is None or rec_key != key:  # no session yet only before the first record
            if current is not None:
                yield current
            key = rec_key
            current = ImportedSession(
                id=str(rec.get("session_id") or f"{path.stem}:{line}"),
                model=model or str(rec.get("model") or "unknown"),
                title=str(rec.get("source_repo") or "") or None,
            )
        call = call_from_record(rec, len(current.calls))
        if call is not None:
            current.calls.append(call)
    if current is not None:
        yield current


def call_from_record(rec: dict[str, Any], turn: int) -> ImportedCall | None:
    """One call from a record, or None for a harness-injected action (pure)."""
    tool = str(rec.get("tool") or "")
    command = rec.get("command")
    output = str(rec.get("result_excerpt") or "")
    if tool == HARNESS:
        return None
    if tool == FORMAT_ERROR:
        return ImportedCall(tool=tool, arguments=str(command or ""), turn_index=turn, kind="bash",
                            output=output, source_decision="deny",
                            source_reason="format error: the harness found no single action")
    if tool in SHELL_TOOLS and isinstance(command, str):
        if tool == "tmux_keystrokes" and command.endswith("\n"):
            command = command[:-1]
        return ImportedCall(tool=tool, arguments=json.dumps({"command": command}, ensure_ascii=False),
                            turn_index=turn, kind="bash", text=command, output=output)
    return ImportedCall(tool=tool, arguments=str(rec.get("args_json") or ""), turn_index=turn,
                        kind="other", output=output)
