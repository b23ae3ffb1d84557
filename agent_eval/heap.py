"""The collector, tuned for the command line's process: off while it starts, then told
that what it built lives as long as the process.

An ``agent-eval run`` process builds ~140,000 long-lived objects before its first turn
(the openai SDK's types, SQLAlchemy, the pydantic models, the suite), and CPython's cyclic
collector walks every one of them at each full collection: two or three while the
process starts and more while it plays, 0.1-0.2 CPU-s of a 2.5 CPU-s run of the bundled
suite (BENCHMARKS.md, "CPU per model turn beside plain loops").  So the command line
starts with the collector off (:func:`start_lean`, called by ``agent_eval.__main__``
before anything is imported; imports make almost no cyclic garbage: ~2,400 unreachable
objects of 140,000 here), and :func:`settle` turns it back on with everything alive at that
moment moved to the permanent generation (``gc.freeze``: the modules, the suite, the
store and the clients live until the process exits), so each later collection walks
only what was made since.  CPython's documentation gives the same recipe for servers
that fork after start-up (``gc.freeze``).  From then on the young generation is collected
every :data:`YOUNG_THRESHOLD` net allocations instead of CPython's 700: a turn's requests
and replies are dicts and lists freed by reference counting, and at 700 a run of 1,300
turns ran ~70 young collections (and, 16 sessions in flight, a full one) walking the
sessions under way: 0.04 CPU-s of 1.3, for at most a few MB more garbage held between
collections.

A command that plays model turns (``run``, ``demo``, ``worker``, ``replay``) settles when
the first item is played (``live/loop.py``), after its imports and set-up, and ``check
--batch`` when its batch starts; every other command settles as soon as it is resolved
(``cli/__init__.py``: ``SETTLE_LATER``), so a long-lived process (``view``, ``proxy``,
``sim-server``) collects as usual.  Only a process started by
:func:`start_lean` is touched: a library user's process and the test suite's (which call
the commands through ``CliRunner``) keep their collector as it is.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Net allocations between young-generation collections once settled."""

_lean = False


def start_lean() -> None:
    """The collector off until :func:`settle` (the command line's first step)."""
    global _lean
    _lean = True
    gc.disable()


def settle() -> None:
    """Freeze what is alive and turn the collector back on, its young generation at
    :data:`YOUNG_THRESHOLD`; once per process, and only in a process that
    :func:`start_lean` started (elsewhere nothing happens)."""
    global _lean
    if not _lean:
        return
    _lean = False
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    gc.enable()
