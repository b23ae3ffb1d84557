"""The run's progress bar on a terminal (rich's progress), apart from ``progress.py`` so
a run without a terminal (CI, a pipe: the plain lines) never imports it."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from agent_eval.cli.progress import flight_text, rate_text, tokens_text


class _InFlight(ProgressColumn):
    """Sessions and turns in flight and tokens/s, read from the tally at each refresh."""

    def __init__(self, tally, started: Callable[[], float]) -> None:
        super().__init__()
        self.tally, self.started = tally, started

    def render(self, task) -> Text:
        tokens = tokens_text(self.tally, time.monotonic() - self.started())
        return Text(flight_text(self.tally) + (f" · {tokens}" if tokens else ""))


class Bar:
    """The run's progress bar on a terminal, shown once the number of sessions to play is
    known."""

    def __init__(self, console: Console, run_id: int, tally) -> None:
        self.console, self.run_id, self.tally = console, run_id, tally
        self.progress: Progress | None = None
        self.started = time.monotonic()

    def start(self, total: int) -> None:
        if not total:
            return
        self.started = time.monotonic()
        self.progress = Progress(
            TextColumn("[bold]run {task.fields[run]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("sessions · {task.fields[calls]} calls · {task.fields[rate]} errors/100 ·"),
            _InFlight(self.tally, lambda: self.started),
            TimeElapsedColumn(), console=self.console, transient=False)
        self.task = self.progress.add_task("run", total=total, run=self.run_id, calls=0,
                                           rate="–")
        self.progress.start()

    def update(self, t, _records) -> None:
        if self.progress is not None:
            calls = t.calls
            self.progress.update(self.task, completed=t.done, calls=calls,
                                 rate=rate_text(t, calls))

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
