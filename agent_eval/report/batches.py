"""The batched session files (``sessions/<first>-<last>.html``), written beside the index.

Streaming every session back (the rows its page shows, ``Store.iter_transcripts``) and
rendering its transcript through Jinja2 (autoescape on, as everywhere) is more than half
the work of a large report, and it needs nothing the index needs.  So ``SessionFiles`` hands most of it to one worker process that
opens the same database, streams its range of sessions, renders them a hundred to a file
and writes them, while the main process builds the index, the lists and the summaries,
then writes the remaining (earlier) session files itself.

Robustness:

* the worker is *spawned* (a fresh interpreter), never forked: it shares no connection or
  other state with the main process and opens the store at its ``Store.address`` (the URL
  object goes to the child whole; it is never printed);
* the worker writes only ``sessions/``; nothing else is shared, so the output is the same
  bytes as the in-process path (a test compares them);
* in-process instead when ``workers=0`` or, by default, when no core is spare (on a busy
  machine the worker's start-up only adds to the time), for a run of one batch (a fork costs more than it
  saves), for an in-memory SQLite database (another process cannot see it), or when the
  pool cannot start;
* an error in the worker is raised in the main process by ``wait``.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from agent_eval.report.index import column_namer, session_links
from agent_eval.report.pages import (
    SESSIONS_DIR,
    SESSIONS_PER_FILE,
    session_file,
    transcript_page,
)
from agent_eval.report.render import render_session_batch

# the worker's share of the session files: it also pays for starting an interpreter, and
# this process first builds the index, lists and summaries, about as much CPU as 80% of
# the session files of a 10,000-session run (the profiles in
# benchmarks/history/BENCHMARKS-until-2026-11.md, "report of 10,000 sessions")
WORKER_SHARE = 0.85


def spare_core() -> bool:
    """Is a core free for a worker (load average of the last minute below cores - 1)?
    On a busy machine a second process only adds its start-up to the report's time."""
    try:
        return os.getloadavg()[0] < (os.cpu_count() or 1) - 1
    except (AttributeError, OSError):  # no load average on this platform
        return (os.cpu_count() or 1) > 1


def write_text(path: Path, text: str) -> None:
    # a lone surrogate from a broken import becomes "?" rather than stopping the report
    path.write_text(text, encoding="utf-8", errors="replace")


def write_session_files(store, run_ids: list[int], out: Path,
                        id_range: tuple[int, int] | None = None, sessions=None) -> None:
    """Stream every session of the runs (id order; only ``id_range`` when given, whole
    batch files) and write ``sessions/`` a hundred to a file, each batch rendered, written,
    then dropped: flat memory whatever the run's size.  ``sessions``: the runs' session
    rows already named by column (``column_namer``), read here when not given."""
    if sessions is None:
        name_of = column_namer(run_ids)
        sessions = [dataclasses.replace(s, target=name_of(s))
                    for s in store.session_rows(run_ids)]
    links = session_links(sessions, from_dir=SESSIONS_DIR)
    batch: list = []
    for rows in store.iter_transcripts(run_ids, id_range):  # id order: one file per id range
        sid = rows.session.id
        if batch and session_file(sid) != session_file(batch[-1].id):
            _write_batch(out, batch)
            batch = []
        page = transcript_page(rows, links)
        batch.append(dataclasses.replace(page, target=links[sid].target))
    if batch:
        _write_batch(out, batch)


def _write_batch(out: Path, pages: list) -> None:
    write_text(Path(out) / SESSIONS_DIR / session_file(pages[0].id), render_session_batch(pages))


def _write_in_worker(address, run_ids: list[int], out: Path, id_range: tuple[int, int],
                     sessions) -> None:
    from agent_eval.store import open_store

    with open_store(address) as store:
        write_session_files(store, run_ids, out, id_range, sessions)


class SessionFiles:
    """``with SessionFiles(store, run_ids, out, files, workers):`` writes ``sessions/``.
    ``workers``: None decides by ``spare_core``, 0 never starts a worker, 1 always does.

    ``files`` are the batch file names the report will hold (``session_file``);
    ``sessions`` the runs' session rows named by column, if this process has them.  With
    a worker, the worker takes the later ``WORKER_SHARE`` of the files as soon as the block
    is entered and this process writes the earlier ones on leaving it (after the index
    work inside the block), then waits for the worker; without, all on entering.
    """

    def __init__(self, store, run_ids: list[int], out: Path, files: set[str],
                 workers: int | None = None, sessions=None) -> None:
        self.store, self.run_ids, self.out = store, list(run_ids), Path(out)
        self.sessions = sessions  # this process's named session rows, when already read
        in_memory = store.address is None  # another process cannot see it
        lows = sorted(int(name.split("-")[0]) for name in files)
        wanted = spare_core() if workers is None else workers > 0
        self.parallel = wanted and len(lows) > 1 and not in_memory
        split = lows[min(len(lows) - 1, max(1, round(len(lows) * (1 - WORKER_SHARE))))]
        self._mine = (0, split - 1) if self.parallel else None
        self._theirs = (split, lows[-1] + SESSIONS_PER_FILE - 1) if self.parallel else None
        self._pool: ProcessPoolExecutor | None = None
        self._future: Future | None = None

    def __enter__(self) -> SessionFiles:
        if self._theirs is not None:  # parallel
            try:
                self._pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
                # the session rows go along (pickled) when this process has them: reading
                # them again would cost the worker more than unpickling
                self._future = self._pool.submit(_write_in_worker, self.store.address,
                                                 self.run_ids, self.out, self._theirs,
                                                 self.sessions)
            except (OSError, ValueError, NotImplementedError):  # no processes here: serial
                self._shutdown()
        if self._future is None:
            self._mine = None
            write_session_files(self.store, self.run_ids, self.out, sessions=self.sessions)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None and self._future is not None:
                write_session_files(self.store, self.run_ids, self.out, self._mine,
                                    self.sessions)
                self._future.result()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
