"""The private PostgreSQL cluster fault tests restart: it starts, survives a restart,
and when it cannot start, a test skips with the reason, or fails under CI=true."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import pgcluster


@pytest.mark.postgres
def test_a_private_cluster_answers_again_after_a_restart(pg_cluster):
    import psycopg

    url = pg_cluster.create_database("pgfault_restart")
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE t (n int)")
        conn.execute("INSERT INTO t VALUES (1)")
    with psycopg.connect(url) as kept:
        pg_cluster.restart(pause_s=0.2)
        with pytest.raises(psycopg.OperationalError, match="connection"):
            kept.execute("SELECT 1")  # the restart cut it
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT n FROM t").fetchall() == [(1,)]
    root = pg_cluster.root
    pg_cluster.close()
    assert not Path(root).exists()


def no_binaries() -> Path:
    raise pgcluster.ClusterUnavailable("no PostgreSQL server binaries")


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception),
                                         ("", pytest.skip.Exception)],
                         ids=["fails-under-CI", "skips-otherwise"])
def test_a_cluster_that_cannot_start(monkeypatch, ci, outcome):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(pgcluster, "find_bindir", no_binaries)
    with pytest.raises(outcome, match="no PostgreSQL server binaries"):
        pgcluster.cluster_or_skip()
