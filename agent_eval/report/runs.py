"""The runs list as text: one row per stored run, in ``RUN_HEAD`` order, shared by
``agent-eval runs`` (a terminal table) and the viewer's runs page (HTML); each caller
escapes the texts for its own medium."""

from __future__ import annotations

RUN_HEAD = ("id", "label", "kind", "status", "targets", "stack", "sessions", "calls",
            "errors/100 [95% CI]", "started", "duration")  # fmt: skip


def run_cells(r) -> tuple[str, ...]:
    """A run's row as text, in ``RUN_HEAD`` order (shared with the viewer)."""
    if len(r.by_target) > 1:  # one figure per target, never one pooled across models
        rate = "; ".join(f"{name} {'–' if per100 is None else f'{per100:.2f}'}"
                         for name, per100 in r.target_rates())
    elif r.per100 is None:
        rate = "–"
    else:
        lo, hi = r.interval
        rate = f"{r.per100:.2f} [{lo:.1f}–{hi:.1f}]"
    calls = str(r.calls)
    if getattr(r, "telemetry", None) is not None:  # collected: what telemetry could not prove
        calls += f" (+{r.telemetry[2]} not judged)"
    return (str(r.id), r.label or "", r.kind, r.status, ", ".join(r.targets),
            stack_cell(r), str(r.sessions), calls, rate,
            r.started.strftime("%Y-%m-%d %H:%M"), format_duration(r.duration_s))


def stack_cell(r, target: str | None = None) -> str:
    """The serving stack's mark (``transcript.stack_mark``) of one target, or of the run:
    its targets' marks, each once; "–" for a run that kept none (imports, older runs)."""
    marks = getattr(r, "stack_marks", None) or {}
    if target is not None:
        return marks.get(target, "–")
    return ", ".join(dict.fromkeys(marks.values())) or "–"


def target_cells(r) -> list[tuple[str, ...]]:
    """One row per target of a run of several (``agent-eval runs``), in ``RUN_HEAD``
    order: the target's name, calls and errors per 100 with its Wilson interval; the
    run's own cells left blank.  None for a run of one target (its row says it all)."""
    from agent_eval.metrics.stats import wilson_interval

    if len(r.by_target) < 2:
        return []
    rows: list[tuple[str, ...]] = []
    for name, calls, errors in r.by_target:
        rate = "–"
        if calls:
            lo, hi = wilson_interval(errors, calls)
            rate = f"{100 * errors / calls:.2f} [{100 * lo:.1f}–{100 * hi:.1f}]"
        rows.append(("", "", "", "", f"· {name}", stack_cell(r, name), "", str(calls), rate,
                     "", ""))
    return rows


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
