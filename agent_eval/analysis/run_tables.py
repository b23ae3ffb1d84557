"""The closing tables of stored runs: one library call from run ids to every figure
``run`` (text and ``--json``) and ``report`` print.

:func:`run_tables` reads the per-column summaries (``Store.summarize``, the store's
aggregator), the clustered errors/100 of each column (``Store.cluster_stats``, sessions
as clusters: the interval ``gate --max-error-rate`` decides on), and, for one run, its
status and its ``--until-decided`` plan, and the rows of the failure-class breakdown
(``metrics.class_table``) with each class's rule name; the CLI only renders the :class:`RunTables` it
returns (``cli/tables.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_eval.metrics import TOTAL, GroupSummary, Rate, class_table
from agent_eval.metrics.clustered import ClusteredRate, units_rate
from agent_eval.metrics.sequential import SequentialPlan
from agent_eval.policy import get_rule
from agent_eval.store import Store


@dataclass(frozen=True)
class RunTables:
    """What the closing tables show of ``run_ids``.

    ``summaries``: per column (the target, or ``name · run N`` for each (run, target)
    pair when there are several runs), every figure of the two tables; ``clustered``:
    per column, errors/100 on the clustered interval; ``classes``: the breakdown's rows
    (``metrics.class_table`` of ``summaries``: a row per class, then ``total``) and
    ``class_names`` the rule name of each class that has one; ``status``: the run's
    status as stored, and ``sequential``: its ``--until-decided`` plan as stored
    (``None`` for a fixed-size run), both for a single run only (``None`` for several)."""

    run_ids: tuple[int, ...]
    summaries: dict[str, GroupSummary]
    clustered: dict[str, ClusteredRate]
    classes: list[tuple[str, dict[str, Rate]]] = field(default_factory=list)
    class_names: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    sequential: dict | None = None


def summarize_runs(store: Store, run_ids: Sequence[int]) -> dict[str, GroupSummary]:
    """Per-column summaries of the given runs (read once from the store).

    Columns are the HTML report's: the target, or ``name · run N`` for each (run,
    target) pair when there are several runs, so the terminal never pools runs the
    report keeps apart.

    Computed by GROUP BY in the database (``store.summarize``), the same numbers as
    ``metrics.summarize`` over every row.
    """
    return store.summarize(list(run_ids), "target", columns=True)


def clustered_rates(store: Store, run_ids: Sequence[int]) -> dict[str, ClusteredRate]:
    """Per column of :func:`summarize_runs`, errors/100 on the clustered interval (sessions
    as clusters, stratified by scenario): the interval ``gate --max-error-rate`` decides
    on, from the same sums (``store.cluster_stats``)."""
    stats = store.cluster_stats(list(run_ids), columns=True)
    return {name: units_rate(s) for name, s in stats.items()}


def run_tables(store: Store, run_ids: Sequence[int]) -> RunTables:
    """Every figure of the closing tables of ``run_ids`` (module docstring)."""
    ids = tuple(run_ids)
    status = sequential = None
    if len(ids) == 1:
        info = store.get_run(ids[0])
        status = info.status
        plan = SequentialPlan.from_config(info.config)
        sequential = None if plan is None else plan.stored()
    summaries = summarize_runs(store, ids)
    classes = class_table(summaries)
    return RunTables(ids, summaries, clustered_rates(store, ids), classes,
                     class_names(code for code, _ in classes), status, sequential)


def class_names(codes: Iterable[str]) -> dict[str, str]:
    """The rule name of each failure class that has a rule (``total`` has none)."""
    rules = {code: get_rule(code) for code in codes if code != TOTAL}
    return {code: rule.name for code, rule in rules.items() if rule is not None}
