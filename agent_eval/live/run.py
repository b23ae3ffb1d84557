"""Runs: targets × scenarios × repeats, played concurrently and streamed into the store.

A run is planned from its config (suite, targets, repeats) and recorded in the store
before any session starts (:func:`start_run`).  :func:`play_run` plays it under its lease
through the run recorder (``recorder.py``), which owns the run's status and hands each
finished session (with its children) to the run's one writer thread: it is stored within
a fraction of a second, batched with the sessions that ended meanwhile.  An interrupted
run (Ctrl-C, a dead server) keeps every finished session; ``play_run(resume=True)``
plays only the sessions whose keys are not stored yet.  ``loop.play_items`` is the one
session-playing loop (``loop.py``) with :func:`session_player`: ``run`` and
``--resume`` feed it a plan in memory (:class:`PlannedItems`), workers the items they
claim from the store (``workers.py``), ``replay`` its stored contexts.

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
from collections import deque
from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval import __version__
from agent_eval.errors import ConfigError, HarnessFault, RequestRejected
from agent_eval.live.client import REJECTED, ModelClient, Target, target_from_settings
from agent_eval.live.loop import play_items
from agent_eval.live.orchestrator import (
    CONTEXT_FULL,
    CONTEXT_FULL_WRITING,
    TRUNCATED,
    run_session,
)
from agent_eval.live.stackprint import STACK_KEY, stack_fingerprint
from agent_eval.live.targets import TOOL_CHOICE_MODES
from agent_eval.policy import ENGINE_VERSION
from agent_eval.runs import RunRecorder, RunSpec, RunWriter
from agent_eval.scenario import LoadedScenario, Suite, load_suite
from agent_eval.scenario.bundled import load_policy
from agent_eval.scenario.select import limit_scenarios, select_scenarios
from agent_eval.store import RunStatus, Store
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
    truncated: int = 0  # error sessions a reply cut by max_tokens inside a tool call ended
    server_gone: bool = False  # its server stopped answering mid-run
    first: list[str | None] = field(default_factory=list)  # rejections of the first sessions
    n_first: int = 0  # how many first sessions decide (FIRST_SESSIONS, or fewer planned)


@dataclass
class RunTally:
    """Running totals for the progress bar and the closing line; model rates exclude
    error sessions."""

    planned: int = 0
    done: int = 0  # planned sessions played and stored
    stored: int = 0  # sessions stored: ``done`` and the children they spawned
    targets: dict[str, TargetTally] = field(default_factory=dict)
    # what is under way, for the progress line: sessions started and not yet stored,
    # requests sent and not yet answered (one per turn), and the completion tokens the
    # servers reported so far (tokens/s where the server reports usage)
    sessions_in_flight: int = 0
    requests_in_flight: int = 0
    completion_tokens: int = 0

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.targets.values())

    @property
    def errors(self) -> int:
        return sum(t.errors for t in self.targets.values())

    @property
    def left(self) -> int:
        return sum(t.left for t in self.targets.values())

    @property
    def server_gone(self) -> str | None:
        """The first target whose server stopped answering, if any."""
        return next((name for name, t in self.targets.items() if t.server_gone), None)

    @property
    def stopped(self) -> str | None:
        """The first stop line (a target whose first sessions were all refused alike)."""
        return next((t.stopped for t in self.targets.values() if t.stopped), None)

    def target(self, name: str, n_first: int = 0) -> TargetTally:
        tally = self.targets.setdefault(name, TargetTally())
        tally.n_first = max(tally.n_first, min(FIRST_SESSIONS, n_first))
        return tally

    def add(self, records: list[SessionRecord]) -> bool:
        """Count one stored session (and its children); True when it was the last of its
        target's first sessions and they were all refused the same way (the target
        stops, ``stopped`` says why)."""
        self.done += 1
        self.stored += len(records)
        for rec in records:
            tally = self.targets.setdefault(rec.target, TargetTally())
            if rec.status == "error":
                tally.error_sessions += rec.parent_key is None
                tally.truncated += (rec.error or "").startswith(TRUNCATED)
                tally.first_error = tally.first_error or rec.error
                continue
            tally.sessions += rec.parent_key is None
            tally.context_full += (rec.error or "").startswith((CONTEXT_FULL,
                                                                CONTEXT_FULL_WRITING))
            tally.calls += len(rec.calls)
            tally.errors += sum(c.decision == "deny" for c in rec.calls)
        tally = self.targets[records[0].target]
        if len(tally.first) >= tally.n_first:
            return False
        tally.first.append(_rejection(records[0]))
        first = tally.first
        if len(first) == tally.n_first and first[0] and first.count(first[0]) == len(first):
            tally.stopped = stop_line(records[0].target, len(first), first[0])
            return True
        return False


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
             done: AbstractSet[str] = frozenset()) -> list[WorkItem]:
    """Every (target, scenario, repeat) whose session is not stored yet, interleaved by
    repeat so an interrupted run has an even sample."""
    return [
        WorkItem(t, sc, r)
        for r in range(repeats)
        for sc in suite.top_level()
        for t in targets
        if f"{t.name}/{sc.name}/{r}" not in done
    ]


def run_config(suite: Suite, targets: list[Target], repeats: int,
               policy: dict[str, str | None] | None = None,
               sequential: dict[str, Any] | None = None) -> dict[str, Any]:
    """What ``--resume`` needs to replay the plan.  Holds no API key (env var names only).
    ``policy`` is ``run --allowlist``'s file and ``--agent`` (None: the suite's own);
    ``sequential`` a ``run --until-decided`` run's plan (``metrics.sequential``), whose
    ``repeats`` are then the first batch's."""
    extra = {} if sequential is None else {"sequential": sequential}
    return {**extra,
        "suite": str(suite.path),
        "policy": policy,
        # the selection (run --scenario/--tag/--exclude/--limit), so --resume keeps to it
        "scenarios": sorted(sc.name for sc in suite.top_level()),
        "repeats": repeats,
        "targets": [t.settings() for t in targets],
        # run --max-turns/--max-tool-calls over the suite's own limits (None: the suite's)
        "limits": suite.limits,
    }


