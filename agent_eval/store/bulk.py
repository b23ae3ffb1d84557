"""Rows written in one driver-level executemany: the store's bulk write path.

``conn.execute(insert(table), rows)`` runs every row through SQLAlchemy's per-row
parameter building (``construct_params``): 2.2 s of a 9.9 s import profile, for 15,381
calls and 123,497 findings, and a fifth of a live run's writer thread for the request
blobs alone.  Here the statement is compiled once per table, column set, statement kind
and dialect, and each row goes to the driver after the very type processors SQLAlchemy
applies (JSON text, UTC timestamps and dates, the NUL stand-in on PostgreSQL, booleans),
so the stored rows are the same.  Values are still bound parameters, never SQL text.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Dialect, Insert, Table, insert

Build = Callable[[Dialect], Insert]
"""The statement for a dialect (an upsert, say); None: a plain ``INSERT`` of the table.
Compiled once per function, so pass a module-level function, not a new lambda."""


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]],
                build: Build | None = None) -> None:
    """INSERT ``rows`` (dicts with the same keys, column names) in one DBAPI executemany;
    ``build`` gives another statement over the same columns (``ON CONFLICT ...``)."""
    if not rows:
        return
    sql, order, processors, positional = _compiled(table, tuple(rows[0]), conn.dialect, build)
    values = itemgetter(*order) if len(order) > 1 else (lambda row: (row[order[0]],))
    params: list[Any] = []
    for row in rows:
        row_values = list(values(row))
        for i, process in processors:
            row_values[i] = process(row_values[i])
        params.append(tuple(row_values) if positional else dict(zip(order, row_values, strict=True)))
    conn.exec_driver_sql(sql, params)


@lru_cache(maxsize=64)
def _compiled(
    table: Table, columns: tuple[str, ...], dialect: Dialect, build: Build | None
) -> tuple[str, tuple[str, ...], list[tuple[int, Callable[[Any], Any]]], bool]:
    """(SQL text, bind order, (position, type processor) pairs, positional?) for an
    executemany of ``columns`` into ``table`` under ``dialect``."""
    statement = build(dialect) if build is not None else insert(table)
    compiled = statement.compile(dialect=dialect, column_keys=list(columns),
                                 for_executemany=True)
    order = tuple(compiled.positiontup or ()) if compiled.positional else columns
    if set(order) != set(columns) or compiled.escaped_bind_names:
        raise RuntimeError(f"cannot bulk-insert {table.name}: bind names differ from columns")
    processors: list[tuple[int, Callable[[Any], Any]]] = []
    for i, name in enumerate(order):
        process = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors.append((i, process))
    return compiled.string, order, processors, compiled.positional
