"""``gate --max-stack-faults``: the pure stack-fault check beside ``evaluate_gate``
(analysis/stack_faults.py), and the command on a real store."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.factories import add_run

from agent_eval.analysis.gate import evaluate_gate
from agent_eval.analysis.stack_faults import stack_fault_checks, with_stack_fault_checks
from agent_eval.cli import main
from agent_eval.metrics import summarize
from agent_eval.store import open_store
from agent_eval.transcript import (
    CallRecord,
    CallRow,
    SessionRecord,
    SessionRow,
    StackFaultRecord,
)


def summaries(plan: dict[str, tuple[int, tuple[tuple[str, bool], ...]]]):
    """``target: (calls, stack faults as (code, ended))``, one session each."""
    sessions, calls = [], []
    for n, (target, (n_calls, faults)) in enumerate(plan.items()):
        sessions.append(SessionRow(n, 1, target, "s", 0, "completed", None, None, (), 0, 0,
                                   False, None, 1, 1, n_calls, None, None,
                                   stack_faults=faults))
        calls += [CallRow(n, 1, target, "s", i, 0, "bash", "allow", None, None)
                  for i in range(n_calls)]
    return summarize(sessions, calls)


def test_a_target_over_the_limit_fails_naming_its_codes_and_errors_stay_clean():
    current = summaries({"llama-cpp": (9, (("AE501", True), ("AE506", False))),
                         "vllm": (400, ())})
    assert current["llama-cpp"].errors.k == 0  # never in the model's errors/100
    checks = stack_fault_checks(current, 5)
    assert [(c.target, c.status, round(c.observed, 2), c.detail) for c in checks] == [
        ("llama-cpp", "fail", 20.0, "2 stack fault(s) per 10 calls = 20.00/100 "
                                    "(AE501 1, AE506 1); never in errors/100; even the low "
                                    "end 5.67 exceeds 5"),
        ("vllm", "pass", 0.0, "0 stack fault(s) per 400 calls = 0.00/100; never in "
                              "errors/100; upper end 0.95 <= 5: a rate above 5 ruled out")]


def test_a_rate_whose_interval_straddles_the_limit_is_inconclusive_not_passed():
    """As every limit of the gate: a point estimate under the limit does not pass when the
    interval reaches above it (0 of 10 calls cannot rule out 5 per 100)."""
    (check,) = stack_fault_checks(summaries({"vllm": (10, ())}), 5)
    assert (check.status, round(check.observed, 2)) == ("inconclusive", 0.0)
    assert "INCONCLUSIVE" in check.detail


def test_the_check_alone_is_judged_and_decides_the_gate():
    current = summaries({"llama-cpp": (4, (("AE502", False),))})
    alone = with_stack_fault_checks(evaluate_gate(current), current, 1)
    assert [(c.kind, c.status) for c in alone.checks] == [("stack-faults", "fail")]
    assert not alone.passed
    assert with_stack_fault_checks(alone, current, None) is alone


def test_a_target_with_no_call_is_skipped_and_a_negative_limit_refused():
    (check,) = stack_fault_checks(summaries({"dead": (0, ())}), 1)
    assert (check.status, check.detail) == ("skip", "no tool call reached the stack")
    with pytest.raises(ValueError, match="--max-stack-faults must be 0 or more"):
        stack_fault_checks(summaries({"x": (1, ())}), -1)


def test_the_command_fails_on_stack_faults_and_prints_them(tmp_path):
    db = str(tmp_path / "gate.db")
    with open_store(db) as store:
        calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}",
                            decision="allow") for i in range(400)]
        run = add_run(store, label="n", suite="s", targets={"llama-cpp": "m"},
                      base_url="http://x/v1")
        store.record_sessions(run, [
            SessionRecord(key="a", target="llama-cpp", scenario="s", calls=calls),
            SessionRecord(key="b", target="llama-cpp", scenario="s", status="error",
                          error="cut", stack_faults=[StackFaultRecord(1, "AE501", "cut",
                                                                      ends=True)])])
        store.set_run_status(run, "finished")
    out = CliRunner().invoke(main, ["gate", "--db", db, "--max-stack-faults", "0.001"])
    assert out.exit_code == 1, out.output
    assert "stack faults/100 <= 0.001" in out.output and "AE501 1" in out.output
    ok = CliRunner().invoke(main, ["gate", "--db", db, "--max-stack-faults", "5",
                                   "--min-coverage", "0.5"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(main, ["gate", "--db", db, "--max-stack-faults", "-1"])
    assert bad.exit_code == 2 and "--max-stack-faults must be 0 or more" in bad.output
