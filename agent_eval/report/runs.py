"""The runs list as text: one row per stored run, in ``RUN_HEAD`` order, shared by
``agent-eval runs`` (a terminal table) and the viewer's runs page (HTML); each caller
escapes the texts for its own medium."""

from __future__ import annotations

from dataclasses import dataclass

RUN_HEAD = ("id", "label", "kind", "status", "targets", "stack", "sessions", "calls",
            "errors/100 [95% CI]", "started", "duration")  # fmt: skip


def run_cells(r) -> tuple[str, ...]:
    """A run's row as text, in ``RUN_HEAD`` order (shared with the viewer)."""
    if len(r.by_target) > 1:  # one figure per target, never one pooled across models
        rate = "; ".join(f"{name} {'–' if per100 is None else f'{per100:.2f}'}"
                         for name, per100 in r.target_rates())
    else:
        rate = _rate_text(r.per100, getattr(r, "clustered_rate", None))
    calls = str(r.calls)
    if getattr(r, "telemetry", None) is not None:  # collected: what telemetry could not prove
        calls += f" (+{r.telemetry[2]} not judged)"
    return (str(r.id), r.label or "", r.kind, r.status, ", ".join(r.targets),
            stack_cell(r), str(r.sessions), calls, rate,
            r.started.strftime("%Y-%m-%d %H:%M"), format_duration(r.duration_s))


def _rate_text(per100: float | None, clustered) -> str:
    """Errors per 100 calls with its clustered interval (sessions as clusters: the one
    ``gate`` and ``compare`` decide on; ``metrics.clustered.clustered_text``); the bare
    rate when no clustered sums were read (never the Wilson interval on calls in its
    place: one column, one kind of interval)."""
    if per100 is None:
        return "–"
    if clustered is None:
        return f"{per100:.2f}"
    from agent_eval.metrics.clustered import clustered_text

    return clustered_text(clustered)


def stack_cell(r, target: str | None = None) -> str:
    """The serving stack's mark (``transcript.stack_mark``) of one target, or of the run:
    its targets' marks, each once; "–" for a run that kept none (imports, older runs)."""
    marks = getattr(r, "stack_marks", None) or {}
    if target is not None:
        return marks.get(target, "–")
    return ", ".join(dict.fromkeys(marks.values())) or "–"


def target_cells(r) -> list[tuple[str, ...]]:
    """One row per target of a run of several (``agent-eval runs``), in ``RUN_HEAD``
    order: the target's name, calls and errors per 100 with its clustered interval; the
    run's own cells left blank.  None for a run of one target (its row says it all)."""
    if len(r.by_target) < 2:
        return []
    rows: list[tuple[str, ...]] = []
    clustered = tuple(getattr(r, "clustered", ()) or ())
    for i, (name, calls, errors) in enumerate(r.by_target):
        rate = _rate_text(100 * errors / calls if calls else None,
                          clustered[i] if i < len(clustered) else None)
        rows.append(("", "", "", "", f"· {name}", stack_cell(r, name), "", str(calls), rate,
                     "", ""))
    return rows


def planned_progress(store, info) -> tuple[int | None, int | None]:
    """(planned, stored) top-level sessions of a live run, from its stored plan; (None,
    None) for other kinds or a plan that does not say."""
    config = info.config or {}
    try:
        names = [t["name"] for t in config["targets"]]
        scenarios, repeats = list(config["scenarios"]), int(config["repeats"])
    except (KeyError, TypeError, ValueError):
        return None, None
    keys = {f"{t}/{sc}/{r}" for t in names for sc in scenarios for r in range(repeats)}
    return len(keys), len(keys & store.finished_keys(info.id))


@dataclass(frozen=True, slots=True)
class StoppedRun:
    """A live run the store says is ``running`` that no process plays (its runner was
    killed, or its machine went down): what the lists show instead of "running"."""

    run_id: int
    planned: int | None
    stored: int | None

    @property
    def hint(self) -> str:
        """The line under a list: what happened and the command that finishes it."""
        stored = ("" if self.planned is None else
                  f"; {self.stored} of {self.planned} planned sessions stored")
        return (f"Run {self.run_id} is not being played (its runner stopped without "
                f"finishing it{stored}): finish it with `agent-eval run --resume "
                f"{self.run_id}`.")


def running_progress(store, rows) -> dict[int, str]:
    """``N of M planned`` for each of the rows' live runs still ``running`` (played or
    stopped), from its stored plan: the sessions cell of the runs lists."""
    out: dict[int, str] = {}
    for r in rows:
        if r.status == "running" and r.kind == "live":
            planned, stored = planned_progress(store, store.get_run(r.id))
            if planned is not None:
                out[r.id] = f"{stored} of {planned} planned"
    return out


def stopped_runs(store, rows) -> dict[int, StoppedRun]:
    """The rows' live runs left ``running`` with no process playing them, by id, each
    with its planned and stored sessions (``Store.run_is_played``: a lease or a leased
    work item)."""
    out: dict[int, StoppedRun] = {}
    for r in rows:
        if r.status == "running" and r.kind == "live" and not store.run_is_played(r.id):
            planned, stored = planned_progress(store, store.get_run(r.id))
            out[r.id] = StoppedRun(r.id, planned, stored)
    return out


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
