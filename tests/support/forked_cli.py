"""``agent-eval`` commands in processes forked from a server that imported the package
once, for tests that start many at once (the worker kill test starts ten).

A fresh ``python -m agent_eval worker`` spends about 1.5 s of CPU importing (the openai
SDK, SQLAlchemy, the bash grammar); ten of them on a busy two-core machine took most of
a minute.  Here a multiprocessing forkserver imports the command line once and forks each
command from it: a real OS process running the real CLI (``kill -9``, ``SIGSTOP`` and its
own connections, exit code and stdout), without paying for the imports again.
:class:`ForkedCommand` answers like ``subprocess.Popen`` where the tests use it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from pathlib import Path

PRELOAD = ["agent_eval.cli", "agent_eval.cli.workers", "agent_eval.live.workers",
           "agent_eval.live.run", "agent_eval.store", "support.forked_cli"]

_context = None


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _play(argv: list[str], out: str, err: str, cwd: str) -> None:
    """The child: the command line with stdout and stderr in files; its exit code."""
    os.chdir(cwd)
    sys.stdout = open(out, "w", encoding="utf-8")  # lives as long as the child
    sys.stderr = open(err, "w", encoding="utf-8")
    from agent_eval.cli import main

    try:
        main(argv, prog_name="agent-eval")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class ForkedCommand:
    """One forked ``agent-eval ARGV...``: ``pid``, ``poll()``, ``returncode``,
    ``send_signal()``, ``kill()``, ``wait()``, ``communicate()`` and ``stderr.read()``."""

    def __init__(self, argv: list[str], cwd: Path, logs: Path) -> None:
        """``logs``: a directory for this process's stdout and stderr files."""
        logs.mkdir(parents=True, exist_ok=True)
        self._out, self._err = logs / "stdout", logs / "stderr"
        self._proc = _forkserver().Process(
            target=_play, args=(argv, str(self._out), str(self._err), str(cwd)), daemon=False)
        self._proc.start()
        self.pid = self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode  # -N: killed by signal N, as Popen says it

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self._proc.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int | None:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise TimeoutError(f"process {self.pid} still running after {timeout} s")
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self._read(self._out), self._read(self._err)

    @property
    def stderr(self) -> ForkedCommand:
        return self

    def read(self) -> str:
        return self._read(self._err)

    @staticmethod
    def _read(path: Path) -> str:
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
