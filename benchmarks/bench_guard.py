"""Guard: `gate`, `compare` and the viewer's pages at a million calls, this code beside the
previous release's, measured in the same minutes on the same machine.

    $ git worktree add ../agent-eval-old v0.x        # the previous release, beside this one
    $ .venv/bin/python benchmarks/bench_guard.py --old-tree ../agent-eval-old \\
        [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test] [--store DIR] \\
        [--rounds 3] [--pages 5] [--no-view] [--markdown]

One store per backend, built once by the *older* code (``bench_reports.load_big_run``'s
million-call run and a 100,000-call run to compare against, with ``bench_view``'s
commands and outputs); the newer code's copy is the same file (SQLite) or a template copy
of the database (PostgreSQL), brought to its head by ``agent-eval db upgrade``, so both
codes read the same rows.  ``--store DIR`` keeps the SQLite files (and names the
PostgreSQL databases ``<name>_old``/``<name>_new`` kept for a next call) so a second call
measures without rebuilding (about ten minutes on two cores).

Each round runs one child process per code, in alternating order (old first in odd
rounds): the child imports that tree's package, runs ``gate --run R --max-error-rate 8
--baseline R`` and ``compare R R`` in process (once to warm, then timed), and with the
viewer each page ``--pages`` times over HTTP (median).  The table gives, per figure, the
rounds' figures and the ratio new / old of their medians: on a machine shared with other
work the ratio measured interleaved is the figure to trust, the seconds less so, and for
``gate`` and ``compare`` the process's CPU (on SQLite it holds the database's work too)
more than the wall time.
The host's CPU model and the load averages before and after are printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("runs", "run", "compare", "calls (failed first)", "sessions (failed first)",
         "session")


def _child(args) -> None:
    """In the child: this tree's package, timed over one store."""
    sys.path.insert(0, str(Path(args.tree) / "benchmarks"))
    sys.path.insert(0, str(args.tree))
    from click.testing import CliRunner

    from agent_eval.cli import main as cli

    def invoke(*argv: str) -> None:
        result = CliRunner().invoke(cli, [*argv, "--db", args.url])
        if result.exit_code not in (0, 1, 4):
            raise SystemExit(f"{argv} exited {result.exit_code}: {result.output}")

    jobs = {"gate": ("gate", "--run", str(args.run), "--max-error-rate", "8", "--baseline",
                     str(args.run)),
            "compare": ("compare", str(args.run), str(args.run))}
    out: dict[str, float] = {}
    for name, argv in jobs.items():
        invoke(*argv)
        start, cpu = time.perf_counter(), time.process_time()
        invoke(*argv)
        out[name] = time.perf_counter() - start
        out[f"{name}, CPU"] = time.process_time() - cpu  # SQLite's work is in it, not PostgreSQL's
    if args.pages:
        out.update(_pages(args))
    print(json.dumps(out))


def _pages(args) -> dict[str, float]:
    import inspect
    import urllib.request

    from bench_view import pages

    from agent_eval.store import open_store
    from agent_eval.view.app import run_view_in_thread

    urls = pages(args.run, args.other, args.session)
    out = {}
    with open_store(args.url) as store:
        takes_store = "store" in inspect.signature(run_view_in_thread).parameters
        with run_view_in_thread(store if takes_store else store.engine) as base:
            for name in PAGES:
                times = []
                for _ in range(args.pages + 1):  # the first warms
                    start = time.perf_counter()
                    with urllib.request.urlopen(base + urls[name], timeout=300) as resp:
                        resp.read()
                    times.append(time.perf_counter() - start)
                out[f"view {name}"] = statistics.median(times[1:])
    return out


def _build(tree: Path, url: str, ids_file: Path) -> dict:
    """The store built by ``tree``'s code; its run ids."""
    if ids_file.exists():
        return json.loads(ids_file.read_text())
    code = (
        "import json, sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "from bench_reports import load_big_run\n"
        "from bench_view import call_texts\n"
        "from agent_eval.store import open_store\n"
        f"with open_store({url!r}) as store:\n"
        "    texts = call_texts()\n"
        "    other, _ = load_big_run(store, 100_000, seed=3, texts=texts)\n"
        "    run, _ = load_big_run(store, 1_000_000, texts=texts)\n"
        "    with store.engine.connect() as conn:\n"
        "        from sqlalchemy import text\n"
        "        session = conn.execute(text('SELECT id FROM sessions WHERE run_id = :r '\n"
        "            'ORDER BY id LIMIT 1 OFFSET 62500'), {'r': run}).scalar_one()\n"
        "print(json.dumps({'run': run, 'other': other, 'session': session}))\n")
    print(f"building the store with {tree} ({url}) ...", file=sys.stderr)
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=_env(tree), check=True,
                          capture_output=True, text=True)
    ids_file.write_text(done.stdout.strip().splitlines()[-1])
    return json.loads(ids_file.read_text())


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _upgrade(url: str) -> None:
    subprocess.run([sys.executable, "-m", "agent_eval", "db", "upgrade", "--db", url],
                   cwd=ROOT, env=_env(ROOT), check=True, capture_output=True)


