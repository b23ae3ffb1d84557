"""import_log: file in, rows out to the store; operator mistakes are ConfigErrors."""

from __future__ import annotations

import gzip
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent_eval.errors import ConfigError
from agent_eval.serverlogs import import_log

FIXTURES = Path(__file__).parent / "fixtures"


class RecordingStore:
    """The store methods import_log needs, keeping what it was given (and reading it back
    whole, whatever the window: these tests check parsing, not the window)."""

    def __init__(self):
        self.samples: list[dict] = []
        self.requests: list[dict] = []

    def add_server_samples(self, rows):
        self.samples.extend(rows)
        return len(rows)

    def add_server_requests(self, rows):
        self.requests.extend(rows)
        return len(rows)

    def server_samples(self, since=None, until=None, source=None):
        return [r for r in self.samples if source in (None, r["source"])]

    def server_requests(self, since=None, until=None, source=None):
        return [r for r in self.requests if source in (None, r["source"])]


@pytest.fixture
def store():
    return RecordingStore()


def test_vllm_rows_carry_the_sample_fields_and_the_label(store):
    stats = import_log(store, "vllm-log", FIXTURES / "vllm_v1.log", label="qwen-27b", year=2025)
    assert (stats.samples, stats.requests, stats.source) == (2, 1, "qwen-27b")
    assert store.samples[0] == {
        "ts": datetime(2025, 8, 1, 12, 0, 10),
        "source": "qwen-27b",
        "label": "qwen-27b",
        "prompt_tps": 512.3,
        "generation_tps": 88.1,
        "running": 2,
        "waiting": 0,
        "swapped": None,
        "kv_cache_pct": 5.2,
        "prefix_hit_pct": 71.3,
        "raw": store.samples[0]["raw"],
    }
    assert "Avg prompt throughput: 512.3" in store.samples[0]["raw"]
    assert store.requests == [
        {
            "ts": datetime(2025, 8, 1, 12, 0, 2),
            "source": "qwen-27b",
            "method": "POST",
            "path": "/v1/chat/completions",
            "status": 200,
            "duration_s": None,
        }
    ]


def test_source_defaults_to_the_file_name(store):
    import_log(store, "vllm-log", FIXTURES / "vllm_v0.log", year=2025)
    assert {r["source"] for r in store.samples} == {"vllm_v0.log"}
    assert store.samples[0]["label"] is None


def test_stats_report_what_was_skipped(store):
    stats = import_log(store, "vllm-log", FIXTURES / "vllm_malformed.log", year=2025)
    assert (stats.lines, stats.malformed, stats.untimed, stats.malformed_lines) == (
        11, 5, 1, (3, 4, 5, 6, 7),
    )  # fmt: skip
    assert (stats.first_ts, stats.last_ts) == (
        datetime(2025, 8, 1, 12, 0, 10),
        datetime(2025, 8, 1, 12, 0, 40),
    )


@pytest.mark.parametrize(
    "offset", [pytest.param("+02:00", id="text"), pytest.param(2, id="hours"),
               pytest.param(timedelta(hours=2), id="timedelta")],
)  # fmt: skip
def test_utc_offset_turns_server_local_time_into_utc(store, offset):
    import_log(store, "vllm-log", FIXTURES / "vllm_v1.log", year=2025, utc_offset=offset)
    assert store.samples[0]["ts"] == datetime(2025, 8, 1, 10, 0, 10)
    assert store.requests[0]["ts"] == datetime(2025, 8, 1, 10, 0, 2)


def test_gzipped_logs_are_read(store, tmp_path):
    packed = tmp_path / "vllm.log.gz"
    with open(FIXTURES / "vllm_v1.log", "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert import_log(store, "vllm-log", packed, year=2025).samples == 2


def test_llamacpp_with_start(store):
    stats = import_log(
        store, "llamacpp-log", FIXTURES / "llamacpp_new.log", start="2025-08-01 12:00:00"
    )
    assert (stats.samples, stats.requests) == (2, 3)
    assert store.samples[0]["ts"] == datetime(2025, 8, 1, 12, 0, 2, 469120)
    assert store.requests[0]["duration_s"] == pytest.approx(2.46912)


def test_llamacpp_with_epoch_timestamps_needs_no_start(store):
    assert import_log(store, "llamacpp-log", FIXTURES / "llamacpp_json.log").samples == 1


class TestOperatorMistakes:
    def test_missing_file_names_the_file(self, store, tmp_path):
        with pytest.raises(ConfigError, match="nope.log: cannot read the log file"):
            import_log(store, "vllm-log", tmp_path / "nope.log")

    def test_binary_file(self, store, tmp_path):
        blob = tmp_path / "model.bin"
        blob.write_bytes(b"\x00\x01\x02GGUF" * 100)
        with pytest.raises(ConfigError, match="model.bin: this is a binary file"):
            import_log(store, "vllm-log", blob)

    def test_wrong_format_suggests_the_other(self, store):
        with pytest.raises(ConfigError, match="llamacpp_new.log: format: .*try llamacpp-log"):
            import_log(store, "vllm-log", FIXTURES / "llamacpp_new.log")
        assert store.samples == [] and store.requests == []

    def test_untimed_llamacpp_log_without_start_asks_for_start(self, store):
        with pytest.raises(ConfigError, match="llamacpp_new.log: start: .*--start"):
            import_log(store, "llamacpp-log", FIXTURES / "llamacpp_new.log")
        assert store.samples == []

    @pytest.mark.parametrize(
        "fmt, opts, field",
        [
            pytest.param("llamacpp-log", {"year": 2025}, "year", id="year-on-llamacpp"),
            pytest.param("vllm-log", {"start": "2025-08-01"}, "start", id="start-on-vllm"),
            pytest.param("vllm-log", {"year": "last"}, "year", id="bad-year"),
            pytest.param("vllm-log", {"utc_offset": "CEST"}, "utc_offset", id="bad-offset"),
            pytest.param("llamacpp-log", {"start": "noon"}, "start", id="bad-start"),
        ],
    )
    def test_bad_options_name_the_field(self, store, fmt, opts, field):
        with pytest.raises(ConfigError, match=re.escape(field)) as err:
            import_log(store, fmt, FIXTURES / "vllm_v1.log", **opts)
        assert err.value.field == field and err.value.path.endswith("vllm_v1.log")

    def test_none_options_mean_not_given(self, store):
        stats = import_log(
            store, "vllm-log", FIXTURES / "vllm_v1.log", year=None, start=None, utc_offset=None
        )
        assert stats.samples == 2

    def test_unknown_format(self, store):
        with pytest.raises(ConfigError, match="unknown server log format 'sglang-log'"):
            import_log(store, "sglang-log", FIXTURES / "vllm_v1.log")