def run_fingerprint(suite: Suite, targets: list[Target], server_models: dict[str, Any],
                    identities: dict[str, Any] | None = None) -> dict[str, Any]:
    """What makes two runs comparable: same suite, policies, engine, server and sampling;
    and each target's serving stack (``stackprint.py``; ``identities``: what each server
    said of itself, by target)."""
    allowlists = sorted({sc.allowlist.fingerprint for sc in suite.scenarios.values()})
    identities = identities or {}
    return {
        "suite": suite.fingerprint,
        "allowlists": allowlists,
        "engine_version": ENGINE_VERSION,
        "agent_eval_version": __version__,
        "server_models": server_models,
        "sampling": {t.name: t.settings().get("sampling") for t in targets},
        STACK_KEY: {t.name: stack_fingerprint(t, identities.get(t.name),
                                              server_models.get(t.name)) for t in targets},
    }


async def probe_identities(targets: list[Target], client_factory: ClientFactory = ModelClient
                           ) -> dict[str, Any]:
    """What each target's server says of itself (``ModelClient.server_identity``); a
    client without that method (a test double) says nothing."""
    out: dict[str, Any] = {}
    for target in targets:
        client = client_factory(target)
        try:
            ask = getattr(client, "server_identity", None)
            out[target.name] = await ask() if ask is not None else {}
        finally:
            await client.aclose()
    return out


