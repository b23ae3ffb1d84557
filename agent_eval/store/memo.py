"""One read: the rows of a statement asked for twice while one page is built, read once.

A viewer page asks the aggregator for figures that share their heaviest statements: the
runs page's list and its label's trend read the same runs' session sums and clustered
sums; the run page's errors by agent, when no session names an agent, is the same GROUP
BY as its per-target table.  Inside :func:`one_read` (``Store.one_read``) the statements
read through :func:`rows` are run once per distinct SQL and parameters; outside it (every
CLI command, the report) nothing is kept.  The scope is a context variable: a page built
in a worker thread keeps its own, and nothing outlives the page (a live run's next page
reads it afresh).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql.expression import Select

_SCOPE: ContextVar[dict | None] = ContextVar("agent_eval_one_read", default=None)


@contextmanager
def one_read() -> Iterator[None]:
    """Within the block, :func:`rows` answers a statement it already ran from memory."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


def rows(conn: Connection, statement: Select[Any]) -> list[Any]:
    """``conn.execute(statement).all()``, once per SQL and parameters within
    :func:`one_read` (a list parameter, an ``IN``, keyed as a set: the rows of a GROUP BY
    do not depend on its order)."""
    memo = _SCOPE.get()
    if memo is None:
        return list(conn.execute(statement).all())
    compiled = statement.compile(dialect=conn.dialect)
    params = tuple(sorted((name, tuple(sorted(v)) if isinstance(v, list | tuple) else v)
                          for name, v in compiled.params.items()))
    key = (conn.engine.url.render_as_string(), str(compiled), params)
    if key not in memo:
        memo[key] = list(conn.execute(statement).all())
    return memo[key]
