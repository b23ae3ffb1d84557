"""Importing the same server log twice stores its samples and requests once."""

from __future__ import annotations

from datetime import UTC, datetime

from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.serverlogs import import_log
from agent_eval.store import open_store

SAMPLE = ("INFO 08-01 12:00:{s:02d} [loggers.py:118] Avg prompt throughput: 512.3 tokens/s, "
          "Avg generation throughput: 88.1 tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
          "GPU KV cache usage: 5.2%, Prefix cache hit rate: 71.3%")
STAMP = "INFO 08-01 12:00:{s:02d} [logger.py:43] Received request chatcmpl-{s}"
COMPLETION = 'INFO:     127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
MODELS = 'INFO:     127.0.0.1:54321 - "GET /v1/models HTTP/1.1" 200 OK'


def write_log(path, completions_at_2s: int) -> None:
    """A sample at 12:00:10 and 12:00:20; at 12:00:02 several completions and a model list
    share one timestamp, as concurrent requests do."""
    lines = [STAMP.format(s=2), *[COMPLETION] * completions_at_2s, MODELS,
             SAMPLE.format(s=10), SAMPLE.format(s=20)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def counts(store) -> tuple[int, int, int]:
    requests = store.server_requests(source="v.log")
    return (len(store.server_samples(source="v.log")), len(requests),
            sum(1 for r in requests if r["path"] == "/v1/chat/completions"))


def test_a_second_import_of_the_same_log_adds_nothing_and_says_so(store, tmp_path):
    log = tmp_path / "v.log"
    write_log(log, completions_at_2s=3)
    first = import_log(store, "vllm-log", log, year=2025)
    second = import_log(store, "vllm-log", log, year=2025)

    assert (first.samples, first.requests, first.already_imported) == (2, 4, 0)
    assert (second.samples, second.requests, second.already_imported) == (0, 0, 6)
    assert counts(store) == (2, 4, 3)


def test_a_longer_log_adds_only_the_surplus_of_lines_sharing_a_timestamp(store, tmp_path):
    log = tmp_path / "v.log"
    write_log(log, completions_at_2s=2)
    import_log(store, "vllm-log", log, year=2025)
    write_log(log, completions_at_2s=5)
    grown = import_log(store, "vllm-log", log, year=2025)

    assert (grown.samples, grown.requests, grown.already_imported) == (0, 3, 5)
    assert counts(store) == (2, 6, 5)


def test_the_same_lines_under_another_source_are_another_server(store, tmp_path):
    log = tmp_path / "v.log"
    write_log(log, completions_at_2s=1)
    import_log(store, "vllm-log", log, year=2025)
    other = import_log(store, "vllm-log", log, year=2025, label="replica-2")

    assert (other.samples, other.requests, other.already_imported) == (2, 2, 0)


def test_the_same_lines_at_another_utc_offset_are_other_times(store, tmp_path):
    log = tmp_path / "v.log"
    write_log(log, completions_at_2s=1)
    import_log(store, "vllm-log", log, year=2025)
    shifted = import_log(store, "vllm-log", log, year=2025, utc_offset="+02:00")

    assert (shifted.samples, shifted.already_imported) == (2, 0)
    assert store.server_samples(source="v.log")[0]["ts"] == datetime(2025, 8, 1, 10, 0, 10, tzinfo=UTC)


def test_the_command_reports_the_skipped_rows_and_perf_counts_stay(tmp_path):
    log, db = tmp_path / "v.log", str(tmp_path / "y.db")
    write_log(log, completions_at_2s=3)
    runner = CliRunner()
    args = ["import", "vllm-log", str(log), "--year", "2025", "--db", db]
    first, second = runner.invoke(main, args), runner.invoke(main, args)

    assert first.exit_code == second.exit_code == 0
    assert "already imported" not in first.output
    assert second.output.strip().endswith("(0 malformed lines); 6 already imported, skipped")
    assert second.output.startswith("imported 0 samples and 0 requests from ")
    with open_store(db) as store:
        assert counts(store) == (2, 4, 3)