async def probe_targets(targets: list[Target], client_factory: ClientFactory = ModelClient
                        ) -> dict[str, Any]:
    """Each target's ``/v1/models`` answer; ``ServerUnreachable`` when one is down."""
    for target in targets:
        root = endpoint_root(target.base_url)
        if root is not None:
            raise ConfigError(f"{target.base_url} is an endpoint, not the API's root: "
                              f"agent-eval adds /chat/completions itself; try --base-url {root}",
                              field="base_url")
    answers: dict[str, Any] = {}
    for target in targets:
        client = client_factory(target)
        try:
            answers[target.name] = await client.list_models()
            await _check_model_served(client, target, served_model_ids(answers[target.name]))
        except RequestRejected as exc:
            if exc.status == 404 and not target.base_url.rstrip("/").endswith("/v1"):
                raise ConfigError(not_found_line(target.base_url, exc.server_message),
                                  field="base_url") from None
            raise
        finally:
            await client.aclose()
    return answers


# what a base URL copied from a request line ends with; the API root is what precedes it
_ENDPOINTS = ("/chat/completions", "/completions", "/responses", "/messages", "/models",
              "/embeddings")


def endpoint_root(base_url: str) -> str | None:
    """The API root of a base URL pasted with its endpoint (``.../v1/chat/completions``
    gives ``.../v1``); None when it names no endpoint (pure)."""
    url = base_url.rstrip("/")
    for suffix in _ENDPOINTS:
        if url.endswith(suffix):
            return url.removesuffix(suffix)
    return None


