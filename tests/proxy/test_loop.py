"""The relay's event loop: uvloop when installed, asyncio's own when it is not."""

from __future__ import annotations

import asyncio
import sys

import pytest

from agent_eval.proxy import loop


async def _running_loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_the_relay_runs_on_uvloop_when_it_is_installed():
    assert loop.run(_running_loop_module()).startswith("uvloop")


def test_without_uvloop_the_relay_runs_on_asyncios_loop(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert loop.run(_running_loop_module()) == "asyncio.unix_events"


def test_run_returns_the_coroutines_value_and_raises_its_error():
    async def answer() -> int:
        return 42

    async def fail() -> None:
        raise ValueError("boom")

    assert loop.run(answer()) == 42
    with pytest.raises(ValueError, match="^boom$"):
        loop.run(fail())
