"""Rows written in one driver-level executemany: the store's bulk write path.

``conn.execute(insert(table), rows)`` runs every row through SQLAlchemy's per-row
parameter building (``construct_params``): 2.2 s of a 9.9 s import profile, for 15,381
calls and 123,497 findings, and a fifth of a live run's writer thread for the request
blobs alone.  Here the statement is compiled once per table, column set, statement kind
and dialect, and each row goes to the driver after the very type processors SQLAlchemy
applies (JSON text, UTC timestamps and dates, the NUL stand-in on PostgreSQL, booleans),
so the stored rows are the same.  Values are still bound parameters, never SQL text.

On SQLite the rows go as multi-row ``INSERT ... VALUES (...), (...)`` statements of up to
:data:`SQLITE_ROWS` rows rather than an executemany: Python's sqlite3 hands the GIL back
around every step, one per row in an executemany, and a run's writer thread stores ~4
rows a turn while the event loop wants the GIL: at concurrency 16 each handoff cost both
threads a wake-up (the writer's CPU per turn 0.17-0.21 ms with an executemany, 0.14-0.16
ms with these statements; BENCHMARKS.md), in a few fixed row counts (:func:`chunk_sizes`)
so the prepared statements sqlite3 keeps stay few.  PostgreSQL (psycopg) keeps its
executemany.
"""

from __future__ import annotations

import sqlite3
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
    """INSERT ``rows`` (dicts with the same keys, column names): one DBAPI executemany,
    or on SQLite multi-row statements; ``build`` gives another statement over the same
    columns (``ON CONFLICT ...``)."""
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
    split = _values_group(sql, len(order)) if conn.dialect.name == "sqlite" else None
    if split is None:
        conn.exec_driver_sql(sql, params)
        return
    head, group, tail = split
    per = max(1, min(SQLITE_ROWS, _sqlite_max_params(conn) // len(order)))
    start = 0
    for size in chunk_sizes(len(params), per):
        chunk = params[start:start + size]
        start += size
        conn.exec_driver_sql(head + ", ".join([group] * size) + tail,
                             tuple(value for row in chunk for value in row))


def chunk_sizes(n: int, per: int) -> list[int]:
    """How ``n`` rows go in multi-row statements of at most ``per`` rows: full ones, then
    the rest as powers of two (53 rows: 32 + 16 + 4 + 1).  Each statement text is
    prepared once per connection and kept in Python's sqlite3 statement cache (128 per
    connection, in SQLite's own memory, which tracemalloc does not see); a statement of
    every row count a batch happens to have filled that cache with hundreds of large
    ones, and a run's memory grew with the sessions it played (+80 MB over 300 row
    counts of 19 columns).  With these sizes a table has at most ``log2(per) + 2``
    statement texts, whatever the batches."""
    full, rest = divmod(n, per)
    sizes = [per] * full
    bit = 1 << max(rest.bit_length() - 1, 0)
    while rest:
        if rest >= bit:
            sizes.append(bit)
            rest -= bit
        bit >>= 1
    return sizes


SQLITE_ROWS = 500
"""Most rows in one SQLite statement (its text and preparation stay small)."""


def _sqlite_max_params(conn: Connection) -> int:
    """The most parameters one statement may bind on this SQLite connection (999 before
    SQLite 3.32, 32,766 since, unless the build says otherwise)."""
    dbapi = conn.connection.dbapi_connection
    return dbapi.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if dbapi is not None else 999


@lru_cache(maxsize=64)
def _values_group(sql: str, n: int) -> tuple[str, str, str] | None:
    """``sql`` cut around its one ``VALUES (?, ...)`` group of ``n`` parameters (what
    SQLAlchemy compiles for SQLite), so one statement can carry many rows; None when it
    has no such group."""
    group = "(" + ", ".join(["?"] * n) + ")"
    at = sql.find(" VALUES " + group)
    if at < 0 or sql.count(group) != 1:
        return None
    cut = at + len(" VALUES ")
    return sql[:cut], group, sql[cut + len(group):]


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
