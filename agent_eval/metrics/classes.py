"""Failure classes in report order: the primary-class precedence and the class breakdown table.

A denied call is counted once, under its primary code, so class rates add up to the total
errors per 100 calls (docs/design.md's breakdown table).  Classes are listed in the registry's
precedence (docs/design.md "Primary class"), which is also the order reports show them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from agent_eval.metrics.stats import Rate
from agent_eval.policy import PRECEDENCE, precedence_rank  # the registry owns the order

if TYPE_CHECKING:
    from agent_eval.metrics.summary import GroupSummary

UNCLASSIFIED = "unclassified"  # a denied call stored without a primary code
TOTAL = "total"  # label of the last row of :func:`class_table`


def class_sort_key(code: str) -> tuple[int, str]:
    """Precedence position; codes the registry does not list (new AE1xx codes, or
    ``unclassified``) come after the known ones, in code order, never dropped."""
    return (precedence_rank(code), code)


def order_classes(codes: Iterable[str]) -> list[str]:
    """The distinct ``codes`` in precedence order."""
    return sorted(set(codes), key=class_sort_key)


def class_table(
    summaries: Mapping[str, GroupSummary], *, all_classes: bool = False
) -> list[tuple[str, dict[str, Rate]]]:
    """docs/design.md's breakdown table: one row per class, one column per group.

    Rows are the classes present in any group (every registry class with
    ``all_classes``), in precedence order, then a ``"total"`` row with each group's
    overall error rate.  A class a group never hit shows as ``0`` of that group's calls,
    so each column adds up to its total.
    """
    present = [code for summary in summaries.values() for code in summary.classes]
    codes = order_classes([*present, *(PRECEDENCE if all_classes else ())])
    rows: list[tuple[str, dict[str, Rate]]] = []
    for code in codes:
        row = {
            group: summary.classes.get(code) or Rate.of(0, summary.calls)
            for group, summary in summaries.items()
        }
        rows.append((code, row))
    rows.append((TOTAL, {group: summary.errors for group, summary in summaries.items()}))
    return rows
