"""The inside half of the agent-CLI sandbox: runs as root in fresh namespaces, confines the
file system, opens the one port, then runs the CLI as the unprivileged user.

Started by ``sandbox.run_confined`` as
``unshare --net --mount --pid --fork --mount-proc --uts --ipc --propagation private
PYTHON -I -S inner.py SPEC.json``, so this process is pid 1 of a new pid namespace in a
new network namespace holding only a loopback interface (down until we raise it).  When it
exits, the kernel kills every process left in the namespace (a CLI's background servers,
shells the model started): nothing outlives a run.

Standard library only, imported before anything is hidden: the interpreter's own library
is read from its prefix, which is not among the hidden folders.

Steps, in order:

1. open a handle (``O_PATH``) on every folder to be bound inside, and the CLI's input and
   output files, while they are still visible;
2. raise ``lo``;
3. mount an empty tmpfs over each folder of ``hide`` (``/tmp``, ``/run``, ``/home``, the
   project's ``/work``...): no UNIX socket of the host (PostgreSQL's, MySQL's) and no other
   user's files are reachable; ``/root`` is mode 0700 and needs no hiding;
4. bind the sandbox folder read-write at its inside path (``/home/agent``), the CLI cache
   read-only, and the relay's socket folder (mode 0700, root's) at ``/run/agent-eval-relay``;
5. listen on ``127.0.0.1:PORT`` in this namespace and relay each connection to the UNIX
   socket, whose other end (outside) connects to the one host port allowed (and each
   ``extra`` port, when the run asks for one, to its own socket and host port);
6. run the CLI with ``user``/``group`` set (no supplementary groups, ``no_new_privs`` so a
   setuid binary cannot give root back), the environment given and nothing inherited,
   stdin, stdout and stderr from and to files of the sandbox folder; kill its whole
   process group after ``timeout`` seconds (exit 124, as timeout(1) does).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
RELAY_DIR = "/run/agent-eval-relay"

libc = ctypes.CDLL(None, use_errno=True)


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                  flags, data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def raise_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def bind(fd: int, target: str, *, read_only: bool) -> None:
    os.makedirs(target, exist_ok=True)
    mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    if read_only:
        mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def pump(src: socket.socket, dst: socket.socket, seen=None) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst``; ``seen(data)`` is called
    with each piece first (the host side records with it)."""
    try:
        while data := src.recv(65536):
            if seen is not None:
                seen(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(listener: socket.socket, socket_path: str) -> None:
    while True:
        conn, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(socket_path)
        except OSError:
            conn.close()
            upstream.close()
            continue
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()


def main(spec_path: str) -> int:
    with open(spec_path) as f:
        spec = json.load(f)
    # 1. handles on what is bound inside, before hiding their parents
    binds = [(os.open(b["source"], os.O_PATH | os.O_DIRECTORY), b["target"], b["read_only"])
             for b in spec["binds"]]
    relay_fd = os.open(spec["relay_dir"], os.O_PATH | os.O_DIRECTORY)
    stdin = open(os.path.join(spec["output_dir"], "stdin"), "rb")
    out = open(os.path.join(spec["output_dir"], "stdout"), "wb")
    err = open(os.path.join(spec["output_dir"], "stderr"), "wb")
    # 2. the one interface
    raise_loopback()
    # 3. hide the host's shared folders
    for folder in spec["hide"]:
        if os.path.isdir(folder) and not os.path.islink(folder):
            mode = "1777" if folder in ("/tmp", "/var/tmp", "/dev/shm") else "755"
            mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size=512m")
    # 4. what the CLI may see
    for fd, target, read_only in binds:
        bind(fd, target, read_only=read_only)
    os.makedirs(RELAY_DIR, mode=0o700, exist_ok=True)
    bind(relay_fd, RELAY_DIR, read_only=False)
    # 5. the one port
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", spec["port"]))
    listener.listen(64)
    threading.Thread(target=relay, args=(listener, f"{RELAY_DIR}/relay.sock"),
                     daemon=True).start()
    # 5b. a second port, when asked (``extra``: the telemetry collector beside the model),
    # each relayed over its own socket in the same root-only folder
    for extra in spec.get("extra", []):
        more = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        more.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        more.bind(("127.0.0.1", extra["port"]))
        more.listen(64)
        threading.Thread(target=relay, args=(more, f"{RELAY_DIR}/{extra['socket']}"),
                         daemon=True).start()
    # 6. the CLI, unprivileged; no_new_privs is inherited and keeps execve from ever
    # granting privileges again (setuid binaries, file capabilities)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    os.umask(0o022)
    with stdin, out, err:
        proc = subprocess.Popen(
            spec["argv"], cwd=spec["cwd"], env=spec["env"], stdin=stdin,
            stdout=out, stderr=err, user=spec["uid"], group=spec["gid"], extra_groups=[],
            start_new_session=True, close_fds=True)
        try:
            return proc.wait(timeout=spec["timeout"])
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
