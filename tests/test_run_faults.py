"""A faulty model server never counts against the model.

``agent-eval run`` against the simulator with each fault knob turned up: the run still
stores every failed session as an ``error`` session with its reason (the server keeps
answering ``/v1/models``), exits 3 with one line when nothing at all was measured, and
the per-target rates are computed over the other sessions only.  Malformed tool-call arguments are the model's mistake
(AE102), not a fault.  Latency knobs show up in the stored turn timings.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.cli.tables import summarize_runs
from agent_eval.sim import Faults, run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
RALF = REPO / "scenarios" / "ralf"
SMALL = ("lights-evening-off", "calendar-week-overview", "research-market-scan-web",
         "evaluator-step")


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory) -> Path:
    """Four ralf scenarios (one spawning the evaluator child), same tasks as the bundle."""
    folder = tmp_path_factory.mktemp("suite") / "small"
    folder.mkdir()
    (folder / "suite.yaml").write_text(
        (RALF / "suite.yaml").read_text().replace(
            "../../allowlists/ralf.yaml", str(REPO / "allowlists" / "ralf.yaml")))
    for name in SMALL:
        shutil.copy(RALF / f"{name}.yaml", folder / f"{name}.yaml")
    return folder


def run_against(faults: Faults, db: Path, suite: Path, *options: str, profile="disciplined",
                config: Path | None = None):
    """Run ``suite`` against a simulator with ``faults``; (exit code, stdout, run id)."""
    with run_sim_in_thread(profile, suite=RALF, faults=faults) as base_url:
        target = (["--config", str(_config(config, base_url))] if config else
                  ["--base-url", base_url, "--model", f"sim-{profile}", "--name", profile])
        result = CliRunner().invoke(main, ["run", "--suite", str(suite), "--db", str(db),
                                           "--concurrency", "8", *target, *options])
    with open_store(str(db)) as store:
        runs = store.list_runs()
    return result, (runs[0].id if runs else None)


def _config(template: Path, base_url: str) -> Path:
    path = template.with_suffix(".filled.yaml")
    path.write_text(template.read_text().replace("BASE_URL", base_url))
    return path


FAULTS = [
    pytest.param(Faults(error_rate=1.0), (), "server error 50", id="error-500-503"),
    pytest.param(Faults(drop_rate=1.0), (), "connection dropped", id="drop"),
    pytest.param(Faults(hang_rate=1.0), ("--timeout", "0.5"), "timeout", id="hang"),
    pytest.param(Faults(truncate_rate=1.0), ("--stream",), "garbled", id="truncate-stream"),
    pytest.param(Faults(truncate_rate=1.0), (), "garbled", id="truncate-json"),
]


@pytest.mark.parametrize("faults, options, reason", FAULTS)
def test_every_failing_session_is_stored_as_error_with_its_reason(
        tmp_path, small_suite, faults, options, reason):
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    # nothing was measured: never exit 0 with an empty table (issue 10), one Error line
    assert result.exit_code == 3, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert "'disciplined'" in line and reason in line
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        assert store.get_run(run_id).status == "finished"
    top = [s for s in sessions if s.parent_id is None]
    assert len(top) == 3
    assert {s.status for s in sessions} == {"error"}
    assert all(reason in s.error for s in sessions), [s.error for s in sessions]


@pytest.mark.parametrize("faults, options, reason", FAULTS[:2])
def test_error_sessions_are_excluded_from_the_target_rates(
        tmp_path, small_suite, faults, options, reason):
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    with open_store(str(tmp_path / "s.db")) as store:
        summary = summarize_runs(store, [run_id])["disciplined"]
    assert summary.error_sessions == 3
    assert summary.sessions == 0 and summary.calls == 0
    assert summary.errors.per100 is None  # no rate at all, not 100 errors per 100 calls


def test_malformed_arguments_are_the_models_error_not_a_fault(tmp_path, small_suite):
    result, run_id = run_against(Faults(malformed_args_rate=1.0), tmp_path / "s.db",
                                 small_suite)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        calls = list(store.call_rows([run_id]))
    assert "error" not in {s.status for s in sessions}
    assert calls and {(c.decision, c.primary) for c in calls} == {("deny", "AE102")}


def test_mixed_faults_give_some_error_sessions_and_rates_over_the_rest(tmp_path):
    config = tmp_path / "targets.yaml"
    config.write_text("targets:\n  - {name: piper, base_url: 'BASE_URL', model: sim-piper, "
                      "retries: 1, concurrency: 8}\n")
    result, run_id = run_against(Faults(error_rate=0.3), tmp_path / "s.db", RALF,
                                 config=config, profile="piper")
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = {s.id: s for s in store.session_rows([run_id])}
        calls = list(store.call_rows([run_id]))
        summary = summarize_runs(store, [run_id])["piper"]
    errored = {i for i, s in sessions.items() if s.status == "error"}
    assert errored and len(errored) < len(sessions)
    assert all(sessions[i].error for i in errored)
    live_calls = [c for c in calls if c.session_id not in errored]
    assert summary.error_sessions == len(errored)
    assert summary.sessions == len(sessions) - len(errored)
    assert summary.calls == len(live_calls)
    assert summary.errors.k == sum(c.decision == "deny" for c in live_calls)


@pytest.mark.parametrize("faults, stream, floor", [
    pytest.param(Faults(latency_s=0.05), False, {"latency_s": 0.05}, id="latency"),
    pytest.param(Faults(ttft_s=0.05), True, {"latency_s": 0.05, "ttft_s": 0.05}, id="ttft"),
])
def test_latency_knobs_show_in_stored_turn_timings(tmp_path, small_suite, faults, stream,
                                                   floor):
    options = ("--stream",) if stream else ()
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        turns = list(store.turn_rows([run_id]))
    assert turns
    for name, lower in floor.items():
        assert min(getattr(t, name) for t in turns) >= lower, name
