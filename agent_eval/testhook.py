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

Hold points: the run recorder (``live/recorder.py``: ``run``, ``--resume``, ``replay``)
and the import's batch writer (``importers/recording.py``).  Imports nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
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


def holding() -> bool:
    """Whether this process must hold: its hold file was created and still exists."""
    path = os.environ.get(HOLD)
    if not path or path not in _signalled:
        return False
    return time.monotonic() < _signalled[path] + HOLD_S and Path(path).exists()


def hold() -> None:
    """Wait while :func:`holding` (Ctrl-C ends the wait as it ends the command)."""
    while holding():
        time.sleep(0.02)


async def hold_async() -> None:
    """:func:`hold` for the event loop (cancelling the task ends the wait)."""
    while holding():
        await asyncio.sleep(0.02)
