"""Server samples read back from the store, and the time window of a run to join them with.

The store keeps timezone-aware UTC; log times are naive (as the server printed them, see
``importing``), so everything here is turned into naive UTC before it is compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from agent_eval.serverlogs.records import Request, Sample
from agent_eval.transcript import SessionRow


def naive_utc(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def run_window(kind: str, created_at: datetime, finished_at: datetime | None,
               sessions: Iterable[SessionRow]) -> tuple[datetime, datetime] | None:
    """The time a run's sessions were played, as naive UTC; ``None`` when unknown.

    A live run spans created..finished (an unfinished one ends at its last finished
    session).  Imported and rescored runs were created long after their sessions ran, so
    their window is the sessions' own: first start to last finish.
    """
    sessions = list(sessions)
    starts = [s.started_at for s in sessions if s.started_at is not None]
    ends = [s.finished_at for s in sessions if s.finished_at is not None]
    if kind != "live":
        if not starts or not ends:
            return None
        return naive_utc(min(starts)), naive_utc(max(ends))
    end = finished_at if finished_at is not None else (max(ends) if ends else None)
    if end is None:
        return None
    return naive_utc(created_at), naive_utc(end)


def samples_from_rows(rows: Iterable[dict]) -> list[Sample]:
    """Stored ``server_samples`` rows as the records ``perf_tables`` reads."""
    return [
        Sample(
            ts=naive_utc(r["ts"]),
            source=r["source"],
            prompt_tps=r["prompt_tps"] or 0.0,
            generation_tps=r["generation_tps"] or 0.0,
            running=r["running"] or 0,
            waiting=r.get("waiting"),
            swapped=r.get("swapped"),
            kv_cache_pct=r.get("kv_cache_pct"),
            prefix_hit_pct=r.get("prefix_hit_pct"),
        )
        for r in rows
    ]


def requests_from_rows(rows: Iterable[dict]) -> list[Request]:
    """Stored ``server_requests`` rows as :class:`Request` records."""
    return [
        Request(
            ts=naive_utc(r["ts"]),
            source=r["source"],
            method=r["method"],
            path=r["path"],
            status=r["status"],
            duration_s=r.get("duration_s"),
        )
        for r in rows
    ]
