"""The statistics on the command line: `agent-eval power`, and `compare` /
`gate --baseline` choosing paired, restricted-mix, refused or independent analysis."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from scipy import optimize
from scipy import stats as sps
from support.factories import add_run as stored_run
from test_cli_gate import TargetPlan, add_run

from agent_eval.cli import main
from agent_eval.cli.compare import side_units
from agent_eval.metrics.clustered import CLUSTERED_METHOD, interval_text, units_rate
from agent_eval.metrics.stratified import compare_poststratified
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "stats.db")


def add_mixed_run(db: str, label: str, sessions: list[tuple]) -> int:
    """One target ``qwen``; ``sessions`` = (scenario, calls, denied[, tag]) per session."""
    with open_store(db) as store:
        run_id = stored_run(store, label=label, suite="scenarios/ralf", targets=("qwen",),
                            base_url="http://127.0.0.1:8000/v1")
        records, seen = [], {}
        for scenario, calls, denied, *tag in sessions:
            repeat = seen[scenario] = seen.get(scenario, -1) + 1
            records.append(SessionRecord(
                key=f"qwen/{scenario}/{repeat}", target="qwen", scenario=scenario, repeat=repeat,
                tags=list(tag),
                calls=[CallRecord(index=j, turn_index=j, tool="bash", arguments="{}",
                                  decision="deny" if j < denied else "allow",
                                  primary="AE301" if j < denied else None,
                                  next_action="pivot" if j < denied else None)
                       for j in range(calls)]))
        store.record_sessions(run_id, records)
        store.set_run_status(run_id, "finished")
    return run_id


def cli(db: str, *args: str):
    return CliRunner().invoke(main, [args[0], "--db", db, *args[1:]])


# --- power --------------------------------------------------------------------------------


def test_power_plans_repeats_from_the_baselines_variance_components(db):
    add_run(db, "nightly", qwen=TargetPlan(1000, {"AE301": 40}, sessions=20))
    result = cli(db, "power", "--baseline", "label:nightly", "--detect", "2")
    assert result.exit_code == 0, result.output
    # 20 scenarios of one 50-call session, 2 errors each (p = 0.04), no session spread:
    # SE²(R) = 20 · (1/20)² · (q + 0.04·0.96 + q/50) / (50 R) under no change (the margin
    # plan), q = 0.0384 / (1 − 1/50) the unbiased p(1 − p) of a rate read from 50 calls;
    # factor t(19) .975 + .8
    factor = sps.t.ppf(0.975, 19) + sps.t.ppf(0.8, 19)
    q = 0.0384 / (1 - 1 / 50)
    unit_se = 100 * math.sqrt(0.05 * (q + 0.0384 + q / 50) / 50)
    repeats = max(2, math.ceil((factor * unit_se / 2) ** 2))
    # the rise detectable now, with the SE at that rise: root of δ = factor · SE(δ)
    def gap(delta):
        r = 0.04 + delta / 100
        return delta - factor * 100 * math.sqrt(0.05 * (q + r * (1 - r) + q / 50) / 50)

    now = optimize.brentq(gap, 0, 50)
    lines = result.stdout.splitlines()
    # one repeat per scenario: no range, and why (the sessions' spread is read from single
    # sessions); the plan rests on the binomial floor, since no session spreads
    assert lines == [
        "Baseline run 1 (nightly)",
        "== qwen ==",
        "baseline: 20 scenarios, 1 repeat(s) each, 1000 calls per pass over the suite, "
        "session design effect 1.00",
        f"for a margin of 2 errors/100 (the gate's --max-regression): {repeats} repeat(s) per "
        f"scenario, about {repeats * 1000} tool calls per run; an unchanged model then passes "
        "with 80% probability, a rise of 2 at most 2.5% (paired, two-sided 95% interval)",
        "no range for the plan: with one repeat per scenario the session spread is read from "
        "single sessions, and no range from it holds the repeats needed at its stated rate; the "
        "plan averages its power over that spread, so it is larger than the variance alone "
        "asks. A baseline of at least 3 repeats gives a range",
        f"with the baseline's 1 repeat(s) the smallest rise detectable at 80% power is "
        f"{now:.2f} errors/100 (standard error at that rise)",
        "Ready: agent-eval run --config TARGETS.yaml --repeats 2 (the baseline's targets file)",
    ]
    assert repeats == 2


def test_power_ends_with_the_run_to_paste_and_its_length_from_the_baselines_timing(db):
    from datetime import UTC, datetime

    from sqlalchemy import update

    from agent_eval.store.schema import runs

    run_id = add_run(db, "nightly", qwen=TargetPlan(1000, {"AE301": 40}, sessions=20))
    config = {"suite": "scenarios/ralf", "repeats": 1, "targets": [{
        "name": "qwen", "base_url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen3.5-27B",
        "sampling": {"temperature": 1.0, "top_p": 0.95, "top_k": 20}, "max_tokens": 4096}]}
    with open_store(db) as store, store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            config=config, created_at=datetime(2026, 11, 27, 2, 0, tzinfo=UTC),
            finished_at=datetime(2026, 11, 27, 2, 10, tzinfo=UTC)))
    result = cli(db, "power", "--baseline", "label:nightly", "--detect", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "Ready: agent-eval run --suite scenarios/ralf --base-url http://127.0.0.1:8000/v1 "
        "--model Qwen/Qwen3.5-27B --name qwen --temperature 1.0 --top-p 0.95 --top-k 20 "
        "--max-tokens 4096 --repeats 2 --label nightly",
        "Estimated length: about 20 min (baseline run 1 took 10 min for 1 repeat(s), scaled "
        "to the repeats, with the same targets, servers and concurrency)"]


def test_power_needs_more_repeats_for_a_smaller_rise(db):
    add_run(db, None, qwen=TargetPlan(1000, {"AE301": 40}, sessions=20))
    two = cli(db, "power", "--baseline", "1", "--detect", "2").stdout
    one = cli(db, "power", "--baseline", "1", "--detect", "1").stdout
    assert "2 repeat(s) per scenario" in two and "7 repeat(s) per scenario" in one


def test_power_says_a_zero_error_baseline_cannot_plan_and_what_a_clean_run_needs(db):
    add_run(db, None, qwen=TargetPlan(1000, {}, sessions=20))
    lines = cli(db, "power", "--baseline", "1", "--detect", "2").stdout.splitlines()
    # Wilson's upper end of 0/n is z²/(n + z²) <= 0.02 from n = 1.96² · 49 = 188.2
    assert lines[3:5] == [
        "cannot plan a margin of 2 errors/100: the baseline has no errors, so it holds no "
        "variance to plan from",
        "a run with no error passes a margin of 2 from 189 tool calls (its Wilson upper end), "
        "about 2 repeat(s); one error needs more"]
    assert "smallest rise detectable" not in " ".join(lines)


@pytest.mark.parametrize(("args", "message"), [
    (("--detect", "0"), "Error: --detect: must be > 0 errors per 100 calls, got 0"),
    (("--power", "1"), "Error: --power: must be a probability strictly between 0 and 1"),
    (("--target", "nope"), "Error: --target: target 'nope' is not in run 1; it holds qwen"),
])
def test_power_usage_errors_exit_2_naming_the_value(db, args, message):
    add_run(db, None, qwen=TargetPlan(100, {"AE301": 4}))
    result = cli(db, "power", "--baseline", "1", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)


# --- compare: mix matching ----------------------------------------------------------------


def suite(names, calls=20, denied=2, repeats=2):
    return [(name, calls, denied) for name in names for _ in range(repeats)]


def test_compare_restricts_different_mixes_to_the_shared_one_and_names_it(db):
    add_mixed_run(db, "a", suite([f"s{i}" for i in range(10)]))
    add_mixed_run(db, "b", suite([f"s{i}" for i in range(6)] + [f"t{i}" for i in range(4)],
                                 denied=3))
    out = cli(db, "compare", "1", "2").stdout
    assert ("compared on 6 shared scenarios covering 60% of a's calls and 60% of b's "
            "(post-stratified to the shared mix; left out: 4 scenarios only in a, 4 only in b)"
            ) in out
    assert "errors/100 paired change +5.00" in out
    assert "paired verdict on errors/100:" in out


def test_compare_refuses_to_call_a_difference_on_a_thin_overlap(db):
    add_mixed_run(db, "a", suite([f"s{i}" for i in range(10)]))
    add_mixed_run(db, "b", suite(["s0", "s1", "s2"] + [f"t{i}" for i in range(7)], denied=10))
    out = cli(db, "compare", "1", "2").stdout
    assert ("no paired difference called: the shared mix covers 30% of a's calls and 30% of "
            "b's (need 50% of each)") in out
    assert ("no verdict on errors/100: the runs hold different mixes and the overlap is too "
            "small to compare them fairly") in out


def test_compare_with_no_shared_scenario_uses_the_independent_clustered_test(db):
    add_mixed_run(db, "a", suite([f"s{i}" for i in range(5)]))
    add_mixed_run(db, "b", suite([f"t{i}" for i in range(5)], denied=8))
    out = cli(db, "compare", "1", "2").stdout
    assert "no shared scenarios: independent verdict on errors/100 (sessions as clusters): " \
           "significant, change +30.00" in out


def test_compare_and_gate_post_stratify_a_changed_suite_on_its_tags(db):
    # the suite was renamed (no shared scenario) but keeps its tags; run b is half hard,
    # half easy where a was mostly easy, and errs 5 more per 100 within each tag
    a = [(f"a{i}", 20, k, "hard") for i, k in enumerate((2, 10, 4, 8))] + \
        [(f"b{i}", 20, k, "easy") for i, k in enumerate((0, 4, 0, 4))]
    b = [(f"c{i}", 20, k, "hard") for i, k in enumerate((3, 11))] + \
        [(f"d{i}", 20, k, "easy") for i, k in enumerate((0, 6, 0, 6, 1, 5))]
    add_mixed_run(db, "nightly", a)
    add_mixed_run(db, "pr", b)
    with open_store(db) as store:
        expected = compare_poststratified(side_units(store, 1, "target")["qwen"].load_units(),
                                          side_units(store, 2, "target")["qwen"].load_units())
    out = cli(db, "compare", "1", "2").stdout
    assert ("re-weighted to the shared tag mix (hard 38%, easy 62%) covering 100% of a's "
            "calls and 100% of b's; 0 strata left out") in out
    assert (f"errors/100 post-stratified change +5.00 [95% CI {expected.lo100:+.2f} to "
            f"{expected.hi100:+.2f}], t p {expected.p_value:.3f}") in out
    assert "post-stratified verdict on errors/100 (shared tag mix): not significant" in out
    gate = cli(db, "gate", "--baseline", "label:nightly", "--json").stdout
    [check] = [c for c in json.loads(gate)["checks"] if c["kind"] == "regression"]
    assert check["detail"].startswith("errors/100 20.00 (32/160) -> 20.00 (32/160), change "
                                      f"+5.00 [95% CI {expected.lo100:+.2f} to "
                                      f"{expected.hi100:+.2f}; 2 tag strata, ")
    assert check["method"] == ("post-stratified over the shared tag strata (WLS cell means, "
                               "session-clustered CR1 SE, t interval), where the scenario mix "
                               "differs")


def test_gate_and_compare_show_the_librarys_clustered_interval_and_name_its_method(db):
    add_mixed_run(db, "nightly", [(f"s{i % 4}", 20, k) for i, k in enumerate((0, 6, 1, 9) * 2)])
    add_mixed_run(db, "pr", [(f"s{i % 4}", 20, k) for i, k in enumerate((2, 7, 0, 12) * 2)])
    with open_store(db) as store:
        a, b = (units_rate(side_units(store, r, "target")["qwen"]) for r in (1, 2))
    gate = cli(db, "gate", "--run", "2", "--max-error-rate", "50", "--json")
    [check] = [c for c in json.loads(gate.stdout)["checks"] if c["kind"] == "error-rate"]
    assert (f"clustered 95% CI {b.lo100:.2f} to {b.hi100:.2f}, deff {b.deff:.1f}, "
            f"{b.clusters} sessions") in check["detail"]
    assert check["method"] == f"interval ends against the limit: {CLUSTERED_METHOD}"
    text = cli(db, "gate", "--run", "2", "--max-error-rate", "50").stdout
    assert f"): interval ends against the limit: {CLUSTERED_METHOD}\n" in text
    out = cli(db, "compare", "1", "2").stdout
    assert (f"errors/100 clustered (sessions): a {a.per100:.2f} {interval_text(a)}, "
            f"b {b.per100:.2f} {interval_text(b)}") in out
    assert f"clustered interval: {CLUSTERED_METHOD}." in cli(db, "compare", "1", "2", "--explain").stdout


def test_compare_reports_mcnemar_on_scenario_pairs(db):
    add_mixed_run(db, "a", suite([f"s{i}" for i in range(4)], denied=0))
    add_mixed_run(db, "b", suite([f"s{i}" for i in range(4)], denied=1))
    out = cli(db, "compare", "1", "2").stdout
    # every one of the 4 scenarios passed in a and failed in b: p = 2 / 2^4
    assert ("scenario pairs (every repeat passed): 4; passed in a only 4, in b only 0; exact "
            "McNemar p 0.125") in out


# --- gate: which interval -----------------------------------------------------------------


def test_gate_without_shared_scenarios_names_the_independent_interval(db):
    add_mixed_run(db, "nightly", suite([f"s{i}" for i in range(5)]))
    add_mixed_run(db, "pr", suite([f"t{i}" for i in range(5)], denied=2))
    out = cli(db, "gate", "--baseline", "label:nightly").stdout
    assert ("; not paired: only 0 shared scenarios with calls on both sides (need 3)]") in out
    assert ("method (regression vs baseline <= 2): independent, sessions as clusters (Welch t "
            "interval), where the runs cannot be paired\n") in out
    assert "smallest rise detectable at 80% power on this run: +" in out


def test_gate_regression_on_repeated_scenarios_uses_sessions_within_scenarios(db):
    add_mixed_run(db, "nightly", suite([f"s{i}" for i in range(6)], denied=1))
    add_mixed_run(db, "pr", [(f"s{i}", 20, 1 + (i % 2) + r) for i in range(6) for r in (0, 1)])
    result = cli(db, "gate", "--baseline", "label:nightly", "--max-regression", "0.5")
    assert "6 scenarios paired" in result.stdout
    assert "paired over the shared scenarios (t interval, SE from sessions within scenarios" \
        in result.stdout
