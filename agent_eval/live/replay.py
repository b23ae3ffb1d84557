"""Replay: an earlier run's stored contexts sent to a candidate model, one reply each.

Every stored turn that ended in a tool call (in a session that did not end in a server
fault) and kept its exact request (``TurnRecord.request``, store/requests.py) is a
**context**: the messages before the reply, the tools, ``tool_choice`` and sampling.
``agent-eval replay`` sends each context, as it was, to a candidate model
(``ModelClient.resend``: only ``model``, and any knob the operator overrides, change) and
judges the candidate's reply with the policy engine against the original run's
allow-list.  Single step: the candidate answers one context; its call is not simulated
and the conversation does not go on.

Stored as a run of kind ``replay`` whose ``parent_run_id`` is the original run.  Each
reply is one session of one turn, keyed by the original turn it answers:

    ORIGINAL_SESSION_KEY@turnN               (repeat 0)
    ORIGINAL_SESSION_KEY@turnN/repeatR       (--repeats K, R = 1 .. K-1)

so ``compare ORIGINAL REPLAY`` pairs every reply with the original turn by key alone
(``transcript.replay_key``, analysis/paired_replay.py).  The session keeps the
original's scenario and tags.

**Seeds.**  Repeat 0 sends the original session key in the ``X-Agent-Eval-Seed`` header,
which is exactly what the original turn was sent with (the orchestrator seeds every
turn of a session with its key).  A server that draws from that header (the simulator
seeds each reply from the header, its own ``--seed``, the profile and the number of
messages) therefore answers a replay to the same profile with the same call: replaying
a simulator run against the same profile reproduces the original verdicts.  Repeat R
sends ``KEY#repeatR``: a fresh draw of the same model on the same context, which is what
repeats are for (the candidate's own noise).  Real servers ignore the header.

**Protocols.**  A turn the proxy recorded from OpenAI Responses, Anthropic Messages or
Gemini (the session's ``protocol``) is stored as a chat request like every other and sent
again in its own protocol (``ModelClient.resend``, ``agent_eval.wire``), so a Codex night
replays against a server's ``/v1/responses``, a Claude Code night against
``/v1/messages``; the candidate's reply is judged the same way.

**Order.**  The turns of one session are sent in order, one at a time (repeats of a turn
back to back), sessions of one scenario one after another, spread over ``concurrency``
workers: a server's prefix cache then serves each context's shared prompt from the
previous turn's request (benchmarks/bench_replay.py measures the share).

A context is skipped, and counted, when its request was not kept (imports, sessions
stored before requests were), was capped by the store (no longer the exact context) or
kept no tools (a turn is never replayed without the tools it had).  A run with nothing
left to replay is refused before anything is stored (:func:`refusal`).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval import __version__
from agent_eval.call_recorder import (
    CallRecorder,
    SessionJudges,
    offered_tool_schemas,
    offered_tools,
)
from agent_eval.errors import ConfigError, HarnessFault, ServerUnreachable
from agent_eval.live.loop import play_items
from agent_eval.live.orchestrator import assistant_message, text_call, turn_record
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.runs import RunRecorder, RunSpec, RunWriter
from agent_eval.scenario.protocols import system_prompt_of
from agent_eval.store import STORED_TEXT_CHARS, RunInfo, Store
from agent_eval.transcript import CallRecord, CallRow, SessionRecord, SessionRow, replay_key

SEED_SUFFIX = "#repeat"

Skip = str
"""Why a tool-call turn is not replayed: one of :data:`SKIPS`."""
SKIPS: dict[Skip, str] = {
    "no request": "kept no request",
    "capped": f"kept a request the store capped (a text over {STORED_TEXT_CHARS} characters: "
              "no longer the exact context)",
    "no tools": "kept a request without its tools (a turn is never replayed without the "
                "tools it had)",
    "pruned": "kept a request whose texts the store's retention setting has since deleted "
              "(--keep-requests-days)",
}


def seed_key(key: str, repeat: int) -> str:
    """The seed header a repeat sends: the original session key for repeat 0."""
    return key if repeat == 0 else f"{key}{SEED_SUFFIX}{repeat}"


@dataclass(frozen=True, slots=True)
class Context:
    """One stored turn to replay: the session it belongs to and the turn's index."""

    session_id: int
    key: str
    scenario: str
    tags: tuple[str, ...]
    turn: int