def _sqlite_pair(store: Path, old: Path) -> tuple[str, str, dict]:
    old_db, new_db = store / "old.db", store / "new.db"
    ids = _build(old, str(old_db), store / "sqlite_ids.json")
    if not new_db.exists():
        import sqlite3
        with sqlite3.connect(old_db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(old_db, new_db)
        _upgrade(str(new_db))
    return str(old_db), str(new_db), ids


def _pg_pair(admin_url: str, store: Path, old: Path) -> tuple[str, str, dict]:
    import psycopg
    from sqlalchemy import make_url

    url = make_url(admin_url)
    plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"agent_eval_guard_{store.name}".replace("-", "_").lower()
    old_url, new_url = (url.set(drivername="postgresql+psycopg", database=f"{name}_{x}")
                        .render_as_string(hide_password=False) for x in ("old", "new"))
    ids_file = store / "pg_ids.json"
    with psycopg.connect(plain, autocommit=True) as admin:
        exists = {r[0] for r in admin.execute("SELECT datname FROM pg_database")}
        if f"{name}_old" not in exists:
            ids_file.unlink(missing_ok=True)
            admin.execute(f'CREATE DATABASE "{name}_old"')
    ids = _build(old, old_url, ids_file)
    with psycopg.connect(plain, autocommit=True) as admin:
        exists = {r[0] for r in admin.execute("SELECT datname FROM pg_database")}
        if f"{name}_new" not in exists:
            admin.execute(f'CREATE DATABASE "{name}_new" TEMPLATE "{name}_old"')
            _upgrade(new_url)
    return old_url, new_url, ids


def _measure(tree: Path, url: str, ids: dict, pages: int) -> dict[str, float]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--tree", str(tree),
            "--url", url, "--run", str(ids["run"]), "--other", str(ids["other"]),
            "--session", str(ids["session"]), "--pages", str(pages)]
    done = subprocess.run(argv, cwd=tree, env=_env(tree), check=True, capture_output=True,
                          text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-tree", type=Path, help="a checkout of the previous release")
    parser.add_argument("--pg", metavar="URL", help="also on PostgreSQL (admin URL)")
    parser.add_argument("--store", type=Path, help="keep the stores here for a next call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=5, help="requests per viewer page")
    parser.add_argument("--no-view", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--other", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--session", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return 0
    if args.old_tree is None:
        parser.error("--old-tree is required")
    old = args.old_tree.resolve()
    store = args.store or Path(os.environ.get("TMPDIR", "/tmp")) / f"agent-eval-guard-{os.getpid()}"
    store.mkdir(parents=True, exist_ok=True)
    pages = 0 if args.no_view else args.pages
    load_before = os.getloadavg()
    backends = {"SQLite": _sqlite_pair(store, old)}
    if args.pg:
        backends["PostgreSQL"] = _pg_pair(args.pg, store, old)
    results: dict[tuple[str, str], dict[str, list[float]]] = {}
    for round_ in range(args.rounds):
        for backend, (old_url, new_url, ids) in backends.items():
            order = [("old", old, old_url), ("new", ROOT, new_url)]
            for code, tree, url in order if round_ % 2 == 0 else order[::-1]:
                for what, seconds in _measure(tree, url, ids, pages).items():
                    results.setdefault((backend, what), {}).setdefault(code, []).append(seconds)
                print(f"round {round_ + 1} {backend} {code} done", file=sys.stderr)
    _print(results, args, load_before, old)
    return 0


def _print(results, args, load_before, old: Path) -> None:
    from bench_reports import _cpu_model

    def ms(xs: list[float]) -> str:
        return " / ".join(f"{x * 1000:.0f}" for x in xs)

    head = "| backend | figure | previous, ms per round | this code, ms per round | ratio of medians |"
    lines = [head, "|---|---|---|---|---:|"]
    for (backend, what), by in results.items():
        ratio = statistics.median(by["new"]) / statistics.median(by["old"])
        lines.append(f"| {backend} | {what} | {ms(by['old'])} | {ms(by['new'])} | "
                     f"{ratio:.2f}× |")
    if not args.markdown:
        lines = [line.strip("|").replace(" | ", "  ") for line in lines if "---" not in line]
    print("\n".join(lines))
    load = " / ".join(f"{x:.2f}" for x in load_before)
    after = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"\nprevious: {old} ({commit}); {args.rounds} rounds interleaved; "
          f"{_cpu_model()}, nproc={os.cpu_count()}; load average (1, 5, 15 min) before "
          f"{load}, after {after}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
