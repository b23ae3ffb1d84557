"""BENCHMARKS.md stays a document a reader can act on.

Every stage section states its goal and the command that reproduces its figures; every
command names a script (or test file) that exists and options that script accepts; its links
resolve; and neither it nor benchmarks/ cites tracker numbers (they say what was measured and
why). No benchmark is run here: the figures are measured by hand (BENCHMARKS.md says how).
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "BENCHMARKS.md"
TEXT = DOC.read_text(encoding="utf-8")
# sections that are about the document, not a stage
NOT_STAGES = {"Running the benchmarks", "Goals without a current figure"}
TRACKER = re.compile(r"#\d+\b|\bissues? #?\d+", re.IGNORECASE)


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", TEXT, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def commands() -> list[str]:
    """The indented command lines (four spaces, as Markdown code) that run a benchmark."""
    return [line.strip() for line in TEXT.splitlines()
            if line.startswith("    ") and re.search(r"benchmarks/|pytest", line)]


def test_every_stage_section_has_a_goal_a_measurement_and_a_command():
    stages = {title: body for title, body in sections().items() if title not in NOT_STAGES}
    assert len(stages) >= 12, sorted(stages)
    for title, body in stages.items():
        assert "**Goal.**" in body, title
        assert "**Measured" in body or "**Prompt processing**" in body, title
        assert re.search(r"^    \S", body, flags=re.MULTILINE), f"{title}: no command"
        assert re.search(r"20\d\d-\d\d-\d\d", body), f"{title}: no date"


def test_each_command_names_an_existing_script_and_options_it_accepts():
    seen = commands()
    assert len(seen) >= 15, seen
    for line in seen:
        words = shlex.split(line)
        files = [w for w in words if w.startswith(("benchmarks/", "tests/"))]
        assert files, line
        for name in files:
            assert (ROOT / name).is_file(), f"{line}: {name} does not exist"
        script = ROOT / files[0]
        if script.parts[-2] != "benchmarks":
            continue  # a pytest run: its options are pytest's
        source = script.read_text(encoding="utf-8")
        for word in words:
            option = word.split("=")[0]
            if option.startswith("--"):
                assert f'"{option}"' in source, f"{line}: {script.name} has no {option}"


def test_relative_links_resolve():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    assert links
    for link in links:
        if not link.startswith(("http://", "https://")):
            assert (ROOT / link).exists(), link


@pytest.mark.parametrize("path", [DOC, *sorted(p for p in (ROOT / "benchmarks").rglob("*")
                                                  if p.suffix in {".py", ".sh", ".md"})],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_tracker_numbers(path):
    found = TRACKER.findall(path.read_text(encoding="utf-8"))
    assert found == [], f"{path.name} cites {found}: say what was measured and why"
