"""Judge a stored run again under another allow-list or engine version, calling no model.

The new run (kind ``rescore``) links to the old one through ``parent_run_id``; each
session keeps its key, target, messages, turns and outputs (what the model saw stays
what it saw), while every call gets a fresh verdict, findings and script, and next
actions are recomputed.  ``compare OLD NEW`` then shows what the policy change moved.

Calls of imported sessions are shown to the engine the way the importer showed them
(source tool names such as ``Bash`` or ``swe-agent-shell`` mapped onto the allow-list's
bash and read tools); calls of live sessions are judged as they were emitted.  The
handshake result is carried over unchanged: it depends on the scenario, which a
re-score does not reload.

Streaming: sessions are loaded one family (a parent and its children) at a time and
written in batches, so memory does not grow with the run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agent_eval.importers import Judge
from agent_eval.importers.outcome import ImportSummary
from agent_eval.importers.recording import BatchWriter
from agent_eval.importers.source import ImportedCall, kind_of_tool
from agent_eval.policy import ENGINE_VERSION, AllowList
from agent_eval.transcript import CallRecord, SessionRecord, assign_next_actions


@dataclass(frozen=True, slots=True)
class RescoreResult:
    """The new run and the rates before and after (denied calls per 100, error sessions
    excluded), plus how many calls changed verdict."""

    run_id: int
    parent_run_id: int
    before: ImportSummary
    after: ImportSummary
    changed: int


def rescore_run(store, run_id: int, allowlist: AllowList, *, label: str | None = None,
                allowlist_path: str | None = None) -> int:
    """Re-judge run ``run_id`` under ``allowlist`` as a new run; return the new run's id."""
    return rescore(store, run_id, allowlist, label=label, allowlist_path=allowlist_path).run_id


def rescore(store, run_id: int, allowlist: AllowList, *, label: str | None = None,
            allowlist_path: str | None = None) -> RescoreResult:
    """Like :func:`rescore_run`, with the before/after summary the CLI prints."""
    old = store.get_run(run_id)
    new_id = store.create_run(
        label=label or f"rescore of run {old.id} under {allowlist.name}",
        kind="rescore",
        suite=old.suite,
        config={**old.config, "rescored_from": old.id, "allowlist": allowlist.name,
                "allowlist_path": allowlist_path, "engine_version": ENGINE_VERSION},
        fingerprint={**old.fingerprint, "allowlist": allowlist.fingerprint,
                     "engine_version": ENGINE_VERSION},
        parent_run_id=old.id,
    )
    writer = BatchWriter(store, new_id, base_url="rescore")
    for target in store.run_targets(old.id):
        store.add_target(new_id, name=target.name, model=target.model,
                         base_url=target.base_url, settings=target.settings)
        writer.targets.add(target.name)
    judge = Judge(allowlist)
    before, after = ImportSummary(run_id=old.id), ImportSummary(run_id=new_id)
    changed = 0
    try:
        for family in _families(store, old.id):
            for session_id in family:
                record = store.load_session(session_id).record
                fresh = rejudge_session(record, judge)
                changed += sum(a.decision != b.decision for a, b in zip(record.calls, fresh.calls, strict=True))
                before.add(record)
                after.add(fresh)
                writer.pending.append(fresh)
                writer.pending_calls += len(fresh.calls)
            if writer.pending_calls >= 2_000:
                writer.flush()
        writer.flush()
    except BaseException:
        store.set_run_status(new_id, "failed")
        raise
    store.set_run_status(new_id, "finished")
    return RescoreResult(run_id=new_id, parent_run_id=old.id, before=before, after=after, changed=changed)


def rejudge_session(record: SessionRecord, judge: Judge) -> SessionRecord:
    """A copy of ``record`` with every call judged again by ``judge`` (pure)."""
    calls = [rejudge_call(call, judge, imported=record.source != "live") for call in record.calls]
    assign_next_actions(calls)
    return replace(record, calls=calls)


def rejudge_call(call: CallRecord, judge: Judge, *, imported: bool) -> CallRecord:
    """One stored call with a fresh verdict; everything the model saw is kept."""
    if imported:
        kind = kind_of_tool(call.tool)
        source = ImportedCall(tool=call.tool, arguments=call.arguments, turn_index=call.turn_index,
                              kind=kind, text=call.command if kind != "other" else None)
        tool, arguments = judge.engine_view(source)
    else:
        tool, arguments = call.tool, call.arguments
    fresh = judge.call(
        ImportedCall(tool=tool, arguments=arguments, turn_index=call.turn_index), call.index
    )
    return replace(
        call, decision=fresh.decision, primary=fresh.primary, findings=fresh.findings,
        script=fresh.script, next_action=None,
    )


def _families(store, run_id: int) -> list[list[int]]:
    """Session ids grouped so a parent and all its descendants are written together."""
    rows = list(store.session_rows([run_id]))
    parent_of = {r.id: r.parent_id for r in rows}
    families: dict[int, list[int]] = {}
    for row in sorted(rows, key=lambda r: r.id):
        root = row.id
        while parent_of.get(root) is not None:
            root = parent_of[root]
        families.setdefault(root, []).append(row.id)
    return list(families.values())
