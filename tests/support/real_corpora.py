"""Where the tests find the real-data corpora, which are NOT part of the repository.

The corpora (real agent tool calls, a 49,499-line shell corpus, captured OpenCode and
Claude Code files, three public trajectories) are kept outside the checkout: their data
card asks that they are read in place, never copied in.  Tests that need them look in
``$AGENT_EVAL_CORPORA`` only, and skip, saying how to enable them, when it is unset or
the file is missing.  Everything else in the suite runs from a clean clone.

    AGENT_EVAL_CORPORA=/path/to/corpora python -m pytest tests
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV_VAR = "AGENT_EVAL_CORPORA"
OPENCODE = "format-fixtures/opencode-1.18.34"
CLAUDE = "format-fixtures/claude-code-2.1.330"
MINI_SWE = "sessions/mini-swe-agent__gemini-3-pro-preview__django__django-16661.traj.json"


def corpora_dir() -> Path | None:
    """The corpora folder named by ``$AGENT_EVAL_CORPORA``, or None when unset."""
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value).expanduser() if value else None


def need_corpora() -> Path:
    """The corpora folder, or skip with what to do."""
    root = corpora_dir()
    if root is None:
        pytest.skip(f"needs the real-data corpora (not in the repository): set {ENV_VAR} "
                    "to their folder to run this test")
    if not root.is_dir():
        pytest.skip(f"{ENV_VAR}={root} is not a folder; point it at the corpora folder")
    return root


def need(relative: str) -> Path:
    """A file of the corpora, or skip with what to do."""
    path = need_corpora() / relative
    if not path.exists():
        pytest.skip(f"{path} is missing; {ENV_VAR} must name the corpora folder that holds "
                    f"{relative}")
    return path
