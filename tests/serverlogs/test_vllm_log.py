"""parse_vllm_log: every throughput-line variant and the access lines, to exact values."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from agent_eval.serverlogs import LogStats, Request, Sample, parse_vllm_log

FIXTURES = Path(__file__).parent / "fixtures"


def parse(name: str, **kw) -> tuple[list[Sample | Request], LogStats]:
    stats = LogStats()
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return list(parse_vllm_log(lines, year=kw.pop("year", 2025), stats=stats, **kw)), stats


def samples(name: str, **kw) -> list[Sample]:
    return [r for r in parse(name, **kw)[0] if isinstance(r, Sample)]


def one(line: str, **kw) -> Sample:
    (record,) = parse_vllm_log([line], year=2025, **kw)
    assert isinstance(record, Sample)
    return record


V1 = (
    "INFO 08-01 12:00:10 [loggers.py:118] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
    "Avg generation throughput: 88.1 tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 5.2%, Prefix cache hit rate: 71.3%"
)
V1_EXPECTED = Sample(
    ts=datetime(2025, 8, 1, 12, 0, 10),
    source="vllm",
    prompt_tps=512.3,
    generation_tps=88.1,
    running=2,
    waiting=0,
    swapped=None,
    kv_cache_pct=5.2,
    prefix_hit_pct=71.3,
)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(V1, id="v1-engine-000"),
        pytest.param(V1.replace("Engine 000: ", ""), id="v1-no-engine"),
        pytest.param("(APIServer pid=12345) " + V1, id="v1-apiserver-prefix"),
        pytest.param(V1.replace("GPU KV cache", "KV cache"), id="v1-kv-without-gpu"),
        pytest.param(V1.replace("08-01 12:00:10", "2025-08-01 12:00:10"), id="v1-date-with-year"),
        pytest.param(
            "\x1b[1;36m(APIServer pid=1)\x1b[0;0m " + V1, id="v1-coloured-apiserver-prefix"
        ),
        pytest.param(V1 + ", External prefix cache hit rate: 0.0%", id="v1-external-prefix-rate"),
        pytest.param(V1 + "\n", id="trailing-newline"),
        pytest.param("2025-08-01T10:00:10.123456789Z " + V1, id="docker-timestamps-prefix"),
    ],
)
def test_v1_variants_read_the_same_values(line):
    assert one(line) == V1_EXPECTED


def test_v0_line_fills_swapped_and_pending_and_ignores_cpu_kv():
    assert one(
        "INFO 05-14 10:22:31 metrics.py:351] Avg prompt throughput: 1234.5 tokens/s, "
        "Avg generation throughput: 56.7 tokens/s, Running: 3 reqs, Swapped: 0 reqs, "
        "Pending: 1 reqs, GPU KV cache usage: 12.3%, CPU KV cache usage: 0.0%."
    ) == Sample(
        ts=datetime(2025, 5, 14, 10, 22, 31),
        source="vllm",
        prompt_tps=1234.5,
        generation_tps=56.7,
        running=3,
        waiting=1,
        swapped=0,
        kv_cache_pct=12.3,
        prefix_hit_pct=None,
    )


def test_v0_fixture_reads_every_throughput_line():
    got = samples("vllm_v0.log")
    assert [(s.ts.second, s.prompt_tps, s.generation_tps, s.running, s.swapped) for s in got] == [
        (21, 0.0, 0.0, 0, 0),
        (31, 1234.5, 56.7, 3, 0),
        (41, 0.0, 98.2, 2, 1),
    ]
    assert got[2].kv_cache_pct == 97.5


def test_older_waiting_wording_fills_waiting():
    (s,) = samples("vllm_v0_waiting.log")
    assert (s.waiting, s.swapped, s.running, s.kv_cache_pct) == (2, 0, 1, 1.5)


def test_v0_prefix_hit_rate_on_its_own_line_or_inline_takes_the_gpu_rate():
    got = samples("vllm_v0_prefix.log")
    assert [s.prefix_hit_pct for s in got] == [45.0, 12.5, None]
    assert len(got) == 3


def test_v1_fixture_with_apiserver_prefix_and_kv_cache_usage():
    got = samples("vllm_v1_apiserver.log")
    assert [
        (s.prompt_tps, s.generation_tps, s.running, s.kv_cache_pct, s.prefix_hit_pct) for s in got
    ] == [
        (4096.8, 35.2, 1, 41.0, 93.5),
        (0.0, 71.9, 2, 43.7, 92.8),
    ]


def test_fractional_seconds_are_kept():
    got = samples("vllm_v1_year.log", year=1999)
    assert [s.ts for s in got] == [
        datetime(2025, 8, 1, 12, 0, 10),
        datetime(2025, 8, 1, 12, 0, 20, 250000),
    ]


def test_year_less_dates_take_the_given_year_and_step_over_new_year():
    lines = [
        V1.replace("08-01 12:00:10", "12-31 23:59:55"),
        V1.replace("08-01 12:00:10", "01-01 00:00:05"),
    ]
    got = list(parse_vllm_log(lines, year=2024))
    assert [s.ts for s in got] == [
        datetime(2024, 12, 31, 23, 59, 55),
        datetime(2025, 1, 1, 0, 0, 5),
    ]


def test_year_defaults_to_the_current_year():
    (s,) = parse_vllm_log([V1])
    assert s.ts.year == datetime.now().year


def test_source_names_the_stream():
    assert one(V1, source="qwen-27b").source == "qwen-27b"


@pytest.mark.parametrize(
    "name, expected",
    [
        pytest.param(
            "vllm_v1.log",
            [("POST", "/v1/chat/completions", 200, datetime(2025, 8, 1, 12, 0, 2))],
            id="stamp-of-received-request-line",
        ),
        pytest.param(
            "vllm_v1_apiserver.log",
            [
                ("POST", "/v1/chat/completions", 200, datetime(2025, 10, 3, 9, 15, 1)),
                # right after a throughput line: the next stamp, its own window's end
                ("POST", "/v1/chat/completions", 400, datetime(2025, 10, 3, 9, 15, 18)),
            ],
            id="apiserver-prefix-after-throughput-line-next-stamp",
        ),
        pytest.param(
            "vllm_v0.log",
            [
                ("POST", "/v1/chat/completions", 200, datetime(2025, 5, 14, 10, 22, 25)),
                # after the last throughput line: just past it
                ("GET", "/v1/models", 200, datetime(2025, 5, 14, 10, 22, 41, 1)),
            ],
            id="v0",
        ),
    ],
)
def test_access_lines_take_the_nearest_preceding_timestamp(name, expected):
    records, _ = parse(name)
    got = [(r.method, r.path, r.status, r.ts) for r in records if isinstance(r, Request)]
    assert got == expected
    assert all(r.duration_s is None for r in records if isinstance(r, Request))


def test_access_line_query_string_is_dropped_from_the_path():
    lines = [V1, 'INFO:     127.0.0.1:1 - "GET /metrics?x=1 HTTP/1.1" 200 OK']
    request = list(parse_vllm_log(lines, year=2025))[1]
    assert request.path == "/metrics"


def test_is_completion_means_a_200_post_to_chat_completions():
    records, _ = parse("vllm_v1_apiserver.log")
    requests = [r for r in records if isinstance(r, Request)]
    assert [r.is_completion for r in requests] == [True, False]


class TestMalformedInput:
    """Broken or foreign lines are skipped and counted, never raised."""

    def test_counts(self):
        records, stats = parse("vllm_malformed.log")
        assert (stats.lines, stats.samples, stats.requests) == (11, 1, 1)
        assert (stats.malformed, stats.untimed, stats.ignored) == (5, 1, 3)
        assert len(records) == 2

    def test_malformed_line_numbers_are_kept(self):
        _, stats = parse("vllm_malformed.log")
        # truncated line, Feb 30, no Running field, no level/header, truncated access line
        assert stats.malformed_lines == [3, 4, 5, 6, 7]

    def test_access_line_before_any_timestamp_is_untimed_not_guessed(self):
        records, _ = parse("vllm_malformed.log")
        (request,) = [r for r in records if isinstance(r, Request)]
        assert request.ts == datetime(2025, 8, 1, 12, 0, 40)

    @pytest.mark.parametrize(
        "line",
        [
            pytest.param("", id="empty"),
            pytest.param("\x00\x01\x02", id="control-bytes"),
            pytest.param("INFO 99-99 99:99:99 [x.py:1] hello", id="impossible-date"),
            pytest.param("Avg prompt throughput: nan", id="bare-hint"),
            pytest.param("x" * 100_000, id="very-long"),
        ],
    )
    def test_garbage_never_raises_and_yields_nothing(self, line):
        stats = LogStats()
        assert list(parse_vllm_log([line], stats=stats)) == []
        assert stats.lines == 1 and stats.samples == 0


@pytest.mark.parametrize("prefix", ["Aug  1 12:00:09 gpu-host vllm[2210]: ",
                                    "2025-08-01T12:00:09.123456+0000 gpu-host vllm[2210]: "])
@pytest.mark.parametrize("name", ["vllm_v1.log", "vllm_v0.log", "vllm_v1_apiserver.log"])
def test_a_journal_export_reads_as_the_log_itself(tmp_path, name, prefix):
    """``journalctl -u vllm`` puts its own time, host and unit before every line; vLLM's
    own stamp is the one read, so the journal reads exactly as the plain log."""
    plain, plain_stats = parse(name)
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    (tmp_path / name).write_text("".join(prefix + line + "\n" for line in lines),
                                 encoding="utf-8")
    stats = LogStats()
    journal = list(parse_vllm_log((tmp_path / name).read_text(encoding="utf-8").splitlines(),
                                  year=2025, stats=stats))
    assert journal == plain and plain
    assert (stats.samples, stats.requests, stats.malformed) == (
        plain_stats.samples, plain_stats.requests, plain_stats.malformed)
