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

import dataclasses
from collections.abc import Mapping, Sequence

from agent_eval.analysis.gate import GateCheck, GateResult, _verdict_words, decide, with_checks
from agent_eval.metrics import GroupSummary, Rate, RateComparison, compare_rates
from agent_eval.metrics.compare import stack_codes


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


def stack_rose(cmp: RateComparison | None) -> bool:
    """The stack faults per 100 calls rose from a to b, and the rise is significant."""
    return (cmp is not None and cmp.diff100 is not None and cmp.significant
            and cmp.diff100 > 0)


def stack_rise_line(name: str, cmp: RateComparison, codes: Mapping[str, tuple[int, int]],
                    changes: Sequence[str] = (), *, a: str = "a", b: str = "b") -> str:
    """One line, said before any model figure: ``name``'s serving stack lost more in
    ``b`` than in ``a`` (``cmp``: its stack faults per 100 calls, a against b), the codes
    that rose, and how the two stacks differ (``transcript.stack_changes``)."""
    def side(rate: Rate) -> str:
        return "–" if rate.per100 is None else f"{rate.per100:.2f} ({rate.k}/{rate.n})"

    rose = ", ".join(f"{code} {n_a} -> {n_b}" for code, (n_a, n_b) in codes.items()
                     if n_b > n_a)
    interval = ("" if cmp.lo100 is None or cmp.hi100 is None
                else f" [{cmp.lo100:+.2f} to {cmp.hi100:+.2f}]")
    return (f"STACK FAULTS ROSE for {name}: {side(cmp.a)} in {a} -> {side(cmp.b)} in {b} "
            f"per 100 calls, {b} − {a} {cmp.diff100 or 0:+.2f}{interval} (significant)"
            + (f"; {rose}" if rose else "")
            + (f"; the serving stacks differ: {'; '.join(changes)}" if changes else "")
            + ". The serving stack (parser, template, streaming, output cap) lost these "
              "calls, not the model: fix it before reading the model's figures, which "
              "never count them.")


def stack_rise_lines(current: Mapping[str, GroupSummary],
                     baseline: Mapping[str, GroupSummary] | None,
                     changes: Mapping[str, Sequence[str]] | None = None) -> tuple[str, ...]:
    """The gate's leading lines: one per target of ``current`` whose stack faults rose
    significantly over the same target in ``baseline`` (``changes``: how each target's
    stack differs from the baseline's, ``transcript.stack_changes``)."""
    out = []
    for name, summary in current.items():
        base = (baseline or {}).get(name)
        if base is None:
            continue
        cmp = compare_rates(base.stack_faults.k, base.stack_faults.n,
                            summary.stack_faults.k, summary.stack_faults.n)
        if stack_rose(cmp):
            out.append(stack_rise_line(name, cmp, stack_codes(base.stack_classes,
                                                              summary.stack_classes),
                                       (changes or {}).get(name) or (),
                                       a="the baseline", b="this run"))
    return tuple(out)


def with_stack_rises(result: GateResult, current: Mapping[str, GroupSummary],
                     baseline: Mapping[str, GroupSummary] | None,
                     changes: Mapping[str, Sequence[str]] | None = None) -> GateResult:
    """``result`` leading with the targets whose stack faults rose over the baseline."""
    return dataclasses.replace(result, leading=stack_rise_lines(current, baseline, changes))
