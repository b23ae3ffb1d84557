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
    # the completion is stamped when its block closed (not 1 ms later, at its access
    # line), so it falls in the window of its own sample
    assert requests[0].ts == samples_[0].ts
    assert requests[0].duration_s == 2.5


def test_epoch_timestamps_of_2024_records_are_wall_time():
    samples_, requests, _ = parse("llamacpp_json.log", start=START)
    assert samples_[0].ts == datetime(2024, 5, 29, 16, 26, 40)
    assert (requests[0].ts, requests[0].path, requests[0].status) == (
        datetime(2024, 5, 29, 16, 26, 40),  # its block's time, not its access line's 41
        "/v1/chat/completions",
        200,
    )


def test_block_cut_before_total_time_still_counts():
    lines = [
        "prompt eval time =     100.00 ms /    10 tokens (   10.00 ms per token,   100.00 tokens per second)",
        "       eval time =     400.00 ms /    20 tokens (   20.00 ms per token,    50.00 tokens per second)",
    ]
    s, request = parse_llamacpp_log(lines, start=START)
    assert (s.prompt_tps, s.generation_tps, s.ts) == (
        100.0,
        50.0,
        START + timedelta(milliseconds=500),
    )
    assert (request.ts, request.duration_s) == (s.ts, 0.5)


ONE_REQUEST_NO_ACCESS_LINE = [
    "slot launch_slot_: id  0 | task 0 | processing task",
    "slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 4096, n_keep = 0, n_prompt_tokens = 12",
    "slot      release: id  0 | task 0 | stop processing: n_past = 40, truncated = 0",
    "slot print_timing: id  0 | task 0 | ",
    "prompt eval time =      80.00 ms /    12 tokens (    6.67 ms per token,   150.00 tokens per second)",
    "       eval time =     560.00 ms /    28 tokens (   20.00 ms per token,    50.00 tokens per second)",
    "      total time =     640.00 ms /    40 tokens",
    "srv  update_slots: all slots are idle",
]


def test_a_log_with_one_finished_request_and_no_access_line_yields_one_request():
    """Before: such a log stored "1 samples and 0 requests"."""
    stats = LogStats()
    records = list(parse_llamacpp_log(ONE_REQUEST_NO_ACCESS_LINE, start=START, stats=stats))
    [sample] = [r for r in records if isinstance(r, Sample)]
    [request] = [r for r in records if isinstance(r, Request)]
    assert (stats.samples, stats.requests) == (1, 1)
    assert (request.method, request.path, request.status, request.is_completion) == (
        "POST", "/v1/chat/completions", 200, True)
    assert (request.ts, request.duration_s) == (sample.ts, pytest.approx(0.64))


def test_print_timings_log_of_2023_counts_its_finished_request():
    _, requests, stats = parse("llamacpp_old.log", start=START)
    assert (stats.samples, stats.requests, len(requests)) == (1, 1, 1)
    assert requests[0].duration_s == pytest.approx(2.46912)


def test_done_request_line_written_before_its_block_takes_the_block_duration():
    lines = [
        "slot launch_slot_: id  0 | task 1464 | processing task, is_child = 0",
        "srv  log_server_r: done request: POST /v1/chat/completions 127.0.0.1 200",
        "slot print_timing: id  0 | task 1464 |",
        "prompt eval time =   65949.79 ms / 15441 tokens (    4.27 ms per token,   234.13 tokens per second)",
        "       eval time =    3639.91 ms /    87 tokens (   41.84 ms per token,    23.90 tokens per second)",
        "      total time =   69589.70 ms / 15528 tokens",
        "slot      release: id  0 | task 1464 | stop processing: n_tokens = 56488, truncated = 0",
    ]
    stats = LogStats()
    records = list(parse_llamacpp_log(lines, start=START, stats=stats))
    [request] = [r for r in records if isinstance(r, Request)]
    assert (stats.samples, stats.requests) == (1, 1)
    # stamped when it finished (the block), not when its response started
    assert (request.ts, request.duration_s) == (
        START + timedelta(milliseconds=69589.70), pytest.approx(69.5897))


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


def test_import_command_stores_the_one_request_of_a_one_request_log(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main

    log = tmp_path / "one.log"
    log.write_text("\n".join(ONE_REQUEST_NO_ACCESS_LINE) + "\n")
    result = CliRunner().invoke(main, ["import", "llamacpp-log", str(log), "--start", "2025-08-01 12:00:00",
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"imported 1 samples and 1 requests from {log}")


def test_a_journald_log_takes_each_lines_journal_time():
    """`journalctl -u llama-server` output: every line stamped by the journal, none by
    llama.cpp (the log `perf` refused for "no timestamps")."""
    samples, requests, stats = parse("llamacpp_journald.log", start=datetime(2026, 1, 1))
    assert [s.ts for s in samples] == [datetime(2026, 11, 27, 2, 13, 54),
                                       datetime(2026, 11, 27, 2, 14, 4)]
    assert [s.generation_tps for s in samples] == [54.57, 40.0]
    assert len(requests) == 3 and stats.malformed == 0
    assert all(r.ts.year == 2026 for r in requests)


def test_a_journald_log_without_a_start_takes_a_year_not_in_the_future():
    samples, _, _ = parse("llamacpp_journald.log")
    now = datetime.now()
    assert [(s.ts.month, s.ts.day, s.ts.hour, s.ts.minute) for s in samples] == [
        (11, 27, 2, 13), (11, 27, 2, 14)]
    assert samples[0].ts <= now + timedelta(days=1) and samples[0].ts.year >= now.year - 1


def test_a_short_iso_journald_log_is_read_in_utc():
    samples, _, _ = parse("llamacpp_journald_iso.log")
    assert [s.ts for s in samples] == [datetime(2026, 11, 27, 1, 13, 54),
                                       datetime(2026, 11, 27, 1, 14, 4)]
