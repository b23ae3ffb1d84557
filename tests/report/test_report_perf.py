"""The report's "Server throughput" section: server samples inside a run's window, beside
the run's useful work (allowed calls per minute, completed handshakes per hour).

The store is real SQLite; the sessions are judged by the real policy engine; the server
samples come from a small hand-written vLLM log through ``import_log``.  Expected values
are computed by hand below each log.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markupsafe import escape
from sqlalchemy import update
from support.factories import add_run
from support.report_fixtures import ALLOWED, PIPED, judged_call, session

from agent_eval.report import write_report
from agent_eval.report.throughput import NO_SAMPLES
from agent_eval.serverlogs import import_log
from agent_eval.store import open_store
from agent_eval.store.schema import runs
from agent_eval.transcript import HandshakeResult

T0 = datetime(2025, 8, 1, 12, 0, 0, tzinfo=UTC)
RUN_WINDOW = (T0, T0 + timedelta(minutes=1))

# A vLLM 0.9 server's stdout: throughput lines every 10 s, access lines borrowing the
# time of the "Received request" line before them.  The 12:05:00 line is after the run.
VLLM_LOG = """\
(APIServer pid=4242) INFO 2025-08-01 12:00:04 [logger.py:49] Received request chatcmpl-1
(APIServer pid=4242) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=4242) INFO 2025-08-01 12:00:10 [loggers.py:123] Engine 000: Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 40.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, KV cache usage: 4.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:00:15 [logger.py:49] Received request chatcmpl-2
(APIServer pid=4242) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=4242) INFO 2025-08-01 12:00:20 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 50.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, KV cache usage: 4.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:00:25 [logger.py:49] Received request chatcmpl-3
(APIServer pid=4242) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=4242) INFO 2025-08-01 12:00:30 [loggers.py:123] Engine 000: Avg prompt throughput: 600.0 tokens/s, Avg generation throughput: 80.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, KV cache usage: 8.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:00:40 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, KV cache usage: 8.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:00:45 [logger.py:49] Received request chatcmpl-4
(APIServer pid=4242) INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=4242) INFO 2025-08-01 12:00:50 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 90.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, KV cache usage: 8.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:00:55 [logger.py:49] Received request models
(APIServer pid=4242) INFO:     127.0.0.1:40000 - "GET /v1/models HTTP/1.1" 200 OK
(APIServer pid=4242) INFO 2025-08-01 12:01:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, KV cache usage: 0.0%, Prefix cache hit rate: 80.0%
(APIServer pid=4242) INFO 2025-08-01 12:05:00 [loggers.py:123] Engine 000: Avg prompt throughput: 9000.0 tokens/s, Avg generation throughput: 500.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, KV cache usage: 30.0%, Prefix cache hit rate: 80.0%
"""
# By hand, over the run's window 12:00:00–12:01:00 (the 12:05:00 sample left out):
#   running 0: 1 window (10 s);  running 1: 2 windows (20 s);  running 2: 3 windows (30 s)
#   generation avg / median / peak / per request: r1 45/45/50/45, r2 90/90/100/45
#   prefill sustained / active: r1 (1000+0)/2=500 / 1000, r2 (600+0+0)/3=200 / 600
#   completions: r1 2 in 1/3 min = 6.00/min, r2 2 in 1/2 min = 4.00/min (GET not counted)
#   busy generation tok/s = mean(40, 50, 80, 100, 90) = 72.0
GENERATION_ROWS = [
    ["running", "samples", "average tok/s", "median", "peak", "per request"],
    ["0", "1", "0.0", "0.0", "0.0", "-"],
    ["1", "2", "45.0", "45.0", "50.0", "45.0"],
    ["2", "3", "90.0", "90.0", "100.0", "45.0"],
]
PREFILL_ROWS = [
    ["running", "samples", "sustained tok/s", "active samples", "active tok/s"],
    ["0", "1", "0.0", "0", "-"],
    ["1", "2", "500.0", "1", "1000.0"],
    ["2", "3", "200.0", "1", "600.0"],
]
COMPLETIONS_ROWS = [
    ["running", "windows", "minutes", "completions", "per minute"],
    ["0", "1", "0.17", "0", "0.00"],
    ["1", "2", "0.33", "2", "6.00"],
    ["2", "3", "0.50", "2", "4.00"],
]
# Sessions: "pipes" 3 allowed + 1 denied, handshake completed; "missed" 1 allowed, handshake
# not completed; "fault" 2 allowed but ended in a server fault, so left out.
#   allowed 4 in 1 min = 4.00/min; denied 1.00/min; 1 handshake in 1/60 h = 60.00/hour
WORK_LINE = ("4.00 allowed calls/min and 60.00 completed handshakes/hour at 72.0 average "
             "generation tok/s (busy windows), over 1.00 min")


def fill_run(db: str, window: tuple[datetime, datetime]) -> int:
    """One finished run of three sessions, its created/finished times pinned to ``window``."""
    pipes = session("qwen/pipes/0", "qwen", "pipes", [
        judged_call(0, 0, ALLOWED, "ok"), judged_call(1, 1, PIPED, "denied"),
        judged_call(2, 2, ALLOWED, "ok"), judged_call(3, 3, ALLOWED, "ok"),
    ], n_turns=4, handshake=HandshakeResult(3, 3, True))  # fmt: skip
    missed = session("qwen/missed/0", "qwen", "missed", [judged_call(0, 0, ALLOWED, "ok")],
                     n_turns=1, status="abandoned",
                     handshake=HandshakeResult(3, 1, False, "update_attempt_outcome.py"))
    fault = session("qwen/fault/0", "qwen", "fault",
                    [judged_call(0, 0, ALLOWED, "ok"), judged_call(1, 1, ALLOWED, "ok")],
                    n_turns=2, status="error", error="server answered 500")
    with open_store(db) as store:
        run_id = add_run(store, label="night", suite="suite",
                         fingerprint={"engine_version": "test"}, targets={"qwen": "Qwen3.5-27B"},
                         base_url="http://127.0.0.1:8000/v1")
        for record in (pipes, missed, fault):
            store.record_session(run_id, record)
        store.set_run_status(run_id, "finished")
        with store.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id)
                         .values(created_at=window[0], finished_at=window[1]))
    return run_id


def import_vllm_log(db: str, folder: Path) -> None:
    log = folder / "vllm.log"
    log.write_text(VLLM_LOG, encoding="utf-8")
    with open_store(db) as store:
        stats = import_log(store, "vllm-log", log, label="qwen-server")
    assert (stats.samples, stats.requests, stats.malformed) == (7, 5, 0)


def write(db: str, run_ids: list[int], out: Path) -> Path:
    with open_store(db) as store:
        return write_report(store, run_ids, out).parent


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The report folder of a run whose window holds the log's first six samples."""
    folder = tmp_path_factory.mktemp("perf-report")
    db = str(folder / "store.db")
    run_id = fill_run(db, RUN_WINDOW)
    import_vllm_log(db, folder)
    return write(db, [run_id], folder / "reports")


