"""Write an import into the store as a new run: the I/O edge of ``importers/``.

Sessions are judged as they are parsed and written in batches through the runs layer
(``runs.SessionBatches``: several sessions per transaction), so memory stays flat and a
broken file never leaves half a session behind: a session is complete before it is
batched.

The run is created only once the first whole session with a tool call is ready (or, for
a file whose sessions carry no calls, once the whole file is read and nothing suggests it
is another format).  So an import that finds nothing, or fails before its first whole
session, leaves no run at all, and ``latest`` never lands on an empty import.  If the
input turns out broken half-way, the whole sessions read before the break are written,
the run is marked ``failed`` and the error says how many were kept.  Ctrl-C marks the
run ``interrupted`` (an import is not resumed: import the file again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from agent_eval.errors import ConfigError
from agent_eval.importers import import_families
from agent_eval.importers.detect import guess_format
from agent_eval.importers.outcome import ImportSummary
from agent_eval.importers.reading import SkipReporter
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.runs import RunSpec, RunWriter, SessionBatches, TargetDefaults
from agent_eval.scenario.protocols import Protocols
from agent_eval.store import Store
from agent_eval.transcript import SessionRecord
from agent_eval.wire.markup import notes_markers


def record_import(
    store: Store,
    fmt: str,
    path: str | Path,
    policy: AllowList | ResolvedPolicy,
    *,
    allowlist_path: str | None = None,
    model: str | None = None,
    label: str | None = None,
    on_skip: SkipReporter | None = None,
    on_session: Callable[[SessionRecord], None] | None = None,
    on_file: Callable[[Path, int], None] | None = None,
    protocols: Protocols | None = None,
    protocols_path: str | None = None,
    stack_notes: Mapping[str, str] | None = None,
) -> ImportSummary:
    """Import ``path`` as a new run of kind ``import``; return what was stored.

    ``on_skip`` hears about each skipped input line, ``on_session`` about each session
    judged, ``on_file`` about each file read with its size (both for progress display).
    ``fmt`` may be ``auto``: each file is read with the format found in it.
    ``protocols`` (read from ``protocols_path``) gives each session its handshake.
    ``policy`` is an allow-list or an agent CLI's configuration (``policy.sources``).
    ``stack_notes`` (``parser``, ``template``: the operator's, as a targets file's) are
    kept in the run's config; a call format they name reads markup left in a reply's
    text as the parser's fault (AE511).

    Raises ConfigError, and stores nothing, when the file holds no session of ``fmt``
    (or only sessions without tool calls while it looks like another format); the
    message names the file, the lines skipped and, when cheap to tell, the format that
    would read it.  A ConfigError after whole sessions were read keeps them in a run
    marked ``failed`` and says so.
    """
    summary = ImportSummary()
    allowlist = policy.allowlist if isinstance(policy, ResolvedPolicy) else policy
    # the agent fixed by --agent; otherwise each session's is chosen and stored with it
    agent = policy.agent_name if isinstance(policy, ResolvedPolicy) \
        and policy.via == "option" else None

    def note_skip(p: Path, line: int, reason: str) -> None:
        summary.skipped_lines.append((str(p), line, reason))
        if on_skip is not None:
            on_skip(p, line, reason)

    spec = RunSpec(
        kind="import",
        label=label or f"import {fmt} {Path(path).name}",
        suite=str(path),
        config={"format": fmt, "path": str(path), "allowlist": allowlist.name,
                "allowlist_path": allowlist_path, "model": model,
                "policy_agent": agent, "protocols_path": protocols_path, "engine_version": ENGINE_VERSION,
                **({"stack": dict(stack_notes)} if stack_notes else {})},
        fingerprint={"allowlist": allowlist.fingerprint, "engine_version": ENGINE_VERSION,
                     "source": fmt},
    )
    run = RunWriter(store, spec, targets=TargetDefaults(base_url=f"import:{fmt}"))
    batches = SessionBatches(run)
    with run.writing():
        try:
            for family in import_families(fmt, path, policy, model=model, on_skip=note_skip,
                                          on_file=on_file, protocols=protocols,
                                          template_markers=notes_markers(dict(stack_notes or {}))):
                for record in family:
                    summary.add(record)
                batches.add(*family)  # a subagent in the batch of the call that spawned it
                summary.run_id = run.run_id
                if on_session is not None:
                    for record in family:
                        on_session(record)
        except ConfigError as exc:
            if not summary.sessions:
                raise with_format_hint(exc, fmt, path) from None
            batches.flush(create=True)
            summary.run_id = run.run_id
            raise ConfigError(  # the run ends failed
                f"{exc}; run {run.run_id} keeps the {summary.sessions} whole sessions read "
                "before the error (status failed)"
            ) from None
        except KeyboardInterrupt:  # the run ends interrupted
            raise ImportInterrupted(run.run_id) from None
        if run.run_id is None:
            refuse_empty_import(summary, fmt, path)
        batches.flush(create=True)
        summary.run_id = run.run_id
    return summary


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C during an import.  ``run_id`` is the run left ``interrupted`` (None when
    none was created yet); ``latest`` never names it (see ``store.runs.resolve_run``)."""

    def __init__(self, run_id: int | None):
        super().__init__(run_id)
        self.run_id = run_id


def refuse_empty_import(summary: ImportSummary, fmt: str, path: str | Path) -> None:
    """Raise ConfigError when nothing worth a run was read: no session at all, or only
    sessions without tool calls from a file that looks like another format."""
    skipped = len(summary.skipped_lines)
    if fmt == "auto":
        if summary.sessions:
            return
        files = len(summary.skipped_files)
        raise ConfigError(f"no sessions of any known format found ({files} files and "
                          f"{skipped - files} lines skipped); name the FORMAT to see why", path=str(path))
    guess = guess_format(path)
    if not summary.sessions:
        found = f"no {fmt} sessions found ({skipped} lines skipped)"
    elif not summary.calls and guess not in (None, fmt):
        plural = "session" if summary.sessions == 1 else "sessions"
        found = (f"no {fmt} sessions with tool calls found ({summary.sessions} {plural} "
                 f"without calls, {skipped} lines skipped)")
    else:
        return
    hint = f" (try: {guess})" if guess not in (None, fmt) else ""
    raise ConfigError(f"{found}; is this {_a(fmt)} file?{hint}", path=str(path))


def with_format_hint(exc: ConfigError, fmt: str, path: str | Path) -> ConfigError:
    """``exc`` with ``; is this a FMT file? (try: OTHER)`` added when the file looks like
    another format; ``exc`` itself otherwise."""
    guess = guess_format(path) if Path(path).exists() and fmt != "auto" else None
    if guess in (None, fmt) or "(try: " in str(exc):
        return exc
    hinted = ConfigError(f"{exc}; is this {_a(fmt)} file? (try: {guess})")
    hinted.path, hinted.field = exc.path, exc.field
    return hinted


def _a(fmt: str) -> str:
    """The format with its article: "an openai", "a claude-code"."""
    return f"{'an' if fmt[0] in 'aeio' else 'a'} {fmt}"
