"""import_log + ``agent-eval perf`` end to end against a real SQLite store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run

from agent_eval import store as store_module
from agent_eval.cli import main
from agent_eval.serverlogs import import_log
from agent_eval.transcript import CallRecord, HandshakeResult, SessionRecord

FIXTURES = Path(__file__).parent / "fixtures"
T0 = datetime(2025, 8, 1, 12, 0, 0)
LINE = (
    "(APIServer pid=4242) INFO {ts:%Y-%m-%d %H:%M:%S} [loggers.py:123] Engine 000: "
    "Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, "
    "Running: {running} reqs, Waiting: 0 reqs, KV cache usage: 10.0%, Prefix cache hit rate: 80.0%"
)
ACCESS = (
    '(APIServer pid=4242) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
)
RECEIVED = (
    "(APIServer pid=4242) INFO {ts:%Y-%m-%d %H:%M:%S} [logger.py:49] Received request chatcmpl-1"
)
# (seconds after T0 the line closes, running, generation, prompt, completions in its window)
WINDOWS = [(10, 1, 40.0, 1000.0, 1), (20, 1, 50.0, 0.0, 2), (30, 2, 60.0, 500.0, 1),
           (40, 2, 90.0, 0.0, 0), (50, 2, 75.0, 0.0, 1), (60, 3, 120.0, 300.0, 1)]  # fmt: skip


def write_log(path) -> None:
    lines = []
    for close, running, gen, prompt, completions in WINDOWS:
        for _ in range(completions):
            lines += [RECEIVED.format(ts=T0 + timedelta(seconds=close - 5)), ACCESS]
        lines.append(
            LINE.format(ts=T0 + timedelta(seconds=close), prompt=prompt, gen=gen, running=running)
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def db(tmp_path):
    url = str(tmp_path / "store.db")
    log = tmp_path / "vllm.log"
    write_log(log)
    with store_module.open_store(url) as store:
        stats = import_log(store, "vllm-log", log, label="qwen")
    assert (stats.samples, stats.requests) == (6, 6)
    return url


def run_perf(db, tmp_path, *args):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["perf", "--db", db, "--out", str(out), *args])
    doc = json.loads((out / "perf.json").read_text()) if (out / "perf.json").exists() else None
    return result, doc, out


def test_perf_over_a_time_window_writes_the_tables(db, tmp_path):
    result, doc, out = run_perf(
        db, tmp_path, "--since", "2025-08-01 12:00", "--until", "2025-08-01 13:00"
    )
    assert result.exit_code == 0, result.output
    assert [(r["running"], r["samples"], r["average_tps"], r["peak_tps"]) for r in doc["generation"]] == [
        (1, 2, 45.0, 50.0), (2, 3, 75.0, 90.0), (3, 1, 120.0, 120.0),
    ]  # fmt: skip
    assert [r["active_tps"] for r in doc["prefill"]] == [1000.0, 500.0, 300.0]
    assert [(r["completions"], r["per_minute"]) for r in doc["completions_per_minute"]] == [
        (3, pytest.approx(9.0)), (2, pytest.approx(4.0)), (1, pytest.approx(6.0)),
    ]  # fmt: skip
    assert "Generation tokens/s by concurrency" in result.output
    assert "| 2 | 3 | 75.0 | 75.0 | 90.0 | 37.5 |" in (out / "perf.md").read_text()


def test_source_filter_and_empty_window(db, tmp_path):
    result, doc, _ = run_perf(db, tmp_path, "--source", "another-server")
    assert result.exit_code == 0, result.output
    assert doc["samples"] == 0 and doc["generation"] == []
    assert "no server samples in this window" in result.output


def test_perf_for_a_run_shows_useful_work_beside_speed(db, tmp_path):
    from sqlalchemy import update

    from agent_eval.store.schema import runs

    with store_module.open_store(db) as store:
        run_id = add_run(store, label="night", targets={"qwen": "Qwen3.5-27B"},
                         base_url="http://127.0.0.1:8000/v1")
        calls = [
            CallRecord(index=i, turn_index=i, tool="bash", arguments="{}", decision=d)
            for i, d in enumerate(["allow", "allow", "deny", "allow"])
        ]
        store.record_sessions(run_id, [
            SessionRecord(key="a", target="qwen", scenario="s", calls=calls,
                          handshake=HandshakeResult(required=3, done=3, completed=True)),
            SessionRecord(key="b", target="qwen", scenario="s",
                          handshake=HandshakeResult(required=3, done=1)),
        ])  # fmt: skip
        store.set_run_status(run_id, "finished")
        with store.engine.begin() as conn:  # pin the run's window to the log's minute
            conn.execute(update(runs).where(runs.c.id == run_id).values(
                created_at=T0.replace(tzinfo=UTC), finished_at=(T0 + timedelta(minutes=1)).replace(tzinfo=UTC)))  # fmt: skip
    result, doc, out = run_perf(db, tmp_path, "--run", "latest")
    assert result.exit_code == 0, result.output
    work = doc["useful_work"]
    assert (work["minutes"], work["allowed_calls"], work["allowed_per_min"]) == (1.0, 3, 3.0)
    assert (work["handshakes_completed"], work["handshakes_per_hour"]) == (1, 60.0)
    assert work["completions_per_min"] == 6.0
    assert work["generation_tps"] == pytest.approx(72.5)
    assert "Useful work beside speed" in result.output
    assert "| completed handshakes / hour | 60.00 | 1 handshakes |" in (out / "perf.md").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["--run", "latest", "--since", "2025-08-01"], "either --run or --since", id="run-and-since"),
        pytest.param(["--since", "yesterday"], "--since: 'yesterday' is not a time", id="bad-since"),
        pytest.param(["--since", "2025-08-02", "--until", "2025-08-01"], "is not after", id="until-before-since"),
        pytest.param(["--run", "99"], "no run with id 99", id="unknown-run"),
    ],
)  # fmt: skip
def test_operator_mistakes_exit_2_with_one_line(db, tmp_path, args, message):
    result, _, _ = run_perf(db, tmp_path, *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_pooled_sources_are_named(db, tmp_path):
    with store_module.open_store(db) as store:
        import_log(store, "vllm-log", FIXTURES / "vllm_v1.log", label="llama", year=2025)
    result, doc, _ = run_perf(db, tmp_path)
    assert doc["sources"] == ["llama", "qwen"]
    assert "pooled sources: llama, qwen (pick one with --source)" in result.output


def test_a_journald_llamacpp_log_imports_without_start_and_perf_reads_it(tmp_path):
    db = str(tmp_path / "j.db")
    log = str(Path(__file__).parent / "fixtures" / "llamacpp_journald_iso.log")
    imported = CliRunner().invoke(main, ["import", "llamacpp-log", log, "--db", db])
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("imported 2 samples and 3 requests")
    perf = CliRunner().invoke(main, ["perf", "--db", db, "--out", str(tmp_path / "out")])
    assert perf.exit_code == 0, perf.output
    assert "Generation tokens/s by concurrency" in perf.stdout


def test_a_vllm_log_without_access_lines_says_completions_are_unknown_not_zero(tmp_path):
    """vLLM started with its access log off: the throughput lines count tokens only, so a
    completions-per-minute table would be all zeros."""
    db = str(tmp_path / "v.db")
    log = str(Path(__file__).parent / "fixtures" / "vllm_v1_no_access.log")
    imported = CliRunner().invoke(main, ["import", "vllm-log", log, "--year", "2025",
                                         "--db", db])
    assert imported.exit_code == 0, imported.output
    perf = CliRunner().invoke(main, ["perf", "--db", db, "--out", str(tmp_path / "out")])
    assert perf.exit_code == 0, perf.output
    out = " ".join(perf.stdout.split())
    assert "Completions per minute by concurrency" not in out
    assert "Completions per minute: unknown, the log holds no access lines" in out
    md = (tmp_path / "out" / "perf.md").read_text(encoding="utf-8")
    assert "Completions per minute: unknown" in md and "| completions |" not in md