@dataclass
class ReplayPlan:
    """What will be sent, in order: ``contexts`` (sorted by session, then turn);
    ``tool_turns`` counts the turns that ended in a tool call (sessions that ended in a
    fault left out), ``replayable`` those that kept what replay needs, ``skipped`` the
    rest by reason."""

    contexts: list[Context]
    tool_turns: int
    replayable: int
    skipped: Counter[Skip] = field(default_factory=Counter)

    def sessions(self) -> list[list[Context]]:
        """The contexts grouped by session, each group in turn order (sent in order), the
        groups of one scenario next to each other: they share the system prompt and the
        task, so a prefix cache still holds them when the next one starts."""
        grouped: dict[int, list[Context]] = {}
        for ctx in self.contexts:
            grouped.setdefault(ctx.session_id, []).append(ctx)
        return sorted(grouped.values(), key=lambda g: (g[0].scenario, g[0].session_id))


def plan_replay(sessions: Iterable[SessionRow], calls: Iterable[CallRow],
                refs: dict[int, dict[int, dict[str, Any]]], *, sample: int | None = None,
                seed: int = 0, targets: Iterable[str] = ()) -> ReplayPlan:
    """The contexts to send (pure).  ``refs`` is ``Store.request_refs``; ``sample`` draws
    that many contexts at random (seeded by ``seed``) from the replayable ones;
    ``targets`` keeps only the sessions of these original targets (all when empty)."""
    only = set(targets)
    rows = {s.id: s for s in sessions
            if s.status != "error" and (not only or s.target in only)}
    tool_turns = sorted({(c.session_id, c.turn_index) for c in calls if c.session_id in rows})
    replayable: list[Context] = []
    skipped: Counter[Skip] = Counter()
    for session_id, turn in tool_turns:
        ref = refs.get(session_id, {}).get(turn)
        why = ("no request" if ref is None else "pruned" if ref.get("pruned")
               else "capped" if ref.get("capped")
               else "no tools" if "tools" not in ref else None)
        if why is not None:
            skipped[why] += 1
            continue
        s = rows[session_id]
        replayable.append(Context(session_id, s.key, s.scenario, tuple(s.tags), turn))
    chosen = replayable
    if sample is not None and sample < len(replayable):
        chosen = sorted(random.Random(seed).sample(replayable, sample),
                        key=lambda c: (c.session_id, c.turn))
    return ReplayPlan(chosen, len(tool_turns), len(replayable), skipped)


def refusal(info: RunInfo, plan: ReplayPlan) -> str | None:
    """The one-line reason a run cannot be replayed, or None when it can."""
    if plan.contexts:
        return None
    where = f"run {info.id} has nothing to replay"
    if plan.tool_turns == 0:
        return f"{where}: it holds no turn that ended in a tool call (outside error sessions)"
    parts = [f"{n} {SKIPS[why]}" for why, n in plan.skipped.most_common()]
    line = f"{where}: of its {plan.tool_turns} tool-call turns, " + "; ".join(parts)
    if info.kind == "import" and plan.skipped["no request"]:
        fmt = (info.config or {}).get("format", "?")
        hint = ("; an openai-format file keeps it when each session object carries the "
                "`tools` it offered" if fmt in ("openai", "auto") else "")
        line += (f". It is an import of format {fmt}, which does not keep the full context "
                 f"(the exact messages and tools sent to the model){hint}; replay a live or "
                 "proxy run")
    return line


AllowListFor = Callable[[str], AllowList | ResolvedPolicy]
"""The allow-list a session of a scenario was judged under, by scenario name."""


def allowlist_source(info: RunInfo, override: AllowList | ResolvedPolicy | None = None
                     ) -> AllowListFor:
    """How the original run judged its calls, so a candidate's call is judged the same way.

    ``override`` (``--allowlist``) wins.  A live run records its suite (``config.suite``):
    each scenario's own allow-list.  An import, a rescore (or any run whose config names
    ``allowlist_path`` or ``allowlist``) used one allow-list for every session.
    """
    if override is not None:
        return lambda _scenario: override
    config = info.config or {}
    named = config.get("allowlist_path") or config.get("allowlist")
    if named:
        shared = _load_named(info, str(named))
        return lambda _scenario: shared
    if config.get("suite"):
        return _suite_source(info, str(config["suite"]))
    raise ConfigError(f"run {info.id} records no allow-list (its config names neither a suite "
                      "nor an allow-list); give --allowlist FILE", field="--allowlist")


def _load_named(info: RunInfo, named: str) -> ResolvedPolicy:
    from agent_eval.scenario.bundled import load_policy

    try:
        return load_policy(named, (info.config or {}).get("policy_agent"))
    except ConfigError as exc:
        raise ConfigError(f"run {info.id} was judged under the allow-list {named!r}, which "
                          f"does not load here ({exc}); give --allowlist FILE",
                          field="--allowlist") from None


