"""Coverage: what a run planned, played and judged, and what it lost, by cause.

A figure says what it was computed on, and a decision never rests on what was not
judged.  Every rate leaves ``error`` sessions out (a server's fault is not the model's),
so a run that lost 26 of 29 sessions to a dying server still shows a clean rate over the
3 left; the gate's ``coverage`` check (``analysis.gate``) fails it instead.

Per target, counting top-level sessions (a subagent's session belongs to its root):

``planned``
    scenarios × repeats of the run's plan (its stored config), ``None`` when the run holds
    no plan (an import, a proxy recording): then the sessions played are the plan.
``played``
    sessions stored.  ``judged``: those not ended in a fault (``status`` other than
    ``error``), the only ones any rate is computed on.
``lost``
    by :data:`LossCause`: ``server fault`` (an ``error`` session: the server or the
    harness failed past the retries), ``truncation`` (an ``error`` session a reply cut by
    the token limit ended, :data:`agent_eval.transcript.TRUNCATED`), ``stack fault``
    (an ``error`` session a stack fault ended, :data:`agent_eval.transcript.STACK_FAULT`:
    what the serving stack lost or mangled between the model and the wire) and ``interrupted`` (planned, never
    played: Ctrl-C, a server gone, a stopped target).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_eval.transcript import STACK_FAULT, TRUNCATED

LossCause = Literal["server fault", "truncation", "stack fault", "interrupted"]
"""Why a planned session was not judged; every cause is always listed, 0 or not."""

LOSS_CAUSES: tuple[LossCause, ...] = ("server fault", "truncation", "stack fault", "interrupted")

MIN_COVERAGE = 0.9
"""The gate's default: a target must have judged at least 90% of its planned sessions."""


@dataclass(frozen=True, slots=True)
class Coverage:
    """One target's sessions: planned, played, judged, and lost by cause."""

    target: str
    planned: int | None
    played: int
    judged: int
    lost: dict[LossCause, int] = field(default_factory=dict)

    @property
    def basis(self) -> int:
        """What the share is of: the plan, or the sessions played when there is none."""
        return self.played if self.planned is None else max(self.planned, self.played)

    @property
    def share(self) -> float | None:
        """Judged sessions over :attr:`basis`; ``None`` when nothing was planned or played."""
        return self.judged / self.basis if self.basis else None

    def text(self) -> str:
        """``judged 3 of 29 sessions planned (10%); lost 26: server fault 26``: the causes
        that lost any (all of them in JSON)."""
        of = "planned" if self.planned is not None else "played (no stored plan)"
        share = "" if self.share is None else f" ({100 * self.share:.0f}%)"
        lost = sum(self.lost.values())
        causes = ", ".join(f"{cause} {n}" for cause, n in self.lost.items() if n)
        return (f"judged {self.judged} of {self.basis} sessions {of}{share}; "
                + (f"lost {lost}: {causes}" if lost else "none lost"))


def loss_cause(error: str | None) -> LossCause:
    """The cause of an ``error`` session, from its stored reason."""
    if (error or "").startswith(TRUNCATED):
        return "truncation"
    return "stack fault" if (error or "").startswith(STACK_FAULT) else "server fault"


def coverage_of(target: str, planned: int | None,
                played: Iterable[tuple[str, str | None]]) -> Coverage:
    """Coverage of one target from its top-level sessions' ``(status, error)``."""
    lost: dict[LossCause, int] = dict.fromkeys(LOSS_CAUSES, 0)
    n = judged = 0
    for status, error in played:
        n += 1
        if status == "error":
            lost[loss_cause(error)] += 1
        else:
            judged += 1
    if planned is not None:
        lost["interrupted"] = max(0, planned - n)
    return Coverage(target, planned, n, judged, lost)


def planned_sessions(config: Mapping[str, Any] | None) -> int | None:
    """Top-level sessions a run's stored config plans per target (scenarios × repeats,
    ``live.run.run_config``), ``None`` when it holds no such plan."""
    config = config or {}
    scenarios, repeats = config.get("scenarios"), config.get("repeats")
    if not isinstance(scenarios, list) or not scenarios or not isinstance(repeats, int):
        return None
    return len(scenarios) * repeats
