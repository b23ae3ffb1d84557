"""Write an import into the store as a new run: the I/O edge of ``importers/``.

Sessions are judged as they are parsed and written in batches (several sessions per
``record_sessions`` call, each batch one transaction), so memory stays flat and a
broken file never leaves half a session behind: a session is complete before it is
batched.  If the input turns out broken half-way, the sessions already written stay
(each whole) and the run is marked ``failed``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent_eval.importers import import_sessions
from agent_eval.importers.source import SkipReporter
from agent_eval.importers.summary import ImportSummary
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.transcript import SessionRecord

BATCH_CALLS = 2_000
"""Flush a batch once it holds this many calls (or BATCH_SESSIONS sessions)."""
BATCH_SESSIONS = 200


def record_import(
    store,
    fmt: str,
    path: str | Path,
    allowlist: AllowList,
    *,
    allowlist_path: str | None = None,
    model: str | None = None,
    label: str | None = None,
    on_skip: SkipReporter | None = None,
    on_session: Callable[[SessionRecord], None] | None = None,
) -> ImportSummary:
    """Import ``path`` as a new run of kind ``import``; return what was stored.

    ``on_skip`` hears about each skipped input line, ``on_session`` about each session
    judged (for progress display).
    """
    summary = ImportSummary()

    def note_skip(p: Path, line: int, reason: str) -> None:
        summary.skipped_lines.append((str(p), line, reason))
        if on_skip is not None:
            on_skip(p, line, reason)

    run_id = store.create_run(
        label=label or f"import {fmt} {Path(path).name}",
        kind="import",
        suite=str(path),
        config={"format": fmt, "path": str(path), "allowlist": allowlist.name,
                "allowlist_path": allowlist_path, "model": model, "engine_version": ENGINE_VERSION},
        fingerprint={"allowlist": allowlist.fingerprint, "engine_version": ENGINE_VERSION,
                     "source": fmt},
    )
    summary.run_id = run_id
    writer = BatchWriter(store, run_id, base_url=f"import:{fmt}")
    try:
        for record in import_sessions(fmt, path, allowlist, model=model, on_skip=note_skip):
            writer.add(record)
            summary.add(record)
            if on_session is not None:
                on_session(record)
        writer.flush()
    except BaseException:
        store.set_run_status(run_id, "failed")
        raise
    store.set_run_status(run_id, "finished")
    return summary


class BatchWriter:
    """Buffers whole sessions and writes them several at a time, adding each new target
    (model name) to the run before its first session is written."""

    def __init__(self, store, run_id: int, *, base_url: str) -> None:
        self.store = store
        self.run_id = run_id
        self.base_url = base_url
        self.targets: set[str] = set()
        self.pending: list[SessionRecord] = []
        self.pending_calls = 0

    def add(self, record: SessionRecord) -> None:
        if record.target not in self.targets:
            self.store.add_target(self.run_id, name=record.target, model=record.target,
                                  base_url=self.base_url, settings={})
            self.targets.add(record.target)
        self.pending.append(record)
        self.pending_calls += len(record.calls)
        if self.pending_calls >= BATCH_CALLS or len(self.pending) >= BATCH_SESSIONS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.store.record_sessions(self.run_id, self.pending)
        self.pending = []
        self.pending_calls = 0
