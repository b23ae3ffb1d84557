"""``run --until-decided``: repeats in batches against the gate's checks, stopping once the
verdict is decided or at the cap, against the simulator over real HTTP; the gate run
afterwards reads the run at its last look's level and agrees with the stop.

The simulator's profiles are the models: ``sim-disciplined`` (about 6 errors/100 on
this suite) is "unchanged" against a baseline of itself, ``sim-inventor`` (about 11) is
the regressed one, both under the target name ``m`` so the gate pairs them."""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import EXIT_FAIL, EXIT_FAULT, EXIT_INCONCLUSIVE, main
from agent_eval.metrics.sequential import SequentialPlan
from agent_eval.scenario import load_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.testhook import HOLD, HOLD_AFTER

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
SCENARIOS = len(load_suite(RALF).top_level())


def run_args(db: Path, url: str, model: str = "sim-disciplined") -> list[str]:
    return ["run", "--suite", str(RALF), "--base-url", url, "--model", model, "--name", "m",
            "--concurrency", "8", "--db", str(db)]


@pytest.fixture(scope="module")
def sim():
    with run_sim_in_thread(suite=RALF) as url:
        yield url


@pytest.fixture(scope="module")
def baseline_db(sim, tmp_path_factory) -> Path:
    """A store holding run 1: the unchanged model, 3 repeats, label ``base``."""
    db = tmp_path_factory.mktemp("seq") / "base.db"
    done = CliRunner().invoke(main, [*run_args(db, sim), "--repeats", "3", "--label", "base"])
    assert done.exit_code == 0, done.output
    return db


@pytest.fixture
def db(baseline_db, tmp_path) -> Path:
    copy = tmp_path / "runs.db"
    with open_store(str(baseline_db)) as store:  # the copy must not miss what the WAL holds
        store.engine.dispose()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{baseline_db}{suffix}").exists():
            shutil.copy(f"{baseline_db}{suffix}", f"{copy}{suffix}")
    return copy


def plan_of(db: Path, run_id: int = 2) -> tuple[SequentialPlan, dict, str]:
    with open_store(str(db)) as store:
        run = store.get_run(run_id)
        plan = SequentialPlan.from_config(run.config)
        assert plan is not None
        top = Counter(s.key for s in store.session_rows([run_id]) if s.parent_id is None)
        return plan, top, run.status


def test_an_unchanged_model_stops_early_as_pass_and_the_gate_agrees(db, sim):
    runner = CliRunner()
    played = runner.invoke(main, [*run_args(db, sim), "--until-decided", "--max-repeats", "8",
                                  "--look-every", "2", "--baseline", "label:base",
                                  "--max-regression", "6"])
    assert played.exit_code == 0, played.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "decided" and status == "finished"
    assert "Look 1: 2 of at most 8 repeats, intervals at 99.9985%" in played.output
    assert "undecided m: regression vs baseline <= 6" in played.output
    assert "Look 2: 4 of at most 8 repeats, intervals at 99.70%; decided m: regression vs " \
           "baseline <= 6" in played.output
    assert "PASS; stopping: decided." in played.output
    assert "Run 2 decided after 2 looks, 4 repeats of at most 8" in played.output
    # half the cap was spent: 4 repeats of each scenario, each played once
    assert len(top) == 4 * SCENARIOS and set(top.values()) == {1}
    assert {int(key.rsplit("/", 1)[1]) for key in top} == {0, 1, 2, 3}

    judged = runner.invoke(main, ["gate", "--run", "2", "--baseline", "label:base",
                                  "--max-regression", "6", "--db", str(db)])
    assert judged.exit_code == 0, judged.output
    assert "sequential run: 2 looks (every 2 repeats, at most 8), stopped when decided " \
           "after 4 repeats; intervals read at a nominal 99.70%" in judged.output
    assert "[99.70% CI " in judged.output
    assert "PASS  m: regression vs baseline <= 6" in judged.output
    narrow = runner.invoke(main, ["gate", "--run", "2", "--baseline", "label:base",
                                  "--max-regression", "6", "--db", str(db)],
                           env={"COLUMNS": "80"})
    assert any(line.startswith("sequential run: 2 looks (every 2 repeats")
               for line in narrow.output.splitlines()), narrow.output
    as_json = runner.invoke(main, ["gate", "--run", "2", "--baseline", "label:base",
                                   "--max-regression", "6", "--db", str(db), "--json"])
    import json

    seq = json.loads(as_json.output)["sequential"]
    assert [look["repeats"] for look in seq["looks"]] == [2, 4]
    assert seq["stopped"] == "decided" and seq["max_repeats"] == 8


