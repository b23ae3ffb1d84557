"""Per-session units (``metrics.clustered.session_units``) from the store, without a call
row leaving the database: the per-session statistics (``power``, the tag strata of
``compare``, and ``cluster_stats``' per-class sums of a run with child sessions) read them.
``gate``, ``compare`` and the viewer read the per-scenario sums instead
(``store.cluster_stats``); every other figure comes from ``store.aggregates``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Engine, Text, cast, func, select

from agent_eval.metrics.classes import UNCLASSIFIED
from agent_eval.metrics.clustered import Unit, units_from_class_counts
from agent_eval.store.schema import denied_calls, sessions, targets, tool_calls


class UnitSession(NamedTuple):
    """The fields of a session that units and repeat outcomes read (``split_sessions``,
    ``metrics.clustered.units_from_class_counts``, ``metrics.repeats._outcomes_by``)."""

    id: int
    parent_id: int | None
    status: str
    target: str
    scenario: str
    repeat: int
    tags: tuple[str, ...]
    n_calls: int


def unit_sessions(engine: Engine, run_ids: Iterable[int], *, columns: bool = False
                  ) -> list[UnitSession]:
    """The runs' sessions in ``session_rows`` order with only what per-session statistics
    need; tags come back as JSON text and are decoded only when not empty, so a run of
    125,000 sessions reads in a fraction of the time full ``SessionRow``s take.
    ``columns``: targets named as report columns (``name · run N`` for several runs)."""
    s = sessions.c
    ids = list(run_ids)
    query = (select(s.id, s.parent_id, s.status, targets.c.name, s.run_id, s.scenario,
                    s.repeat, cast(s.tags, Text), s.n_calls)
             .join(targets, targets.c.id == s.target_id)
             .where(s.run_id.in_(ids)).order_by(s.target_id, s.id))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    several = columns and len(ids) > 1
    return [UnitSession(sid, parent, status, f"{target} · run {run}" if several else target,
                        scenario, repeat,
                        tuple(json.loads(tags)) if tags and tags != "[]" else (), n_calls)
            for sid, parent, status, target, run, scenario, repeat, tags, n_calls in rows]


def units_sql(engine: Engine, run_ids: Iterable[int], *, columns: bool = False) -> list[Unit]:
    """``session_units(session_rows, call_rows)`` from the sessions' stored call counts and
    one GROUP BY of denied calls per (session, class): no call row leaves the database.

    ``sessions.n_calls`` is written as ``len(record.calls)`` in the same transaction as
    those calls (``store.sessions``), so it is the per-session count a GROUP BY over the
    run's calls would give, without reading a million index entries.
    """
    ids = list(run_ids)
    c = tool_calls.c
    rows = unit_sessions(engine, ids, columns=columns)
    with engine.connect() as conn:
        denied = conn.execute(
            select(c.session_id, c.primary_code, func.count())
            .where(*denied_calls(ids)).group_by(c.session_id, c.primary_code)).all()
    by_class: dict[int, Counter] = {}
    for sid, code, n in denied:
        by_class.setdefault(sid, Counter())[code or UNCLASSIFIED] += n
    return units_from_class_counts(rows, {row.id: row.n_calls for row in rows}, by_class)
