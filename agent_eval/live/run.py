"""Runs: targets × scenarios × repeats, played concurrently and streamed into the store.

A run is planned from its config (suite, targets, repeats), recorded in the store before
any session starts, and each finished session (with its children) is written in one
transaction as soon as it ends, so nothing finished is ever held only in memory.  An
interrupted run (Ctrl-C, a dead server) keeps every finished session; ``resume_run``
plays only the sessions whose keys are not stored yet.

A request the server refuses the same way every time is not the model's fault either,
and playing on would only store a run of identical ``error`` sessions: when a target's
first sessions (:data:`FIRST_SESSIONS`) all fail with the same rejection
(``client.REJECTED``), the target stops, its other sessions are left unplayed and
``TargetTally.stopped`` holds one line quoting the server and the likely fix.

A server that dies is not the model's fault: after every session that ended ``error``,
or spawned a child that did, the target's server is probed (``/v1/models``) before the
session is stored.  If the server still
answers, the error session is stored (a fault of that request, excluded from model
rates); if it no longer answers, that session is not stored and the target's remaining
sessions are left unplayed (the run ends ``interrupted``), so ``--resume`` plays them
all once the server is back instead of them being burned as error sessions.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval import __version__
from agent_eval.errors import ConfigError, HarnessFault
from agent_eval.live.client import REJECTED, ModelClient, Target, target_from_settings
from agent_eval.live.orchestrator import CONTEXT_FULL, CONTEXT_FULL_WRITING, run_session
from agent_eval.live.targets import TOOL_CHOICE_MODES
from agent_eval.policy import ENGINE_VERSION
from agent_eval.scenario import LoadedScenario, Suite, load_suite
from agent_eval.scenario.select import select_scenarios
from agent_eval.store import Store
from agent_eval.transcript import SessionRecord


@dataclass(frozen=True)
class WorkItem:
    target: Target
    scenario: LoadedScenario
    repeat: int

    @property
    def key(self) -> str:
        return f"{self.target.name}/{self.scenario.name}/{self.repeat}"


@dataclass
class TargetTally:
    sessions: int = 0
    error_sessions: int = 0
    calls: int = 0
    errors: int = 0
    left: int = 0  # planned but not played (server gone, interrupted, target stopped)
    stopped: str | None = None  # why the target was stopped early (one line)
    first_error: str | None = None  # the first error session's reason
    context_full: int = 0  # sessions the server's context window ended (stalled, not error)


@dataclass
class RunTally:
    """Running totals for the progress bar and the closing line; model rates exclude
    error sessions."""

    planned: int = 0
    done: int = 0
    targets: dict[str, TargetTally] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.targets.values())

    @property
    def errors(self) -> int:
        return sum(t.errors for t in self.targets.values())

    @property
    def left(self) -> int:
        return sum(t.left for t in self.targets.values())

    def add(self, records: list[SessionRecord]) -> None:
        self.done += 1
        for rec in records:
            tally = self.targets.setdefault(rec.target, TargetTally())
            if rec.status == "error":
                tally.error_sessions += rec.parent_key is None
                tally.first_error = tally.first_error or rec.error
                continue
            tally.sessions += rec.parent_key is None
            tally.context_full += (rec.error or "").startswith((CONTEXT_FULL,
                                                                CONTEXT_FULL_WRITING))
            tally.calls += len(rec.calls)
            tally.errors += sum(c.decision == "deny" for c in rec.calls)


ClientFactory = Callable[[Target], Any]

FIRST_SESSIONS = 3  # a target whose first sessions all hit one request rejection stops

# (words in the server's message, likely fix); the first match wins.  Lower case.
_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("enable-auto-tool-choice", "tool-call-parser", "tool choice", "tool_choice"),
     "start vLLM with --enable-auto-tool-choice --tool-call-parser PARSER, or set the "
     "target's tool_choice to what the server supports (docs/servers.md)"),
    (("context length", "context window", "n_ctx", "maximum context", "too long", "exceed"),
     "lower --max-tokens, or start the server with a longer context (llama.cpp -c, "
     "vLLM --max-model-len)"),
    (("does not exist", "model not found", "no such model", "unknown model"),
     "give --model as the server's /v1/models lists it"),
    (("jinja", "template"),
     "the chat template failed: start llama-server with --jinja, or give the server a "
     "chat template that supports tools"),
    (("unauthorized", "api key", "authentication", "forbidden"),
     "set --api-key-env to the variable that holds the server's key"),
    (("content", "tool_calls", "messages"),
     "the server refuses the conversation's shape; docs/servers.md lists what each server "
     "accepts (report the message if agent-eval is up to date)"),
)


def likely_fix(server_message: str) -> str:
    """The most likely fix for a request the server refuses, from its message (pure)."""
    text = server_message.lower()
    for words, fix in _FIXES:
        if any(w in text for w in words):
            return fix
    return "check the server's launch flags for tool calling (docs/servers.md)"


def stop_line(target: str, sessions: int, error: str) -> str:
    """One line: why the target stopped, in the server's words, and what to do."""
    said = "".join(c if c.isprintable() else repr(c)[1:-1] for c in error.removeprefix(REJECTED))
    return (f"target {target!r} stopped: its first {sessions} session"
            f"{'s' if sessions > 1 else ''} all failed the same way, {said} "
            f"Likely fix: {likely_fix(said)}.")


