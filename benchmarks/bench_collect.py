"""``agent-eval collect`` under a steady stream: the telemetry events it judges per second
and its memory.

``agent-eval collect`` runs as a subprocess (a fresh SQLite store, the ralf allow-list,
``--idle-timeout`` short so sessions are stored as the stream goes on); this process posts
OTLP/JSON log exports to ``/v1/logs`` over one keep-alive connection, each export
``--batch`` records as Codex exports them (a ``codex.tool_decision`` and its
``codex.tool_result`` per call, judged commands drawn from allowed and denied forms), each
session ``--calls`` calls long, for ``--seconds`` seconds.  A request is sent when the
last is answered (the receiver judges a batch before it answers), so the rate is what the
receiver sustains.  Every ``--sample`` seconds the receiver's resident memory (``VmRSS``,
Linux) is read; at the end its peak (``VmHWM``) and the status page's counts.

    nice -n 10 python benchmarks/bench_collect.py --seconds 60
    nice -n 10 python benchmarks/bench_collect.py --seconds 10 --batch 64   # quick
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("uv run scripts/db_query.py --sql 'select 1'",
            "uv run scripts/lights.py status",
            "ls scripts/ | grep search",
            "uv run scripts/email_read.py --id 42 2>&1",
            "cat notes/plan.md")


def _attr(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def export(start: int, n_calls: int, calls_per_session: int) -> bytes:
    """One OTLP/JSON logs export: ``n_calls`` calls numbered from ``start``, each a
    decision and a result record, sessions of ``calls_per_session`` calls."""
    records = []
    for i in range(start, start + n_calls):
        session = f"bench-{i // calls_per_session}"
        call_id = f"call-{i}"
        args = json.dumps({"cmd": COMMANDS[i % len(COMMANDS)]})
        base = [_attr("conversation.id", session), _attr("model", "gpt-5-codex"),
                _attr("tool_name", "exec_command"), _attr("call_id", call_id)]
        records.append({"timeUnixNano": str(1_764_380_000_000_000_000 + i), "attributes": [
            _attr("event.name", "codex.tool_decision"), *base, _attr("decision", "approved"),
            _attr("source", "config")]})
        records.append({"timeUnixNano": str(1_764_380_000_000_000_000 + i), "attributes": [
            _attr("event.name", "codex.tool_result"), *base, _attr("arguments", args),
            _attr("success", "true")]})
    return json.dumps({"resourceLogs": [{"resource": {"attributes": [
        _attr("service.name", "codex_cli_rs")]}, "scopeLogs": [{"logRecords": records}]}]}
    ).encode()


def proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--batch", type=int, default=256, help="records per export")
    parser.add_argument("--calls", type=int, default=20, help="calls per session")
    parser.add_argument("--sample", type=float, default=5.0)
    parser.add_argument("--idle-timeout", type=float, default=2.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-collect-"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "collect", "--allowlist",
         str(REPO / "allowlists" / "ralf.yaml"), "--port", "0",
         "--idle-timeout", str(args.idle_timeout), "--db", str(tmp / "runs.db"),
         "--journal", str(tmp / "collect.journal")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        per = args.batch // 2
        baseline = proc_kib(server.pid, "VmRSS")
        samples: list[tuple[float, int]] = []
        sent = requests = 0
        t0 = last_sample = time.monotonic()
        while (now := time.monotonic()) - t0 < args.seconds:
            body = export(sent, per, args.calls)
            conn.request("POST", "/v1/logs", body=body,
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"receiver answered {response.status}")
            sent += per
            requests += 1
            if now - last_sample >= args.sample:
                samples.append((now - t0, proc_kib(server.pid, "VmRSS")))
                last_sample = now
        wall = time.monotonic() - t0
        conn.request("GET", "/_agent_eval/status")
        status = json.loads(conn.getresponse().read())
        peak = proc_kib(server.pid, "VmHWM")
        conn.close()
    finally:
        server.send_signal(signal.SIGINT)
        try:
            _, err = server.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate()
    events = status["events"]
    print(f"{events} events ({sent} calls, {requests} exports of {args.batch} records) in "
          f"{wall:.1f} s: {events / wall:,.0f} events/s judged, {sent / wall:,.0f} calls/s")
    print(f"stored while streaming: {status['stored_sessions']} sessions, "
          f"{status['judged_calls']} calls; open at the end: {status['open_sessions']}")
    print(f"receiver RSS: {baseline / 1024:.1f} MiB before, "
          + ", ".join(f"{t:.0f} s {kib / 1024:.1f}" for t, kib in samples)
          + f"; peak {peak / 1024:.1f} MiB")
    print("exit summary:", err.strip().splitlines()[-1] if err.strip() else "(none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
