"""Paths and allow-lists the policy tests share (imported by the test modules)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from agent_eval.policy import AllowList, load_allowlist

REPO = Path(__file__).resolve().parents[2]
ALLOWLISTS = REPO / "allowlists"


@cache
def allowlist_named(name: str) -> AllowList:
    return load_allowlist(ALLOWLISTS / f"{name}.yaml")
