"""Model-server log records: periodic throughput samples and HTTP request lines.

Log parsers (vLLM's periodic ``Avg prompt throughput ...`` line, its access log) hand rows
over as plain dicts keyed by column name; the store checks the keys, writes them in
chunks inside one transaction and reads them back by time window.  Timestamps are UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import islice

from sqlalchemy import Engine, Table, insert, select

from agent_eval.errors import ConfigError
from agent_eval.store.database import write_transaction

CHUNK = 5000


def add_rows(engine: Engine, table: Table, rows: Iterable[dict]) -> int:
    """Insert ``rows`` into ``table`` in one transaction; how many were written.

    Raises ConfigError naming the field for a key that is not a column or a required
    column left out, and nothing is written.
    """
    allowed = {c.name for c in table.columns} - {"id"}
    required = {c.name for c in table.columns if not c.nullable and c.name != "id"}
    written = 0
    with write_transaction(engine) as conn:
        for chunk in _chunks(rows):
            for n, row in enumerate(chunk, start=written + 1):
                unknown = row.keys() - allowed
                missing = required - row.keys()
                if unknown or missing:
                    bad = sorted(unknown or missing)[0]
                    raise ConfigError(
                        f"{table.name} row {n}: "
                        + ("unknown" if unknown else "missing")
                        + f" field {bad!r}: columns are {', '.join(sorted(allowed))}",
                        field=bad,
                    )
            conn.execute(insert(table), [{col: row.get(col) for col in allowed} for row in chunk])
            written += len(chunk)
    return written


def read_rows(
    engine: Engine,
    table: Table,
    since: datetime | None = None,
    until: datetime | None = None,
    source: str | None = None,
) -> list[dict]:
    """Rows with ``since <= ts < until`` (either bound optional), oldest first."""
    query = select(table).order_by(table.c.ts, table.c.id)
    if since is not None:
        query = query.where(table.c.ts >= since)
    if until is not None:
        query = query.where(table.c.ts < until)
    if source is not None:
        query = query.where(table.c.source == source)
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def _chunks(rows: Iterable[dict]) -> Iterator[list[dict]]:
    it = iter(rows)
    while chunk := list(islice(it, CHUNK)):
        yield chunk
