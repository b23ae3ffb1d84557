"""What `pip install .` costs, phase by phase, for several commits side by side.

    python benchmarks/bench_install.py [--rounds 3] [--cache-dir DIR] COMMIT [COMMIT ...]

Each commit is exported (``git archive``, links kept) into a temporary folder; each round
installs every commit in turn (interleaved, so they share the machine's load), each into a
fresh venv (``python3 -m venv``: the pip the user's Python bundles), with one shared pip
cache (``--cache-dir``; warm it with a first round you throw away, or pass ``--warm``).
``pip install -v`` prints its steps; each line is stamped on arrival, which splits the wall
time into the phases pip goes through:

- ``build env``: the isolated environment pip makes to build the project (the build
  backend downloaded and installed into it);
- ``metadata``: the backend's ``get_requires_for_build_wheel`` and ``prepare_metadata``;
- ``resolve``: fetching each dependency's index page and wheel, choosing versions;
- ``build``: the backend building this project's wheel (copying the package and its data);
- ``install``: unpacking every wheel and compiling its bytecode (pip's default);
- ``exit``: from "Successfully installed" to pip's exit (temporary folders removed).

Prints one line per install (load average before it, each phase, wall, the CPU seconds of
pip and its subprocesses, packages, venv MB) and a median per commit.  ``--plain`` runs
plain ``pip install SRC`` without ``--cache-dir`` (pip's default cache), as a user types
it; ``--pip-arg=--no-compile`` (repeatable) passes options on to pip.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASES = ("build env", "metadata", "resolve", "build", "install", "exit")
MARKS = (
    ("Installing build dependencies: finished", "build env"),
    ("Preparing metadata (pyproject.toml): finished", "metadata"),
    ("Building wheels for collected packages", "resolve"),
    ("Successfully built", "build"),
    ("Successfully installed", "install"),
)


def export(commit: str, root: Path) -> Path:
    out = root / commit
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def install(src: Path, root: Path, cache: Path | None,
            extra: Sequence[str] = ()) -> dict[str, float]:
    env_dir = root / "venv"
    shutil.rmtree(env_dir, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    cmd = [str(env_dir / "bin" / "pip"), "install", "-v", *extra, str(src)]
    if cache is not None:
        cmd[3:3] = ["--cache-dir", str(cache)]
    load = float(Path("/proc/loadavg").read_text().split()[0])
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    marks: dict[str, float] = {}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            for text, phase in MARKS:
                # the build environment's own pip prints indented lines
                if text in line and phase not in marks and (
                        phase in ("build env", "metadata") or line.startswith(text)):
                    marks[phase] = time.monotonic() - start
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"pip install {src} failed ({proc.returncode})")
    marks["exit"] = wall
    # CPU seconds of pip and every process it waited for (the build environment's pip, the
    # backend's hooks): far steadier than the wall time on a loaded machine
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    row = {"load": load, "wall": wall, "cpu": cpu}
    before = 0.0
    for phase in PHASES:
        at = marks.get(phase, before)
        row[phase] = at - before
        before = at
    listed = subprocess.run([str(env_dir / "bin" / "pip"), "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.split()
    row["packages"] = len([p for p in listed if not p.startswith(("pip==", "setuptools=="))])
    size = subprocess.run(["du", "-sm", str(env_dir)], capture_output=True, text=True,
                          check=True).stdout.split()[0]
    row["MB"] = float(size)
    return row


def line(name: str, row: dict[str, float]) -> str:
    phases = " ".join(f"{row[p]:6.1f}" for p in PHASES)
    return (f"{name:>10} load {row['load']:5.1f} | {phases} | {row['wall']:6.1f} s "
            f"| cpu {row['cpu']:5.1f} s | {row['packages']:3.0f} pkgs {row['MB']:4.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--warm", action="store_true", help="one untimed round first")
    parser.add_argument("--plain", action="store_true", help="no --cache-dir: pip's default")
    parser.add_argument("--pip-arg", action="append", default=[],
                        help="passed to pip install, e.g. --pip-arg=--no-compile")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-install-"))
    cache = None if args.plain else (args.cache_dir or root / "pip-cache")
    try:
        sources = {c: export(c, root) for c in args.commits}
        print(f"{'':>10} {'':>10} | " + " ".join(f"{p[:6]:>6}" for p in PHASES) + " |   wall")
        if args.warm:
            for src in sources.values():
                install(src, root, cache, args.pip_arg)
        rows: dict[str, list[dict[str, float]]] = {c: [] for c in args.commits}
        for _ in range(args.rounds):
            for commit, src in sources.items():
                row = install(src, root, cache, args.pip_arg)
                rows[commit].append(row)
                print(line(commit, row), flush=True)
        print("median")
        for commit, got in rows.items():
            med = {k: statistics.median(r[k] for r in got) for k in got[0]}
            print(line(commit, med))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
