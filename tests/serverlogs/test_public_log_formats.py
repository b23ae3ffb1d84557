"""`import` then `perf`, end to end, on logs shaped like those users publish.

The fixtures are constructed (values, hosts and pids are ours), each line in a format
seen in public logs; tests/serverlogs/fixtures/README.md names the public threads whose
format each one follows.  Every expected number below is worked out from the fixture
text by hand, in the comments.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.serverlogs import LogStats, Request, parse_llamacpp_log, parse_vllm_log

FIXTURES = Path(__file__).parent / "fixtures"


def import_and_perf(tmp_path, fmt: str, name: str, *options: str):
    """What a user types: `agent-eval import FMT FILE ...` then `agent-eval perf --json`."""
    db = str(tmp_path / "store.db")
    imported = CliRunner().invoke(main, ["import", fmt, str(FIXTURES / name), *options,
                                         "--db", db])
    assert imported.exit_code == 0, imported.output
    perf = CliRunner().invoke(main, ["perf", "--json", "--db", db,
                                     "--out", str(tmp_path / "out")])
    assert perf.exit_code == 0, perf.output
    return imported, json.loads(perf.stdout)


def rows(doc, table: str, *fields: str):
    return [tuple(r[f] for f in fields) for r in doc[table]]


class TestLlamacppRouterLog:
    """A recent llama-server in router mode: every line of a model's server is prefixed
    with its port (`[51234] `), then llama.cpp's own `M.SS.mmm.uuu` stamp."""

    def test_the_stamps_behind_the_port_prefix_are_read(self):
        records = list(parse_llamacpp_log(
            (FIXTURES / "llamacpp_router.log").read_text().splitlines(),
            start=datetime(2026, 11, 20, 9, 0)))
        # each sample at its `print_timing` header: 1.06.600.000 and 1.29.000.000
        assert [r.ts for r in records if not isinstance(r, Request)] == [
            datetime(2026, 11, 20, 9, 1, 6, 600000), datetime(2026, 11, 20, 9, 1, 29)]

    def test_perf_counts_each_completion_in_its_own_window(self, tmp_path):
        imported, doc = import_and_perf(tmp_path, "llamacpp-log", "llamacpp_router.log",
                                        "--start", "2026-11-20 09:00:00")
        assert imported.stdout.startswith("imported 2 samples and 3 requests")
        assert (doc["first_ts"], doc["last_ts"]) == (
            "2026-11-20 09:01:06.600000", "2026-11-20 09:01:35")  # GET /v1/models
        assert (doc["samples"], doc["requests"], doc["completions"]) == (2, 3, 2)
        assert doc["unwindowed_completions"] == 0
        # generation 12.00 and 15.00 t/s, both with one slot busy
        assert rows(doc, "generation", "running", "samples", "average_tps", "peak_tps") == [
            (1, 2, 13.5, 15.0)]
        # prompt 400 and 2000 t/s
        assert rows(doc, "prefill", "running", "sustained_tps", "active_tps") == [
            (1, 1200.0, 1200.0)]
        # two 10 s windows = 1/3 minute, one completion in each: 6 per minute
        assert rows(doc, "completions_per_minute", "running", "windows", "completions") == [
            (1, 2, 2)]
        assert doc["completions_per_minute"][0]["per_minute"] == pytest.approx(6.0)


class TestLlamacppJournaldWithBlobData:
    """`journalctl -u llama-server` without `-a`: journalctl printed the timing lines as
    `[101B blob data]`, and this build logs `request: POST /chat/completions` (no /v1)."""

    def test_completions_without_v1_count_and_the_hidden_lines_are_named(self, tmp_path):
        imported, doc = import_and_perf(tmp_path, "llamacpp-log",
                                        "llamacpp_journald_blob.log", "--start", "2026-01-01")
        assert imported.stdout.startswith("imported 0 samples and 3 requests")
        assert ("6 lines were hidden by journalctl as [blob data] (llama.cpp's timing "
                "lines): export the journal again with journalctl -a") in " ".join(
                    imported.stdout.split())
        assert (doc["requests"], doc["completions"], doc["samples"]) == (3, 2, 0)
        assert (doc["first_ts"], doc["last_ts"]) == (
            "2026-03-03 14:20:05", "2026-03-03 14:20:36")

    def test_the_parser_counts_the_hidden_lines(self):
        stats = LogStats()
        requests = list(parse_llamacpp_log(
            (FIXTURES / "llamacpp_journald_blob.log").read_text().splitlines(), stats=stats,
            start=datetime(2026, 1, 1)))
        assert (stats.hidden, stats.samples, stats.malformed) == (6, 0, 0)
        assert [(r.path, r.is_completion) for r in requests] == [
            ("/models", False), ("/chat/completions", True), ("/chat/completions", True)]


    def test_a_journal_whose_timing_lines_are_all_hidden_says_how_to_export_it(self, tmp_path):
        log = tmp_path / "hidden.log"
        log.write_text("".join(f"Mar 03 14:20:14 lab2 llama-server[3107]: [{n}B blob data]\n"
                               for n in (101, 100, 48)))
        result = CliRunner().invoke(main, ["import", "llamacpp-log", str(log),
                                           "--db", str(tmp_path / "s.db")])
        assert result.exit_code == 2
        assert ("3 of its 3 lines were hidden by journalctl as [blob data]: export the "
                "journal again with journalctl -a") in " ".join(result.output.split())
        assert "Traceback" not in result.output


