"""Sequential runs (``run --until-decided``): play a batch of repeats, look, stop once decided.

A sequential run is a live run whose config holds a :class:`SequentialPlan`
(``config["sequential"]``: the gate's checks as options, the cap, the batch, the looks
taken) and whose ``config["repeats"]`` is the end of the batch being played, so that
``--resume``, ``plan_run`` and the coverage check (``metrics.coverage``) all see the
sessions planned so far, not the cap.  After each batch :func:`take_look` judges the
run with the gate's own checks (the ``judge`` callable:
``analysis.gate_stored.judge_run``) at the nominal alpha of the look's spending boundary (``metrics.sequential``), records the look
on the run, and the run stops when the verdict is decided (a check failed, or none is
undecided: more repeats cannot change it) or the cap is reached; otherwise the next
batch is planned (:func:`next_batch`).  Because every look is stored before the next
batch, a run interrupted anywhere resumes where its sequence stood: the batch it was
playing is finished, its look taken, and the sequence goes on; workers of a planned run
do the same, the one that completes a batch taking its look.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_eval.metrics.sequential import Boundary, Look, SequentialPlan
from agent_eval.runs import RunWriter
from agent_eval.store import Store

Judge = Callable[[float], Any]
"""Judges the run at a nominal two-sided alpha; returns the gate's ``GateResult``."""


@dataclass(frozen=True)
class LookReport:
    """One look, for the progress line: its number, the boundary, the gate's result."""

    number: int
    look: Look
    boundary: Boundary
    result: Any  # analysis.gate.GateResult
    plan: SequentialPlan

    @property
    def stopped(self) -> str | None:
        return self.plan.stopped


def verdict_decided(result: Any) -> bool:
    """Whether more repeats could not change the gate's verdict: a check failed (the
    repeated intervals already rule the value within the limit out), or none is
    undecided."""
    return bool(result.failures) or not result.inconclusive


def take_look(store: Store, run_id: int, plan: SequentialPlan, repeats: int,
              judge: Judge) -> LookReport:
    """Judge the run at ``repeats`` per scenario with the look's boundary, record the
    look (and the stop, when decided or at the cap) on the run; the report."""
    boundary = plan.boundary_at(repeats)
    result = judge(boundary.nominal_alpha)
    look = Look(repeats, boundary.nominal_alpha, boundary.spent, len(result.inconclusive))
    decided = verdict_decided(result)
    stopped = "decided" if decided else "cap" if repeats >= plan.max_repeats else None
    plan = dataclasses.replace(plan, looks=(*plan.looks, look), stopped=stopped)
    store.update_run_config(run_id, {"sequential": plan.stored()})
    return LookReport(len(plan.looks), look, boundary, result, plan)


def next_batch(store: Store, run_id: int, plan: SequentialPlan) -> int:
    """Plan the next batch: the run's ``repeats`` moves to the next look's; returned."""
    repeats = plan.next_repeats()
    store.update_run_config(run_id, {"repeats": repeats})
    return repeats


def play_until_decided(store: Store, run_id: int, play_batch: Callable[[int], bool],
                       judge: Judge, on_look: Callable[[LookReport], None] | None = None
                       ) -> SequentialPlan:
    """Play the run's batches (``play_batch(repeats)``: every session up to ``repeats``
    per scenario not stored yet; False when some were left unplayed, for ``--resume``)
    and look after each until the run stops; the plan as it stands (``stopped`` None when
    a batch was left unplayed).  Continues a stored sequence where it stood."""
    config = store.get_run(run_id).config
    plan = SequentialPlan.from_config(config)
    if plan is None:
        raise ValueError(f"run {run_id} is not a sequential run")
    repeats = int(config["repeats"])
    while plan.stopped is None:
        if not play_batch(repeats):
            return plan
        if not plan.looks or plan.looks[-1].repeats < repeats:
            report = take_look(store, run_id, plan, repeats, judge)
            plan = report.plan
            if on_look is not None:
                on_look(report)
        if plan.stopped is None:
            repeats = next_batch(store, run_id, plan)
    return plan


WAIT_POLLS = 20  # polls a worker waits for another to take a batch's look


def work_until_decided(store: Store, run_id: int, play_round: Callable[[], Any],
                       add_batch: Callable[[int, int], None], judge: Judge,
                       on_look: Callable[[LookReport], None] | None = None, *,
                       poll_s: float = 1.0) -> tuple[SequentialPlan, Any]:
    """A worker's share of a sequential run planned for workers: ``play_round()`` plays
    open items until none is left (``workers.play_as_worker``; its tally).  The worker
    that completes a batch (the one whose round marked the run finished, exactly one)
    takes its look; unless the run stops, it sets the run running again and stores the
    next batch's items (``add_batch(first_repeat, repeats)``), and every worker plays on.
    A worker that finds a batch complete and its look not taken (the worker that
    completed it died) takes it after :data:`WAIT_POLLS` polls.  Returns the plan and
    the last round's tally (a server gone or a stop ends the worker's part)."""
    import time

    waited = 0
    while True:
        tally = play_round()
        if getattr(tally, "server_gone", None) or getattr(tally, "stopped", None):
            return _plan(store, run_id)[0], tally
        plan, repeats, status = _plan(store, run_id)
        if plan.stopped is not None:
            return plan, tally
        looked = bool(plan.looks) and plan.looks[-1].repeats >= repeats
        if not looked and status == "finished" and (
                getattr(tally, "marked_finished", False) or waited >= WAIT_POLLS):
            report = take_look(store, run_id, plan, repeats, judge)
            plan = report.plan
            if on_look is not None:
                on_look(report)
            looked = True
        if looked and status == "finished":
            if plan.stopped is not None:
                return plan, tally
            # the items first, then the batch's end, then running: a worker killed in
            # between leaves the run finished, and the next worker picks it up from there
            add_batch(plan.looks[-1].repeats, plan.next_repeats())
            next_batch(store, run_id, plan)
            RunWriter(store, run_id).set_status("running")
            waited = 0
            continue
        if waited >= 3 * WAIT_POLLS:  # nothing moves: `run --resume` finishes it
            return plan, tally
        time.sleep(poll_s)  # another worker holds the last items, or takes the look
        waited += 1


def _plan(store: Store, run_id: int) -> tuple[SequentialPlan, int, str]:
    info = store.get_run(run_id)
    plan = SequentialPlan.from_config(info.config)
    if plan is None:
        raise ValueError(f"run {run_id} is not a sequential run")
    return plan, int(info.config["repeats"]), info.status
