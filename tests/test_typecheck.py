"""The package type-checks: ``mypy agent_eval``, as configured under ``[tool.mypy]`` in
pyproject.toml, reports no error (a new one fails the suite with mypy's report)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors_in_the_package():
    result = subprocess.run([sys.executable, "-m", "mypy", "agent_eval"], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert report.startswith("Success: no issues found"), report
