"""The pure gate: each threshold passes and fails where it should, per target, and a
baseline comparison fails only on a regression the sample supports."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from agent_eval.analysis.gate import evaluate_gate
from agent_eval.analysis.gate_render import render_gate_markdown, render_gate_text
from agent_eval.metrics import summarize
from agent_eval.transcript import CallRow, SessionRow


def rows(target: str, calls: int, denied: dict[str, int] | None = None, *,
         handshakes: tuple[int, int] = (0, 0), start_id: int = 0):
    """One session per 10 calls for ``target``: ``calls`` tool calls of which ``denied``
    (code -> count) are denied; ``handshakes`` = (completed, required) sessions."""
    denied = dict(denied or {})
    codes = [code for code, n in denied.items() for _ in range(n)]
    n_sessions = max(1, -(-calls // 10), handshakes[1])
    sessions = [
        SessionRow(
            id=start_id + i, run_id=1, target=target, scenario=f"s{i}", repeat=0,
            status="completed", error=None, parent_id=None, tags=(),
            handshake_required=3 if i < handshakes[1] else 0,
            handshake_done=3 if i < handshakes[0] else 1,
            handshake_completed=i < handshakes[0],
            handshake_missed_step=None if i < handshakes[0] else "update_stage_status.py",
            n_turns=1, n_messages=2, n_calls=0, started_at=None, finished_at=None,
        )
        for i in range(n_sessions)
    ]
    call_rows = [
        CallRow(session_id=start_id + i % n_sessions, run_id=1, target=target, scenario="s",
                index=i, turn_index=0, tool="bash",
                decision="deny" if i < len(codes) else "allow",
                primary=codes[i] if i < len(codes) else None,
                next_action="pivot" if i < len(codes) else None)
        for i in range(calls)
    ]
    return sessions, call_rows


def summaries(*targets):
    """``summaries(("qwen", 100, {"AE301": 5}), ...)`` -> per-target GroupSummary dict."""
    all_sessions, all_calls = [], []
    for i, (target, calls, denied, *rest) in enumerate(targets):
        hs = rest[0] if rest else (0, 0)
        s, c = rows(target, calls, denied, handshakes=hs, start_id=i * 100_000)
        all_sessions += s
        all_calls += c
    return summarize(all_sessions, all_calls, by="target")


def statuses(result):
    return [(c.target, c.kind, c.status) for c in result.checks]


# --- error rate --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("denied", "limit", "status"),
    [
        # Wilson 95% intervals over 100 calls: 2 -> 0.55–7.00, 7 -> 3.43–13.75, 20 -> 13.34–28.88
        pytest.param(2, 8.0, "pass", id="2-per-100-upper-end-7.0-under-8-passes"),
        pytest.param(7, 8.0, "inconclusive", id="7-per-100-interval-straddles-8"),
        pytest.param(8, 8.0, "inconclusive", id="8-per-100-at-8-is-not-a-pass"),
        pytest.param(20, 8.0, "fail", id="20-per-100-low-end-13.3-over-8-fails"),
    ],
)
def test_max_error_rate_reads_the_interval_ends_against_the_limit(denied, limit, status):
    result = evaluate_gate(summaries(("qwen", 100, {"AE301": denied})), max_error_rate=limit)
    [check] = result.checks
    assert (check.kind, check.status, check.observed) == ("error-rate", status, denied)
    assert result.passed is (status == "pass")
    assert result.outcome == status


def test_a_point_estimate_under_the_bar_is_not_a_pass_when_the_interval_straddles_it():
    # docs/design.md's 27B: 9 errors in 161 calls = 5.59/100, Wilson 95% CI 2.97–10.28:
    # under 6 by its point estimate, yet a rate above 6 is not ruled out
    [check] = evaluate_gate(summaries(("27b", 161, {"AE320": 9})), max_error_rate=6).checks
    assert check.status == "inconclusive"
    assert check.observed == pytest.approx(5.59, abs=0.01)
    assert check.detail == ("errors/100 5.59 (9/161 calls, Wilson 95% CI 2.97 to 10.28); "
                            "INCONCLUSIVE: the interval 2.97 to 10.28 straddles 6, so the "
                            "sample can neither confirm nor rule out a rate above it")


def test_a_pass_says_the_upper_end_that_rules_a_higher_rate_out():
    [check] = evaluate_gate(summaries(("qwen", 1000, {"AE301": 10})), max_error_rate=2).checks
    assert check.status == "pass"
    assert check.detail.endswith("upper end 1.83 <= 2: a rate above 2 ruled out")


def test_every_target_must_pass_and_the_failing_one_is_named():
    current = summaries(("qwen3.5-27b", 1000, {"AE320": 10}),
                        ("qwen3.6-35b", 158, {"AE301": 20, "AE304": 9}))
    result = evaluate_gate(current, max_error_rate=8)
    assert statuses(result) == [("qwen3.5-27b", "error-rate", "pass"),
                                ("qwen3.6-35b", "error-rate", "fail")]
    assert not result.passed
    assert [f.target for f in result.failures] == ["qwen3.6-35b"]
    assert "qwen3.6-35b: errors/100 <= 8" in render_gate_text(result)


def test_one_overall_summary_is_judged_as_one_target():
    overall = summarize(*rows("all", 50, {"AE304": 20}), by="all")["all"]
    result = evaluate_gate(overall, max_error_rate=1)
    assert statuses(result) == [("all", "error-rate", "fail")]


def test_a_target_without_tool_calls_fails_rather_than_passing_silently():
    current = summarize([rows("down", 0)[0][0]], [], by="target")
    [check] = evaluate_gate(current, max_error_rate=8).checks
    assert (check.status, check.observed) == ("fail", None)
    assert "no tool calls" in check.detail


def test_a_run_with_no_targets_fails():
    result = evaluate_gate({}, max_error_rate=8)
    assert statuses(result) == [("(run)", "sessions", "fail")]


def test_no_thresholds_judges_nothing_and_fails():
    result = evaluate_gate(summaries(("qwen", 10, {"AE301": 10})))
    assert statuses(result) == [("(run)", "judged", "fail")]
    assert result.checks[0].detail.startswith("no check applied: a gate that judged nothing")


def test_only_skipped_checks_fail_unless_a_missing_baseline_is_allowed():
    current = summaries(("qwen", 100, {}))
    assert statuses(evaluate_gate(current, min_handshake=0.8)) == [
        ("qwen", "handshake", "skip"), ("(run)", "judged", "fail")]
    allowed = evaluate_gate(current, min_handshake=0.8, allow_missing_baseline=True)
    assert (allowed.checks[-1].status, allowed.passed) == ("skip", True)


# --- class rates -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pipes", "status"),
    # Wilson over 1000 calls: 10 -> 0.54–1.83, 30 -> 2.11–4.25, 50 -> 3.81–6.54
    [pytest.param(10, "pass", id="upper-end-under-3"),
     pytest.param(30, "inconclusive", id="3-at-3-straddles"),
     pytest.param(50, "fail", id="low-end-over-3")],
)
def test_max_class_bounds_one_class_per_100_calls(pipes, status):
    current = summaries(("qwen", 1000, {"AE301": pipes, "AE304": 20}))
    [check] = evaluate_gate(current, max_class={"AE301": 3}).checks
    assert (check.kind, check.name, check.status, check.observed) == (
        "class-rate", "AE301/100 <= 3", status, pipes / 10)


def test_a_class_never_hit_counts_as_zero_of_the_calls():
    [check] = evaluate_gate(summaries(("qwen", 1000, {"AE304": 20})),
                            max_class={"AE301": 1}).checks
    assert (check.status, check.observed) == ("pass", 0.0)
    assert "0/1000 calls" in check.detail


def test_a_class_limit_of_0_can_never_pass_only_stay_inconclusive():
    [check] = evaluate_gate(summaries(("qwen", 1000, {"AE304": 20})),
                            max_class={"AE301": 0}).checks
    assert (check.status, check.observed) == ("inconclusive", 0.0)


def test_several_classes_are_checked_separately():
    current = summaries(("qwen", 1000, {"AE301": 5, "AE304": 80}))
    result = evaluate_gate(current, max_class={"AE301": 3, "AE304": 3})
    assert [(c.name, c.status) for c in result.checks] == [
        ("AE301/100 <= 3", "pass"), ("AE304/100 <= 3", "fail")]


# --- handshake ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completed", "status"),
    [pytest.param(7, "fail", id="7-of-10-under-0.8"), pytest.param(8, "pass", id="8-of-10-at-0.8"),
     pytest.param(10, "pass", id="all")],
)
def test_min_handshake_bounds_the_completion_share(completed, status):
    current = summaries(("qwen", 100, {}, (completed, 10)))
    [check] = evaluate_gate(current, min_handshake=0.8).checks
    assert (check.kind, check.status, check.observed) == ("handshake", status, completed / 10)
    assert f"{completed}/10 sessions" in check.detail


def test_handshake_check_is_skipped_when_no_session_required_one():
    check, _ = evaluate_gate(summaries(("qwen", 100, {})), min_handshake=0.8).checks
    assert (check.status, check.passed) == ("skip", True)
    assert "no session" in check.detail


@pytest.mark.parametrize(
    "thresholds",
    [pytest.param({"min_handshake": 80}, id="handshake-as-percent"),
     pytest.param({"max_error_rate": -1}, id="negative-rate"),
     pytest.param({"max_class": {"AE301": -0.5}}, id="negative-class"),
     pytest.param({"baseline": "same", "max_regression": 0}, id="regression-margin-0")],
)
def test_impossible_thresholds_are_refused(thresholds):
    current = summaries(("qwen", 10, {}))
    if thresholds.get("baseline") == "same":
        thresholds = {**thresholds, "baseline": current}
    with pytest.raises(ValueError, match="must be >= 0|is a share within|cannot pass"):
        evaluate_gate(current, **thresholds)


def test_a_regression_margin_of_0_is_refused_saying_why_and_what_to_use():
    current = summaries(("qwen", 5000, {"AE301": 100}))
    with pytest.raises(ValueError, match="cannot pass") as refused:
        evaluate_gate(current, baseline=current, max_regression=0)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("--max-regression 0 cannot pass: no sample rules out every rise")
    assert "e.g. --max-regression 2" in message and "agent-eval power" in message


# --- baseline regression: noise does not fail a build ------------------------------------


def test_a_big_looking_jump_over_20_calls_is_inconclusive_not_a_fail_nor_a_pass():
    baseline = summaries(("qwen", 20, {}))
    current = summaries(("qwen", 20, {"AE301": 2}))  # 0 -> 10 per 100
    result = evaluate_gate(current, baseline=baseline, max_regression=2)
    [check] = result.checks
    assert check.observed == pytest.approx(10.0)
    assert (check.status, result.outcome, result.passed) == ("inconclusive", "inconclusive", False)
    assert check.detail.endswith("INCONCLUSIVE: the interval -3.15 to +23.15 straddles 2, so the "
                                 "sample can neither confirm nor rule out a rise above it")


@pytest.mark.parametrize(("reading", "outcome"), [("pass", "pass"), ("fail", "fail")])
def test_on_inconclusive_reads_an_undecided_rise_as_the_operator_says(reading, outcome):
    baseline = summaries(("qwen", 20, {}))
    current = summaries(("qwen", 20, {"AE301": 2}))
    result = evaluate_gate(current, baseline=baseline, max_regression=2,
                           on_inconclusive=reading)
    assert (result.checks[0].status, result.outcome) == ("inconclusive", outcome)


def test_no_change_over_20_calls_is_inconclusive_not_a_pass():
    # 1/20 -> 1/20: change 0, Wald 95% CI -13.51 to +13.51: a rise of 2 is not ruled out
    baseline = summaries(("qwen", 20, {"AE301": 1}))
    current = summaries(("qwen", 20, {"AE301": 1}))
    result = evaluate_gate(current, baseline=baseline, max_regression=2)
    assert (result.checks[0].status, result.outcome) == ("inconclusive", "inconclusive")


def test_no_change_over_5000_calls_passes_as_the_upper_end_rules_the_rise_out():
    # 100/5000 -> 100/5000: change 0, Wald 95% CI -0.55 to +0.55 <= 2
    baseline = summaries(("qwen", 5000, {"AE301": 100}))
    result = evaluate_gate(summaries(("qwen", 5000, {"AE301": 100})), baseline=baseline,
                           max_regression=2)
    [check] = result.checks
    assert (check.status, result.outcome) == ("pass", "pass")
    assert check.detail.endswith("upper end +0.55 <= 2: a rise above 2 ruled out")


def test_no_errors_on_either_side_rules_nothing_out():
    baseline = summaries(("qwen", 20, {}))
    result = evaluate_gate(summaries(("qwen", 20, {})), baseline=baseline, max_regression=2)
    assert result.checks[0].status == "inconclusive"


def test_the_same_jump_over_5000_calls_fails():
    baseline = summaries(("qwen", 5000, {}))
    current = summaries(("qwen", 5000, {"AE301": 500}))
    [check] = evaluate_gate(current, baseline=baseline, max_regression=2).checks
    assert (check.status, check.observed) == ("fail", pytest.approx(10.0))
    assert "a real regression" in check.detail


def test_context_md_jump_from_27b_to_35b_is_supported_above_0_1_but_not_above_2():
    # 9/161 -> 19/158: +6.44 per 100; Wald 95% CI 6.44 ± 1.96 × 3.16 = +0.25 to +12.63.
    baseline = summaries(("qwen", 161, {"AE320": 9}))
    current = summaries(("qwen", 158, {"AE301": 19}))
    [small] = evaluate_gate(current, baseline=baseline, max_regression=0.1).checks
    [at_two] = evaluate_gate(current, baseline=baseline, max_regression=2).checks
    assert (small.status, at_two.status) == ("fail", "inconclusive")
    assert "change +6.44 [95% CI +0.25 to +12.63]" in at_two.detail


def test_an_improvement_passes():
    baseline = summaries(("qwen", 1000, {"AE301": 100}))
    current = summaries(("qwen", 1000, {"AE301": 10}))
    [check] = evaluate_gate(current, baseline=baseline, max_regression=1).checks
    assert (check.status, check.observed) == ("pass", pytest.approx(-9.0))


def test_baseline_without_max_regression_allows_a_rise_of_2():
    baseline = summaries(("qwen", 5000, {"AE301": 100}))
    current = summaries(("qwen", 5000, {"AE301": 300}))  # +4.00, Wald CI +3.22 to +4.78
    [check] = evaluate_gate(current, baseline=baseline).checks
    assert (check.name, check.threshold, check.status) == (
        "regression vs baseline <= 2", 2.0, "fail")


def test_targets_are_matched_by_name_and_a_missing_one_fails_unless_allowed():
    baseline = summaries(("qwen3.5-27b", 5000, {}))
    current = summaries(("qwen3.5-27b", 5000, {"AE301": 500}), ("new-model", 5000, {"AE301": 500}))
    result = evaluate_gate(current, baseline=baseline, max_regression=2)
    assert statuses(result) == [("qwen3.5-27b", "regression", "fail"),
                                ("new-model", "regression", "fail")]
    assert "absent from the baseline" in result.checks[1].detail
    allowed = evaluate_gate(current, baseline=baseline, max_regression=2,
                            allow_missing_baseline=True)
    assert statuses(allowed)[1] == ("new-model", "regression", "skip")
    assert [f.target for f in allowed.failures] == ["qwen3.5-27b"]


# --- rendering ---------------------------------------------------------------------------


def test_markdown_lists_failures_first_then_every_check_with_numbers():
    current = summaries(("qwen3.5-27b", 161, {"AE320": 9}), ("qwen3.6-35b", 158, {"AE301": 29}))
    result = evaluate_gate(current, max_error_rate=12, max_class={"AE301": 3})
    md = render_gate_markdown(result, title="Run 7 (pr-12)")
    lines = md.splitlines()
    assert lines[0] == "## ❌ agent-eval gate: failed"
    assert "Run 7 (pr-12)" in lines
    failed = lines.index("Failed thresholds:")
    assert lines[failed + 1] == ("- **qwen3.6-35b**: errors/100 <= 12: errors/100 18.35 "
                                 "(29/158 calls, Wilson 95% CI 13.09 to 25.12); even the low "
                                 "end 13.09 exceeds 12")
    assert lines[failed + 2].startswith("- **qwen3.6-35b**: AE301/100 <= 3: AE301/100 18.35")
    assert "| PASS | qwen3.5-27b | errors/100 <= 12 | 12 | 5.59 |" in md
    assert "| FAIL | qwen3.6-35b | AE301/100 <= 3 | 3 | 18.35 |" in md
    assert "| PASS | qwen3.5-27b | AE301/100 <= 3 | 3 | 0.00 |" in md
    assert sum(line.startswith(("| PASS", "| FAIL", "| INCONCLUSIVE")) for line in lines) == 4


def test_markdown_of_a_pass_says_passed_and_lists_no_failures():
    md = render_gate_markdown(evaluate_gate(summaries(("qwen", 100, {})), max_error_rate=8))
    assert md.startswith("## ✅ agent-eval gate: passed")
    assert "Failed thresholds" not in md


def test_markdown_keeps_a_hostile_target_name_as_text():
    result = evaluate_gate(summaries(("<script>x|y</script>", 10, {})), max_error_rate=8)
    md = render_gate_markdown(result)
    assert "<script>" not in md
    assert "&lt;script&gt;x\\|y&lt;/script&gt;" in md


def test_terminal_text_ends_with_the_verdict_naming_the_failures():
    result = evaluate_gate(summaries(("a", 100, {"AE301": 20}), ("b", 100, {})), max_error_rate=8)
    lines = render_gate_text(result).splitlines()
    assert lines[0].startswith("FAIL  a: errors/100 <= 8: errors/100 20.00 (20/100 calls")
    assert lines[1].startswith("PASS  b: errors/100 <= 8: errors/100 0.00")
    assert lines[-1] == "gate FAILED: 1 of 2 checks failed (a: errors/100 <= 8)"


# --- many targets: Holm across the regression checks --------------------------------------


def test_one_of_14_targets_rising_at_one_sided_p_0_01_is_inconclusive_after_holm():
    # 50/1000 -> 75/1000: +2.50, Wald SE 1.081; against a margin of 0.1, z 2.22, one-sided
    # p 0.0132: alone it fails (low end +0.38 > 0.1); across 14 checks Holm multiplies the
    # smallest p by 14 -> 0.185
    others = [(f"t{i}", 1000, {"AE301": 50}) for i in range(1, 14)]
    baseline = summaries(("t0", 1000, {"AE301": 50}), *others)
    alone = evaluate_gate(summaries(("t0", 1000, {"AE301": 75})), baseline=baseline,
                          max_regression=0.1, allow_missing_baseline=True)
    assert alone.checks[0].status == "fail"
    assert alone.checks[0].p_value == pytest.approx(sps.norm.sf(2.4 / 1.0810), rel=1e-3)
    result = evaluate_gate(summaries(("t0", 1000, {"AE301": 75}), *others), baseline=baseline,
                           max_regression=0.1)
    t0 = result.checks[0]
    assert t0.status == "inconclusive"
    assert t0.detail.endswith(f"; Holm-adjusted p {min(1, 14 * t0.p_value):.3g}: not "
                              "supported once the other targets' checks are counted")
    assert t0.method == ("Holm's adjustment across the 14 regression checks (one-sided, "
                         "alpha 0.025)")
    assert result.outcome == "inconclusive"


def test_a_rise_that_survives_holm_still_fails():
    others = [(f"t{i}", 1000, {"AE301": 50}) for i in range(1, 14)]
    baseline = summaries(("t0", 1000, {"AE301": 50}), *others)
    result = evaluate_gate(summaries(("t0", 1000, {"AE301": 150}), *others), baseline=baseline,
                           max_regression=2)
    assert [c.status for c in result.checks][:2] == ["fail", "pass"]


def test_the_gate_says_each_method_once_for_every_check_and_target_resting_on_it():
    from agent_eval.analysis.gate import GateCheck, GateResult

    wilson = "Wilson score interval at the effective sample size n/deff"
    checks = [GateCheck(name, target, "rate", 8.0, 2.0, "pass", "ok", wilson)
              for target in ("qwen", "llama") for name in ("errors/100 <= 8", "AE301/100 <= 3")]
    text = render_gate_text(GateResult(checks))
    assert text.count(wilson) == 1
    assert f"method (errors/100 <= 8, AE301/100 <= 3): {wilson}" in text