def served_model_ids(listing: Any) -> list[str]:
    """The model names in a ``/v1/models`` answer, in the server's order (pure)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    return [m["id"] for m in data or () if isinstance(m, dict) and isinstance(m.get("id"), str)]


def near_models(model: str, served: list[str]) -> list[str]:
    """The served names a mistyped ``model`` most likely meant: the same name in another
    case or without the namespace (``qwen3.5-27b`` for ``Qwen/Qwen3.5-27B``), else the
    closest spellings (pure)."""
    import difflib

    def bare(name: str) -> str:
        return name.rsplit("/", 1)[-1].lower()

    same = [s for s in served if bare(s) == bare(model)]
    if same:
        return same[:1]
    lowered = {s.lower(): s for s in served}
    return [lowered[c] for c in difflib.get_close_matches(model.lower(), list(lowered), n=1,
                                                          cutoff=0.6)]


_MODEL_REFUSED = ("does not exist", "not found", "no such model", "unknown model")


async def _check_model_served(client: Any, target: Target, served: list[str]) -> None:
    """A model name the server does not list is tried with one one-token request before
    the run is recorded: a server that refuses it (vLLM, Ollama, SGLang) stops the run
    here with the served names, nothing stored; one that answers any name (llama-server
    lists its file name) plays on."""
    if not served or target.model in served or not hasattr(client, "try_model"):
        return
    try:
        await client.try_model()
    except RequestRejected as exc:
        said = exc.server_message.lower()
        if exc.status == 404 or any(w in said for w in _MODEL_REFUSED):
            raise ConfigError(unknown_model_line(target, served), field="model") from None
    except HarnessFault:
        return  # not about the name: the sessions meet it and say so


def unknown_model_line(target: Target, served: list[str]) -> str:
    """One line: the model is not served, the closest served name, every served name."""
    near = near_models(target.model, served)
    hint = f"did you mean {near[0]!r}? " if near else ""
    shown = ", ".join(served[:12]) + (f" and {len(served) - 12} more" if len(served) > 12 else "")
    return (f"{target.model!r} is not served at {target.base_url} (target {target.name!r}); "
            f"{hint}served: {shown} (its /v1/models)")


def not_found_line(base_url: str, server_message: str) -> str:
    """What a 404 on ``/models`` under a base URL without ``/v1`` most often means."""
    url = base_url.rstrip("/")
    said = "" if server_message.strip().lower() in ("not found", "404: not found") else \
        f" ({server_message})"
    return (f"{url}/models answered 404 Not Found{said}: OpenAI-compatible servers answer "
            f"under /v1; try --base-url {url}/v1")


def start_run(store: Store, suite: Suite, targets: list[Target], repeats: int, *,
              label: str | None, server_models: dict[str, Any],
              policy: dict[str, str | None] | None = None,
              identities: dict[str, Any] | None = None,
              sequential: dict[str, Any] | None = None) -> int:
    """Record a new run and its targets; returns the run id."""
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise ConfigError(f"target names must be unique, got {names}", field="targets")
    for t in targets:
        _check_named_tool_choice(t, suite)
    run = RunWriter(store, RunSpec(
        kind="live", label=label, suite=str(suite.path),
        config=run_config(suite, targets, repeats, policy, sequential),
        fingerprint=run_fingerprint(suite, targets, server_models, identities),
    ))
    run_id = run.create()
    for t in targets:
        run.add_target(name=t.name, model=t.model, base_url=t.base_url, settings=t.settings())
    return run_id


def record_new_run(store: Store, suite: Suite, targets: list[Target], repeats: int, *,
                   label: str | None, client_factory: ClientFactory = ModelClient,
                   policy: dict[str, str | None] | None = None,
                   sequential: dict[str, Any] | None = None) -> int:
    """Probe every target's server (``ServerUnreachable`` when one is down: nothing is
    recorded) and record the new run (:func:`start_run`); returns its id."""
    server_models = asyncio.run(probe_targets(targets, client_factory))
    identities = asyncio.run(probe_identities(targets, client_factory))
    return start_run(store, suite, targets, repeats, label=label, server_models=server_models,
                     policy=policy, identities=identities, sequential=sequential)


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
        policy = config.get("policy")  # run --allowlist, replacing the suite's
        suite = load_suite(suite_path or Path(config["suite"]),
                           load_policy(policy["allowlist"], policy.get("agent"))
                           if policy else None)
        if config.get("scenarios"):  # runs stored before selection have no such key
            suite = select_scenarios(suite, include=list(config["scenarios"]))
        if config.get("limits"):
            suite = limit_scenarios(suite, turns=config["limits"].get("turns"),
                                    tool_calls=config["limits"].get("tool_calls"))
        targets = [target_from_settings(s) for s in config["targets"]]
        repeats = int(config["repeats"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"run {info.id} has no resumable config ({exc})",
                          field="--resume") from None
    return info.id, suite, targets, repeats


class PlannedItems:
    """A run's items, in memory, one queue per target (``run``, ``--resume``)."""

    def __init__(self, items: list[WorkItem]) -> None:
        self.queues: dict[str, deque[WorkItem]] = {}
        for item in items:
            self.queues.setdefault(item.target.name, deque()).append(item)
        self.stopped: set[str] = set()

    async def take(self, lane: str | None) -> WorkItem | None:
        queue = self.queues.get(lane or "")
        if not queue or lane in self.stopped:
            return None
        return queue.popleft()

    async def give_back(self, item: WorkItem) -> None:
        self.queues[item.target.name].appendleft(item)

    def stop(self, item: WorkItem) -> None:
        self.stopped.add(item.target.name)


def session_player(suite: Suite, clients: dict[str, Any], tally: RunTally
                   ) -> Callable[[WorkItem], Awaitable[list[SessionRecord] | None]]:
    """What playing a work item means for ``run``, ``--resume`` and ``worker``: its
    scenario's session, with its children.  A session that ended ``error`` (or spawned a
    child that did) is only kept while its server still answers ``/v1/models``;
    otherwise None (the loop gives the item back) and the target is marked
    ``server_gone``."""

    async def play(item: WorkItem) -> list[SessionRecord] | None:
        name = item.target.name
        client = clients[name]
        tally.sessions_in_flight += 1
        try:
            records = await run_session(item.scenario, CountingClient(client, tally),
                                        target=name, suite=suite, repeat=item.repeat,
                                        key=item.key)
        finally:
            tally.sessions_in_flight -= 1
        target = tally.target(name)
        if _any_error(records) and (target.server_gone or not await _answers(client)):
            target.server_gone = True
            return None
        return records

    return play


