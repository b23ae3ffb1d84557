"""A live run whose runner was killed (``kill -9``) stays ``running`` in the store: its
page stops refreshing and says how to finish it, and every live run's page says how
many of its planned sessions are stored."""

from __future__ import annotations

import urllib.request

import pytest
from view_fixtures import ALLOWED, judged, record

from agent_eval.store import open_store


@pytest.fixture
def half_run(tmp_path):
    """A live run planned as 2 targets × 2 scenarios × 1 repeat, one session stored."""
    db = str(tmp_path / "half.db")
    with open_store(db) as store:
        run_id = store.create_run(
            label="nightly", kind="live", suite="s", fingerprint={},
            config={"scenarios": ["clean", "pipe"], "repeats": 1,
                    "targets": [{"name": "careful"}, {"name": "sloppy"}]})
        for name in ("careful", "sloppy"):
            store.add_target(run_id, name=name, model=name, base_url="http://x/v1", settings={})
        store.record_session(run_id, record("careful/clean/0", [judged(0, 0, ALLOWED)]))
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
