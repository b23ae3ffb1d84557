"""Reports benchmark: the class-breakdown query over a million tool calls, and a full report.

Builds a synthetic store in a fresh SQLite file (and, with ``--pg``, in a fresh PostgreSQL
database created next to the one the URL names and dropped at the end), then times:

* the class breakdown per target (``store.summarize([run], detail="rates")``, the one
  aggregator) on a run of 1,000,000 tool calls (125,000 sessions of 8
  calls over 4 targets, 1% of sessions ended by a server fault, error mixes shaped like
  docs/design.md's table).  Goal: under 1 s.  The run is bulk-inserted through the store's
  tables (SQLAlchemy Core ``executemany``; COPY on PostgreSQL), not ``record_sessions``,
  to keep generation to seconds.
* ``agent_eval.report.write_report`` of a separate 10,000-session run (about 80,000 calls
  with turns, messages and findings from the real policy engine), written through
  ``store.record_sessions`` like a live run.  Goal: under 60 s.

    $ .venv/bin/python benchmarks/bench_reports.py [--pg postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--calls 1000000] [--sessions 10000] [--repeat 5] [--report-workers 0|1] [--markdown]

Prints a table (``--markdown``: the rows for BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert, make_url, text  # noqa: E402

from agent_eval.policy import check_call, load_allowlist  # noqa: E402
from agent_eval.store import open_store  # noqa: E402
from agent_eval.store.schema import sessions, tool_calls  # noqa: E402
from agent_eval.transcript import (  # noqa: E402
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
    assign_next_actions,
)

CALLS_PER_SESSION = 8
T0 = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
BREAKDOWN_GOAL_S, REPORT_GOAL_S = 1.0, 60.0

# target -> {primary code: errors per 100 calls}; shaped like docs/design.md's breakdown.
MIXES = {
    "qwen3.6-35b-a3b": {"AE301": 6.33, "AE304": 2.53, "AE307": 0.63, "AE311": 2.53},
    "qwen3.5-27b": {"AE301": 0.62, "AE302": 0.62, "AE308": 0.62, "AE309": 1.24, "AE320": 1.86},
    "qwen3.5-122b-a10b": {"AE301": 1.56, "AE304": 2.34, "AE305": 0.78, "AE306": 1.56,
                          "AE309": 0.78, "AE320": 1.56, "AE101": 1.56},
    "sim-piper": {"AE301": 3.4, "AE304": 3.4, "AE307": 1.1, "AE311": 2.2},
}

# Commands judged by the real engine for the report run: docs/design.md's examples.
ALLOWED = [
    'uv run scripts/db_query.py --sql "select id, subject from emails where unread"',
    "uv run scripts/fetch_context.py --no-attach --agent planner",
    'uv run scripts/embedding_search.py --query "quarterly plan"',
    "uv run scripts/update_attempt_outcome.py --outcome success",
    "uv run scripts/update_stage_status.py awaiting_eval",
    "uv run scripts/ralf_spawn.py step_evaluator",
]
DENIED = [
    'ls scripts/ | grep -E "search|web"',
    "curl -s 'https://example.com/search?q=x'",
    "pkill -f vllm || true",
    "cd /work && uv run scripts/db_query.py --sql x",
    "uv run scripts/db_query.py --sql x | jq '.attempt.session_id'",
    "timeout 60 uv run scripts/db_query.py --sql x",
    "uv run scripts/food_management.py --list",
    "uv run scripts/fetch_context.py --no-agent",
    "uv run scripts/db_query.py --sql x 2>&1",
    'uv run python -c "print(1)"',
]


# --- the million-call run ------------------------------------------------------------------


def load_big_run(store, n_calls: int, seed: int = 7,
                  texts: Sequence[tuple[str, str]] | None = None) -> tuple[int, int]:
    """Bulk-insert a run of ``n_calls`` tool calls; its id and the calls outside faults.
    ``texts``: (command, output) pairs drawn at random for the calls (as a shell tool
    stores them: the command, its JSON arguments and the output); without, the calls
    have no command, arguments ``{}`` and no output."""
    rng = random.Random(seed)
    run_id = store.create_run(label="bench-1m", kind="live", suite="synthetic", config={},
                              fingerprint={})
    target_ids = {name: store.add_target(run_id, name=name, model=name,
                                         base_url="http://127.0.0.1:8000/v1", settings={})
                  for name in MIXES}
    names = list(MIXES)
    n_sessions = n_calls // CALLS_PER_SESSION
    first_id = _next_id(store, "sessions")
    session_rows, call_rows, live_calls = [], [], 0
    for i in range(n_sessions):
        sid, name = first_id + i, names[i % len(names)]
        faulted = rng.random() < 0.01
        codes = [_draw(rng, MIXES[name]) for _ in range(CALLS_PER_SESSION)]
        session_rows.append({
            "id": sid, "run_id": run_id, "target_id": target_ids[name], "key": f"{name}/s{i}/0",
            "scenario": f"scenario-{i % 40}", "repeat": i // 40, "status":
            "error" if faulted else "completed", "error": "503" if faulted else None,
            "parent_id": None, "tags": [], "handshake_required": 3, "handshake_done": 3,
            "handshake_completed": True, "handshake_missed_step": None, "n_turns": 8,
            "n_messages": 18, "n_calls": CALLS_PER_SESSION,
            "n_denied": sum(1 for code in codes if code), "messages": [], "source": "bench",
            "schema_version": 1, "started_at": T0, "finished_at": T0 + timedelta(seconds=40),
        })
        for j, code in enumerate(codes):
            command, output = rng.choice(texts) if texts else (None, "")
            arguments = json.dumps({"command": command}) if texts else "{}"
            call_rows.append((sid, run_id, target_ids[name], j, j, "bash", arguments,
                              "deny" if code else "allow", code,
                              "pivot" if code else None, output, command))
        live_calls += 0 if faulted else CALLS_PER_SESSION
    _bulk_insert(store, session_rows, call_rows)
    store.set_run_status(run_id, "finished")
    return run_id, live_calls


def _draw(rng: random.Random, mix: dict[str, float]) -> str | None:
    x = rng.random() * 100
    for code, per100 in mix.items():
        if x < per100:
            return code
        x -= per100
    return None


CALL_COLUMNS = ("session_id", "run_id", "target_id", "index", "turn_index", "tool", "arguments",
                "decision", "primary_code", "next_action", "output", "command")


def _bulk_insert(store, session_rows: list[dict], call_rows: list[tuple]) -> None:
    chunk = 50_000
    with store.engine.begin() as conn:
        for i in range(0, len(session_rows), chunk):
            conn.execute(insert(sessions), session_rows[i:i + chunk])
    if store.engine.dialect.name == "postgresql":
        raw = store.engine.raw_connection()
        try:
            columns = ", ".join(f'"{c}"' for c in CALL_COLUMNS)
            with raw.cursor() as cur, cur.copy(f"COPY tool_calls ({columns}) FROM STDIN") as cp:
                for row in call_rows:
                    cp.write_row(row)
            raw.commit()
        finally:
            raw.close()
        with store.engine.begin() as conn:  # explicit ids do not move the sequence
            conn.execute(text("SELECT setval(pg_get_serial_sequence('sessions', 'id'), "
                              "(SELECT MAX(id) FROM sessions))"))
        # as autovacuum leaves a store after a load: statistics, and the visibility map
        # that lets covering indexes answer without reading the table
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
        return
    with store.engine.begin() as conn:
        for i in range(0, len(call_rows), chunk):
            conn.execute(insert(tool_calls),
                         [dict(zip(CALL_COLUMNS, row, strict=True))
                          for row in call_rows[i:i + chunk]])


def _next_id(store, table: str) -> int:
    with store.engine.connect() as conn:
        return (conn.execute(text(f"SELECT COALESCE(MAX(id), 0) FROM {table}")).scalar() or 0) + 1


def time_breakdown(store, run_id: int, live_calls: int, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        found = store.summarize([run_id], with_turns=False, detail="rates")
        times.append(time.perf_counter() - start)
        counted = sum(s.calls for s in found.values())
        assert counted == live_calls, f"breakdown counted {counted}, expected {live_calls}"
    return times


# --- the 10,000-session run for the report ---------------------------------------------------


def judged_pool() -> list[CallRecord]:
    allowlist = load_allowlist(ROOT / "allowlists" / "ralf.yaml")
    pool = []
    for command in ALLOWED + DENIED:
        arguments = json.dumps({"command": command})
        verdict = check_call("bash", arguments, allowlist)
        pool.append(CallRecord(
            index=0, turn_index=0, tool="bash", arguments=arguments, decision=verdict.decision,
            primary=verdict.primary, command=command,
            findings=[FindingRecord(f.code, f.message, f.start, f.end) for f in verdict.findings],
            output='{"rows": 3}' if verdict.decision == "allow" else
            "Denied by policy: run a listed script through `uv run`.",
            script=verdict.invocation.script if verdict.invocation else None))
    return pool


def report_records(n_sessions: int, seed: int = 11):
    """Batches of SessionRecords: 4 targets, 40 scenarios, ~8 calls each, ~10% denied."""
    rng = random.Random(seed)
    pool = judged_pool()
    allowed = [c for c in pool if c.decision == "allow"]
    denied = [c for c in pool if c.decision == "deny"]
    names = list(MIXES)
    batch = []
    for i in range(n_sessions):
        name = names[i % len(names)]
        n = rng.randint(5, 11)
        calls = []
        for j in range(n):
            proto = rng.choice(denied) if rng.random() < 0.1 else rng.choice(allowed)
            calls.append(CallRecord(
                index=j, turn_index=j, tool=proto.tool, arguments=proto.arguments,
                decision=proto.decision, primary=proto.primary, command=proto.command,
                findings=list(proto.findings), output=proto.output, script=proto.script,
                call_id=f"call_{i}_{j}"))
        assign_next_actions(calls)
        done = rng.random() < 0.8
        started = T0 + timedelta(seconds=i * 3)
        messages = [{"role": "system", "content": "You are the research subagent. " * 20},
                    {"role": "user", "content": f"Task {i % 40}: find the unread emails."}]
        turns = []
        for j, call in enumerate(calls):
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call.call_id, "type": "function",
                 "function": {"name": "bash", "arguments": call.arguments}}]})
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": call.output})
            turns.append(TurnRecord(index=j, content="", reasoning="Next I query the store.",
                                    prompt_tokens=32_000 + j * 400, completion_tokens=120,
                                    latency_s=1.2 + rng.random(), ttft_s=0.3,
                                    decode_tps=55.0, started_at=started + timedelta(seconds=j)))
        batch.append(SessionRecord(
            key=f"{name}/scenario-{i % 40}/{i // 40}", target=name, scenario=f"scenario-{i % 40}",
            repeat=i // 40, status="completed" if done else "stalled", tags=["research"],
            handshake=HandshakeResult(required=3, done=3 if done else 1, completed=done,
                                      missed_step=None if done else "update_stage_status.py"),
            messages=messages, turns=turns, calls=calls, started_at=started,
            finished_at=started + timedelta(seconds=len(calls) + 1), source="bench"))
        if len(batch) == 200:
            yield batch
            batch = []
    if batch:
        yield batch


def load_report_run(store, n_sessions: int) -> int:
    run_id = store.create_run(label="bench-report", kind="live", suite="synthetic", config={},
                              fingerprint={})
    for name in MIXES:
        store.add_target(run_id, name=name, model=name, base_url="http://127.0.0.1:8000/v1",
                         settings={})
    for batch in report_records(n_sessions):
        store.record_sessions(run_id, batch)
    store.set_run_status(run_id, "finished")
    return run_id


def time_report(store, run_id: int, workers: int | None = None) -> float | None:
    try:
        from agent_eval.report import write_report
    except ImportError:
        print("  (agent_eval.report not available: report not timed)", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        index = write_report(store, [run_id], Path(out), workers=workers)
        seconds = time.perf_counter() - start
        pages = sum(1 for _ in Path(index).parent.rglob("*.html"))
    print(f"  report: {pages:,} HTML pages in {seconds:.1f} s", file=sys.stderr)
    return seconds


# --- backends --------------------------------------------------------------------------------


@contextmanager
def sqlite_url():
    with tempfile.TemporaryDirectory() as tmp:
        yield str(Path(tmp) / "bench.db")


@contextmanager
def postgres_url(admin_url: str):
    """A brand-new database next to the one ``admin_url`` names, dropped afterwards."""
    import psycopg

    url = make_url(admin_url)
    plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"agent_eval_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(plain, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(drivername="postgresql+psycopg", database=name).render_as_string(
            hide_password=False)
    finally:
        with psycopg.connect(plain, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_backend(label: str, url: str, args) -> dict:
    print(f"{label}: generating {args.calls:,} calls ...", file=sys.stderr)
    with open_store(url) as store:
        start = time.perf_counter()
        big_run, live_calls = load_big_run(store, args.calls)
        generate_s = time.perf_counter() - start
        times = time_breakdown(store, big_run, live_calls, args.repeat)
        print(f"  breakdown: best {min(times):.3f} s, first {times[0]:.3f} s", file=sys.stderr)
        report_s = load_s = None
        if args.sessions:
            start = time.perf_counter()
            report_run = load_report_run(store, args.sessions)
            load_s = time.perf_counter() - start
            report_s = time_report(store, report_run, args.report_workers)
    return {"backend": label, "generate_s": generate_s, "calls": args.calls,
            "live_calls": live_calls, "first_s": times[0], "best_s": min(times),
            "median_s": statistics.median(times), "load_s": load_s, "report_s": report_s}


def _fmt(seconds: float | None, digits: int = 3) -> str:
    return "–" if seconds is None else f"{seconds:.{digits}f}"


def print_table(results: list[dict], args) -> None:
    head = ("backend", "tool calls", "generate s", "breakdown first s", "best s", "median s",
            f"{args.sessions:,}-session run stored s", "write_report s")
    rows = [(r["backend"], f"{r['calls']:,}", _fmt(r["generate_s"], 1), _fmt(r["first_s"]),
             _fmt(r["best_s"]), _fmt(r["median_s"]), _fmt(r["load_s"], 1),
             _fmt(r["report_s"], 1)) for r in results]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|" + "---:|" * (len(head) - 1))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(x[i]) for x in (head, *rows)) for i in range(len(head))]
        for row in (head, *rows):
            print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    print(f"\ngoals: breakdown < {BREAKDOWN_GOAL_S:g} s, write_report < {REPORT_GOAL_S:g} s; "
          f"machine: nproc={os.cpu_count()}, {_cpu_model()}, "
          f"Python {platform.python_version()}, {datetime.now(UTC):%Y-%m-%d}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", metavar="URL",
                        help="also on PostgreSQL: a fresh database is created beside this one")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=10_000,
                        help="sessions in the report run (0: skip the report)")
    parser.add_argument("--repeat", type=int, default=5, help="breakdown queries timed")
    parser.add_argument("--report-workers", type=int, choices=(0, 1), default=None,
                        help="write_report's workers: 1 session-file worker process, 0 none "
                             "(default: one when a core is spare)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    results = []
    with sqlite_url() as url:
        results.append(bench_backend("SQLite", url, args))
    if args.pg:
        with postgres_url(args.pg) as url:
            results.append(bench_backend("PostgreSQL", url, args))
    print_table(results, args)
    return 0 if all(r["best_s"] < BREAKDOWN_GOAL_S and (r["report_s"] or 0) < REPORT_GOAL_S
                    for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