def test_a_regressed_model_stops_as_fail(db, sim):
    runner = CliRunner()
    played = runner.invoke(main, [*run_args(db, sim, "sim-inventor"), "--until-decided",
                                  "--max-repeats", "10", "--look-every", "2",
                                  "--max-error-rate", "3"])
    assert played.exit_code == 0, played.output
    plan, top, status = plan_of(db)
    assert plan.stopped == "decided" and status == "finished"
    assert plan.looks[-1].repeats < 10  # stopped before the cap
    assert "errors/100 <= 3" in played.output and "FAIL; stopping: decided." in played.output
    judged = runner.invoke(main, ["gate", "--run", "2", "--max-error-rate", "3", "--db",
                                  str(db)])
    assert judged.exit_code == EXIT_FAIL, judged.output
    assert f"sequential run: {len(plan.looks)} look" in judged.output
    assert "FAIL  m: errors/100 <= 3" in judged.output


def test_the_cap_ends_inconclusive_and_says_so(db, sim):
    runner = CliRunner()
    played = runner.invoke(main, [*run_args(db, sim, "sim-inventor"), "--until-decided",
                                  "--max-repeats", "4", "--look-every", "2",
                                  "--baseline", "1", "--max-regression", "0.5"])
    assert played.exit_code == 0, played.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "cap" and status == "finished"
    assert plan.looks[-1].nominal_alpha == pytest.approx(plan.boundary_at(4).nominal_alpha)
    assert "stopping: the cap is reached." in played.output
    assert "Run 2 reached its cap of 4 repeats with 1 check still undecided: the gate will " \
           "say INCONCLUSIVE (exit 4)" in played.output
    assert len(top) == 4 * SCENARIOS
    judged = runner.invoke(main, ["gate", "--run", "2", "--baseline", "1",
                                  "--max-regression", "0.5", "--db", str(db)])
    assert judged.exit_code == EXIT_INCONCLUSIVE, judged.output
    assert "stopped at the cap after 4 repeats" in judged.output


