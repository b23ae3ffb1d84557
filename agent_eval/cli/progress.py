"""A run's progress as it plays: a bar on a terminal, plain lines everywhere else.

Without a terminal (CI, a pipe, ``tee``) rich's bar draws nothing, and a run against a slow
server would print nothing for twenty minutes.  There a plain line is printed when the run
starts, every ``AGENT_EVAL_PROGRESS_EVERY`` seconds (default 30) and when it ends, as
pytest and pip do::

    run 3: 2/12 sessions · 14 calls · 7.1 errors/100 · 3 sessions, 3 turns in flight · 41 tok/s · 1m30s

Both read the run's tally (``live.run.RunTally``); the tally counts sessions and requests
in flight and the completion tokens the servers report (tokens/s shows only where a server
reports usage).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from agent_eval.cli.progress_bar import Bar

DEFAULT_EVERY_S = 30.0


def progress_every() -> float:
    """Seconds between plain progress lines: ``AGENT_EVAL_PROGRESS_EVERY`` or 30."""
    try:
        every = float(os.environ.get("AGENT_EVAL_PROGRESS_EVERY", DEFAULT_EVERY_S))
    except ValueError:
        return DEFAULT_EVERY_S
    return every if every > 0 else DEFAULT_EVERY_S


def elapsed_text(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def rate_text(tally, calls: int | None = None) -> str:
    """Errors per 100 calls so far; ``calls`` when the caller has read them already."""
    calls = tally.calls if calls is None else calls
    return f"{100 * tally.errors / calls:.1f}" if calls else "–"


def flight_text(tally) -> str:
    """What is under way: sessions and turns (requests) in flight, tokens/s so far."""
    return (f"{tally.sessions_in_flight} session{'s' if tally.sessions_in_flight != 1 else ''}, "
            f"{tally.requests_in_flight} turn{'s' if tally.requests_in_flight != 1 else ''} "
            "in flight")


def tokens_text(tally, elapsed: float) -> str:
    """Completion tokens per second over the run so far; empty when no server reported
    usage."""
    if not tally.completion_tokens or elapsed <= 0:
        return ""
    return f"{tally.completion_tokens / elapsed:.0f} tok/s"


def progress_line(run_id: int, tally, total: int, elapsed: float) -> str:
    """One plain progress line (see the module docstring)."""
    calls = tally.calls
    parts = [f"run {run_id}: {tally.done}/{total} sessions", f"{calls} calls",
             f"{rate_text(tally, calls)} errors/100", flight_text(tally)]
    tokens = tokens_text(tally, elapsed)
    if tokens:
        parts.append(tokens)
    parts.append(elapsed_text(elapsed))
    return " · ".join(parts)


class PlainProgress:
    """Plain lines at the start, every ``every`` seconds (a thread that only prints) and
    at the end.  ``clock`` and ``on_line`` are for tests."""

    def __init__(self, console: Console, run_id: int, tally, *, every: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_line: Callable[[str], None] | None = None) -> None:
        self.console, self.run_id, self.tally = console, run_id, tally
        self.every = every if every is not None else progress_every()
        self.clock, self.on_line = clock, on_line
        self.total = 0
        self.started = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, total: int) -> None:
        self.total, self.started = total, self.clock()
        if not total:
            return
        self.tick()
        self._thread = threading.Thread(target=self._ticking, name="progress", daemon=True)
        self._thread.start()

    def _ticking(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()

    def tick(self) -> None:
        line = progress_line(self.run_id, self.tally, self.total, self.clock() - self.started)
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        if self.on_line is not None:
            self.on_line(line)

    def update(self, _tally, _records) -> None:
        """Sessions are counted in the tally; the lines come on the clock."""

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.tick()


def run_progress(console: Console, run_id: int, tally) -> Bar | PlainProgress:
    """A bar on a terminal (``progress_bar.py``: rich's progress loads only for it), plain
    lines otherwise."""
    if console.is_terminal:
        from agent_eval.cli.progress_bar import Bar

        return Bar(console, run_id, tally)
    return PlainProgress(console, run_id, tally)
