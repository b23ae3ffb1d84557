"""A file read as the wrong FORMAT: exit 2, one error line naming the file and the format
it looks like, a handful of warnings, and nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.store import open_store

RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")

def article(fmt: str) -> str:
    return ("an " if fmt[0] in "aeio" else "a ") + fmt


FILES = {
    "tau-bench": ("openai", "sessions/tau-bench__gpt-4o__airline-task0-trial0.json"),
    "opencode-export": ("opencode", "format-fixtures/opencode-1.18.34/opencode-export.json"),
    "opencode-rows": ("opencode", "format-fixtures/opencode-1.18.34/opencode-db-rows.session-message-part.json"),
    "opencode-stream": ("opencode", "format-fixtures/opencode-1.18.34/opencode-run-format-json.ask-auto-rejected.jsonl"),
    "claude-transcript": ("claude-code", "format-fixtures/claude-code-2.1.330/transcript.jsonl"),
    "claude-stream": ("claude-code", "format-fixtures/claude-code-2.1.330/stream-json.jsonl"),
    "mini-swe-traj": ("mini-swe-agent", "sessions/mini-swe-agent__gemini-3-pro-preview__django__django-16661.traj.json"),
    "swe-agent-traj": ("swe-agent", "sessions/swe-agent__gpt4__pydicom__pydicom-1458.traj"),
    "call-records": ("call-records", "real-tool-calls.jsonl"),
}
FORMATS = ("openai", "opencode", "claude-code", "mini-swe-agent", "swe-agent", "call-records")
PAIRS = [
    pytest.param(fmt, name, id=f"{fmt}-reads-{name}")
    for fmt in FORMATS for name, (own, _) in FILES.items() if own != fmt
]


@pytest.fixture(scope="module")
def corpus_files(corpora: Path, tmp_path_factory) -> dict[str, Path]:
    """Each fixture file by name; the 15 MB call-records corpus cut to its first 30 lines."""
    files = {name: corpora / rel for name, (_, rel) in FILES.items()}
    head = tmp_path_factory.mktemp("calls") / "calls.jsonl"
    with files["call-records"].open(encoding="utf-8") as fh:
        head.write_text("".join(next(fh) for _ in range(30)), encoding="utf-8")
    files["call-records"] = head
    return files


def import_file(fmt: str, path: Path, db: Path):
    return CliRunner().invoke(main, ["import", fmt, str(path), "--allowlist", RALF, "--db", str(db)])


def stored_runs(db: Path) -> list[int]:
    with open_store(str(db)) as store:
        return [run.id for run in store.list_runs()]


@pytest.mark.parametrize(("fmt", "name"), PAIRS)
def test_wrong_format_exits_2_names_the_likely_format_and_stores_nothing(corpus_files, tmp_path, fmt, name):
    path = corpus_files[name]
    result = import_file(fmt, path, tmp_path / "s.db")

    assert result.exit_code == 2, result.output
    [error] = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert error.startswith(f"Error: {path}: ")
    assert error.endswith(f"is this {article(fmt)} file? (try: {FILES[name][0]})")
    assert "Traceback" not in result.output
    assert stored_runs(tmp_path / "s.db") == []


@pytest.mark.parametrize(
    ("fmt", "name", "found"),
    [
        pytest.param("claude-code", "tau-bench", "no claude-code sessions found (331 lines skipped)",
                     id="claude-code-reads-tau-bench"),
        pytest.param("openai", "claude-transcript", "no openai sessions found (53 lines skipped)",
                     id="openai-reads-claude-transcript"),
        pytest.param("opencode", "claude-transcript", "no opencode sessions found (0 lines skipped)",
                     id="opencode-reads-claude-transcript"),
        pytest.param("openai", "mini-swe-traj",
                     "this is a mini-swe-agent file, which the openai reader would read without its calls",
                     id="openai-reads-mini-swe-traj"),
    ],
)
def test_the_error_counts_what_was_found_and_skipped(corpus_files, tmp_path, fmt, name, found):
    path = corpus_files[name]
    result = import_file(fmt, path, tmp_path / "s.db")

    assert result.stderr.splitlines()[-1] == (
        f"Error: {path}: {found}; is this {article(fmt)} file? (try: {FILES[name][0]})"
    )


def test_skipped_lines_are_summarised_after_the_first_three(corpus_files, tmp_path):
    path = corpus_files["tau-bench"]
    result = import_file("claude-code", path, tmp_path / "s.db")

    lines = result.stderr.splitlines()
    assert [line.split(": skipped:")[0] for line in lines[:3]] == [
        f"Warning: {path}: line {n}" for n in (1, 2, 3)
    ]
    assert lines[3] == f"Warning: {path}: 328 more lines skipped (331 in all)"
    assert len(lines) == 5 and lines[4].startswith("Error:")


def test_a_file_of_its_own_format_without_tool_calls_still_imports(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]')
    result = import_file("openai", path, tmp_path / "s.db")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("run 1: imported 1 sessions, 0 calls")
    assert stored_runs(tmp_path / "s.db") == [1]