def test_resume_after_a_look_continues_the_sequence(db, sim, monkeypatch):
    """Ctrl-C after look 1 was stored: the run is interrupted, and --resume plays the
    next batch and takes look 2 (not look 1 again) with the boundary of two looks."""
    import agent_eval.live.sequential as sequential

    real = sequential.next_batch

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sequential, "next_batch", interrupted)
    runner = CliRunner()
    first = runner.invoke(main, [*run_args(db, sim), "--until-decided", "--max-repeats", "8",
                                 "--look-every", "2", "--baseline", "label:base",
                                 "--max-regression", "6"])
    assert first.exit_code == 130, first.output
    assert "continue the sequence with: agent-eval run --resume 2" in first.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2] and status == "interrupted"
    assert len(top) == 2 * SCENARIOS

    monkeypatch.setattr(sequential, "next_batch", real)
    resumed = runner.invoke(main, ["run", "--resume", "2", "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    assert "Look 1" not in resumed.output and "Look 2: 4 of at most 8 repeats" in resumed.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "decided" and status == "finished"
    assert len(top) == 4 * SCENARIOS and set(top.values()) == {1}


def test_resume_of_a_batch_the_server_cut_finishes_it_then_looks(db, monkeypatch):
    """The server dies within the first batch: the run is interrupted with no look; the
    resumed run plays what the batch left, takes look 1, and goes on to decide."""
    hold = db.parent / "hold"
    monkeypatch.setenv(HOLD, str(hold))
    monkeypatch.setenv(HOLD_AFTER, "5")
    runner = CliRunner()
    args = ["--until-decided", "--max-repeats", "8", "--look-every", "2",
            "--baseline", "label:base", "--max-regression", "6"]
    with run_sim_in_thread(suite=RALF) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        result: list = []
        play = threading.Thread(target=lambda: result.append(
            runner.invoke(main, [*run_args(db, url), *args])))
        play.start()
        import time

        while not hold.exists() and play.is_alive():
            time.sleep(0.02)
    hold.unlink()
    play.join(timeout=120)
    assert result[0].exit_code == EXIT_FAULT, result[0].output
    plan, top, status = plan_of(db)
    assert plan.looks == () and status == "interrupted"
    assert 5 <= len(top) < 2 * SCENARIOS
    monkeypatch.delenv(HOLD)
    with run_sim_in_thread(suite=RALF, port=port):
        resumed = runner.invoke(main, ["run", "--resume", "2", "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    assert f"Resuming run 2: playing up to 2 repeats per scenario (at most 8): " \
           f"{2 * SCENARIOS - len(top)} sessions." in resumed.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "decided" and status == "finished"
    assert len(top) == 4 * SCENARIOS and set(top.values()) == {1}


@pytest.mark.parametrize(("extra", "said"), [
    (["--max-error-rate", "8"], "--max-error-rate is an option of --until-decided"),
    (["--max-repeats", "8"], "--max-repeats is an option of --until-decided"),
    (["--until-decided", "--max-repeats", "8"], "--until-decided needs the checks to decide"),
    (["--until-decided", "--max-error-rate", "8"], "--until-decided needs --max-repeats N"),
    (["--until-decided", "--max-error-rate", "8", "--max-repeats", "8", "--repeats", "3"],
     "give --max-repeats N instead of --repeats"),
    (["--until-decided", "--max-error-rate", "8", "--max-repeats", "4", "--look-every", "5"],
     "--look-every 5 is more than --max-repeats 4"),
    (["--until-decided", "--max-repeats", "4", "--baseline", "1", "--max-regression", "0"],
     "--max-regression 0 cannot pass"),
    (["--until-decided", "--max-repeats", "4", "--max-regression", "2"],
     "--max-regression needs --baseline"),
    (["--until-decided", "--max-repeats", "4", "--max-class", "AE999=1"], "AE999"),
    (["--until-decided", "--max-repeats", "4", "--baseline", "label:nosuch"],
     "--baseline label:nosuch: no run has that label"),
])
def test_bad_option_combinations_give_one_error_line(db, sim, extra, said):
    bad = CliRunner().invoke(main, [*run_args(db, sim), *extra])
    assert bad.exit_code == 2, bad.output
    errors = [line for line in bad.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and said in errors[0], bad.output
    assert "Traceback" not in bad.output
    with open_store(str(db)) as store:
        assert [r.id for r in store.list_runs()] == [1]  # nothing recorded


def test_resume_refuses_new_sequence_options(db, sim):
    bad = CliRunner().invoke(main, ["run", "--resume", "1", "--until-decided", "--db", str(db)])
    assert bad.exit_code == 2
    errors = [line for line in bad.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--resume continues the run's own sequence" in errors[0]


def test_workers_play_a_planned_sequential_run_batch_by_batch(db, sim):
    """--plan-only --until-decided stores the first batch; the worker that completes a
    batch takes its look and stores the next, until the run is decided."""
    runner = CliRunner()
    planned = runner.invoke(main, [*run_args(db, sim), "--plan-only", "--until-decided",
                                   "--max-repeats", "8", "--look-every", "2",
                                   "--baseline", "label:base", "--max-regression", "6"])
    assert planned.exit_code == 0, planned.output
    assert f"{2 * SCENARIOS} sessions stored as work items" in planned.output
    assert "its first batch" in planned.output
    worked = runner.invoke(main, ["worker", "2", "--db", str(db), "--concurrency", "8"])
    assert worked.exit_code == 0, worked.output
    assert "Look 1: 2 of at most 8 repeats" in worked.output
    assert "Look 2: 4 of at most 8 repeats" in worked.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "decided" and status == "finished"
    assert len(top) == 4 * SCENARIOS and set(top.values()) == {1}
    with open_store(str(db)) as store:
        progress = store.work_progress(2)
    assert progress.planned == progress.done == 4 * SCENARIOS
    # a second worker finds the sequence stopped and plays nothing
    again = runner.invoke(main, ["worker", "2", "--db", str(db)])
    assert again.exit_code == 0, again.output
    assert "Look" not in again.output


def test_json_carries_the_sequence_and_the_look_lines_go_to_stderr(db, sim):
    import json

    played = CliRunner().invoke(main, [*run_args(db, sim), "--until-decided", "--max-repeats", "8",
                                  "--look-every", "2", "--baseline", "label:base",
                                  "--max-regression", "6", "--json"])
    assert played.exit_code == 0, played.output
    out = json.loads(played.stdout)
    assert [look["repeats"] for look in out["sequential"]["looks"]] == [2, 4]
    assert out["sequential"]["stopped"] == "decided" and out["status"] == "finished"
    assert "Look 2: 4 of at most 8 repeats" in played.stderr


def test_a_server_down_when_a_batch_starts_leaves_the_run_resumable(db, monkeypatch):
    import agent_eval.live.sequential as sequential

    server = run_sim_in_thread(suite=RALF)
    url = server.__enter__()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    real = sequential.next_batch

    def then_the_server_dies(*args, **kwargs):
        repeats = real(*args, **kwargs)
        server.__exit__(None, None, None)
        return repeats

    monkeypatch.setattr(sequential, "next_batch", then_the_server_dies)
    runner = CliRunner()
    first = runner.invoke(main, [*run_args(db, url), "--until-decided", "--max-repeats", "8",
                                 "--look-every", "2", "--baseline", "label:base",
                                 "--max-regression", "6"])
    assert first.exit_code == EXIT_FAULT, first.output
    assert "Look 1: 2 of at most 8 repeats" in first.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2] and status == "interrupted"

    monkeypatch.setattr(sequential, "next_batch", real)
    with run_sim_in_thread(suite=RALF, port=port):
        resumed = runner.invoke(main, ["run", "--resume", "2", "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    plan, top, status = plan_of(db)
    assert [look.repeats for look in plan.looks] == [2, 4]
    assert plan.stopped == "decided" and status == "finished"
    assert len(top) == 4 * SCENARIOS and set(top.values()) == {1}