def test_a_short_iso_journal_of_a_router_child_takes_the_journal_time_in_utc():
    """`journalctl -o short-iso-precise`: microseconds and a `-04:00` zone, then the
    router's port prefix and llama.cpp's own stamp, both dropped."""
    head = "2026-07-28T20:08:{}-04:00 t0 llama-server[1686919]: [42751] "
    lines = [
        head.format("39.809061") + "107.53.131.684 I slot print_timing: id  0 | task 7 | ",
        head.format("39.809100") + "prompt eval time =     100.00 ms /    50 tokens (    2.00 ms per token,   500.00 tokens per second)",
        head.format("39.809120") + "       eval time =    1000.00 ms /    20 tokens (   50.00 ms per token,    20.00 tokens per second)",
        head.format("39.809140") + "      total time =    1100.00 ms /    70 tokens",
        head.format("39.809300") + "107.53.131.900 I srv  log_server_r: done request: POST /v1/chat/completions 127.0.0.1 200",
    ]  # fmt: skip
    sample, request = parse_llamacpp_log(lines)
    assert sample.ts == request.ts == datetime(2026, 7, 29, 0, 8, 39, 809140)  # total time
    assert (sample.prompt_tps, sample.generation_tps, request.is_completion) == (500.0, 20.0, True)


class TestVllmWithoutRequestLogging:
    """A recent vLLM with request logging off (no `Received request` lines): each access
    line comes right after the throughput line that closed the previous window, and
    idle throughput lines are skipped (none from 10:01:12 to 10:01:52)."""

    def test_an_access_line_after_a_throughput_line_takes_the_next_stamp(self):
        records = list(parse_vllm_log(
            (FIXTURES / "vllm_v1_no_request_log.log").read_text().splitlines(), year=2026))
        requests = [(r.method, r.ts) for r in records if isinstance(r, Request)]
        at = [datetime(2026, 11, 20, 10, m, s) for m, s in
              ((0, 0), (0, 22), (0, 32), (0, 42), (0, 42), (0, 42), (1, 2), (1, 52))]
        assert requests == list(zip(["GET", "POST", "POST", "POST", "POST", "GET", "POST",
                                     "POST"], at, strict=True))

    def test_at_the_end_of_the_log_it_is_stamped_just_past_the_throughput_line(self):
        lines = (FIXTURES / "vllm_v1_no_request_log.log").read_text().splitlines()[:7]
        *_, request = parse_vllm_log(lines, year=2026)
        assert request.ts == datetime(2026, 11, 20, 10, 0, 12, 1)

    def test_perf_puts_each_completion_in_the_window_it_ran_in(self, tmp_path):
        imported, doc = import_and_perf(tmp_path, "vllm-log", "vllm_v1_no_request_log.log",
                                        "--year", "2026")
        assert imported.stdout.startswith("imported 8 samples and 8 requests")
        assert (doc["first_ts"], doc["last_ts"]) == ("2026-11-20 10:00:00", "2026-11-20 10:01:52")
        assert (doc["requests"], doc["completions"], doc["unwindowed_completions"]) == (8, 6, 0)
        # running 0: 10:00:12, 10:01:12, 10:01:52; running 1: 10:00:22, 10:00:52,
        # 10:01:02; running 2: 10:00:32, 10:00:42
        assert rows(doc, "generation", "running", "samples", "average_tps", "peak_tps") == [
            (0, 3, pytest.approx(14.1667, abs=1e-4), 30.4),
            (1, 3, pytest.approx(44.5667, abs=1e-4), 47.5),
            (2, 2, pytest.approx(92.95), 97.3)]
        assert rows(doc, "prefill", "running", "sustained_tps", "active_tps") == [
            (0, pytest.approx(103.3333, abs=1e-4), 310.0), (1, pytest.approx(506.8), 1520.4),
            (2, 1105.0, 2210.0)]
        # one completion in 10:01:52's window (30 s over 3 windows: 2 a minute), two in
        # 10:00:22's and 10:01:02's (30 s: 4 a minute), three in 10:00:32's and 10:00:42's
        # (20 s: 9 a minute)
        assert rows(doc, "completions_per_minute", "running", "windows", "completions",
                    "per_minute") == [(0, 3, 1, pytest.approx(2.0)), (1, 3, 2, pytest.approx(4.0)),
                                      (2, 2, 3, pytest.approx(9.0))]


@pytest.mark.parametrize(
    "path, completion",
    [
        pytest.param("/v1/chat/completions", True, id="v1"),
        pytest.param("/chat/completions", True, id="llamacpp-without-v1"),
        pytest.param("/openai/v1/chat/completions", True, id="behind-a-path-prefix"),
        pytest.param("/v1/completions", False, id="text-completions"),
        pytest.param("/v1/chat/completions/extra", False, id="not-the-endpoint"),
    ],
)
def test_a_completion_is_a_200_post_to_any_chat_completions_path(path, completion):
    request = Request(ts=datetime(2026, 1, 1), source="s", method="POST", path=path,
                      status=200)
    assert request.is_completion is completion
