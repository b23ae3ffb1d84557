"""The real browser the page tests drive: Playwright launching Debian's Chromium through
``executable_path`` (``scripts/ci/browser.sh`` installs both).  The ``browser`` fixture
(tests/conftest.py) launches it; without them a test skips, saying why, and fails instead
under ``CI=true``."""

from __future__ import annotations

import os
import shutil

SETUP = "run scripts/ci/browser.sh to install Chromium and playwright"
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"),
                             shutil.which("chromium-browser")) if p and os.path.exists(p)),
                None)


def missing() -> str | None:
    """Why no browser can be launched here, or None."""
    if CHROMIUM is None:
        return f"no Chromium found (/usr/bin/chromium or on PATH): {SETUP}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the playwright package is not installed: {SETUP}"
    return None
