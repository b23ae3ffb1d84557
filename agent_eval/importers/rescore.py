"""Judge a stored run again under another allow-list or engine version, calling no model.

The new run (kind ``rescore``) links to the old one through ``parent_run_id``; each
session keeps its key, target, messages, turns and outputs (what the model saw stays
what it saw), while every call gets a fresh verdict, findings and script, and next
actions are recomputed.  ``compare OLD NEW`` then shows what the policy change moved.

Every call goes through the call recorder (``call_recorder.py``) the way its path first judged
it: calls of imported and proxied sessions as another harness's (source tool names such
as ``Bash`` or ``swe-agent-shell`` read onto the allow-list's bash and read tools, the
command the importer read out of its format), calls of live sessions exactly as they
were emitted, each with the tools its turn's stored request offered.  So a rescore under
the same allow-list gives every call the verdict it has.  Under an agent CLI's rules
(``policy.sources``) a session keeps the agent that judged it before, else gets the one
its system prompt names, else the default agent (``calls.SessionJudges``).  The handshake result is
carried over unchanged: it depends on the scenario, which a re-score does not reload.

Streaming: sessions are loaded one family (a parent and its children) at a time and
written in batches, so memory does not grow with the run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agent_eval.call_recorder import (
    TEXT_CALL_TOOL,
    CallRecorder,
    SessionJudges,
    kind_of_tool,
    offered_tool_schemas,
    offered_tools,
)
from agent_eval.importers.outcome import ImportSummary
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.policy.sources import ResolvedPolicy
from agent_eval.runs import RunSpec, RunWriter, SessionBatches, TargetDefaults
from agent_eval.scenario.protocols import system_prompt_of
from agent_eval.store import Store
from agent_eval.transcript import CallRecord, FindingRecord, SessionRecord, assign_next_actions


@dataclass(frozen=True, slots=True)
class RescoreResult:
    """The new run and the rates before and after (denied calls per 100, error sessions
    excluded), plus how many calls changed verdict."""

    run_id: int
    parent_run_id: int
    before: ImportSummary
    after: ImportSummary
    changed: int


def rescore_run(store: Store, run_id: int, allowlist: AllowList, *, label: str | None = None,
                allowlist_path: str | None = None) -> int:
    """Re-judge run ``run_id`` under ``allowlist`` as a new run; return the new run's id."""
    return rescore(store, run_id, allowlist, label=label, allowlist_path=allowlist_path).run_id


def rescore(store: Store, run_id: int, policy: AllowList | ResolvedPolicy, *, label: str | None = None,
            allowlist_path: str | None = None) -> RescoreResult:
    """Like :func:`rescore_run`, with the before/after summary the CLI prints; ``policy``
    may be an agent CLI's configuration."""
    judges = {foreign: SessionJudges(policy, foreign=foreign) for foreign in (False, True)}
    allowlist = judges[False].allowlist
    old = store.get_run(run_id)
    run = RunWriter(store, RunSpec(
        kind="rescore",
        label=label or f"rescore of run {old.id} under {allowlist.name}",
        suite=old.suite,
        config={**old.config, "rescored_from": old.id, "allowlist": allowlist.name,
                "allowlist_path": allowlist_path, "engine_version": ENGINE_VERSION},
        fingerprint={**old.fingerprint, "allowlist": allowlist.fingerprint,
                     "engine_version": ENGINE_VERSION},
        parent_run_id=old.id,
    ), targets=TargetDefaults(base_url="rescore"))
    new_id = run.create()
    batches = SessionBatches(run)
    with run.writing(on_interrupt="failed"):  # a rescore is not resumed: run it again
        for target in store.run_targets(old.id):
            run.add_target(name=target.name, model=target.model, base_url=target.base_url,
                           settings=target.settings)
        before, after = ImportSummary(run_id=old.id), ImportSummary(run_id=new_id)
        changed = 0
        for family in _families(store, old.id):
            for session_id in family:
                record = store.load_session(session_id).record
                judge = judges[record.source != "live"].for_session(
                    named=record.policy_agent, named_via=record.policy_agent_via or "header",
                    system_prompt=system_prompt_of(record.messages))
                fresh = rejudge_session(record, judge.calls)
                judge.stamp(fresh)
                changed += sum(a.decision != b.decision for a, b in zip(record.calls, fresh.calls, strict=True))
                before.add(record)
                after.add(fresh)
                batches.add(fresh, flush=False)
            if batches.pending_calls >= batches.batch_calls:  # a family stays one batch
                batches.flush()
        batches.flush()
    return RescoreResult(run_id=new_id, parent_run_id=old.id, before=before, after=after, changed=changed)


def rejudge_session(record: SessionRecord, calls: CallRecorder) -> SessionRecord:
    """A copy of ``record`` with every call judged again by ``calls`` (pure)."""
    requests = {t.index: t.request for t in record.turns}
    # the tools offered with each call, with their schemas: its turn's stored request, else
    # the session's offered list (telemetry keeps one per session), as first judged
    session_tools = [{"name": name, "parameters": schema}
                     for name, schema in (record.offered_tools or {}).items()]

    def offered_with(turn: int) -> tuple[list[str] | None, dict[str, str | None]]:
        request = requests.get(turn)
        if isinstance(request, dict) and request.get("tools"):
            return offered_tools(request), offered_tool_schemas(request["tools"])
        schemas = offered_tool_schemas(session_tools)
        return (list(schemas) or None), schemas

    fresh = [rejudge_call(call, calls, *offered_with(call.turn_index)) for call in record.calls]
    assign_next_actions(fresh)
    return replace(record, calls=fresh)


def rejudge_call(call: CallRecord, calls: CallRecorder,
                 offered: list[str] | None = None,
                 schemas: dict[str, str | None] | None = None) -> CallRecord:
    """One stored call with a fresh verdict; everything the model saw is kept.  A markup
    call (AE104) has no tool to judge again: it stays as it is.  ``schemas``: the offered
    tools' argument schemas (``calls.offered_tool_schemas``), checked as when first judged."""
    if call.tool == TEXT_CALL_TOOL:
        return replace(call, next_action=None)
    kind = kind_of_tool(call.tool) if calls.foreign else None
    judged = calls.judge(call.tool, call.arguments, offered=offered, kind=kind,
                         text=call.command if calls.foreign and kind != "other" else None,
                         schema=(schemas or {}).get(call.tool))
    verdict = judged.verdict
    invocation = verdict.invocation
    return replace(
        call, decision=verdict.decision, primary=verdict.primary,
        findings=[FindingRecord(f.code, f.message, f.start, f.end) for f in verdict.findings],
        script=invocation.script if invocation is not None else None, next_action=None,
        leak=judged.leak,
    )


def _families(store: Store, run_id: int) -> list[list[int]]:
    """Session ids grouped so a parent and all its descendants are written together."""
    rows = list(store.session_rows([run_id]))
    parent_of = {r.id: r.parent_id for r in rows}
    families: dict[int, list[int]] = {}
    for row in sorted(rows, key=lambda r: r.id):
        root, parent = row.id, row.parent_id
        while parent is not None:
            root, parent = parent, parent_of.get(parent)
        families.setdefault(root, []).append(row.id)
    return list(families.values())