@pytest.fixture(scope="module")
def report_outside(tmp_path_factory) -> Path:
    """The same run a day earlier: every sample falls outside its window."""
    folder = tmp_path_factory.mktemp("perf-report-outside")
    db = str(folder / "store.db")
    day = timedelta(days=1)
    run_id = fill_run(db, (RUN_WINDOW[0] - day, RUN_WINDOW[1] - day))
    import_vllm_log(db, folder)
    return write(db, [run_id], folder / "reports")


class Tables(HTMLParser):
    """Every <table> of a page by its class, as rows of cell texts."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs).get("class") or "", [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag in ("td", "th") and self.current is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.current:
            self.current[-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def index_html(report: Path) -> str:
    return (report / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("table", "expected"),
    [("generation-table", GENERATION_ROWS), ("prefill-table", PREFILL_ROWS),
     ("completions-table", COMPLETIONS_ROWS)],
    ids=["generation-by-concurrency", "prefill-sustained-and-active", "completions-per-minute"],
)  # fmt: skip
def test_index_shows_server_tables_bucketed_by_concurrency(report, table, expected):
    assert Tables(index_html(report)).tables[table] == expected


def test_samples_after_the_run_window_are_left_out(report):
    html = index_html(report)
    assert "500.0" not in Tables(html).tables["generation-table"][-1]
    assert "7 samples" not in html and "6 samples, 4 completions" in html


def test_useful_work_line_sits_beside_generation_speed(report):
    html = index_html(report)
    assert f"<strong>Useful work:</strong> {WORK_LINE}" in html


def test_useful_work_table_counts_allowed_calls_and_handshakes_without_fault_sessions(report):
    assert Tables(index_html(report)).tables["work-table"] == [
        ["useful work", "rate", "count"],
        ["allowed tool calls / min", "4.00", "4 calls"],
        ["denied tool calls / min", "1.00", "1 calls"],
        ["completed handshakes / hour", "60.00", "1 handshakes"],
        ["server completions / min", "4.00", "4 requests"],
        ["generation tokens/s (busy windows)", "72.0", ""],
    ]


def test_section_names_the_window_and_the_source(report):
    html = index_html(report)
    assert '<h2 id="server">Server throughput</h2>' in html
    assert "2025-08-01 12:00:00 to 2025-08-01 12:01:00 UTC" in html
    assert "source: qwen-server" in html


def test_summary_json_carries_the_useful_work_numbers(report):
    data = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    [work] = data["useful_work"]
    assert work == {
        "run": data["runs"][0]["id"],
        "start": "2025-08-01T12:00:00",
        "end": "2025-08-01T12:01:00",
        "minutes": 1.0,
        "samples": 6,
        "sources": ["qwen-server"],
        "allowed_calls": 4,
        "denied_calls": 1,
        "handshakes_completed": 1,
        "completions": 4,
        "allowed_calls_per_min": 4.0,
        "denied_calls_per_min": 1.0,
        "completed_handshakes_per_hour": 60.0,
        "completions_per_min": 4.0,
        "generation_tps": 72.0,
    }


def test_summary_markdown_has_one_useful_work_line(report):
    text = (report / "summary.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("Useful work")]
    assert lines == [f"Useful work beside server speed (run 1): {WORK_LINE}."]


def test_report_agrees_with_perf_run(report, tmp_path):
    """The report and ``agent-eval perf --run`` read the same window the same way."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    db = str(report.parents[1] / "store.db")
    out = tmp_path / "perf"
    result = CliRunner().invoke(main, ["perf", "--db", db, "--run", "latest", "--out", str(out)])
    assert result.exit_code == 0, result.output
    perf = json.loads((out / "perf.json").read_text(encoding="utf-8"))
    [work] = json.loads((report / "summary.json").read_text(encoding="utf-8"))["useful_work"]
    assert perf["samples"] == work["samples"]
    assert perf["useful_work"]["allowed_per_min"] == work["allowed_calls_per_min"]
    assert perf["useful_work"]["generation_tps"] == work["generation_tps"]
    assert [r["average_tps"] for r in perf["generation"]] == [0.0, 45.0, 90.0]


