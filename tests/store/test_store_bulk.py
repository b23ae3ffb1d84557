"""The bulk write path (``agent_eval.store.bulk``): every row stored, in few statement texts.

Python's sqlite3 keeps each prepared statement text (128 per connection, in SQLite's own
memory): a multi-row INSERT for every row count a batch happened to have held hundreds
of large statements, and a run's memory grew with the sessions it played.  What is
asserted is what the cache can hold: the number of distinct statement texts.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine, event, func, select

from agent_eval.store.bulk import SQLITE_ROWS, chunk_sizes, insert_rows


@pytest.mark.parametrize("per", [1, 7, 37, SQLITE_ROWS])
def test_chunks_cover_every_row_in_few_sizes(per):
    sizes_seen = set()
    for n in range(0, 3 * per + 70):
        sizes = chunk_sizes(n, per)
        assert sum(sizes) == n and all(0 < s <= per for s in sizes)
        sizes_seen.update(sizes)
    assert len(sizes_seen) <= math.floor(math.log2(per)) + 2


def test_batches_of_every_size_share_a_few_statements(tmp_path):
    metadata = MetaData()
    table = Table("calls", metadata, Column("id", Integer, primary_key=True),
                  *(Column(f"c{i}", Text) for i in range(12)))
    engine = create_engine(f"sqlite:///{tmp_path / 'bulk.db'}")
    metadata.create_all(engine)
    texts: set[str] = set()
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: texts.add(statement))
    next_id, stored = 1, 0
    with engine.begin() as conn:
        for size in range(1, 301):  # what a run's writer hands over: any row count
            rows = [{"id": next_id + i, **{f"c{i}": "uv run scripts/x.py" for i in range(12)}}
                    for i in range(size)]
            next_id += size
            insert_rows(conn, table, rows)
            stored += size
        texts = {t for t in texts if t.startswith("INSERT")}
        assert conn.execute(select(func.count()).select_from(table)).scalar() == stored
    assert len(texts) <= math.floor(math.log2(SQLITE_ROWS)) + 2  # not one per row count
