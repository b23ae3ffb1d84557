"""Runs, sessions and calls built by hand for the tests: the one place that knows how to
fill a store without playing a run.

:func:`add_run` stores a run the way the tests build one by hand (created, its targets
added, its sessions stored, its status set); :func:`judged_bash` is a bash call with the
verdict the engine gives it under an allow-list; :func:`allowed`, :func:`denied` and
:func:`session` make the records of the store tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

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


def judged_bash(index: int, turn: int, command: str, allowlist: Any, *, output: str = "ok",
                extra: Mapping[str, Any] | None = None, **kw: Any) -> CallRecord:
    """A bash call ``{"command": command, **extra}`` with the verdict the engine gives it
    under ``allowlist``, as the live orchestrator stores it; ``kw``: other CallRecord
    fields (``child_key`` ...)."""
    from agent_eval.policy import check_call

    arguments = json.dumps({"command": command, **(extra or {})})
    verdict = check_call("bash", arguments, allowlist)
    return CallRecord(
        index=index, turn_index=turn, tool="bash", arguments=arguments,
        decision=verdict.decision, primary=verdict.primary,
        findings=[FindingRecord(f.code, f.message, f.start, f.end) for f in verdict.findings],
        command=command, output=output, **kw)


LOOPBACK = "http://127.0.0.1:1/v1"  # a base URL nothing answers on: a run built by hand


def add_run(store: Any, sessions: Sequence[SessionRecord] = (), *, label: str | None = "nightly",
            kind: str = "live", suite: str | None = None, config: dict | None = None,
            fingerprint: dict | None = None,
            targets: Sequence[str] | Mapping[str, str] | None = None,
            base_url: str = LOOPBACK, settings: dict | None = None,
            status: str | None = None, **run: Any) -> int:
    """A run stored by hand; its id.  ``targets``: the target names (each served by a
    model of its own name), or a mapping of name to model; by default the targets of
    ``sessions`` in the order they first appear.  ``sessions`` are stored in one batch
    (parents before their children); ``status`` is set last when given.  ``run``: the
    other arguments of ``Store.create_run`` (``parent_run_id`` ...)."""
    run_id = store.create_run(label=label, kind=kind, suite=suite, config=config or {},
                              fingerprint=fingerprint or {}, **run)
    if targets is None:
        targets = list(dict.fromkeys(s.target for s in sessions))
    models = targets if isinstance(targets, Mapping) else {name: name for name in targets}
    for name, model in models.items():
        store.add_target(run_id, name=name, model=model, base_url=base_url,
                         settings=dict(settings or {}))
    if sessions:
        store.record_sessions(run_id, list(sessions))
    if status is not None:
        store.set_run_status(run_id, status)
    return run_id