def test_no_samples_in_the_window_is_said_in_one_line(report_outside):
    html = index_html(report_outside)
    tables = Tables(html).tables
    assert "generation-table" not in tables and "work-table" not in tables
    assert f'<p class="server-note">{escape(NO_SAMPLES)}</p>' in html
    assert "agent-eval import vllm-log FILE" in html


def test_no_samples_leaves_useful_work_out_of_the_summaries(report_outside):
    data = json.loads((report_outside / "summary.json").read_text(encoding="utf-8"))
    assert data["useful_work"] == []
    text = (report_outside / "summary.md").read_text(encoding="utf-8")
    assert "Useful work" not in text


def test_a_hostile_source_label_renders_as_text(tmp_path):
    db = str(tmp_path / "store.db")
    run_id = fill_run(db, RUN_WINDOW)
    log = tmp_path / "vllm.log"
    log.write_text(VLLM_LOG, encoding="utf-8")
    with open_store(db) as store:
        import_log(store, "vllm-log", log, label="<script>alert(1)</script>")
    html = index_html(write(db, [run_id], tmp_path / "reports"))
    assert "<script>alert(1)</script>" not in html
    assert "source: &lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.fixture(scope="module")
def short_report(tmp_path_factory) -> Path:
    """A 22-second run, 12:00:00–12:00:22: the 12:00:30 throughput line (covering
    12:00:20–12:00:30) and the 12:00:25 request fall in the 10 s after its end."""
    folder = tmp_path_factory.mktemp("perf-short")
    db = str(folder / "store.db")
    run_id = fill_run(db, (T0, T0 + timedelta(seconds=22)))
    import_vllm_log(db, folder)
    return write(db, [run_id], folder / "reports")


def test_lines_in_the_ten_seconds_after_the_run_count_in_tables_and_useful_work(short_report):
    # samples 12:00:10 (r1, 40 tok/s), 12:00:20 (r1, 50), 12:00:30 (r2, 80): 3 samples;
    # completions 12:00:04, 12:00:15, 12:00:25: 3, placed r1 2 + r2 1.
    # Rates per minute of the run (22 s): 3 / (22/60) = 8.18; 4 allowed calls -> 10.91;
    # busy generation tok/s = mean(40, 50, 80) = 56.7
    html = index_html(short_report)
    tables = Tables(html).tables
    assert "3 samples, 3 completions" in html
    assert sum(int(row[3]) for row in tables["completions-table"][1:]) == 3
    work = {row[0]: row[1:] for row in tables["work-table"][1:]}
    assert work["server completions / min"] == ["8.18", "3 requests"]
    assert work["allowed tool calls / min"] == ["10.91", "4 calls"]
    assert work["generation tokens/s (busy windows)"] == ["56.7", ""]


def test_summary_json_useful_work_uses_the_same_lines_as_the_tables(short_report):
    [work] = json.loads((short_report / "summary.json").read_text(encoding="utf-8"))["useful_work"]
    assert (work["samples"], work["completions"], work["generation_tps"]) == (3, 3, 56.67)
    assert work["end"] == "2025-08-01T12:00:22"
