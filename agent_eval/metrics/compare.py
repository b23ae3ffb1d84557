"""Side-by-side comparison of two groups (targets, runs): what changed, and is it real.

Every difference is a :class:`RateComparison`, so each carries its 95% interval and the
two-proportion z-test that decides ``significant`` (docs/design.md: 9/161 against 19/158 is a
real difference; smaller gaps often are not).  Comparisons are fair only on the same
scenario mix; sampling to a common mix is the caller's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_eval.metrics.classes import order_classes
from agent_eval.metrics.stats import Rate, RateComparison, compare_rates
from agent_eval.metrics.summary import GroupSummary


@dataclass(frozen=True, slots=True)
class GroupComparison:
    """Group ``b`` against baseline ``a``; every difference reads ``b − a``.

    ``classes`` covers every class either side hit, in precedence order (a class one side
    never hit counts as 0 of its calls).  ``handshake`` compares completion shares,
    ``pivot`` the share of denials followed at once by an allowed call.
    """

    a: str
    b: str
    errors: RateComparison
    classes: dict[str, RateComparison]
    handshake: RateComparison
    pivot: RateComparison
    # stack faults per 100 calls (rules AE5xx): the serving stack's, never in ``errors``
    stack_faults: RateComparison | None = None
    # each stack-fault code either side hit: (faults in a, faults in b)
    stack_codes: dict[str, tuple[int, int]] = field(default_factory=dict)


def compare_groups(a: GroupSummary, b: GroupSummary, *, exact: bool = True) -> GroupComparison:
    """Compare two summaries from :func:`~agent_eval.metrics.summarize`; ``exact=False``
    leaves Fisher's exact p out (``compare_rates``)."""
    classes = {}
    for code in order_classes([*a.classes, *b.classes]):
        ka = a.classes[code].k if code in a.classes else 0
        kb = b.classes[code].k if code in b.classes else 0
        classes[code] = compare_rates(ka, a.calls, kb, b.calls, exact=exact)
    return GroupComparison(
        a=a.group,
        b=b.group,
        errors=_compare(a.errors, b.errors, exact),
        classes=classes,
        handshake=_compare(a.handshake.completed, b.handshake.completed, exact),
        pivot=_compare(a.recovery.pivot, b.recovery.pivot, exact),
        stack_faults=_compare(a.stack_faults, b.stack_faults, exact),
        stack_codes=stack_codes(a.stack_classes, b.stack_classes),
    )


def stack_codes(a: dict[str, int], b: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Each stack-fault code either side hit, in code order: (faults in a, faults in b)."""
    return {code: (a.get(code, 0), b.get(code, 0)) for code in sorted({*a, *b})}


def _compare(a: Rate, b: Rate, exact: bool = True) -> RateComparison:
    return compare_rates(a.k, a.n, b.k, b.n, exact=exact)
