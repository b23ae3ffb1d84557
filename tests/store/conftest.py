"""Fixtures of the store tests: a run with two targets in the fresh store."""

from __future__ import annotations

import pytest
from support.factories import add_run


@pytest.fixture
def run_id(store) -> int:
    return add_run(store, label="nightly", suite="scenarios/", config={"repeats": 3},
                   fingerprint={"suite_sha256": "ab12", "engine": "0.1.0"},
                   targets=("qwen-27b", "qwen-35b-moe"), base_url="http://127.0.0.1:8000/v1")
