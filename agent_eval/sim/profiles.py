"""Behaviour profiles: how a simulated model errs, and what it does after a denial.

A :class:`Profile` is a small record of probabilities.  Each one imitates a column of
docs/design.md's failure table (errors per 100 tool calls by class); the rates there are per
call *including* retries, so the per-step mistake probability is lower than the column
total for profiles that retry denied variants.  ``tests/sim/test_calibration.py`` walks a
suite with each profile and checks the resulting rates and class mix.

After a denial a profile draws a :data:`Reaction`:

``pivot``    emit the right reference step (the reliable model's recovery).
``retry``    another denied variant (a different mutation or a different form of it).
``repeat``   the identical call again.
``give-up``  a short final text and no tool call (the session is left open).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from agent_eval.errors import ConfigError

Reaction = Literal["pivot", "retry", "repeat", "give-up"]
REACTIONS: tuple[Reaction, ...] = ("pivot", "retry", "repeat", "give-up")

TEMPTATION_CODES: dict[str, frozenset[str]] = {
    "big-output": frozenset({"AE301", "AE302"}),
    "web-search": frozenset({"AE307", "AE309"}),
    "flags": frozenset({"AE310", "AE311"}),
    "read-path": frozenset({"AE320"}),
    "chain": frozenset({"AE304", "AE306"}),
    "script-tool": frozenset({"AE101"}),
    "handshake": frozenset(),
}
"""Which failure classes each scenario temptation (``Scenario.temptations``) invites."""


@dataclass(frozen=True)
class Profile:
    """A seeded simulated model.

    ``mix`` weights the failure classes (AE code -> relative weight) a mistake is drawn
    from; ``tempted`` multiplies the mistake probability, and the weight of the invited
    classes, on scenarios whose temptations invite a class of the mix.
    """

    name: str
    imitates: str
    p_mistake: float
    mix: tuple[tuple[str, float], ...]
    after_denial: tuple[tuple[Reaction, float], ...]
    tempted: float = 1.5
    p_skip_handshake: float = 0.0  # ends before the handshake on "handshake" scenarios
    p_parallel: float = 0.0  # two independent steps in one reply
    p_text_call: float = 0.0  # a tool call written as text (AE104)

    @property
    def model_id(self) -> str:
        """The model name this profile is served under in ``/v1/models``."""
        return f"sim-{self.name}"


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(
            name="disciplined",
            imitates="Qwen3.5-27B (dense): 5.6 errors/100 calls; blocked reads, an unlisted "
            "script, rare pipes, stderr redirects and python -c; pivots at once",
            p_mistake=0.049,
            mix=(("AE320", 3.0), ("AE309", 2.0), ("AE301", 1.0), ("AE302", 1.0),
                 ("AE308", 1.0), ("AE311", 1.0)),
            after_denial=(("pivot", 0.95), ("retry", 0.05)),
            tempted=1.3,
            p_parallel=0.08,
        ),
        Profile(
            name="piper",
            imitates="Qwen3.6-35B-A3B (MoE): 12 errors/100 calls; mostly pipes and chains, "
            "some bare ls/curl; retries denied variants, often never reaches the handshake",
            p_mistake=0.064,
            mix=(("AE301", 6.3), ("AE304", 2.5), ("AE307", 0.7), ("AE311", 2.5)),
            after_denial=(("pivot", 0.45), ("retry", 0.35), ("repeat", 0.1), ("give-up", 0.1)),
            tempted=1.5,
            p_skip_handshake=0.35,
            p_text_call=0.002,
        ),
        Profile(
            name="wrapper",
            imitates="Qwen3.5-122B-A10B (MoE): 10 errors/100 calls; heredocs, timeout "
            "prefixes, chains, pipes, a script name as a tool, blocked reads, unlisted scripts",
            p_mistake=0.076,
            mix=(("AE304", 2.3), ("AE306", 1.6), ("AE301", 1.6), ("AE101", 1.6),
                 ("AE320", 1.6), ("AE305", 0.8), ("AE309", 0.8)),
            after_denial=(("pivot", 0.75), ("retry", 0.2), ("give-up", 0.05)),
            tempted=1.4,
            p_skip_handshake=0.1,
        ),
        Profile(
            name="inventor",
            imitates="no docs/design.md column: a flag guesser that invents scripts and flags "
            "(unlisted-script, unknown-flag, invalid-argument dominate)",
            p_mistake=0.087,
            mix=(("AE309", 3.0), ("AE310", 3.0), ("AE311", 3.0), ("AE307", 0.5)),
            after_denial=(("pivot", 0.5), ("retry", 0.4), ("give-up", 0.1)),
            tempted=1.6,
            p_skip_handshake=0.15,
        ),
    ]
}
"""The built-in profiles by name."""


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (``sim-`` prefix allowed); ConfigError if unknown."""
    key = name.removeprefix("sim-")
    if key not in PROFILES:
        raise ConfigError(
            f"unknown simulator profile {name!r}; choose one of {', '.join(PROFILES)}",
            field="profile",
        )
    return PROFILES[key]


