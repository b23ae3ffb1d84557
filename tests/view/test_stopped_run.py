"""A live run whose runner was killed (``kill -9``) stays ``running`` in the store: its
page stops refreshing and says how to finish it, and every live run's page says how
many of its planned sessions are stored."""

from __future__ import annotations

import urllib.request

import pytest
from support.factories import add_run
from support.view_fixtures import ALLOWED, judged, record

from agent_eval.store import open_store


@pytest.fixture
def half_run(tmp_path):
    """A live run planned as 2 targets × 2 scenarios × 1 repeat, one session stored."""
    db = str(tmp_path / "half.db")
    with open_store(db) as store:
        run_id = add_run(
            store, [record("careful/clean/0", [judged(0, 0, ALLOWED)])], label="nightly",
            suite="s", targets=("careful", "sloppy"), base_url="http://x/v1",
            config={"scenarios": ["clean", "pipe"], "repeats": 1,
                    "targets": [{"name": "careful"}, {"name": "sloppy"}]})
    return db, run_id


def page(store, path: str) -> str:
    from agent_eval.view.app import run_view_in_thread

    with run_view_in_thread(store) as base:
        return urllib.request.urlopen(base + path).read().decode()


def test_a_run_left_running_by_a_killed_runner_says_how_to_resume(half_run):
    db, run_id = half_run
    with open_store(db) as store:
        html = page(store, f"/runs/{run_id}")
    assert f"agent-eval run --resume {run_id}" in html
    assert 'http-equiv="refresh"' not in html and "refreshes every" not in html
    assert "1 of 4 planned sessions stored" in html


def test_a_run_being_played_refreshes_and_says_nothing_of_resuming(half_run):
    db, run_id = half_run
    with open_store(db) as runner, runner.lease(run_id), open_store(db) as store:
        html = page(store, f"/runs/{run_id}")
        calls = page(store, f"/calls?run_id={run_id}")
    assert 'http-equiv="refresh"' in html and 'http-equiv="refresh"' in calls
    assert "--resume" not in html
    assert "1 of 4 planned sessions stored" in html


def test_the_runs_lists_say_stopped_with_planned_and_the_resume_command(half_run,
                                                                       monkeypatch):
    """The runs index and `agent-eval runs` no longer call a killed runner's run
    "running": it reads "stopped", its sessions "1 of 4 planned", and the line under the
    list gives the command that finishes it."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    db, run_id = half_run
    with open_store(db) as store:
        html = page(store, "/")
    assert ">stopped</a>" in html and "1 of 4 planned" in html
    assert f"agent-eval run --resume {run_id}" in html and "refreshes every" not in html
    monkeypatch.setenv("COLUMNS", "120")
    result = CliRunner().invoke(main, ["runs", "--db", db])
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if line.startswith(f"│  {run_id}")]
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert "stopped" in cells and "1 of 4 planned" in cells and "running" not in cells
    after = result.stdout[result.stdout.rindex("┘") + 1:]
    assert " ".join(after.split()) == (
        f"Run {run_id} is not being played (its runner stopped without finishing it; 1 of 4 "
        f"planned sessions stored): finish it with `agent-eval run --resume {run_id}`.")
    assert all(len(line) <= 120 for line in result.stdout.splitlines())


def test_a_played_run_is_running_in_the_lists_with_no_resume_line(half_run, monkeypatch):
    from click.testing import CliRunner

    from agent_eval.cli import main

    db, run_id = half_run
    with open_store(db) as runner, runner.lease(run_id), open_store(db) as store:
        html = page(store, "/")
        monkeypatch.setenv("COLUMNS", "120")
        result = CliRunner().invoke(main, ["runs", "--db", db])
    assert "stopped" not in html and "--resume" not in html and "1 of 4 planned" in html
    assert "running" in result.stdout and "--resume" not in result.stdout
    assert "1 of 4 planned" in result.stdout