def _suite_source(info: RunInfo, suite_path: str) -> AllowListFor:
    from agent_eval.scenario import load_suite
    from agent_eval.scenario.bundled import find_suite

    try:
        suite = load_suite(find_suite(Path(suite_path)))
    except ConfigError as exc:
        raise ConfigError(f"run {info.id} played the suite {suite_path}, which does not load "
                          f"here ({exc}); give --allowlist FILE", field="--allowlist") from None

    def allowlist_for(scenario: str) -> AllowList | ResolvedPolicy:
        found = suite.scenarios.get(scenario)
        if found is None:
            raise ConfigError(f"scenario {scenario!r} of run {info.id} is no longer in the "
                              f"suite {suite_path}; give --allowlist FILE", field="--allowlist")
        return found.policy if found.policy is not None else found.allowlist

    return allowlist_for


def judge_reply(reply: Any, calls: CallRecorder, offered: list[str] | None,
                schemas: dict[str, str | None] | None = None) -> list[CallRecord]:
    """The candidate's calls judged by the call recorder as the original's were
    (``call_recorder.py``), each against its offered tool's schema too (``schemas``); tool-call
    markup left in the text is one AE104 call; no call at all is an empty list.  Next
    actions stay unset: a single step says nothing about what came next."""
    if reply.tool_calls:
        return [calls.record(i, 0, out.name, out.arguments, offered=offered, call_id=out.id,
                             schema=(schemas or {}).get(out.name))[0]
                for i, out in enumerate(reply.tool_calls)]
    return [text_call(0, 0, reply)] if reply.markup else []


def replay_record(ctx: Context, repeat: int, target: str, request: dict[str, Any],
                  outcome: Any, calls: CallRecorder, started: datetime) -> SessionRecord:
    """The stored session of one replayed context: its one turn (with the request sent)
    and the judged calls; ``outcome`` is the reply or the ``HarnessFault`` it ended in.
    ``messages`` holds the task (the first user message), the context's last message and
    the reply, for ``show`` and the viewer: the whole context is in the turn's request,
    each message stored once."""
    record = SessionRecord(
        key=replay_key(ctx.key, ctx.turn, repeat), target=target, scenario=ctx.scenario,
        repeat=repeat, tags=list(ctx.tags), started_at=started, finished_at=_now(),
    )
    sent = [m for m in request.get("messages") or () if isinstance(m, dict)]
    task = next((m for m in sent if m.get("role") == "user"), None)
    last = ([task] if task is not None and task is not sent[-1] else []) + sent[-1:]
    if isinstance(outcome, HarnessFault):
        record.status, record.error = "error", str(outcome)
        record.messages = last
        return record
    record.turns = [turn_record(0, outcome, started)]
    record.calls = judge_reply(outcome, calls, offered_tools(request),
                               offered_tool_schemas(request.get("tools")))
    record.messages = [*last, assistant_message(outcome, ctx.turn)]
    record.status = "completed" if record.calls else "abandoned"
    return record


@dataclass
class ReplayTally:
    """Running totals: contexts sent, replies that called a tool, denied replies, server
    faults; ``left`` counts contexts not sent because the server went away."""

    planned: int = 0
    done: int = 0
    calls: int = 0
    denied: int = 0
    no_call: int = 0
    errors: int = 0
    left: int = 0

    def add(self, record: SessionRecord) -> None:
        self.done += 1
        if record.status == "error":
            self.errors += 1
        elif not record.calls:
            self.no_call += 1
        else:
            self.calls += 1
            self.denied += any(c.decision == "deny" for c in record.calls)


def replay_config(info: RunInfo, target: Any, plan: ReplayPlan, *, sample: int | None,
                  seed: int, repeats: int, allowlist_path: str | None) -> dict[str, Any]:
    """What the replay run records: where it came from and how it was drawn (no key)."""
    config = info.config or {}
    return {  # suite and allow-list as the original named them: a replay replays too
        "replay_of": info.id,
        "suite": config.get("suite"),
        "allowlist_path": allowlist_path or config.get("allowlist_path") or config.get(
            "allowlist"),
        "steps": 1,
        "sample": sample,
        "seed": seed,
        "repeats": repeats,
        "contexts": len(plan.contexts),
        "tool_turns": plan.tool_turns,
        "skipped": dict(plan.skipped),
        "targets": [target.settings()],
    }


def start_replay(store: Store, info: RunInfo, target: Any, plan: ReplayPlan, *,
                 label: str | None, server_models: dict[str, Any], sample: int | None,
                 seed: int, repeats: int, allowlist: AllowList | None,
                 allowlist_path: str | None) -> int:
    """Record the replay run and its one target; returns the run id."""
    fingerprint = {
        "replay_of": info.id,
        "allowlists": sorted({allowlist.fingerprint} if allowlist else
                             set((info.fingerprint or {}).get("allowlists") or ())),
        "engine_version": ENGINE_VERSION,
        "agent_eval_version": __version__,
        "server_models": {target.name: server_models},
        "sampling": {target.name: target.settings().get("sampling")},
    }
    run = RunWriter(store, RunSpec(
        label=label or f"replay of run {info.id} against {target.model}", kind="replay",
        suite=info.suite,
        config=replay_config(info, target, plan, sample=sample, seed=seed, repeats=repeats,
                             allowlist_path=allowlist_path),
        fingerprint=fingerprint, parent_run_id=info.id,
    ))
    run_id = run.create()
    run.add_target(name=target.name, model=target.model, base_url=target.base_url,
                   settings=target.settings())
    return run_id


