"""The gate's leak check: calls an agent CLI's rules let through that the strict reading
of the same rules refuses (docs/policies.md).  Pure, beside ``gate.evaluate_gate``.

Errors per 100 calls are the harness's verdicts, what the model was actually refused; a
leak is a call that was allowed, so no error rate shows it.  ``--max-leaks N`` bounds
their count per target, all classes together, the classes named in the detail.  A count,
not a rate: one ``cd /x && python3 script.py`` through a ``Bash(cd:*)`` rule is already
a hole in the rules, however many calls were fine.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_eval.analysis.gate import GateCheck, GateResult, with_checks
from agent_eval.metrics import GroupSummary


def leak_checks(current: Mapping[str, GroupSummary], max_leaks: int) -> list[GateCheck]:
    """One check per target: its leaked calls ``<= max_leaks`` passes."""
    if max_leaks < 0:
        raise ValueError(f"--max-leaks must be 0 or more, not {max_leaks}")
    checks = []
    for name, summary in current.items():
        total = sum(summary.leaks.values())
        classes = ", ".join(f"{code} {n}" for code, n in summary.leaks.items())
        detail = (f"{total} leaked call(s) of {summary.calls}" + (f" ({classes})" if classes
                                                                  else ""))
        checks.append(GateCheck(f"leaks <= {max_leaks}", name, "leaks", float(max_leaks),
                                float(total), "pass" if total <= max_leaks else "fail",
                                detail))
    return checks


def with_leak_checks(result: GateResult, current: Mapping[str, GroupSummary],
                     max_leaks: int | None) -> GateResult:
    """``result`` with the leak checks added (unchanged without ``max_leaks``)."""
    if max_leaks is None:
        return result
    return with_checks(result, leak_checks(current, max_leaks))
