"""Run a real agent CLI confined.  These CLIs EXECUTE the commands a model emits, so they
never run as root, never see the host's files or network, and reach exactly one port.

A run (``Sandbox.run``) is, from the outside in:

- **user**: ``agent-eval-cli`` (``ensure_user`` creates it with useradd when absent: a
  system user, no home, no login shell), no supplementary groups, ``no_new_privs``;
- **namespaces** (``unshare``, util-linux): network (only ``lo``), mount (private), pid (the
  CLI's whole process tree dies with the run), uts, ipc;
- **files**: a fresh temporary folder is the CLI's HOME (``/home/agent`` inside) and holds its
  working folder (``/home/agent/project``); an empty tmpfs hides ``/tmp``, ``/var/tmp``,
  ``/dev/shm``, ``/run``, ``/home``, ``/work``, ``/mnt``, ``/srv``, ``/opt`` (no host UNIX socket, such as
  PostgreSQL's, is reachable; ``/root`` is 0700); the CLI cache is bound read-only at
  ``/opt/agent-clis``; the environment is exactly what the caller gives (nothing of the
  host's, no credentials);
- **network**: inside, ``127.0.0.1:PORT`` is served by a relay (``inner.py``) that forwards
  each connection over a UNIX socket in a root-only folder to the host-side ``Relay``,
  which connects to the one host port given (``agent-eval proxy``).  Every other address,
  port and name lookup fails inside: there is no route and no resolver (a run may ask for
  a second port, ``extra_ports``: the telemetry collector's, relayed the same way over its
  own socket to its own host port).  The host-side
  relay also records both byte streams of each connection (``Relay.connections``), which is
  how the tests see exactly what a CLI sent.

Why a UNIX socket and not a veth pair: a veth needs addresses outside the loopback range
and routes on the host; a path socket crosses the namespace boundary through the file
system only, with no host network change, and needs nothing but Python and ``unshare``.

Needs root (to make the namespaces and drop to the user); ``unavailable()`` says why not.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .inner import pump

CLI_USER = os.environ.get("AGENT_EVAL_CLI_USER", "agent-eval-cli")
INSIDE_HOME = "/home/agent"
INSIDE_CWD = f"{INSIDE_HOME}/project"
INSIDE_CLIS = "/opt/agent-clis"
HIDE = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/home", "/work", "/mnt", "/srv", "/opt")
INNER = Path(__file__).with_name("inner.py")
TIMEOUT_EXIT = 124


def unavailable() -> str | None:
    """Why the sandbox cannot run here, or None."""
    if sys.platform != "linux":
        return "the agent-CLI sandbox needs Linux namespaces"
    if os.geteuid() != 0:
        return "the agent-CLI sandbox needs root (to make namespaces and drop to agent-eval-cli)"
    if shutil.which("unshare") is None:
        return "the agent-CLI sandbox needs unshare (util-linux)"
    return None


def ensure_user(name: str = CLI_USER) -> tuple[int, int]:
    """(uid, gid) of the sandbox user, created when absent; never root."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                        "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise RuntimeError(f"sandbox user {name} is root (uid {entry.pw_uid}); refusing")
    return entry.pw_uid, entry.pw_gid


@dataclass
class Connection:
    """The raw bytes of one relayed TCP connection, both ways, in order."""

    sent: bytearray = field(default_factory=bytearray)  # client -> upstream
    received: bytearray = field(default_factory=bytearray)  # upstream -> client
    marks: list[tuple[int, float]] = field(default_factory=list)  # (offset in sent, time)


class Relay:
    """Accept on ``listener`` (a bound UNIX or TCP socket), connect each to
    ``127.0.0.1:port``, copy bytes both ways, and keep them in ``connections``."""

    def __init__(self, listener: socket.socket, port: int) -> None:
        self.listener, self.port = listener, port
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        listener.listen(64)
        self._thread = threading.Thread(target=self._accept, daemon=True, name="cli-relay")
        self._thread.start()

    @classmethod
    def tcp(cls, port: int) -> Relay:
        """A recording relay on a free loopback port, to put between two servers."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        return cls(listener, port)

    @property
    def listen_port(self) -> int:
        return self.listener.getsockname()[1]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            record = Connection()
            with self._lock:
                self.connections.append(record)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_pump, args=(conn, upstream, record.sent, record.marks),
                             daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, conn, record.received, None),
                             daemon=True).start()

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()


def _pump(src: socket.socket, dst: socket.socket, into: bytearray,
          marks: list[tuple[int, float]] | None) -> None:
    def seen(data: bytes) -> None:
        if marks is not None:
            marks.append((len(into), time.monotonic()))
        into.extend(data)

    pump(src, dst, seen)


@dataclass(frozen=True)
class Outcome:
    """How a confined run ended; ``stdout``/``stderr`` are the CLI's, whole."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode == TIMEOUT_EXIT


