"""A hold point for the interrupt tests: a long command stops once it has stored
something, and says so.

Tests that interrupt ``run`` or ``import`` (Ctrl-C, SIGKILL, a server killed mid-run)
must step in while the command is certainly mid-job.  Making the job huge or slow only
moves the race, and a faster machine loses it.  Instead, with ``AGENT_EVAL_TEST_HOLD=FILE``
in its environment, a command creates FILE (holding its pid) once
``AGENT_EVAL_TEST_HOLD_AFTER`` sessions (default 1) are stored, then goes on storing
nothing new while FILE exists: the test waits for FILE, does its deed, and deletes FILE
to let the command go on (or signals it).  A hold lasts :data:`HOLD_S` seconds at most,
so a test that forgets to let go cannot hang.  Without the variable nothing happens.

Hold points: the run recorder (``runs/recorder.py``: ``run``, ``--resume``, ``replay``)
and the batches of imports, ``collect`` and rescore (``runs/writer.py``).  Imports nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

HOLD = "AGENT_EVAL_TEST_HOLD"
HOLD_AFTER = "AGENT_EVAL_TEST_HOLD_AFTER"
HOLD_S = 120.0

_signalled: dict[str, float] = {}  # hold file -> when it was created


def stored(count: int) -> None:
    """``count`` sessions are stored so far: create the hold file once they are enough."""
    path = os.environ.get(HOLD)
    if not path or path in _signalled or count < int(os.environ.get(HOLD_AFTER) or 1):
        return
    Path(path).write_text(str(os.getpid()))
    _signalled[path] = time.monotonic()


def batch_room(written: int) -> int | None:
    """How many sessions the next batch may take so that the hold comes exactly after
    ``AGENT_EVAL_TEST_HOLD_AFTER`` stored ones (None: no limit).  Without it, a fast
    model and a lingering writer could store the whole run in the first batch, and the
    hold would come when nothing is left to interrupt."""
    path = os.environ.get(HOLD)
    if not path or path in _signalled:
        return None
    return max(1, int(os.environ.get(HOLD_AFTER) or 1) - written)


def holding() -> bool:
    """Whether this process must hold: its hold file was created and still exists."""
    path = os.environ.get(HOLD)
    if not path or path not in _signalled:
        return False
    return time.monotonic() < _signalled[path] + HOLD_S and Path(path).exists()


def hold(stop: Callable[[], bool] | None = None) -> None:
    """Wait while :func:`holding` (Ctrl-C ends the wait as it ends the command; so does
    ``stop()`` turning true: a writer thread told to close)."""
    while holding() and not (stop is not None and stop()):
        time.sleep(0.02)


async def hold_handed(count: int) -> None:
    """The event loop's side of a hold: once ``count`` sessions are handed to the writer,
    enough to reach the hold, wait until the writer has stored them and created the file,
    then while it holds.  So a fast model cannot play the whole run while the writer
    lingers over its first batch."""
    path = os.environ.get(HOLD)
    if not path or count < int(os.environ.get(HOLD_AFTER) or 1):
        return
    deadline = time.monotonic() + HOLD_S
    while path not in _signalled and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await hold_async()


async def hold_async() -> None:
    """:func:`hold` for the event loop (cancelling the task ends the wait)."""
    while holding():
        await asyncio.sleep(0.02)
