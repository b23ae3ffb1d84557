"""Fixtures of the store tests: a run with two targets in the fresh store."""

from __future__ import annotations

import pytest


@pytest.fixture
def run_id(store) -> int:
    rid = store.create_run(
        label="nightly",
        kind="live",
        suite="scenarios/",
        config={"repeats": 3},
        fingerprint={"suite_sha256": "ab12", "engine": "0.1.0"},
    )
    for name in ("qwen-27b", "qwen-35b-moe"):
        store.add_target(
            rid, name=name, model=name, base_url="http://127.0.0.1:8000/v1", settings={}
        )
    return rid
