"""The gate's stack-fault check: what the serving stack lost or mangled (rules AE5xx,
``policy/stack.py``), bounded apart from the model's errors.  Pure, beside
``gate.evaluate_gate``.

A nightly whose parser, template or output cap broke shows it here before it shows in
any model figure: stack faults never count in errors/100, so ``--max-error-rate`` cannot
see them.  ``--max-stack-faults X`` reads the 95% interval (Wilson's, per call) of stack
faults per 100 calls the stack handled (``GroupSummary.stack_faults``) as every rate
limit of the gate is read (``gate.decide``): PASS when its upper end is at or below X,
FAIL when its lower end is above X, else INCONCLUSIVE; the codes are named in the detail.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_eval.analysis.gate import GateCheck, GateResult, _verdict_words, decide, with_checks
from agent_eval.metrics import GroupSummary


def stack_fault_checks(current: Mapping[str, GroupSummary],
                       max_stack_faults: float) -> list[GateCheck]:
    """One check per target, its stack faults per 100 calls read by their interval's ends
    against ``max_stack_faults`` (:func:`gate.decide`); a target with no call and no
    fault is skipped, and says so."""
    if max_stack_faults < 0:
        raise ValueError(f"--max-stack-faults must be 0 or more, not {max_stack_faults:g}")
    checks = []
    name_of = f"stack faults/100 <= {max_stack_faults:g}"
    for name, summary in current.items():
        rate = summary.stack_faults
        if rate.per100 is None:
            checks.append(GateCheck(name_of, name, "stack-faults", max_stack_faults, None,
                                    "skip", "no tool call reached the stack"))
            continue
        codes = ", ".join(f"{code} {n}" for code, n in summary.stack_classes.items())
        status = decide(rate.lo100, rate.hi100, max_stack_faults)
        detail = (f"{rate.k} stack fault(s) per {rate.n} calls = {rate.per100:.2f}/100"
                  + (f" ({codes})" if codes else "") + "; never in errors/100; "
                  + _verdict_words(status, rate.lo100, rate.hi100, max_stack_faults))
        checks.append(GateCheck(name_of, name, "stack-faults", max_stack_faults,
                                rate.per100, status, detail))
    return checks


def with_stack_fault_checks(result: GateResult, current: Mapping[str, GroupSummary],
                            max_stack_faults: float | None) -> GateResult:
    """``result`` with the stack-fault checks added (unchanged without a limit)."""
    if max_stack_faults is None:
        return result
    return with_checks(result, stack_fault_checks(current, max_stack_faults))
