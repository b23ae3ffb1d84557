"""Fixtures of the policy tests: the shipped allow-lists."""

from __future__ import annotations

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import AllowList


@pytest.fixture(scope="session")
def ralf() -> AllowList:
    return allowlist_named("ralf")


@pytest.fixture(scope="session")
def permissive() -> AllowList:
    return allowlist_named("permissive")