class Sandbox:
    """One fresh confined folder whose CLI reaches only ``upstream_port`` on the host, as
    ``127.0.0.1:port`` inside.  ``home`` is the host path of the CLI's HOME (write its
    config there before ``run``; read its session files after).  Use as a context manager:
    the folder is deleted on exit unless ``keep``."""

    def __init__(self, upstream_port: int, *, port: int = 8100, clis_dir: Path | None = None,
                 keep: bool = False, extra_ports: dict[int, int] | None = None) -> None:
        """``extra_ports``: further ``{inside port: host port}`` the CLI may reach (the
        telemetry collector beside the model), each through its own recording relay
        (``extra_relays``); nothing else is opened."""
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        self.uid, self.gid = ensure_user()
        self.port, self.keep, self.clis_dir = port, keep, clis_dir
        self.root = Path(tempfile.mkdtemp(prefix="agent-eval-cli-"))
        self.home = self.root / "home"
        (self.home / "project").mkdir(parents=True)
        self._relay_dir = self.root / "relay"
        self._relay_dir.mkdir(mode=0o700)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self._relay_dir / "relay.sock"))
        self.relay = Relay(listener, upstream_port)
        self.extra_relays: dict[int, Relay] = {}
        for inside, host in (extra_ports or {}).items():
            if inside == port:
                raise ValueError(f"port {inside} is the CLI's model port")
            more = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            more.bind(str(self._relay_dir / f"relay-{inside}.sock"))
            self.extra_relays[inside] = Relay(more, host)

    @property
    def base_url(self) -> str:
        """The one address the CLI can reach, as it writes it."""
        return f"http://127.0.0.1:{self.port}"

    def inside(self, host_path: Path) -> str:
        """The path the CLI sees for a host path under ``home``."""
        return f"{INSIDE_HOME}/{host_path.relative_to(self.home)}".rstrip("/.")

    def run(self, argv: list[str], env: dict[str, str], *, timeout: float = 120.0,
            cwd: str = INSIDE_CWD, stdin: bytes = b"") -> Outcome:
        """Run ``argv`` confined, as the sandbox user, with exactly ``env`` (plus HOME, USER,
        LANG, TERM, TMPDIR and a default PATH), ``stdin`` as its standard input, and wait at
        most ``timeout`` seconds."""
        self._give_home()
        out = self.root / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        (out / "stdin").write_bytes(stdin)
        binds = [{"source": str(self.home), "target": INSIDE_HOME, "read_only": False}]
        if self.clis_dir is not None:
            binds.append({"source": str(self.clis_dir), "target": INSIDE_CLIS, "read_only": True})
        full_env = {"HOME": INSIDE_HOME, "USER": CLI_USER, "LOGNAME": CLI_USER,
                    "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp",
                    "PATH": "/usr/local/bin:/usr/bin:/bin", **env}
        spec = {"argv": argv, "env": full_env, "cwd": cwd, "uid": self.uid, "gid": self.gid,
                "port": self.port, "timeout": timeout, "binds": binds, "hide": list(HIDE),
                "relay_dir": str(self._relay_dir), "output_dir": str(out),
                "extra": [{"port": inside, "socket": f"relay-{inside}.sock"}
                          for inside in self.extra_relays]}
        spec_file = self.root / "spec.json"
        spec_file.write_text(json.dumps(spec))
        python = os.path.realpath(sys._base_executable)  # stdlib only; outside hidden folders
        done = subprocess.run(
            ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "--uts", "--ipc",
             "--propagation", "private", python, "-I", "-S", str(INNER), str(spec_file)],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout + 30)
        if done.returncode != 0 and not (out / "stdout").exists():
            raise RuntimeError(f"sandbox set-up failed ({done.returncode}): "
                               f"{done.stderr.decode(errors='replace')[-2000:]}")
        stderr = (out / "stderr").read_bytes().decode(errors="replace")
        if done.stderr:
            stderr += "\n[sandbox] " + done.stderr.decode(errors="replace")
        return Outcome(done.returncode, (out / "stdout").read_bytes().decode(errors="replace"),
                       stderr)

    def _give_home(self) -> None:
        """The CLI's folder belongs to the CLI's user (config written by root included)."""
        for path in [self.home, *self.home.rglob("*")]:
            os.lchown(path, self.uid, self.gid)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.relay.close()
        for relay in self.extra_relays.values():
            relay.close()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
