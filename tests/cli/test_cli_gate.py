"""`agent-eval gate` on a real SQLite store: exit codes 0/1/2 exactly, the numbers printed,
baselines resolved by label, and the Markdown file."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from support.factories import add_run as stored_run

from agent_eval.cli import main
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, HandshakeResult, SessionRecord


@dataclass
class TargetPlan:
    """``calls`` tool calls over ``sessions`` sessions, the first ones denied as ``denied``
    (code -> count); ``handshakes`` completed of the sessions (all require one)."""

    calls: int
    denied: dict[str, int] = field(default_factory=dict)
    sessions: int = 10
    handshakes: int | None = None  # None: every session completed its handshake
    faulted: int = 0  # extra sessions that ended in a server fault, 10 denied calls each


def make_records(target: str, plan: TargetPlan, *, scenario_prefix: str = "task") -> list:
    codes = [code for code, n in plan.denied.items() for _ in range(n)]
    per_session = -(-plan.calls // plan.sessions)
    done = plan.sessions if plan.handshakes is None else plan.handshakes
    sizes = [max(0, min(per_session, plan.calls - s * per_session)) for s in range(plan.sessions)]
    # denials dealt round-robin over the sessions (the j-th call of each in turn), so they
    # spread like independent mistakes rather than piling into the first sessions
    slots = sorted((j, s) for s in range(plan.sessions) for j in range(sizes[s]))
    code_of = {(s, j): codes[n] for n, (j, s) in enumerate(slots[:len(codes)])}
    records = []
    for s in range(plan.sessions):
        calls = []
        for j in range(sizes[s]):
            code = code_of.get((s, j))
            calls.append(CallRecord(
                index=j, turn_index=j, tool="bash",
                arguments='{"command": "uv run scripts/db_query.py --sql x"}',
                decision="deny" if code else "allow", primary=code,
                next_action="pivot" if code else None))
        records.append(SessionRecord(
            key=f"{target}/{scenario_prefix}-{s}/0", target=target,
            scenario=f"{scenario_prefix}-{s}", calls=calls,
            handshake=HandshakeResult(required=3, done=3 if s < done else 1,
                                      completed=s < done,
                                      missed_step=None if s < done else "update_stage_status.py")))
    for f in range(plan.faulted):
        calls = [CallRecord(index=j, turn_index=j, tool="bash", arguments="{}", decision="deny",
                            primary="AE301", next_action="retry-denied") for j in range(10)]
        records.append(SessionRecord(key=f"{target}/fault-{f}/0", target=target,
                                     scenario=f"fault-{f}", status="error",
                                     error="server returned 503", calls=calls))
    return records


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "gate.db")


def add_run(db: str, label: str | None, *, status: str = "finished",
            silent: tuple[str, ...] = (), **targets: TargetPlan) -> int:
    """A run of ``targets``; ``silent`` names targets it declares that played no session."""
    with open_store(db) as store:
        run_id = stored_run(store, [r for name, plan in targets.items()
                                    for r in make_records(name, plan)],
                            label=label, suite="scenarios/ralf", targets=[*targets, *silent],
                            status=status)
    return run_id


def gate(db: str, *args: str):
    return CliRunner().invoke(main, ["gate", "--db", db, *args])


# --- pass / fail -------------------------------------------------------------------------


def test_a_run_within_every_threshold_exits_0_and_prints_each_check(db):
    add_run(db, "pr-1", **{"qwen3.5-27b": TargetPlan(1000, {"AE320": 10}, sessions=20)})
    result = gate(db, "--max-error-rate", "8", "--max-class", "AE320=6", "--min-handshake", "0.8")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Run 1 (pr-1)"
    assert lines[1] == ("PASS  qwen3.5-27b: coverage >= 90%: judged 20 of 20 sessions played "
                        "(no stored plan) (100%); none lost")
    assert lines[2] == ("PASS  qwen3.5-27b: errors/100 <= 8: errors/100 1.00 "
                        "(10/1000 calls, clustered 95% CI 0.52 to 1.90, deff 1.0, 20 sessions); "
                        "upper end 1.90 <= 8: a rate above 8 ruled out")
    assert lines[3].startswith("PASS  qwen3.5-27b: AE320/100 <= 6: AE320/100 1.00")
    assert lines[4] == ("PASS  qwen3.5-27b: handshake >= 0.8: handshake completed in "
                        "20/20 sessions = 1.00 >= 0.8")
    assert lines[-1] == "gate passed: 4 checks, none failed"


def test_a_point_estimate_under_the_limit_over_10_sessions_is_inconclusive_with_exit_4(db):
    # 9/161 = 5.59 < 8, but the clustered interval 2.18–11.45 does not rule out a rate above
    # 8 (9 effective errors: Korn–Graubard's Clopper–Pearson, t on 8 df)
    add_run(db, "pr-1", **{"qwen3.5-27b": TargetPlan(161, {"AE320": 9})})
    result = gate(db, "--max-error-rate", "8")
    assert result.exit_code == 4, result.output
    assert result.stdout.splitlines()[2] == (
        "INCONCLUSIVE  qwen3.5-27b: errors/100 <= 8: errors/100 5.59 (9/161 calls, clustered "
        "95% CI 2.18 to 11.45, deff 1.0, 10 sessions); INCONCLUSIVE: the interval 2.18 to "
        "11.45 straddles 8, so the sample can neither confirm nor rule out a rate above it")


def test_one_session_never_passes_a_rate_limit(db):
    add_run(db, "pr-1", qwen=TargetPlan(10, {}, sessions=1))
    result = gate(db, "--max-error-rate", "50")
    assert result.exit_code == 4, result.output
    assert ("INCONCLUSIVE  qwen: errors/100 <= 50: errors/100 0.00 (0/10 calls, 1 session: no "
            "clustered interval, and one session cannot certify a rate); INCONCLUSIVE: no "
            "interval to rule out a rate above 50") in result.stdout


@pytest.mark.parametrize(
    ("option", "value", "failed_line"),
    [
        pytest.param("--max-error-rate", "8", "FAIL  qwen3.6-35b: errors/100 <= 8: errors/100 "
                     "20.00 (200/1000 calls, clustered 95% CI 17.49 to 22.78, deff 1.0, "
                     "20 sessions); even the low end 17.49 exceeds 8", id="error-rate"),
        pytest.param("--max-class", "AE301=3", "FAIL  qwen3.6-35b: AE301/100 <= 3: AE301/100 "
                     "10.00 (100/1000 calls, clustered 95% CI 8.09 to 12.18, deff 1.0, "
                     "20 sessions); even the low end 8.09 exceeds 3", id="class"),
        pytest.param("--min-handshake", "0.8", "FAIL  qwen3.6-35b: handshake >= 0.8: handshake "
                     "completed in 12/20 sessions = 0.60 < 0.8", id="handshake"),
    ],
)
def test_each_threshold_kind_fails_with_exit_1_naming_the_target_and_numbers(
        db, option, value, failed_line):
    add_run(db, "pr-2", **{
        "qwen3.5-27b": TargetPlan(1000, {"AE320": 10}, sessions=20),
        "qwen3.6-35b": TargetPlan(1000, {"AE301": 100, "AE304": 40, "AE311": 60}, sessions=20,
                                  handshakes=12),
    })
    result = gate(db, option, value)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert failed_line in lines
    assert lines[1].startswith("PASS  qwen3.5-27b: coverage >= 90%")
    assert lines[2].startswith("PASS  qwen3.5-27b")
    assert lines[-1].startswith("gate FAILED: 1 of 4 checks failed (qwen3.6-35b")


def test_sessions_lost_to_server_faults_do_not_count_against_the_model(db):
    add_run(db, None, qwen=TargetPlan(1000, {"AE301": 10}, sessions=30, faulted=3))
    result = gate(db, "--max-error-rate", "2")
    assert result.exit_code == 0, result.output
    assert "errors/100 1.00 (10/1000 calls" in result.stdout
    assert ("PASS  qwen: coverage >= 90%: judged 30 of 33 sessions played (no stored plan) "
            "(91%); lost 3: server fault 3") in result.stdout


def test_a_run_that_lost_most_sessions_to_server_faults_fails_its_coverage(db):
    # `sim-server --error-rate 0.85`: 26 of 29 sessions lost, the 3 left clean
    add_run(db, None, qwen=TargetPlan(6, {}, sessions=3, faulted=26))
    result = gate(db, "--max-error-rate", "10")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == ("FAIL  qwen: coverage >= 90%: judged 3 of 29 sessions played (no stored "
                        "plan) (10%); lost 26: server fault 26: below 90%, so no rate over the "
                        "sessions left can stand for the run (rerun or resume it; "
                        "--min-coverage sets the share)")
    assert not lines[2].startswith("PASS")
    assert gate(db, "--max-error-rate", "10", "--min-coverage", "0.1").exit_code != 1


def test_a_run_cut_by_max_tokens_fails_its_coverage_naming_truncation(db):
    # 26 of 29 sessions cut by the token limit: 1/8 calls left is no PASS at 10/100
    from agent_eval.transcript import TRUNCATED

    run_id = add_run(db, None, qwen=TargetPlan(8, {"AE301": 1}, sessions=3))
    with open_store(db) as store:
        store.record_sessions(run_id, [
            SessionRecord(key=f"qwen/cut-{i}/0", target="qwen", scenario=f"cut-{i}",
                          status="error", error=TRUNCATED + "'bash' after 512 completion tokens")
            for i in range(26)])
    result = gate(db, "--max-error-rate", "10", "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["coverage"] == {"qwen": {"planned": None, "played": 29, "judged": 3, "lost": {
        "server fault": 0, "truncation": 26, "stack fault": 0, "interrupted": 0}}}
    [coverage] = [c for c in data["checks"] if c["kind"] == "coverage"]
    assert (coverage["status"], coverage["observed"]) == ("fail", pytest.approx(3 / 29))
    assert "lost 26: truncation 26" in coverage["detail"]
    assert [c["status"] for c in data["checks"] if c["kind"] == "error-rate"] != ["pass"]


def test_coverage_counts_sessions_a_planned_run_never_played_as_interrupted(db):
    with open_store(db) as store:
        stored_run(store, make_records("qwen", TargetPlan(1000, {}, sessions=20)), label=None,
                   suite="scenarios/ralf", status="interrupted",
                   config={"scenarios": [f"task-{i}" for i in range(20)], "repeats": 2})
    result = gate(db, "--max-error-rate", "8", "--allow-incomplete")
    assert result.exit_code == 1, result.output
    assert ("FAIL  qwen: coverage >= 90%: judged 20 of 40 sessions planned (50%); lost 20: "
            "interrupted 20: below 90%") in result.stdout


def test_run_picks_the_run_by_id_not_just_the_latest(db):
    first = add_run(db, None, qwen=TargetPlan(100, {"AE301": 20}))
    add_run(db, None, qwen=TargetPlan(100, {}))
    assert gate(db, "--max-error-rate", "8").exit_code == 0
    assert gate(db, "--run", str(first), "--max-error-rate", "8").exit_code == 1


@pytest.mark.parametrize("status", ["running", "interrupted", "failed"])
def test_an_unfinished_run_with_a_target_that_played_no_session_fails_naming_both(db, status):
    add_run(db, None, status=status, silent=("qwen3.6-35b",),
            **{"qwen3.5-27b": TargetPlan(161, {"AE320": 9})})
    result = gate(db, "--max-error-rate", "8")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1] == (f"FAIL  (run): run finished: the run is {status}, not finished: its "
                        "sessions may not be all of the suite; resume it, or pass "
                        "--allow-incomplete to judge what it holds")
    assert lines[2] == ("FAIL  qwen3.6-35b: sessions > 0: the run names this target but it "
                        "played no session: nothing of it was judged (--allow-incomplete skips it)")
    assert lines[3].startswith("PASS  qwen3.5-27b: coverage >= 90%")
    assert lines[4].startswith("INCONCLUSIVE  qwen3.5-27b: errors/100 <= 8")
    allowed = gate(db, "--max-error-rate", "8", "--allow-incomplete")
    assert allowed.exit_code == 4
    assert allowed.stdout.splitlines()[1].startswith(f"SKIP  (run): run finished: skipped: "
                                                     f"the run is {status}")


# --- baselines ---------------------------------------------------------------------------


def test_a_jump_over_20_calls_against_the_nightly_is_inconclusive_with_exit_4(db):
    add_run(db, "nightly", qwen=TargetPlan(20, {}, sessions=2))
    add_run(db, "pr-3", qwen=TargetPlan(20, {"AE301": 2}, sessions=2))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2")
    assert result.exit_code == 4, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Run 2 (pr-3) against baseline run 1 (nightly)"
    assert lines[2].startswith("INCONCLUSIVE  qwen: regression vs baseline <= 2: ")
    assert ("errors/100 0.00 (0/20) -> 10.00 (2/20), change +10.00 [95% CI -29.15 to +49.15; "
            "independent, 2 df; not paired: only 2 shared "
            "scenarios with calls on both sides (need 3)]; INCONCLUSIVE: the interval -29.15 "
            "to +49.15 straddles 2, so the sample can neither confirm nor rule out a rise "
            "above it; about 580 repeats per scenario would decide it (an unchanged model then "
            "passes with 80% probability: `agent-eval power`'s plan)" in lines[2])
    assert "smallest rise detectable at 80% power on this run: +72.04" in lines[2]
    assert lines[-1] == ("gate INCONCLUSIVE: 1 of 2 checks could not be decided by the sample "
                         "(qwen: regression vs baseline <= 2); none failed")


def test_one_session_per_side_is_never_a_pass(db):
    add_run(db, "nightly", qwen=TargetPlan(10, {}, sessions=1))
    add_run(db, "pr-3", qwen=TargetPlan(10, {"AE301": 10}, sessions=1))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2")
    assert result.exit_code == 4, result.output
    assert ("INCONCLUSIVE  qwen: regression vs baseline <= 2: errors/100 0.00 (0/10) -> "
            "100.00 (10/10); too few sessions for an interval (need 2 per run): INCONCLUSIVE, "
            "never a pass") in result.stdout


def test_a_regression_margin_of_0_is_refused_with_one_line_saying_what_to_use(db):
    add_run(db, "nightly", qwen=TargetPlan(100, {}))
    add_run(db, "pr-3", qwen=TargetPlan(100, {}))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "0")
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line == ("Error: --max-regression 0 cannot pass: no sample rules out every rise, so "
                    "a margin of 0 can only fail or stay inconclusive; give the largest rise "
                    "you accept, e.g. --max-regression 2, and size the runs for it with "
                    "`agent-eval power --baseline RUN --detect 2`")


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_gate_lines_keep_to_the_terminal_width_and_the_method_is_said_once(db, monkeypatch,
                                                                           columns):
    add_run(db, "nightly", qwen=TargetPlan(20, {}, sessions=2), llama=TargetPlan(20, {}, sessions=2))
    add_run(db, "pr-3", qwen=TargetPlan(20, {"AE301": 2}, sessions=2),
            llama=TargetPlan(20, {"AE301": 1}, sessions=2))
    monkeypatch.setenv("COLUMNS", str(columns))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2",
                  "--max-error-rate", "8")
    lines = result.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    starts = [line.split("  ")[0] for line in lines if not line.startswith(" ")]
    assert starts.count("INCONCLUSIVE") == 4  # two rates, two rises: 20 calls decide nothing
    methods = [line for line in lines if line.startswith("method (")]
    assert [m.split(":")[0] for m in methods] == ["method (errors/100 <= 8)",
                                                  "method (regression vs baseline <= 2)"]
    text = " ".join(result.stdout.split())
    assert ("method (regression vs baseline <= 2): independent, sessions as clusters (Welch t "
            "interval), where the runs cannot be paired; Holm's adjustment across the 2 "
            "regression checks (one-sided, alpha 0.025)") in text


@pytest.mark.parametrize(("reading", "code", "verdict"), [
    ("pass", 0, "gate passed (--on-inconclusive pass)"),
    ("fail", 1, "gate FAILED (--on-inconclusive fail)")])
def test_on_inconclusive_maps_the_undecided_rise_to_an_exit_code(db, reading, code, verdict):
    add_run(db, "nightly", qwen=TargetPlan(20, {}, sessions=2))
    add_run(db, "pr-3", qwen=TargetPlan(20, {"AE301": 2}, sessions=2))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2",
                  "--on-inconclusive", reading)
    assert result.exit_code == code
    assert result.stdout.splitlines()[-1].startswith(verdict + ": 1 of 2 checks could not")


def test_the_same_jump_over_1000_calls_fails(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {}, sessions=20))
    add_run(db, "pr-4", qwen=TargetPlan(1000, {"AE301": 100}, sessions=20))
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2")
    assert result.exit_code == 1
    assert "change +10.00 [95% CI +7.96 to +12.04; 20 scenarios paired, 19 df]" \
        in result.stdout
    assert ("method (regression vs baseline <= 2): paired over the shared scenarios "
            "(t interval, SE from spread across scenarios)\n") in result.stdout
    # the smallest rise under the alternative: the SE at rates (0, δ), not at the observed
    # (0, 0.10): root of δ = (t.975 + t.8 on 19 df) · SE · √(q(1 − q) / 0.09), q = δ/100
    from scipy import optimize
    from scipy import stats as sps

    se = (12.04 - 7.96) / 2 / sps.t.ppf(0.975, 19)
    factor = sps.t.ppf(0.975, 19) + sps.t.ppf(0.8, 19)
    mde = optimize.brentq(
        lambda d: d - factor * se * ((d / 100) * (1 - d / 100) / 0.09) ** 0.5, 1e-9, 100)
    assert f"smallest rise detectable at 80% power on this run: +{mde:.2f}" in result.stdout
    assert f"{mde:.2f}" == "0.91"
    assert "a real regression" in result.stdout


def test_label_baseline_is_the_newest_run_with_that_label_other_than_the_current(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {}, sessions=20))            # 1: old nightly
    add_run(db, "nightly", qwen=TargetPlan(1000, {"AE301": 100}, sessions=20))  # 2: new nightly
    add_run(db, "other", qwen=TargetPlan(1000, {"AE301": 100}, sessions=20))    # 3
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "4")
    assert "against baseline run 2 (nightly)" in result.stdout
    assert result.exit_code == 0, result.output  # +0.00 [-2.81 to +2.81]
    on_the_nightly = gate(db, "--run", "2", "--baseline", "label:nightly", "--max-regression", "4")
    assert "Run 2 (nightly) against baseline run 1 (nightly)" in on_the_nightly.stdout
    assert on_the_nightly.exit_code == 1


def test_a_misspelt_baseline_label_with_no_other_check_fails_instead_of_passing_on_0_checks(db):
    add_run(db, "nightly", qwen=TargetPlan(100, {}))
    result = gate(db, "--baseline", "label:nope", "--max-regression", "2")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == ("FAIL  (run): baseline found: baseline label:nope: no run other than "
                        "run 1 has that label; regression checks not judged; a misspelt label "
                        "would keep the gate green for ever: fix the label, or pass "
                        "--allow-missing-baseline for the first run of a series")
    assert lines[2] == ("PASS  qwen: coverage >= 90%: judged 10 of 10 sessions played (no stored "
                        "plan) (100%); none lost")
    assert lines[-1] == "gate FAILED: 1 of 2 checks failed ((run): baseline found)"


def test_a_label_baseline_is_chosen_per_target_the_newest_run_of_the_label_that_holds_it(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {}, sessions=20))              # 1
    add_run(db, "nightly", llama=TargetPlan(1000, {}, sessions=20))             # 2: another model
    add_run(db, "pr-9", qwen=TargetPlan(1000, {"AE301": 100}, sessions=20),
            llama=TargetPlan(1000, {}, sessions=20))                            # 3
    result = gate(db, "--baseline", "label:nightly", "--max-regression", "2", "--json")
    assert result.exit_code == 1, result.output
    import json

    verdict = json.loads(result.stdout)
    assert (verdict["baseline"], verdict["baselines"]) == (2, {"qwen": 1, "llama": 2})
    statuses = {c["target"]: c["status"] for c in verdict["checks"]}
    assert statuses == {"qwen": "fail", "llama": "pass"}
    text = gate(db, "--baseline", "label:nightly", "--max-regression", "2")
    assert text.stdout.splitlines()[0] == ("Run 3 (pr-9) against baseline label:nightly per "
                                           "target: qwen -> run 1, llama -> run 2")


def test_the_first_nightly_passes_only_when_allowed_and_says_so(db):
    add_run(db, "nightly", qwen=TargetPlan(100, {}))
    args = ("--baseline", "label:nightly", "--max-regression", "2", "--max-error-rate", "8")
    assert gate(db, *args).exit_code == 1
    result = gate(db, *args, "--allow-missing-baseline")
    assert result.exit_code == 0, result.output
    assert ("SKIP  (run): baseline found: skipped: baseline label:nightly: no run other than "
            "run 1 has that label; regression checks not judged (--allow-missing-baseline)"
            in result.stdout)
    assert result.stdout.splitlines()[-1] == ("gate passed: 2 of 3 checks passed, 1 skipped, "
                                              "none failed")


def test_a_gate_whose_every_check_was_skipped_fails_unless_allowed(db):
    add_run(db, "nightly", other=TargetPlan(100, {}))
    add_run(db, None, qwen=TargetPlan(100, {}))
    result = gate(db, "--baseline", "1")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2] == (
        "FAIL  qwen: regression vs baseline <= 2: target absent from the baseline: nothing to "
        "compare with (--allow-missing-baseline skips it)")
    allowed = gate(db, "--baseline", "1", "--allow-missing-baseline")
    assert allowed.exit_code == 0
    assert ("SKIP  (run): checks judged > 0: all 1 checks were skipped; passing as "
            "--allow-missing-baseline allows") in allowed.stdout


def test_a_target_missing_from_the_baseline_fails_unless_allowed(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {}, sessions=20))
    add_run(db, None, qwen=TargetPlan(1000, {}, sessions=20),
            newcomer=TargetPlan(100, {"AE301": 50}))
    assert gate(db, "--baseline", "1").exit_code == 1
    result = gate(db, "--baseline", "1", "--allow-missing-baseline")
    assert result.exit_code == 0, result.output  # qwen: 0/1000 both, Wilson upper end 0.38
    assert ("SKIP  newcomer: regression vs baseline <= 2: skipped: target absent from the "
            "baseline (--allow-missing-baseline)") in result.stdout


# --- where to look ------------------------------------------------------------------------


def test_a_failed_rate_names_its_worst_sessions_with_ready_show_lines(db):
    add_run(db, "pr-7", qwen=TargetPlan(1000, {"AE301": 150, "AE304": 50}, sessions=20))
    result = gate(db, "--max-error-rate", "8", "--view-url", "http://127.0.0.1:8000/")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL  qwen: errors/100"))
    assert lines[at + 1] == "    largest classes (per 100 calls): AE301 15.00, AE304 5.00"
    assert lines[at + 2] == ("    agent-eval show 1 1  (task-0, repeat 0: 10 of 50 calls "
                             "denied)  http://127.0.0.1:8000/sessions/1.html")
    assert [line.split("  (")[0] for line in lines[at + 2:at + 5]] == [
        "    agent-eval show 1 1", "    agent-eval show 1 2", "    agent-eval show 1 3"]


def test_a_regression_names_the_classes_that_rose_and_its_worst_sessions(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {"AE304": 20}, sessions=20))
    add_run(db, "pr-8", qwen=TargetPlan(1000, {"AE301": 100, "AE304": 20}, sessions=20))
    result = gate(db, "--baseline", "label:nightly", "--json")
    assert result.exit_code == 1
    [check] = [c for c in json.loads(result.stdout)["checks"] if c["kind"] == "regression"]
    assert check["leads"][0] == "classes that rose (per 100 calls): AE301 +10.00"
    assert check["leads"][1].startswith("agent-eval show 2 ")
    assert len(check["leads"]) == 4 and "http" not in " ".join(check["leads"])
    md = Path(db).with_suffix(".md")
    gate(db, "--baseline", "label:nightly", "--markdown", str(md))
    text = md.read_text()
    assert "  - classes that rose (per 100 calls): AE301 +10.00\n  - agent-eval show 2 " in text


def test_a_mostly_lost_run_names_the_lost_sessions(db):
    add_run(db, None, qwen=TargetPlan(6, {}, sessions=3, faulted=26))
    result = gate(db, "--max-error-rate", "10")
    lines = result.stdout.splitlines()
    assert lines[2] == "    agent-eval show 1 4  (fault-0, repeat 0: lost to a fault)"


def test_the_exit_codes_in_the_command_reference_come_from_their_constants():
    from agent_eval.cli import EXIT_CODES, EXIT_INCONCLUSIVE

    reference = " ".join((Path(__file__).resolve().parents[2] / "docs" / "cli.md")
                         .read_text(encoding="utf-8").split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {meaning}" in reference
    assert dict(EXIT_CODES)[EXIT_INCONCLUSIVE].startswith("gate inconclusive")


# --- markdown ----------------------------------------------------------------------------


def test_markdown_file_holds_the_same_checks(db, tmp_path):
    add_run(db, "pr-5", qwen=TargetPlan(1000, {"AE301": 200}, sessions=20))
    out = tmp_path / "gate.md"
    result = gate(db, "--max-error-rate", "8", "--markdown", str(out))
    assert result.exit_code == 1
    md = out.read_text()
    assert md.startswith("## ❌ agent-eval gate: failed\n\nRun 1 (pr-5)\n\ngate FAILED: 1 of 2 "
                         "checks failed (qwen: errors/100 <= 8)\n")
    assert ("- **qwen**: errors/100 <= 8: errors/100 20.00 (200/1000 calls, clustered 95% CI "
            "17.49 to 22.78, deff 1.0, 20 sessions); even the low end 17.49 exceeds 8") in md
    assert "| FAIL | qwen | errors/100 <= 8 | 8 | 20.00 |" in md


def test_junit_file_holds_one_case_per_check_with_each_failure_named(db, tmp_path):
    import xml.etree.ElementTree as ET

    add_run(db, "pr-2", **{
        "qwen3.5-27b": TargetPlan(1000, {"AE320": 10}, sessions=20),
        "qwen3.6-35b": TargetPlan(158, {"AE301": 10, "AE304": 4, "AE311": 5}, handshakes=6),
    })
    out = tmp_path / "gate.xml"
    result = gate(db, "--max-class", "AE301=3", "--min-handshake", "0.8", "--junit", str(out))
    assert result.exit_code == 1
    suite = ET.parse(out).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "2", "0")
    failures = {(c.get("classname"), c.get("name")): (c.find("failure").get("type"),
                                                      c.find("failure").get("message"))
                for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failures == {
        ("gate.qwen3.6-35b", "AE301/100 <= 3"): (
            "inconclusive",
            "INCONCLUSIVE: AE301/100 6.33 (10/158 calls, clustered 95% CI 2.68 to 12.33, deff "
            "1.0, 10 sessions); INCONCLUSIVE: the interval 2.68 to 12.33 straddles 3, so the "
            "sample can neither confirm nor rule out a rate above it"),
        ("gate.qwen3.6-35b", "handshake >= 0.8"): (
            "handshake", "handshake completed in 6/10 sessions = 0.60 < 0.8"),
    }


def test_junit_makes_an_inconclusive_gate_a_failure_not_a_skip(db, tmp_path):
    import xml.etree.ElementTree as ET

    add_run(db, "nightly", qwen=TargetPlan(20, {}, sessions=2))
    add_run(db, "pr-3", qwen=TargetPlan(20, {"AE301": 2}, sessions=2))
    out = tmp_path / "gate.xml"
    result = gate(db, "--baseline", "label:nightly", "--junit", str(out))
    assert result.exit_code == 4
    suite = ET.parse(out).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")
    [failure] = suite.iter("failure")
    assert failure.get("type") == "inconclusive"
    assert failure.get("message").startswith("INCONCLUSIVE: errors/100 0.00 (0/20) -> 10.00")
    gate(db, "--baseline", "label:nightly", "--junit", str(out), "--on-inconclusive", "pass")
    suite = ET.parse(out).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "0")
    assert "read as a pass (--on-inconclusive pass)" in suite.find("testcase/system-out").text


# --- usage: exit 2 with one line ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--max-class", "AE301"], "'AE301' is not CODE=X", id="no-equals"),
        pytest.param(["--max-class", "AE301=lots"], "'AE301=lots' is not CODE=X", id="not-a-number"),
        pytest.param(["--max-class", "AE301=-1"], "'AE301=-1' is not CODE=X", id="negative"),
        pytest.param(["--max-class", "AE999=3"], "AE999 is not a rule code", id="unknown-code"),
        pytest.param(["--max-class", "AE403=3"], "AE403 is a session outcome", id="session-code"),
        pytest.param([], "give at least one threshold", id="no-threshold"),
        pytest.param(["--max-error-rate", "8", "--max-regression", "2"],
                     "--max-regression needs --baseline", id="regression-without-baseline"),
        pytest.param(["--min-handshake", "80"], "min_handshake is a share within 0..1",
                     id="handshake-as-percent"),
        pytest.param(["--run", "99", "--max-error-rate", "8"], "no run with id 99", id="no-such-run"),
        pytest.param(["--baseline", "42"], "no run with id 42", id="no-such-baseline"),
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_value(db, args, message):
    add_run(db, None, qwen=TargetPlan(10, {}))
    result = gate(db, *args)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: ") and message in line
    assert result.stdout == ""


def test_an_empty_store_is_a_usage_error(db):
    open_store(db).close()
    result = gate(db, "--max-error-rate", "8")
    assert result.exit_code == 2
    assert "the store holds no runs yet" in result.stderr


# --- the README's CI workflows use the gate as documented --------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def workflow_commands() -> list[list[str]]:
    """Every `agent-eval ...` step of the YAML workflows under README's "Use in CI",
    with `${{ ... }}` expressions and `$VARS` replaced by placeholders."""
    section = README.read_text(encoding="utf-8").split("## Use in CI", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        workflow = yaml.safe_load(block)
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                script = re.sub(r"\$\{\{[^}]*\}\}", "1", step.get("run", ""))
                script = re.sub(r'"?\$[A-Z_]+"?', "PLACEHOLDER", script)
                for line in script.replace("\\\n", " ").splitlines():
                    if line.strip().startswith("agent-eval "):
                        commands.append(shlex.split(line)[1:])
    return commands


def test_the_readme_workflows_show_run_gate_and_report():
    names = [args[0] for args in workflow_commands()]
    assert names.count("gate") == 2 and names.count("run") == 2 and names.count("report") == 2


@pytest.mark.parametrize("args", workflow_commands(), ids=lambda a: " ".join(a[:2]))
def test_every_readme_workflow_command_parses(args):
    command = main.commands[args[0]]
    if isinstance(command, click.Group):
        command, args = command.commands[args[1]], args[1:]
    command.make_context(args[0], list(args[1:]))  # raises on an unknown option or value


def test_the_readme_pull_request_gate_runs_as_documented(db, tmp_path, monkeypatch):
    add_run(db, "nightly", **{"qwen3.5-27b": TargetPlan(2000, {"AE320": 20}, sessions=40)})
    add_run(db, "pr-12", **{"qwen3.5-27b": TargetPlan(2000, {"AE301": 10}, sessions=40)})
    [gate_args] = [a for a in workflow_commands() if a[0] == "gate" and "latest" in a]
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*gate_args, "--db", db])
    assert result.exit_code == 0, result.output  # 0.5/100 errors, all AE301, all handshakes
    assert result.stdout.startswith("Run 2 (pr-12) against baseline run 1 (nightly)\n")
    assert result.stdout.splitlines()[-1] == "gate passed: 5 checks, none failed"
    assert (tmp_path / "gate.md").read_text().startswith("## ✅ agent-eval gate: passed")