async def execute_replay(recorder: RunRecorder, plan: ReplayPlan, client: Any,
                         allowlist_for: AllowListFor, *, target: str, repeats: int = 1,
                         concurrency: int = 4, foreign: bool = False,
                         on_context: Callable[[ReplayTally], None] | None = None
                         ) -> ReplayTally:
    """Send every planned context (``repeats`` times each) through the one loop
    (``loop.py``) and hand each session's replies to the recorder (started) when its last
    context is answered.  ``client`` has ``resend`` (a ``ModelClient``).  A server fault
    on one request is an ``error`` session, excluded from every rate; a server that stops
    answering altogether stops the replay (``left``).
    ``foreign``: the contexts come from another harness (a proxy run, an import), whose
    tools the call recorder reads as it read the original calls (``call_recorder.py``)."""
    tally = ReplayTally(planned=len(plan.contexts) * repeats)
    judges: dict[int, SessionJudges] = {}
    source = ReplayItems(plan.sessions())

    async def play(group: list[Context]) -> list[SessionRecord] | None:
        requests = recorder.store.load_requests(group[0].session_id)
        policy = allowlist_for(group[0].scenario)
        first = requests[group[0].turn].request
        judge = judges.setdefault(id(policy), SessionJudges(policy, foreign=foreign)).for_session(
            system_prompt=system_prompt_of(first.get("messages") or [])
            if isinstance(first, dict) else None)
        calls = judge.calls
        records = []
        for ctx in group:
            body, protocol = requests[ctx.turn].request, requests[ctx.turn].protocol
            for repeat in range(repeats):
                started = _now()
                try:
                    outcome: Any = await client.resend(body, seed_key=seed_key(ctx.key, repeat),
                                                       **({"protocol": protocol}
                                                          if protocol else {}))
                except ServerUnreachable:
                    return None
                except HarnessFault as exc:
                    outcome = exc
                sent = getattr(outcome, "request", None) or body
                records.append(replay_record(ctx, repeat, target, sent, outcome, calls,
                                             started))
                judge.stamp(records[-1])
        return records

    def after(_group: list[Context], records: list[SessionRecord]) -> bool:
        for record in records:
            tally.add(record)
        if on_context:
            on_context(tally)
        return False

    await play_items(source, recorder, {None: concurrency}, play, after)
    tally.left += sum(len(group) for group in source.queue) * repeats
    return tally


class ReplayItems:
    """A replay's items: the planned contexts, a session's at a time (the loop's
    ``ItemSource``).  A server gone stops the whole replay."""

    def __init__(self, groups: list[list[Context]]) -> None:
        self.queue: deque[list[Context]] = deque(groups)
        self.stopped = False

    async def take(self, lane: str | None) -> list[Context] | None:
        return self.queue.popleft() if self.queue and not self.stopped else None

    async def give_back(self, group: list[Context]) -> None:
        self.queue.appendleft(group)

    def stop(self, group: list[Context]) -> None:
        self.stopped = True


def play_replay(store: Store, run_id: int, plan: ReplayPlan, target: Any,
                allowlist_for: AllowListFor, *, repeats: int = 1, foreign: bool = False,
                on_context: Callable[[ReplayTally], None] | None = None,
                client_factory: Callable[[Any], Any] | None = None) -> ReplayTally:
    """Play the replay run ``run_id`` (recorded by :func:`start_replay`) against
    ``target`` through the run recorder: it ends ``finished``, or ``interrupted`` when the
    server went away or on Ctrl-C (``KeyboardInterrupt`` is raised after marking it)."""
    from agent_eval.live.client import ModelClient

    recorder = RunRecorder(store, run_id)
    done: list[ReplayTally] = []

    async def go() -> None:
        async with (client_factory or ModelClient)(target) as client:
            done.append(await execute_replay(
                recorder, plan, client, allowlist_for, target=target.name, repeats=repeats,
                concurrency=target.concurrency, foreign=foreign, on_context=on_context))

    with recorder.recording(lambda: "interrupted" if done[0].left else "finished"):
        asyncio.run(go())
    return done[0]


def _now() -> datetime:
    return datetime.now(UTC)
