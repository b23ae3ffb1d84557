"""``gate --max-leaks``: the pure leak check beside ``evaluate_gate`` (analysis/leaks.py)."""

from __future__ import annotations

import pytest

from agent_eval.analysis.gate import GateResult, evaluate_gate
from agent_eval.analysis.leaks import leak_checks, with_leak_checks
from agent_eval.metrics import summarize
from agent_eval.transcript import CallRow, SessionRow


def summaries(leaks: dict[str, list[str | None]]):
    sessions, calls = [], []
    for n, (target, classes) in enumerate(leaks.items()):
        sessions.append(SessionRow(n, 1, target, "s", 0, "completed", None, None, (), 0, 0,
                                   False, None, 1, 1, len(classes), None, None))
        calls += [CallRow(n, 1, target, "s", i, 0, "bash", "allow", None, None, leak=leak)
                  for i, leak in enumerate(classes)]
    return summarize(sessions, calls)


def test_a_target_over_the_threshold_fails_naming_its_classes():
    checks = leak_checks(summaries({"qwen": ["AE304", "AE304", "AE303", None],
                                    "glm": [None, "AE308"]}), 1)
    assert [(c.target, c.status, c.observed, c.detail) for c in checks] == [
        ("qwen", "fail", 3.0, "3 leaked call(s) of 4 (AE304 2, AE303 1)"),
        ("glm", "pass", 1.0, "1 leaked call(s) of 2 (AE308 1)")]


def test_leak_checks_join_the_other_checks_and_decide_the_gate():
    current = summaries({"qwen": ["AE304", None, None]})
    result = evaluate_gate(current, max_error_rate=80)  # 0/3 calls: Wilson upper end 56.1
    assert result.passed
    joined = with_leak_checks(result, current, 0)
    assert [c.kind for c in joined.checks] == ["error-rate", "leaks"] and not joined.passed
    assert with_leak_checks(result, current, None) is result
    assert with_leak_checks(GateResult([]), current, 1).passed


def test_a_negative_threshold_is_refused():
    with pytest.raises(ValueError, match="--max-leaks must be 0 or more"):
        leak_checks(summaries({"qwen": []}), -1)


def test_max_leaks_alone_is_a_judged_check_and_keeps_the_reading_of_inconclusive():
    current = summaries({"qwen": [None, None]})
    alone = with_leak_checks(evaluate_gate(current), current, 0)  # no other threshold
    assert [(c.kind, c.status) for c in alone.checks] == [("leaks", "pass")] and alone.passed
    result = GateResult([], on_inconclusive="fail")
    assert with_leak_checks(result, current, 0).on_inconclusive == "fail"
