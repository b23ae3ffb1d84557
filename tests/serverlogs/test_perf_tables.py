"""perf_tables and useful_work: bucket averages computed by hand."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agent_eval.serverlogs import (
    CompletionsRow,
    GenerationRow,
    PrefillRow,
    Request,
    Sample,
    perf_tables,
    useful_work,
)
from agent_eval.serverlogs.render import perf_document, render_markdown
from agent_eval.transcript import CallRow, SessionRow

T0 = datetime(2025, 8, 1, 12, 0, 0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def sample(seconds, running, gen, prompt=0.0, source="vllm") -> Sample:
    return Sample(at(seconds), source, prompt_tps=prompt, generation_tps=gen, running=running)


def request(seconds, status=200, method="POST", path="/v1/chat/completions", source="vllm"):
    return Request(at(seconds), source, method, path, status)


# Six 10-second windows closing at +10 … +60 s, running 1,1,2,2,2,3.
SAMPLES = [
    sample(10, 1, gen=40.0, prompt=1000.0),
    sample(20, 1, gen=50.0, prompt=0.0),
    sample(30, 2, gen=60.0, prompt=500.0),
    sample(40, 2, gen=90.0, prompt=0.0),
    sample(50, 2, gen=75.0, prompt=0.0),
    sample(60, 3, gen=120.0, prompt=300.0),
]
REQUESTS = [
    request(5),  # window 1 (running 1)
    request(10),  # a window's end is inside it
    request(12),  # window 2 (running 1)
    request(25),  # running 2
    request(30, status=400),  # not a completion
    request(35, method="GET", path="/v1/models"),  # not a completion
    request(50),  # running 2
    request(55),  # running 3
    request(0),  # a window's start is outside it: unwindowed
    request(61),  # after the last window: unwindowed
    request(15, source="other-server"),  # no window of its source: unwindowed
]


@pytest.fixture
def tables():
    return perf_tables(SAMPLES, REQUESTS)


def test_generation_by_concurrency(tables):
    assert tables.generation == (
        GenerationRow(1, 2, average_tps=45.0, median_tps=45.0, peak_tps=50.0, per_request_tps=45.0),
        GenerationRow(2, 3, average_tps=75.0, median_tps=75.0, peak_tps=90.0, per_request_tps=37.5),
        GenerationRow(
            3, 1, average_tps=120.0, median_tps=120.0, peak_tps=120.0, per_request_tps=40.0
        ),
    )


def test_prefill_sustained_and_active_only(tables):
    assert tables.prefill == (
        PrefillRow(1, 2, sustained_tps=500.0, active_samples=1, active_tps=1000.0),
        PrefillRow(2, 3, sustained_tps=pytest.approx(500 / 3), active_samples=1, active_tps=500.0),
        PrefillRow(3, 1, sustained_tps=300.0, active_samples=1, active_tps=300.0),
    )


def test_completions_per_minute_by_concurrency(tables):
    assert tables.throughput == (
        CompletionsRow(
            1,
            windows=2,
            minutes=pytest.approx(20 / 60),
            completions=3,
            per_minute=pytest.approx(9.0),
        ),
        CompletionsRow(2, windows=3, minutes=0.5, completions=2, per_minute=4.0),
        CompletionsRow(
            3,
            windows=1,
            minutes=pytest.approx(10 / 60),
            completions=1,
            per_minute=pytest.approx(6.0),
        ),
    )


def test_totals_and_span(tables):
    assert (tables.samples, tables.requests, tables.completions, tables.unwindowed) == (6, 11, 9, 3)
    assert (tables.first_ts, tables.last_ts) == (at(0), at(61))


def test_median_of_an_even_bucket_is_the_mean_of_the_middle_two():
    got = perf_tables(
        [sample(10, 4, 10.0), sample(20, 4, 20.0), sample(30, 4, 60.0), sample(40, 4, 100.0)], []
    )
    (row,) = got.generation
    assert (row.average_tps, row.median_tps, row.peak_tps, row.per_request_tps) == (
        47.5,
        40.0,
        100.0,
        11.875,
    )


def test_idle_bucket_has_no_per_request_rate_and_no_active_prefill():
    got = perf_tables([sample(10, 0, 0.0)], [])
    assert got.generation[0].per_request_tps is None
    assert got.prefill[0] == PrefillRow(0, 1, sustained_tps=0.0, active_samples=0, active_tps=None)


def test_window_starts_at_the_previous_sample_when_lines_are_closer_than_window_s():
    got = perf_tables([sample(10, 1, 1.0), sample(14, 1, 1.0)], [request(12)])
    (row,) = got.throughput
    assert (row.minutes, row.completions) == (pytest.approx(14 / 60), 1)


def test_sources_get_their_own_windows():
    got = perf_tables(
        [sample(10, 1, 10.0, source="a"), sample(12, 2, 30.0, source="b")],
        [request(5, source="a"), request(5, source="b")],
    )
    assert [(r.running, r.minutes, r.completions) for r in got.throughput] == [
        (1, pytest.approx(10 / 60), 1),
        (2, pytest.approx(10 / 60), 1),
    ]


def test_window_length_is_configurable():
    got = perf_tables([sample(60, 1, 10.0)], [request(15)], window_s=60)
    assert (got.throughput[0].minutes, got.throughput[0].per_minute) == (1.0, 1.0)


def test_empty_input_gives_empty_tables():
    got = perf_tables([], [])
    assert (got.generation, got.prefill, got.throughput) == ((), (), ())
    assert (got.samples, got.requests, got.completions, got.unwindowed) == (0, 0, 0, 0)
    assert (got.first_ts, got.last_ts, got.sources) == (None, None, ())
    assert "(no samples)" in render_markdown(got)


def test_requests_without_samples_are_all_unwindowed():
    got = perf_tables([], [request(5), request(6)])
    assert (got.completions, got.unwindowed, got.throughput) == (2, 2, ())


def _session(id, *, completed=False, required=3, status="completed"):
    return SessionRow(
        id=id, run_id=1, target="m", scenario="s", repeat=0, status=status, error=None,
        parent_id=None, tags=(), handshake_required=required, handshake_done=3 if completed else 1,
        handshake_completed=completed, handshake_missed_step=None, n_turns=1, n_messages=2,
        n_calls=1, started_at=None, finished_at=None,
    )  # fmt: skip


def _call(session_id, index, decision):
    return CallRow(
        session_id=session_id, run_id=1, target="m", scenario="s", index=index, turn_index=index,
        tool="bash", decision=decision, primary=None if decision == "allow" else "AE301",
        next_action=None,
    )  # fmt: skip


def test_useful_work_beside_speed_over_a_run_window():
    sessions = [
        _session(1, completed=True),
        _session(2, completed=False),
        _session(3, completed=True, required=0),  # no handshake asked: not counted
        _session(4, completed=True, status="error"),  # harness fault: excluded
    ]
    calls = [_call(1, 0, "allow"), _call(1, 1, "allow"), _call(2, 0, "deny"), _call(2, 1, "allow")]
    calls += [_call(3, 0, "allow"), _call(4, 0, "allow"), _call(4, 1, "deny")]
    work = useful_work(calls, sessions, SAMPLES, REQUESTS, start=at(0), end=at(120))
    assert (work.minutes, work.allowed_calls, work.denied_calls) == (2.0, 4, 1)
    assert (work.allowed_per_min, work.denied_per_min) == (2.0, 0.5)
    assert (work.handshakes_completed, work.handshakes_per_hour) == (1, 30.0)
    # every 200 chat completion in [start, end], whatever its source (perf filters by --source)
    assert (work.completions, work.completions_per_min) == (9, 4.5)
    # busy windows only: (40+50+60+90+75+120)/6
    assert work.generation_tps == pytest.approx(72.5)


def test_server_lines_just_after_the_run_count_up_to_reach_but_rates_stay_per_run_minute():
    late = [Request(at(125), "a", "POST", "/v1/chat/completions", 200)]
    plain = useful_work([], [], [], late, start=at(0), end=at(120))
    reached = useful_work([], [], [], late, start=at(0), end=at(120), reach=at(130))
    assert plain.completions == 0
    assert (reached.completions, reached.completions_per_min) == (1, 0.5)


def test_useful_work_of_an_empty_window_has_no_rates():
    work = useful_work([], [], [], [], start=at(0), end=at(0))
    assert (work.allowed_per_min, work.handshakes_per_hour, work.generation_tps) == (
        None,
        None,
        None,
    )


def test_perf_document_is_plain_json_data(tables):
    import json

    doc = json.loads(json.dumps(perf_document(tables, scope="since x")))
    assert doc["generation"][1] == {
        "running": 2, "samples": 3, "average_tps": 75.0, "median_tps": 75.0,
        "peak_tps": 90.0, "per_request_tps": 37.5,
    }  # fmt: skip
    assert doc["completions_per_minute"][1]["per_minute"] == 4.0
    assert doc["first_ts"] == "2025-08-01 12:00:00" and doc["useful_work"] is None


def test_markdown_shows_each_table_with_its_rows(tables):
    text = render_markdown(tables)
    assert "| 2 | 3 | 75.0 | 75.0 | 90.0 | 37.5 |" in text
    assert "| 2 | 3 | 166.7 | 1 | 500.0 |" in text
    assert "| 1 | 2 | 0.33 | 3 | 9.00 |" in text


def test_sources_that_contributed_are_listed(tables):
    assert tables.sources == ("other-server", "vllm")
    assert "sources: other-server, vllm." in render_markdown(tables)
