"""A private PostgreSQL cluster for tests that stop and start the server.

The PostgreSQL on 127.0.0.1:5432 is shared by the rest of the suite (and by other
people), so a test that restarts PostgreSQL gets a cluster of its own: ``initdb`` into a
fresh directory, trust authentication, a free TCP port on 127.0.0.1 and the unix socket
in that directory, run as the ``postgres`` OS user when the tests run as root (initdb
refuses root).  ``pg_ctl -w`` waits for each start and stop; ``close()`` stops the
server and deletes the directory, whatever happened in the test.

The ``pg_cluster`` fixture in conftest.py skips (with the reason) when the server
binaries are missing or the cluster cannot start, and fails instead under CI=true.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class ClusterUnavailable(RuntimeError):
    """No private cluster here: why, in one line."""


def find_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` holding initdb and pg_ctl."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                        else 0)
    for path in reversed(candidates):
        if (Path(path) / "initdb").exists() and (Path(path) / "pg_ctl").exists():
            return Path(path)
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise ClusterUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) in "
                             "/usr/lib/postgresql/*/bin or on PATH; install postgresql")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgCluster:
    """One throwaway cluster: ``start()``, ``stop()``, ``restart(pause_s)``, ``close()``."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise ClusterUnavailable("running as root and there is no 'postgres' OS user "
                                         "for initdb to run as") from None
        # short and traversable by postgres: pytest's tmp_path is neither (0700, long)
        self.root = Path(tempfile.mkdtemp(prefix="agent-eval-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        if self.as_postgres:
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        self.root.chmod(0o755)

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        argv = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  cwd=self.root)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterUnavailable(f"{args[0]}: {exc}") from None
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            raise ClusterUnavailable(f"{args[0]} {args[1] if len(args) > 1 else ''} failed "
                                     f"({done.returncode}): {done.stderr.strip()[-1500:]} "
                                     f"{tail}".strip())

    def init(self) -> PgCluster:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                       "max_connections = 100\nshared_buffers = 32MB\n")
        return self

    def start(self) -> None:
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l",
                  str(self.log), timeout=90)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data),
                  timeout=90)

    def restart(self, pause_s: float = 1.0) -> None:
        """Stop (every connection cut, new ones refused), wait, start again."""
        self.stop()
        time.sleep(pause_s)
        self.start()

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        """Stop the server if it runs and delete everything; never raises."""
        try:
            if self.running():
                self.stop(mode="immediate")
        except ClusterUnavailable:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> PgCluster:
    """A started private cluster, or :class:`ClusterUnavailable` saying why not."""
    cluster = PgCluster()
    try:
        cluster.init().start()
    except BaseException:
        cluster.close()
        raise
    return cluster


def cluster_or_skip() -> PgCluster:
    """:func:`start_cluster` for a test: skip with the reason when it cannot start, fail
    instead under CI=true (where a skipped fault test would pass unnoticed)."""
    import pytest

    try:
        return start_cluster()
    except ClusterUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true but a private PostgreSQL cluster could not start: {exc}",
                        pytrace=False)
        pytest.skip(f"no private PostgreSQL cluster: {exc}")
