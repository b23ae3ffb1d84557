"""The one loop that plays a run's items and hands their sessions to the run recorder.

``run`` and ``--resume`` (a plan in memory, ``run.PlannedItems``), ``worker`` (items
claimed from the store, ``workers.ClaimedItems``) and ``replay`` (stored contexts,
``replay.ReplayItems``) all play through :func:`play_items`; what differs is where the
items come from (an :class:`ItemSource`) and what playing one means (``play``: a scenario
session with its children, or a stored context sent again).

``lanes`` maps a lane (a target's name, or None for any item) to its number of slots:
``run`` gives each target its own concurrency, a worker and a replay one pool.  Each slot
takes an item, plays it, and hands the sessions to the recorder (``recorder.py``), which
stores them on its one writer thread.  ``play`` returns None when the item's server went
away: the item is given back unplayed and its source stops handing out items of that
target (the whole source, for a worker or a replay), so what was not played is played by
``--resume`` or another worker later, never burned as ``error`` sessions.  ``after``
hears of each stored item and may stop its target too (a target whose first sessions
were all refused).  Cancellation (Ctrl-C) stops cleanly: sessions handed over are stored
by the recorder, sessions in flight are dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from agent_eval import heap
from agent_eval.runs import RunRecorder
from agent_eval.transcript import SessionRecord

Item = TypeVar("Item")


class ItemSource(Protocol[Item]):
    """Where the loop takes its items."""

    async def take(self, lane: str | None) -> Item | None:
        """The next item of ``lane``, or None when there is none left for it."""

    async def give_back(self, item: Item) -> None:
        """An item that was not played (its server went away): left for later."""

    def stop(self, item: Item) -> None:
        """Hand out no more items of ``item``'s target (or none at all)."""


async def play_items(source: ItemSource[Any], recorder: RunRecorder,
                     lanes: dict[str | None, int],
                     play: Callable[[Any], Awaitable[list[SessionRecord] | None]],
                     after: Callable[[Any, list[SessionRecord]], bool] | None = None) -> None:
    """Play every item ``source`` hands out; see the module docstring."""
    heap.settle()  # set up: the collector back on, what was built frozen (heap.py)

    async def slot(lane: str | None) -> None:
        while (item := await source.take(lane)) is not None:
            records = await play(item)
            if records is None:
                await source.give_back(item)  # not stored: played again later
                source.stop(item)
                return
            await recorder.session(records, item)
            if after is not None and after(item, records):
                source.stop(item)

    await asyncio.gather(*(slot(lane) for lane, n in lanes.items() for _ in range(max(1, n))))
