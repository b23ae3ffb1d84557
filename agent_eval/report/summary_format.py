"""The shape of ``summary.json`` (``schema_version`` 1), as types the writers are checked
against: the file CI reads, so a key renamed or a value changed in kind is a type error,
not a silent break.  Keys are only ever added.  What each figure means is documented in
:mod:`agent_eval.report.ci_files` (and ``throughput``, ``agreement`` for their entries).

Rates are per 100 and ``None`` (``null``) when nothing was counted; an interval is
``[lo, hi]``, or ``None`` when there is none.
"""

from __future__ import annotations

from typing import TypedDict

from agent_eval.transcript import ExitState

Interval = list[float] | None
"""``[lo, hi]`` per 100, rounded to 2 places; ``None`` when no interval can be given."""


class RunEntry(TypedDict):
    id: int
    label: str | None
    kind: str
    status: str
    suite: str | None
    created_at: str  # ISO 8601


class Statistics(TypedDict):
    """The methods behind the figures, named."""

    interval: str
    comparison: str
    check: str
    clustered_interval: str
    interval_to_trust: str


class ClassEntry(TypedDict):
    errors: int
    per_100: float | None
    ci95: Interval


class HandshakeEntry(TypedDict):
    sessions: int
    completed: int
    completion_per_100: float | None
    ci95: Interval
    mean_done_share: float | None
    most_missed_step: str | None


class SpeedEntry(TypedDict):
    latency_p50_s: float | None
    latency_p95_s: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    decode_tps_mean: float | None
    completions_per_min: float | None
    allowed_calls_per_min: float | None
    completed_sessions_per_hour: float | None


class RepeatsEntry(TypedDict):
    scenarios: int
    k: int
    pass_all_per_100: float | None
    pass_hat: float | None
    flips_per_100: float | None


class ClusteredAcrossTasks(TypedDict):
    ci95: Interval
    design_effect: float | None
    scenarios: int


class ClusteredClass(TypedDict):
    ci95: Interval
    design_effect: float | None


class ClusteredEntry(TypedDict):
    errors_per_100_ci95: Interval
    design_effect: float | None
    sessions: int
    strata: int
    df: int
    few_clusters: bool
    across_tasks: ClusteredAcrossTasks
    classes: dict[str, ClusteredClass]


class StackFaultsEntry(TypedDict):
    """Stack faults per 100 calls the stack handled, and per code."""

    faults: int
    calls: int
    per_100: float | None
    ci95: Interval
    classes: dict[str, int]


class TargetEntry(TypedDict):
    """One column's figures."""

    sessions: int
    error_sessions: int
    messages: int
    tool_calls: int
    errors: int
    errors_per_100: float | None
    # sessions as clusters (``clustered.errors_per_100_ci95``): the one to read first
    errors_per_100_ci95_clustered: Interval
    errors_per_100_ci95: Interval  # Wilson on calls (calls as independent)
    classes: dict[str, ClassEntry]  # primary class of the denied calls
    # calls an agent CLI's rules allowed that their strict reading refuses, per class
    leaks: dict[str, int]
    # what the serving stack lost or mangled (AE5xx), never in errors
    stack_faults: StackFaultsEntry
    handshake: HandshakeEntry
    # denials, then the share per 100 of each next action (``transcript.NEXT_ACTIONS``:
    # the keys follow that registry), denials_per_session, turns_burned
    recovery: dict[str, int | float | None]
    exit_states: dict[ExitState, int]
    speed: SpeedEntry
    repeats: RepeatsEntry | None
    clustered: ClusteredEntry | None


class SessionCounts(TypedDict):
    """Counted as in junit.xml."""

    total: int
    failed: int
    errored: int


class UsefulWorkEntry(TypedDict):
    run: int
    start: str  # ISO 8601
    end: str
    minutes: float | None
    samples: int
    sources: list[str]
    allowed_calls: int
    denied_calls: int
    handshakes_completed: int
    completions: int
    allowed_calls_per_min: float | None
    denied_calls_per_min: float | None
    completed_handshakes_per_hour: float | None
    completions_per_min: float | None
    generation_tps: float | None


class AgreementEntry(TypedDict):
    calls_with_source_verdict: int
    agree: int
    agree_per_100: float | None
    agree_ci95: Interval
    ours_deny_source_allow: int
    ours_allow_source_deny: int


class SummaryJson(TypedDict):
    schema_version: int
    generator: str
    runs: list[RunEntry]
    statistics: Statistics
    columns: list[str]
    targets: dict[str, TargetEntry]
    sessions: SessionCounts
    useful_work: list[UsefulWorkEntry]
    source_agreement: dict[str, AgreementEntry]
