"""Runs, sessions and calls built by hand for the tests: the one place that
knows how to fill a store without playing a run."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent_eval.transcript import (
    CallRecord,
    FindingRecord,
    SessionRecord,
    TurnRecord,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ODD_TEXT = 'naïve 🚀 \u202eRTL\u202c tab\there\r\nquote\' "dq" back\\slash ；semicolon'
INJECTION = "'; DROP TABLE sessions; --"


def allowed(index: int, command: str, *, turn: int = 0) -> CallRecord:
    return CallRecord(
        index=index,
        turn_index=turn,
        tool="bash",
        arguments=f'{{"command": {command!r}}}',
        decision="allow",
        command=command,
        script=command.split()[2].removeprefix("scripts/"),
        output='{"rows": 3}',
    )


def denied(index: int, command: str, code: str, *, turn: int = 0, start: int = 0) -> CallRecord:
    return CallRecord(
        index=index,
        turn_index=turn,
        tool="bash",
        arguments=f'{{"command": {command!r}}}',
        decision="deny",
        primary=code,
        findings=[FindingRecord(code, f"{code} in command", start, len(command))],
        command=command,
        output="Denied by policy: run a listed script through `uv run`.",
        next_action="pivot",
    )


def session(key: str, target: str = "qwen-27b", **changes) -> SessionRecord:
    base = SessionRecord(
        key=key,
        target=target,
        scenario="email-search",
        calls=[allowed(0, 'uv run scripts/db_query.py --sql "select 1"')],
        turns=[TurnRecord(index=0, content="ok", latency_s=1.5)],
        messages=[{"role": "user", "content": "find the email"}],
        started_at=T0,
        finished_at=T0 + timedelta(seconds=30),
    )
    return replace(base, **changes)
