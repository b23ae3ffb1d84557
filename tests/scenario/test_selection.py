"""``run``/``demo`` selection (--scenario, --tag, --exclude, --limit) and their --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.scenario import load_suite
from agent_eval.scenario.select import select_scenarios

RALF = Path(__file__).resolve().parents[2] / "scenarios" / "ralf"


@pytest.fixture(scope="module")
def suite():
    return load_suite(RALF)


def _top(s) -> list[str]:
    return sorted(sc.name for sc in s.top_level())


def test_globs_tags_exclude_and_limit_apply_in_order(suite):
    assert _top(select_scenarios(suite, include=["lights-*"])) == [
        "lights-dim-office", "lights-evening-off", "lights-status-report"]
    assert _top(select_scenarios(suite, include=["lights-*"], exclude=["*-off"])) == [
        "lights-dim-office", "lights-status-report"]
    assert _top(select_scenarios(suite, tags=["calendar", "lights"], limit=4)) == [
        "calendar-book-review", "calendar-move-standup", "calendar-week-overview",
        "lights-dim-office"]


def test_child_only_scenarios_stay_for_the_spawns(suite):
    picked = select_scenarios(suite, include=["research-literature-review"])
    assert _top(picked) == ["research-literature-review"]
    assert "evaluator-step" in picked.scenarios
    assert picked.fingerprint != suite.fingerprint


def test_no_selection_is_the_suite_itself(suite):
    assert select_scenarios(suite) is suite


def test_a_selection_that_leaves_nothing_says_what_exists(suite):
    with pytest.raises(ConfigError, match="no scenario of suite 'ralf' is selected") as err:
        select_scenarios(suite, include=["nope*"], tags=["lights"])
    assert str(err.value).startswith(
        "--scenario: no scenario of suite 'ralf' is selected by --scenario nope* --tag lights;")
    assert "tags are: big-output, calendar" in str(err.value)


@pytest.mark.e2e
def test_demo_plays_only_the_selection_and_prints_json(tmp_path):
    db = str(tmp_path / "d.db")
    result = CliRunner().invoke(main, [
        "demo", "--profiles", "disciplined", "--repeats", "1", "--tag", "lights",
        "--exclude", "*-off", "--no-report", "--json", "--db", db])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["run"], data["status"], data["sessions_stored"]) == (1, "finished", 2)
    assert data["targets"]["disciplined"]["sessions"] == 2
    from agent_eval.store import open_store

    with open_store(db) as store:
        assert sorted(s.scenario for s in store.session_rows([1])) == [
            "lights-dim-office", "lights-status-report"]
        assert store.get_run(1).config["scenarios"] == ["lights-dim-office",
                                                        "lights-status-report"]


def test_run_with_an_empty_selection_is_exit_2(tmp_path):
    result = CliRunner().invoke(main, [
        "run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--scenario", "zzz",
        "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "Error: --scenario: no scenario of suite 'ralf'" in result.output
