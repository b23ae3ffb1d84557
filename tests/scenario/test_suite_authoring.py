"""Suite authoring: ``agent-eval init`` writes a suite that ``validate`` passes and that
plays against the simulator over real HTTP at once; ``validate`` names each problem at
its file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.scenario.lint import lint_suite
from agent_eval.scenario.scaffold import scaffold_suite

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.e2e
def test_init_validate_run_against_the_simulator(tmp_path):
    from agent_eval.sim import run_sim_in_thread
    from agent_eval.store import open_store

    folder = tmp_path / "my-suite"
    made = _cli("init", str(folder))
    assert made.exit_code == 0, made.output
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "README.md", "allowlists/my-suite.yaml", "close-ticket.yaml", "suite.yaml"]
    checked = _cli("validate", str(folder))
    assert checked.exit_code == 0, checked.output
    assert "1 scenario(s), no problem" in checked.output
    db = str(tmp_path / "runs.db")
    with run_sim_in_thread("disciplined", suite=folder) as base_url:
        played = _cli("run", "--suite", str(folder), "--base-url", base_url,
                      "--model", "disciplined", "--repeats", "2", "--db", db)
    assert played.exit_code == 0, played.output
    with open_store(db) as store:
        sessions = store.session_rows([1])
    assert [s.scenario for s in sessions] == ["close-ticket", "close-ticket"]
    assert all(s.handshake_done for s in sessions), [s.outcome for s in sessions]


def test_init_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    result = _cli("init", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {tmp_path}: exists and is not an empty folder")
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_the_bundled_suite_validates_clean():
    result = _cli("validate", str(REPO / "scenarios" / "ralf"))
    assert result.exit_code == 0, result.output
    assert lint_suite(REPO / "scenarios" / "ralf") == []


@pytest.fixture
def suite(tmp_path) -> Path:
    folder = tmp_path / "s"
    scaffold_suite(folder)
    return folder


def _edit(suite: Path, old: str, new: str, name: str = "close-ticket.yaml") -> None:
    path = suite / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def _rendered(suite: Path) -> list[str]:
    return [p.render().replace(str(suite) + "/", "") for p in lint_suite(suite)]


def test_schema_errors_and_unknown_keys_come_with_their_line(suite):
    _edit(suite, "tools: [bash, read]\n", "tools: [bash, read]\nbogus: 1\n")
    _edit(suite, "limits: {turns: 6, tool_calls: 8}\n", "limits: {turns: six}\n", "suite.yaml")
    assert _rendered(suite) == [
        "suite.yaml:5: limits.turns: Input should be a valid integer, "
        "unable to parse string as an integer",
        "close-ticket.yaml:7: bogus: unknown field; check the spelling against "
        "`agent-eval schema scenario`",
    ]


def test_a_yaml_file_that_is_not_a_scenario_is_named(suite):
    (suite / "notes.yaml").write_text("owner: me\n")
    (suite / "extra.yml").write_text("task: x\n")
    assert _rendered(suite) == [
        "extra.yml: ignored: only *.yaml files are scenarios; rename it to .yaml or move it out",
        "notes.yaml:1: not a scenario (no `task:`): every *.yaml in a suite folder is a "
        "scenario; move other YAML into a subfolder",
    ]


def test_a_reference_step_denied_by_its_own_allowlist(suite):
    _edit(suite, "  - bash: uv run scripts/tickets.py show --id T-104\n",
          "  - bash: uv run scripts/tickets.py show --id T-104 | head\n")
    (problem,) = _rendered(suite)
    assert problem.startswith("close-ticket.yaml:26: reference.1: 'uv run scripts/tickets.py "
                              "show --id T-104 | head' is denied by its own allow-list (AE301)")


def test_an_unreachable_handshake_step(suite):
    _edit(suite, "--resolution: rerun-after-cleanup}}", "--resolution: wont-fix}}")
    assert _rendered(suite) == [
        "close-ticket.yaml:23: handshake.0: unreachable: no reference step (after the previous "
        "handshake step) makes 'tickets.py close --id T-104 --resolution wont-fix'"]


def test_a_goal_the_reference_never_meets(suite):
    _edit(suite, "  - {script: tickets.py, subcommand: [show], args: {--id: T-104}}\nhandshake",
          "  - {script: tickets.py, subcommand: [show], args: {--id: T-999}}\nhandshake")
    assert _rendered(suite) == [
        "close-ticket.yaml:21: goal.0: 'tickets.py show --id T-999' is met by no reference "
        "step before the session closes"]


def test_a_reference_call_without_a_simulated_answer(suite):
    _edit(suite, "    notes/runbook.md: |", "    notes/other.md: |")
    assert _rendered(suite) == [
        "close-ticket.yaml:25: reference.0: no simulated answer: add 'notes/runbook.md' to "
        "environment.files"]


def test_a_yaml_syntax_error_names_its_line(suite):
    _edit(suite, "agent: support\n", "agent: [support\n")
    (problem,) = _rendered(suite)
    assert problem.startswith("close-ticket.yaml:") and "not valid YAML" in problem


def test_validate_json_and_exit_code(suite):
    (suite / "notes.yaml").write_text("owner: me\n")
    result = _cli("validate", str(suite), "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["scenarios"] == 2
    assert [(p["path"], p["line"]) for p in data["problems"]] == [(str(suite / "notes.yaml"), 1)]
