"""Fixtures of the simulator's tests: the fixture suite and a running server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import OpenAI
from support.simplay import FIXTURE_SUITE

from agent_eval.scenario import Suite, load_suite
from agent_eval.sim import run_sim_in_thread


@pytest.fixture(scope="session")
def suite() -> Suite:
    return load_suite(FIXTURE_SUITE)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with run_sim_in_thread("disciplined", suite=FIXTURE_SUITE, seed=7) as url:
        yield url


@pytest.fixture
def client(sim_url: str) -> OpenAI:
    return OpenAI(base_url=sim_url, api_key="sim-key", max_retries=0, timeout=120)