_ATTEMPTS = re.compile(r" \((?:after|the same answer on) \d+ attempts?\)")


def _rejection(record: SessionRecord) -> str | None:
    """The session's refusal with the attempt count left out, so refusals compare equal."""
    if record.status == "error" and (record.error or "").startswith(REJECTED):
        return _ATTEMPTS.sub("", record.error or "")
    return None


def plan_run(suite: Suite, targets: list[Target], repeats: int,
             done: set[str] = frozenset()) -> list[WorkItem]:
    """Every (target, scenario, repeat) whose session is not stored yet, interleaved by
    repeat so an interrupted run has an even sample."""
    return [
        WorkItem(t, sc, r)
        for r in range(repeats)
        for sc in suite.top_level()
        for t in targets
        if f"{t.name}/{sc.name}/{r}" not in done
    ]


def run_config(suite: Suite, targets: list[Target], repeats: int) -> dict[str, Any]:
    """What ``--resume`` needs to replay the plan.  Holds no API key (env var names only)."""
    return {
        "suite": str(suite.path),
        # the selection (run --scenario/--tag/--exclude/--limit), so --resume keeps to it
        "scenarios": sorted(sc.name for sc in suite.top_level()),
        "repeats": repeats,
        "targets": [t.settings() for t in targets],
    }


def run_fingerprint(suite: Suite, targets: list[Target], server_models: dict[str, Any]
                    ) -> dict[str, Any]:
    """What makes two runs comparable: same suite, policies, engine, server and sampling."""
    allowlists = sorted({sc.allowlist.fingerprint for sc in suite.scenarios.values()})
    return {
        "suite": suite.fingerprint,
        "allowlists": allowlists,
        "engine_version": ENGINE_VERSION,
        "agent_eval_version": __version__,
        "server_models": server_models,
        "sampling": {t.name: t.settings().get("sampling") for t in targets},
    }


async def probe_targets(targets: list[Target], client_factory: ClientFactory = ModelClient
                        ) -> dict[str, Any]:
    """Each target's ``/v1/models`` answer; ``ServerUnreachable`` when one is down."""
    answers: dict[str, Any] = {}
    for target in targets:
        client = client_factory(target)
        try:
            answers[target.name] = await client.list_models()
        finally:
            await client.aclose()
    return answers


def start_run(store: Store, suite: Suite, targets: list[Target], repeats: int, *,
              label: str | None, server_models: dict[str, Any]) -> int:
    """Record a new run and its targets; returns the run id."""
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ConfigError(f"target names must be unique, got {names}", field="targets")
    for t in targets:
        _check_named_tool_choice(t, suite)
    run_id = store.create_run(
        label=label, kind="live", suite=str(suite.path),
        config=run_config(suite, targets, repeats),
        fingerprint=run_fingerprint(suite, targets, server_models),
    )
    for t in targets:
        store.add_target(run_id, name=t.name, model=t.model, base_url=t.base_url,
                         settings=t.settings())
    return run_id


def _check_named_tool_choice(target: Target, suite: Suite) -> None:
    """A tool_choice naming a tool must name one every scenario offers, or every request
    of the scenarios that lack it is refused (or forced into a tool they do not have)."""
    choice = target.tool_choice
    if choice is None or choice in TOOL_CHOICE_MODES:
        return
    for sc in suite.scenarios.values():
        offered = [*sc.spec.tools, *(t.name for t in sc.spec.extra_tools)]
        if choice not in offered:
            raise ConfigError(
                f"target {target.name!r} forces the tool {choice!r}, which scenario "
                f"{sc.name!r} does not offer ({', '.join(offered)}); give auto, none, "
                f"required or a tool every scenario offers", field="tool_choice")