@dataclass(frozen=True)
class DeclaredProfile:
    """A statistical profile whose per-scenario error probabilities are declared.

    Unlike :class:`Profile` (a behaviour served over HTTP, whose rates follow from its
    mistakes and reactions), the truth here is known: every call of a session on scenario
    ``s`` errs with the session's own propensity ``q ~ Beta(p_s·c, (1 − p_s)·c)``, so the
    marginal per-call error probability is exactly ``p_s`` while calls of one session err
    together (intra-session correlation ``1/(c + 1)``, design effect
    ``1 + (m − 1)/(c + 1)`` for ``m`` calls per session).  ``benchmarks/bench_stats.py``
    draws runs from it in-process to measure interval coverage, A/A false alarms and power.
    """

    name: str
    scenarios: tuple[tuple[str, float, int], ...]  # (scenario, p_s per call, calls/session)
    concentration: float

    @property
    def true_rate(self) -> float:
        """The pooled per-call error probability of one pass over every scenario."""
        calls = sum(m for _, _, m in self.scenarios)
        return sum(p * m for _, p, m in self.scenarios) / calls

    def shifted(self, rise: float) -> DeclaredProfile:
        """The same profile with every scenario's probability raised by ``rise`` (0..1)."""
        return DeclaredProfile(f"{self.name}+{rise:g}",
                               tuple((s, min(1.0, p + rise), m) for s, p, m in self.scenarios),
                               self.concentration)

    def session(self, scenario: int, rng: random.Random) -> tuple[int, int]:
        """``(errors, calls)`` of one session on the ``scenario``-th scenario."""
        _, p, m = self.scenarios[scenario]
        q = rng.betavariate(p * self.concentration, (1 - p) * self.concentration) if 0 < p < 1 \
            else p
        return sum(rng.random() < q for _ in range(m)), m


DECLARED = DeclaredProfile(
    name="declared",
    scenarios=(
        ("lookup-status", 0.00, 8), ("list-stages", 0.01, 10), ("render-report", 0.02, 14),
        ("query-db", 0.03, 18), ("update-stage", 0.05, 12), ("read-config", 0.07, 20),
        ("web-search", 0.10, 16), ("big-output", 0.14, 24), ("flags", 0.19, 22),
        ("chain", 0.25, 26), ("script-tool", 0.32, 18), ("handshake", 0.40, 12),
    ),
    concentration=20.0,
)
"""Twelve scenarios from 0 to 40 errors per 100 calls (pooled 14.56), sessions of 8–26
calls, intra-session correlation 1/21 (session design effects 1.3–2.2): tasks differ far
more than sessions of one task, as on the real transcripts (docs/statistics.md)."""
