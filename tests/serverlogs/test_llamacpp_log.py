"""parse_llamacpp_log: slot timing blocks, access lines, and the clock they run on."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent_eval.serverlogs import LogStats, Request, Sample, parse_llamacpp_log

FIXTURES = Path(__file__).parent / "fixtures"
START = datetime(2025, 8, 1, 12, 0, 0)


def parse(name: str, **kw) -> tuple[list[Sample], list[Request], LogStats]:
    stats = LogStats()
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    records = list(parse_llamacpp_log(lines, stats=stats, **kw))
    return (
        [r for r in records if isinstance(r, Sample)],
        [r for r in records if isinstance(r, Request)],
        stats,
    )


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("llamacpp_new.log", id="slot-print-timing"),
        pytest.param("llamacpp_old.log", id="print-timings-runs"),
        pytest.param("llamacpp_json.log", id="2024-json-records"),
    ],
)
def test_timing_block_reads_the_request_rates(name):
    got, _, _ = parse(name, start=START)
    assert (got[0].prompt_tps, got[0].generation_tps, got[0].running) == (518.44, 54.57, 1)
    assert (got[0].waiting, got[0].kv_cache_pct, got[0].prefix_hit_pct) == (None, None, None)


def test_untimed_log_advances_the_clock_by_each_requests_total_time():
    got, _, _ = parse("llamacpp_new.log", start=START)
    assert [s.ts for s in got] == [
        START + timedelta(milliseconds=2469.12),
        START + timedelta(milliseconds=2469.12 + 1200.0),
    ]


def test_without_start_the_clock_is_relative_to_1970():
    got, _, _ = parse("llamacpp_old.log")
    assert got[0].ts == datetime(1970, 1, 1) + timedelta(milliseconds=2469.12)


def test_running_counts_slots_busy_when_the_request_finished():
    got, _, _ = parse("llamacpp_new.log", start=START)
    # task 172 on slot 1 finished while slot 0 still held task 171
    assert [s.running for s in got] == [1, 2]


def test_access_lines_become_requests_and_completions_take_the_block_duration():
    samples_, requests, _ = parse("llamacpp_new.log", start=START)
    assert [(r.method, r.path, r.status, r.duration_s) for r in requests] == [
        ("POST", "/v1/chat/completions", 200, pytest.approx(2.46912)),
        ("GET", "/health", 200, None),
        ("POST", "/v1/chat/completions", 200, pytest.approx(1.2)),
    ]
    assert requests[0].ts == samples_[0].ts
    assert all(r.is_completion for r in (requests[0], requests[2]))


def test_log_timestamps_prefix_is_added_to_start():
    samples_, requests, _ = parse("llamacpp_stamped.log", start=START)
    assert samples_[0].ts == START + timedelta(
        minutes=1, seconds=7, milliseconds=600, microseconds=500
    )
    assert requests[0].ts == START + timedelta(minutes=1, seconds=7, milliseconds=601)
    assert requests[0].duration_s == 2.5


def test_epoch_timestamps_of_2024_records_are_wall_time():
    samples_, requests, _ = parse("llamacpp_json.log", start=START)
    assert samples_[0].ts == datetime(2024, 5, 29, 16, 26, 40)
    assert (requests[0].ts, requests[0].path, requests[0].status) == (
        datetime(2024, 5, 29, 16, 26, 41),
        "/v1/chat/completions",
        200,
    )


def test_block_cut_before_total_time_still_counts():
    lines = [
        "prompt eval time =     100.00 ms /    10 tokens (   10.00 ms per token,   100.00 tokens per second)",
        "       eval time =     400.00 ms /    20 tokens (   20.00 ms per token,    50.00 tokens per second)",
    ]
    (s,) = parse_llamacpp_log(lines, start=START)
    assert (s.prompt_tps, s.generation_tps, s.ts) == (
        100.0,
        50.0,
        START + timedelta(milliseconds=500),
    )


def test_block_without_eval_line_is_malformed():
    stats = LogStats()
    lines = [
        "prompt eval time =     100.00 ms /    10 tokens (   10.00 ms per token,   100.00 tokens per second)",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 500",
    ]
    (request,) = parse_llamacpp_log(lines, stats=stats)
    assert request.status == 500 and not request.is_completion
    assert (stats.samples, stats.malformed, stats.malformed_lines) == (0, 1, [1])


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("prompt eval time =  12", id="truncated-timing"),
        pytest.param("srv  log_server_r: request: POST /v1/chat", id="truncated-access"),
    ],
)
def test_truncated_lines_are_malformed(line):
    stats = LogStats()
    assert list(parse_llamacpp_log([line], stats=stats)) == []
    assert stats.malformed == 1


def test_counts_of_the_new_format_fixture():
    _, _, stats = parse("llamacpp_new.log", start=START)
    assert (stats.lines, stats.samples, stats.requests, stats.malformed) == (21, 2, 3, 0)