def load_run_plan(store: Store, run_ref: str | int, suite_path: Path | None = None
                  ) -> tuple[int, Suite, list[Target], int]:
    """Rebuild (run id, suite, targets, repeats) of a stored live run, for ``--resume``
    and workers; ``suite_path`` replaces the planner's suite folder (another machine)."""
    info = store.resolve_run(run_ref)
    if info.kind != "live":
        raise ConfigError(f"run {info.id} is an {info.kind} run; only live runs resume",
                          field="--resume")
    config = info.config or {}
    try:
        suite = load_suite(suite_path or Path(config["suite"]))
        if config.get("scenarios"):  # runs stored before selection have no such key
            suite = select_scenarios(suite, include=list(config["scenarios"]))
        targets = [target_from_settings(s) for s in config["targets"]]
        repeats = int(config["repeats"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"run {info.id} has no resumable config ({exc})",
                          field="--resume") from None
    return info.id, suite, targets, repeats


async def execute_run(
    store: Store,
    run_id: int,
    items: list[WorkItem],
    suite: Suite,
    *,
    tally: RunTally | None = None,
    on_session: Callable[[RunTally, list[SessionRecord]], None] | None = None,
    client_factory: ClientFactory = ModelClient,
) -> RunTally:
    """Play ``items`` with each target's concurrency, writing every finished session.

    Returns the tally; ``tally.left`` counts sessions not played (or not kept) because
    their server went away.  Cancellation (Ctrl-C) stops cleanly: finished sessions are
    stored, sessions in flight are dropped and replayed by ``--resume``.
    """
    tally = tally or RunTally()
    tally.planned += len(items)
    by_target: dict[str, list[WorkItem]] = {}
    for item in items:
        by_target.setdefault(item.target.name, []).append(item)
        tally.targets.setdefault(item.target.name, TargetTally())
    write = _writer(store, run_id)
    await asyncio.gather(*(
        _play_target(write, queue, suite, tally, on_session, client_factory)
        for queue in by_target.values()
    ))
    return tally


def _writer(store: Store, run_id: int) -> Callable[[list[SessionRecord]], Awaitable[None]]:
    """Store sessions off the event loop: each batch is written in a worker thread, one at
    a time (a lock keeps one writer, as SQLite wants), so a slow commit no longer stalls
    every other session's streaming replies.  A cancelled caller leaves the thread to
    finish its transaction: a session handed to the store is stored whole or not at all."""
    lock = asyncio.Lock()

    async def write(records: list[SessionRecord]) -> None:
        async with lock:
            await asyncio.to_thread(store.record_sessions, run_id, records)

    return write


async def _play_target(write, items: list[WorkItem], suite: Suite,
                       tally: RunTally, on_session, client_factory) -> None:
    target = items[0].target
    client = client_factory(target)
    queue: asyncio.Queue[WorkItem] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    server_gone = False
    first: list[str | None] = []  # the rejection (or None) of each of the first sessions
    n_first = min(FIRST_SESSIONS, len(items))

    async def worker() -> None:
        nonlocal server_gone
        while not server_gone and tally.targets[target.name].stopped is None:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            records = await run_session(
                item.scenario, client, target=target.name, suite=suite,
                repeat=item.repeat, key=item.key,
            )
            if _any_error(records) and (server_gone or not await _answers(client)):
                server_gone = True
                queue.put_nowait(item)  # not stored: --resume plays it again
                return
            await write(records)
            tally.add(records)
            if len(first) < n_first:
                first.append(_rejection(records[0]))
                if len(first) == n_first and first[0] and first.count(first[0]) == n_first:
                    tally.targets[target.name].stopped = stop_line(target.name, n_first, first[0])
            if on_session:
                on_session(tally, records)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, target.concurrency))))
    finally:
        tally.targets[target.name].left += queue.qsize()
        await client.aclose()


def _any_error(records: list[SessionRecord]) -> bool:
    """Whether the session or any child it spawned ended ``error``: a child can fail on a
    dying server while its parent, needing no further reply, still closes."""
    return any(r.status == "error" for r in records)


async def _answers(client: Any) -> bool:
    """Whether the target's server still answers ``/v1/models`` (after its retries)."""
    try:
        await client.list_models()
    except HarnessFault:
        return False
    return True
