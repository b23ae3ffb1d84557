"""One run as a source writes it: created, given targets, sessions written, status set.

Every source of runs (``run``, ``--resume``, ``worker``, ``replay``, ``import``,
``collect``, ``rescore``, ``proxy``) writes through a :class:`RunWriter`, and only this
layer (``runs/``) calls the store's run writes: ``create_run``, ``set_run_status``,
``record_sessions``, ``finish_run_if_done`` (tests/test_layers.py checks it).  So a run's
status means the same whoever wrote it:

- ``running`` from creation until the source ends it;
- ``finished`` when every session the source meant to store is stored;
- ``interrupted`` on Ctrl-C (a live run is resumable; an import is not: import again);
- ``failed`` when a fault stopped it (what was stored before the fault is kept).

:meth:`RunWriter.writing` is that rule for a source that ends in one block (import,
``collect``'s close, rescore); the live run recorder (``runs/recorder.py``) and the
proxy's recorder, which end on their own schedule, call :meth:`RunWriter.set_status`.

A run may be created lazily (``RunWriter(store, spec)``, then :meth:`create` on the first
write): an import that finds nothing leaves no run, so ``latest`` never lands on an empty
one.  :class:`SessionBatches` buffers whole sessions (a parent with its children) and
writes them several at a time, each batch one transaction, so memory stays flat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agent_eval import testhook
from agent_eval.store import RunKind, RunStatus, Store
from agent_eval.transcript import SessionRecord

BATCH_CALLS = 2_000
""":class:`SessionBatches` writes a batch once it holds this many calls..."""
BATCH_SESSIONS = 200
"""... or this many sessions."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """A run to create: its kind, label, suite (or source), the configuration it ran
    with and the fingerprint that makes runs comparable (credentials are scrubbed by the
    store); ``parent_run_id`` for a rescore or replay of an earlier run."""

    kind: RunKind
    label: str | None
    suite: str | None
    config: dict[str, Any]
    fingerprint: dict[str, Any]
    parent_run_id: int | None = None


@dataclass(frozen=True, slots=True)
class TargetDefaults:
    """How a target met first in a session is stored when the source names only a model
    (imports, rescore, the proxy): the model's name is the target's, with this endpoint
    and these settings."""

    base_url: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunCounts:
    """What a writer stored: sessions (children included), their turns and calls."""

    sessions: int = 0
    turns: int = 0
    calls: int = 0

    def add(self, records: list[SessionRecord]) -> None:
        self.sessions += len(records)
        self.turns += sum(len(r.turns) for r in records)
        self.calls += sum(len(r.calls) for r in records)


class RunWriter:
    """One run in the store as one source writes it.

    ``run`` is the run's id, or a :class:`RunSpec` of a run created by :meth:`create`
    (called by the first :meth:`write`).  With ``targets``, each session's target is
    added to the run before its first session is written; without, the source adds its
    targets itself (:meth:`add_target`; a live run has them from its plan)."""

    def __init__(self, store: Store, run: int | RunSpec, *,
                 targets: TargetDefaults | None = None) -> None:
        self.store = store
        self.spec = run if isinstance(run, RunSpec) else None
        self.run_id: int | None = run if isinstance(run, int) else None
        self.targets = targets
        self.target_names: set[str] = set()
        self.counts = RunCounts()

    def create(self) -> int:
        """The run's id, creating the run (status ``running``) the first time."""
        if self.run_id is None:
            if self.spec is None:  # __init__ takes an id or a spec
                raise RuntimeError("RunWriter without a run")
            spec = self.spec
            self.run_id = self.store.create_run(
                label=spec.label, kind=spec.kind, suite=spec.suite, config=spec.config,
                fingerprint=spec.fingerprint, parent_run_id=spec.parent_run_id)
        return self.run_id

    def add_target(self, *, name: str, model: str, base_url: str,
                   settings: dict[str, Any]) -> int:
        """Add a target to the run (created if need be); the existing one's id when the
        run has that name already."""
        target_id = self.store.add_target(self.create(), name=name, model=model,
                                          base_url=base_url, settings=settings)
        self.target_names.add(name)
        return target_id

    def write(self, records: list[SessionRecord]) -> None:
        """Store ``records`` (whole sessions, children after their parent) in one
        transaction; ConfigError when the store refuses one (a key stored already), and
        then none of them is stored."""
        run_id = self.create()
        if self.targets is not None:
            for name in sorted({r.target for r in records} - self.target_names):
                self.add_target(name=name, model=name, base_url=self.targets.base_url,
                                settings=dict(self.targets.settings))
        self.store.record_sessions(run_id, records)
        self.counts.add(records)

    def set_status(self, status: RunStatus) -> None:
        """Set the run's status (``running`` again, or how it ended: see the module
        docstring); nothing when the run was never created."""
        if self.run_id is not None:
            self.store.set_run_status(self.run_id, status)

    def finish_if_done(self) -> bool:
        """A planned run: mark it ``finished`` when no work item is left open (one
        worker's conditional update wins); whether this call marked it."""
        return self.store.finish_run_if_done(self.create())

    @contextlib.contextmanager
    def writing(self, *, on_interrupt: RunStatus = "interrupted") -> Iterator[RunWriter]:
        """The block writes the run, which then ends ``finished``; Ctrl-C ends it
        ``on_interrupt``, any other fault ``failed``, and the exception goes on.  A run
        the block never created is left uncreated."""
        try:
            yield self
        except KeyboardInterrupt:
            self.set_status(on_interrupt)
            raise
        except BaseException:
            self.set_status("failed")
            raise
        self.set_status("finished")


class SessionBatches:
    """Whole sessions buffered and written several at a time through a :class:`RunWriter`.

    A lazily created run (the writer holds a spec) is created only when a session with
    a tool call arrives, the buffer is full, or ``flush(create=True)`` is called: so a
    source whose sessions carry no call decides at the end whether it has a run at all.
    """

    def __init__(self, run: RunWriter, *, batch_calls: int = BATCH_CALLS,
                 batch_sessions: int = BATCH_SESSIONS) -> None:
        self.run = run
        self.batch_calls = batch_calls
        self.batch_sessions = batch_sessions
        self.pending: list[SessionRecord] = []
        self.pending_calls = 0
        self.written = 0

    @property
    def run_id(self) -> int | None:
        return self.run.run_id

    def add(self, *records: SessionRecord, flush: bool = True) -> None:
        """Buffer ``records``, written in one batch (a session and the subagent sessions
        its calls link to); written at once when the buffer is full or, before the run
        exists, when they hold its first call (unless ``flush`` is False: the caller
        flushes at a family's end)."""
        self.pending.extend(records)
        self.pending_calls += sum(len(r.calls) for r in records)
        first_calls = self.run.run_id is None and self.pending_calls > 0
        if flush and (first_calls or self.full()):
            self.flush(create=True)

    def full(self) -> bool:
        return (self.pending_calls >= self.batch_calls
                or len(self.pending) >= self.batch_sessions)

    def flush(self, *, create: bool = False) -> None:
        """Write the buffered sessions; before the run exists, only when ``create``."""
        if self.run.run_id is None:
            if not create:
                return
            self.run.create()
        if not self.pending:
            return
        self.run.write(self.pending)
        self.written += len(self.pending)
        self.pending = []
        self.pending_calls = 0
        testhook.stored(self.written)
        testhook.hold()
