"""The window a run's server samples are joined over: live runs span their own life,
imported and rescored runs the time their sessions were really played."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from agent_eval.serverlogs.stored import naive_utc, run_window
from agent_eval.transcript import SessionRow

T0 = datetime(2025, 8, 1, 12, 0, tzinfo=UTC)


def session(start_min: float, end_min: float) -> SessionRow:
    return SessionRow(
        id=1, run_id=1, target="t", scenario="s", repeat=0, status="completed", error=None,
        parent_id=None, tags=(), handshake_required=0, handshake_done=0,
        handshake_completed=False, handshake_missed_step=None, n_turns=1, n_messages=1,
        n_calls=1, started_at=T0 + timedelta(minutes=start_min),
        finished_at=T0 + timedelta(minutes=end_min),
    )


def test_live_run_spans_created_to_finished():
    window = run_window("live", T0, T0 + timedelta(minutes=30), [session(1, 2)])
    assert window == (datetime(2025, 8, 1, 12, 0), datetime(2025, 8, 1, 12, 30))


def test_unfinished_live_run_ends_at_its_last_finished_session():
    window = run_window("live", T0, None, [session(1, 2), session(3, 7)])
    assert window == (datetime(2025, 8, 1, 12, 0), datetime(2025, 8, 1, 12, 7))


def test_imported_run_uses_its_sessions_own_times_not_the_import_time():
    imported_at = T0 + timedelta(days=40)
    window = run_window("import", imported_at, imported_at, [session(5, 9), session(2, 6)])
    assert window == (datetime(2025, 8, 1, 12, 2), datetime(2025, 8, 1, 12, 9))


def test_run_with_nothing_to_go_by_has_no_window():
    assert run_window("live", T0, None, []) is None
    assert run_window("rescore", T0, T0, []) is None


def test_naive_utc_converts_other_zones_and_keeps_naive_times():
    cest = timezone(timedelta(hours=2))
    assert naive_utc(datetime(2025, 8, 1, 14, 0, tzinfo=cest)) == datetime(2025, 8, 1, 12, 0)
    assert naive_utc(datetime(2025, 8, 1, 12, 0)) == datetime(2025, 8, 1, 12, 0)