class CountingClient:
    """A model client that counts, in the run's tally, the requests in flight and the
    completion tokens the server reported; everything else goes to the client."""

    def __init__(self, client: Any, tally: RunTally) -> None:
        self._client, self._tally = client, tally

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        self._tally.requests_in_flight += 1
        try:
            reply = await self._client.complete(*args, **kwargs)
        finally:
            self._tally.requests_in_flight -= 1
        self._tally.completion_tokens += getattr(reply, "completion_tokens", None) or 0
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def session_counter(tally: RunTally,
                    on_session: Callable[[RunTally, list[SessionRecord]], None] | None
                    ) -> Callable[[WorkItem, list[SessionRecord]], bool]:
    """Counts each stored session in ``tally`` (True: its target's first sessions were
    all refused alike, it stops) and tells ``on_session``."""

    def after(_item: WorkItem, records: list[SessionRecord]) -> bool:
        stop = tally.add(records)
        if on_session:
            on_session(tally, records)
        return stop

    return after


async def execute_run(recorder: RunRecorder, items: list[WorkItem], suite: Suite, *,
                      tally: RunTally | None = None,
                      on_session: Callable[[RunTally, list[SessionRecord]], None] | None = None,
                      client_factory: ClientFactory = ModelClient) -> RunTally:
    """Play ``items`` with each target's concurrency into the recorder's run (started).

    The list is taken over: emptied once its items are queued, so an item played is
    not kept (a run's memory is flat in the sessions it played).  Returns the tally;
    ``tally.left`` counts sessions not played (or not kept) because their server went
    away or their target stopped.
    """
    tally = tally or RunTally()
    tally.planned += len(items)
    source = PlannedItems(items)
    targets = {item.target.name: item.target for item in items}
    items.clear()
    for name, queue in source.queues.items():
        tally.target(name, len(queue))
    clients = {name: client_factory(t) for name, t in targets.items()}
    try:
        await play_items(source, recorder, {name: t.concurrency for name, t in targets.items()},
                         session_player(suite, clients, tally), session_counter(tally, on_session))
    finally:
        for name, queue in source.queues.items():
            tally.targets[name].left += len(queue)
        for client in clients.values():
            await client.aclose()
    return tally


def play_run(store: Store, run_id: int, suite: Suite, targets: list[Target], repeats: int,
             *, resume: bool = False, tally: RunTally | None = None,
             on_start: Callable[[int], None] | None = None,
             on_session: Callable[[RunTally, list[SessionRecord]], None] | None = None,
             client_factory: ClientFactory = ModelClient, batch: bool = False) -> RunTally:
    """Play run ``run_id`` in this process, under its lease: every planned session not
    stored yet (all of them for a new run; with ``resume``, the servers are probed first).
    ``on_start(n)`` hears how many sessions will be played, once the lease is held.  The
    run ends ``finished``, or ``interrupted`` when sessions were left (Ctrl-C raises
    ``KeyboardInterrupt`` after marking it so; ``--resume`` finishes it).  A ``batch`` of
    a sequential run (``live/sequential.py``) leaves a run played whole ``running``: its
    look decides whether it finishes."""
    tally = tally if tally is not None else RunTally()
    recorder = RunRecorder(store, run_id)
    with recorder.claim():  # before planning: a second --resume is refused, naming us
        items = plan_run(suite, targets, repeats, store.finished_keys(run_id) if resume
                         else frozenset())
        if on_start is not None:
            on_start(len(items))
        if resume and items:
            asyncio.run(probe_targets(targets, client_factory))
        done: RunStatus | None = None if batch else "finished"
        with recorder.recording(lambda: "interrupted" if tally.left else done):
            asyncio.run(execute_run(recorder, items, suite, tally=tally,
                                    on_session=on_session, client_factory=client_factory))
    return tally


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
