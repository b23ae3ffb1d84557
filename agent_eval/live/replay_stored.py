"""A stored run replayed: one library call from a run reference to the paired result.

``agent-eval replay`` parses its options into a :class:`ReplayRequest` and a ``Target``
and calls :func:`replay_stored`, which plans the contexts (``live/replay.py``), refuses a
run with nothing to replay before anything is stored, asks the candidate's server who it
is, records the replay run, plays it, and pairs each reply with the original call it
answers (``analysis.paired_replay``).  The CLI prints the :class:`StoredReplay` it
returns; ``on_start`` and ``on_context`` let it draw progress meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_eval.analysis.paired_replay import PairedReplay, pair_replay, render_paired_text
from agent_eval.errors import ConfigError
from agent_eval.live.replay import (
    AllowListFor,
    ReplayPlan,
    ReplayTally,
    allowlist_source,
    plan_replay,
    play_replay,
    refusal,
    start_replay,
)
from agent_eval.live.run import probe_targets
from agent_eval.live.targets import Target
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.store import RunInfo, Store


@dataclass(frozen=True)
class ReplayRequest:
    """``agent-eval replay``'s options: which contexts (``targets`` of the original run,
    a ``sample`` drawn with ``seed``), how often (``repeats``), judged under what (an
    ``allowlist_path`` and its ``agent``, else the original run's), and the ``label``."""

    targets: tuple[str, ...] = ()
    sample: int | None = None
    seed: int = 0
    repeats: int = 1
    allowlist_path: Path | None = None
    agent: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class StoredReplay:
    """A replay played: the ``original`` run, the replay run's id, what was planned and
    sent (``plan``, ``tally``), and every reply paired with its original (``paired``)."""

    original: RunInfo
    run_id: int
    plan: ReplayPlan
    tally: ReplayTally
    paired: PairedReplay

    def summary(self) -> str:
        """What was stored and from what, one line."""
        plan, tally = self.plan, self.tally
        skipped = ", ".join(f"{n} {why}" for why, n in plan.skipped.most_common())
        return (f"Replay run {self.run_id} of run {self.original.id}: {tally.done} replies "
                f"stored ({tally.calls} called a tool, {tally.no_call} did not, "
                f"{tally.errors} server faults) from {len(plan.contexts)} of "
                f"{plan.tool_turns} tool-call turns"
                + (f"; skipped: {skipped}" if skipped else "") + ".")

    def fault(self) -> str | None:
        """The error line when the server stopped answering mid-replay, else None."""
        if not self.tally.left:
            return None
        return (f"Error: the model server stopped answering; {self.tally.left} replies not "
                f"sent (run {self.run_id} left interrupted).")

    def text(self) -> str:
        """The paired table and where to read the full comparison."""
        return (render_paired_text(self.paired)
                + f"Full comparison: agent-eval compare {self.original.id} {self.run_id}\n")


def replay_stored(store: Store, run_ref: str | int, target: Target, request: ReplayRequest,
                  *, on_start: Callable[[int, int], None] | None = None,
                  on_context: Callable[[ReplayTally], None] | None = None) -> StoredReplay:
    """Replay the run ``run_ref`` names against ``target`` and pair the replies.

    Refused (ConfigError, nothing stored) when a ``targets`` name is not the run's, when
    the run has nothing to replay, or when a scenario's allow-list no longer loads;
    ``ServerUnreachable`` when the candidate's server does not answer before the run is
    recorded.  ``on_start(run_id, replies)`` is called once the replay run is recorded,
    ``on_context(tally)`` after each session's replies; on Ctrl-C the run is left
    ``interrupted`` and ``KeyboardInterrupt`` raised."""
    info = store.resolve_run(run_ref)
    override = load_override(request.allowlist_path, request.agent)
    plan = plan_replay(store.session_rows([info.id]), store.call_rows([info.id]),
                       store.request_refs(info.id), sample=request.sample, seed=request.seed,
                       targets=request.targets)
    known = {t.name for t in store.run_targets(info.id)}
    if unknown := sorted(set(request.targets) - known):
        raise ConfigError(f"run {info.id} has no target {unknown[0]!r}; its targets: "
                          f"{', '.join(sorted(known))}", field="--target")
    if (why := refusal(info, plan)) is not None:
        raise ConfigError(why)
    allowlist_for: AllowListFor = allowlist_source(info, override)
    for scenario in sorted({c.scenario for c in plan.contexts}):
        allowlist_for(scenario)  # a scenario that no longer loads: refused before storing
    server_models = asyncio.run(probe_targets([target]))[target.name]
    run_id = start_replay(
        store, info, target, plan, label=request.label, server_models=server_models,
        sample=request.sample, seed=request.seed, repeats=request.repeats,
        allowlist=override.allowlist if override else None,
        allowlist_path=str(request.allowlist_path) if request.allowlist_path else None)
    if on_start is not None:
        on_start(run_id, len(plan.contexts) * request.repeats)
    tally = play_replay(store, run_id, plan, target, allowlist_for, repeats=request.repeats,
                        foreign=info.kind in ("proxy", "import"), on_context=on_context)
    a, b = [info.id], [run_id]
    paired = pair_replay(info.id, run_id, store.session_rows(a), store.call_rows(a),
                         store.session_rows(b), store.call_rows(b))
    return StoredReplay(info, run_id, plan, tally, paired)


def load_override(path: Path | None, agent: str | None) -> ResolvedPolicy | None:
    """``--allowlist FILE`` (and ``--agent NAME`` of an agent CLI's config), or None."""
    if path is None:
        if agent is not None:
            raise ConfigError("--agent picks an agent of --allowlist CONFIG; give both",
                              field="--agent")
        return None
    from agent_eval.scenario.bundled import load_policy

    return load_policy(path, agent)

