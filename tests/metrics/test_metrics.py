"""Metrics as a specification: hand-computed values, docs/design.md's numbers reproduced."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.metrics import (
    FISHER_TEST,
    PRECEDENCE,
    TOTAL,
    UNCLASSIFIED,
    Z_TEST,
    Rate,
    RepeatStats,
    class_table,
    compare_groups,
    compare_rates,
    fisher_exact_p,
    flipped_scenarios,
    percentile,
    repeat_stats,
    summarize,
    summarize_repeats,
    wilson_interval,
)
from agent_eval.transcript import CallRow, SessionRow, TurnRow

T0 = datetime(2025, 5, 1, 12, 0, 0)
_ids = count(1)


def session(
    *,
    target="qwen3.6-35b",
    scenario="ralf-research",
    repeat=0,
    status="completed",
    tags=(),
    run_id=1,
    parent_id=None,
    handshake=(0, 0, False, None),
    n_turns=1,
    n_messages=2,
    started_at=None,
    finished_at=None,
) -> SessionRow:
    required, done, completed, missed = handshake
    return SessionRow(
        id=next(_ids),
        run_id=run_id,
        target=target,
        scenario=scenario,
        repeat=repeat,
        status=status,
        error="server closed the connection" if status == "error" else None,
        parent_id=parent_id,
        tags=tuple(tags),
        handshake_required=required,
        handshake_done=done,
        handshake_completed=completed,
        handshake_missed_step=missed,
        n_turns=n_turns,
        n_messages=n_messages,
        n_calls=0,
        started_at=started_at,
        finished_at=finished_at,
    )


def call(s: SessionRow, index: int, primary: str | None = None, *, turn=None, next_action=None):
    """An allowed call, or a denied one when ``primary`` is given."""
    return CallRow(
        session_id=s.id,
        run_id=s.run_id,
        target=s.target,
        scenario=s.scenario,
        index=index,
        turn_index=index if turn is None else turn,
        tool="bash",
        decision="deny" if primary else "allow",
        primary=primary,
        next_action=next_action,
    )


def turn(
    s: SessionRow, index: int, latency=None, ttft=None, tps=None, prompt=None, completion=None
):
    return TurnRow(
        s.id, s.run_id, s.target, index, latency, ttft, prompt, completion, None, tps, None
    )


# docs/design.md "The headline metric": sessions, messages, calls and errors per primary class.
# "other bash (argument quoting, complex uv run)" is filed under AE313 complex-shell here.
WORKLOADS = {
    "qwen3.6-35b": (20, 145, 158, {"AE301": 10, "AE304": 4, "AE307": 1, "AE313": 4}),
    "qwen3.5-27b": (
        21, 138, 161,
        {"AE301": 1, "AE302": 1, "AE308": 1, "AE309": 2, "AE313": 1, "AE320": 3},
    ),
    "qwen3.5-122b": (
        17, 121, 128,
        {"AE301": 2, "AE304": 3, "AE305": 1, "AE306": 2, "AE309": 1, "AE320": 2, "AE101": 2},
    ),
}  # fmt: skip
BREAKDOWN = {  # docs/design.md's breakdown table, errors per 100 tool calls, two decimals
    "qwen3.6-35b": {"AE301": 6.33, "AE304": 2.53, "AE307": 0.63, "AE313": 2.53, TOTAL: 12.03},
    "qwen3.5-27b": {
        "AE301": 0.62, "AE302": 0.62, "AE308": 0.62, "AE309": 1.24, "AE313": 0.62,
        "AE320": 1.86, TOTAL: 5.59,
    },
    "qwen3.5-122b": {
        "AE101": 1.56, "AE305": 0.78, "AE306": 1.56, "AE301": 1.56, "AE304": 2.34,
        "AE309": 0.78, "AE320": 1.56, TOTAL: 10.16,
    },
}  # fmt: skip


def workload_rows(target: str):
    """Sessions and calls with exactly docs/design.md's counts; calls spread round-robin."""
    n_sessions, n_messages, n_calls, errors = WORKLOADS[target]
    per_session, extra = divmod(n_messages, n_sessions)
    sessions = [
        session(target=target, n_messages=per_session + (i < extra)) for i in range(n_sessions)
    ]
    primaries = [code for code, k in errors.items() for _ in range(k)]
    primaries += [None] * (n_calls - len(primaries))
    calls = [call(sessions[i % n_sessions], i // n_sessions, p) for i, p in enumerate(primaries)]
    return sessions, calls


@pytest.fixture(scope="module")
def context_summaries():
    rows = {target: workload_rows(target) for target in WORKLOADS}
    sessions = (s for target in rows for s in rows[target][0])
    calls = (c for target in rows for c in rows[target][1])  # generators: one pass each
    return summarize(sessions, calls, by="target")


@pytest.mark.parametrize(
    "target, errors, per100_1dp, per100_2dp",
    [
        pytest.param("qwen3.6-35b", 19, 12.0, 12.03, id="35B-19-of-158"),
        pytest.param("qwen3.5-27b", 9, 5.6, 5.59, id="27B-9-of-161"),
        pytest.param("qwen3.5-122b", 13, 10.2, 10.16, id="122B-13-of-128"),
    ],
)
def test_errors_per_100_calls_reproduce_context_table(
    context_summaries, target, errors, per100_1dp, per100_2dp
):
    summary = context_summaries[target]
    n_sessions, n_messages, n_calls, _ = WORKLOADS[target]
    assert (summary.sessions, summary.messages, summary.calls) == (n_sessions, n_messages, n_calls)
    assert (summary.errors.k, summary.errors.n) == (errors, n_calls)
    assert round(summary.errors.per100, 1) == per100_1dp
    assert round(summary.errors.per100, 2) == per100_2dp


@pytest.mark.parametrize("target", list(BREAKDOWN))
def test_class_breakdown_reproduces_context_table(context_summaries, target):
    summary = context_summaries[target]
    got = {code: round(rate.per100, 2) for code, rate in summary.classes.items()}
    got[TOTAL] = round(summary.errors.per100, 2)
    assert got == BREAKDOWN[target]


@pytest.mark.parametrize("target", list(WORKLOADS))
def test_class_rates_add_up_to_the_total(context_summaries, target):
    summary = context_summaries[target]
    assert sum(rate.k for rate in summary.classes.values()) == summary.errors.k
    assert sum(r.per100 for r in summary.classes.values()) == pytest.approx(summary.errors.per100)


def test_classes_are_listed_in_primary_precedence_order(context_summaries):
    assert list(context_summaries["qwen3.5-122b"].classes) == [
        "AE101", "AE305", "AE306", "AE301", "AE304", "AE309", "AE320",
    ]  # fmt: skip


def test_class_table_has_a_row_per_class_seen_anywhere_and_a_total_row(context_summaries):
    table = dict(class_table(context_summaries))
    codes = [code for code, _ in class_table(context_summaries)]
    assert codes == [
        "AE101", "AE305", "AE308", "AE306", "AE301", "AE304", "AE302", "AE313",
        "AE307", "AE309", "AE320", TOTAL,
    ]  # fmt: skip
    assert table["AE302"]["qwen3.6-35b"] == Rate.of(0, 158)
    assert round(table["AE302"]["qwen3.5-27b"].per100, 2) == 0.62
    assert table[TOTAL]["qwen3.5-27b"].k == 9


def test_class_table_can_list_every_registry_class(context_summaries):
    codes = [code for code, _ in class_table(context_summaries, all_classes=True)]
    assert codes == [*PRECEDENCE, TOTAL]


def test_design_doc_lists_the_precedence_of_the_registry_whole_and_in_order():
    """docs/design.md's "Primary class" list is the registry's PRECEDENCE, not a copy
    that drifts (it lacked AE106 and AE107 and put AE105 before them)."""
    from pathlib import Path

    design = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    section = design.split("### Primary class", 1)[1].split("\n#", 1)[0]
    listed = section.split("in this order", 1)[1].split("The order puts", 1)[0]
    assert re.findall(r"AE\d{3}", listed) == list(PRECEDENCE)


def test_one_precedence_rank_orders_findings_primary_codes_and_class_rows():
    from agent_eval.metrics.classes import class_sort_key
    from agent_eval.policy import precedence_rank, primary_code

    assert [precedence_rank(c) for c in PRECEDENCE] == list(range(len(PRECEDENCE)))
    assert precedence_rank("AE900") == precedence_rank("unclassified") == len(PRECEDENCE)
    assert class_sort_key("AE305") == (precedence_rank("AE305"), "AE305")
    assert primary_code(["AE900", "AE301", "AE305"]) == "AE305"


def test_precedence_is_the_policy_registry_order():
    from agent_eval import policy

    assert PRECEDENCE == tuple(policy.PRECEDENCE)


@pytest.mark.parametrize(
    "k, n, lo, hi",
    [
        pytest.param(19, 158, 0.0783519, 0.1801817, id="19-of-158"),
        pytest.param(9, 161, 0.0296850, 0.1028148, id="9-of-161"),
        pytest.param(13, 128, 0.0603186, 0.1660249, id="13-of-128"),
        pytest.param(0, 160, 0.0, 0.0234462, id="none-of-160"),
        pytest.param(160, 160, 0.9765538, 1.0, id="all-of-160"),
        pytest.param(0, 0, 0.0, 1.0, id="no-trials"),
    ],
)
def test_wilson_interval(k, n, lo, hi):
    assert wilson_interval(k, n) == pytest.approx((lo, hi), abs=1e-7)


def test_rate_is_per_100_with_wilson_bounds_per_100():
    rate = Rate.of(19, 158)
    assert rate.per100 == pytest.approx(12.0253, abs=1e-4)
    assert (rate.lo100, rate.hi100) == pytest.approx((7.83519, 18.01817), abs=1e-5)
    assert rate.share == pytest.approx(19 / 158)


def test_rate_of_nothing_has_no_value():
    assert Rate.of(0, 0) == Rate(0, 0, None, None, None)
    assert Rate.of(0, 0).share is None


@pytest.mark.parametrize("k, n", [(5, 4), (-1, 4), (0, -1)], ids=["k>n", "k<0", "n<0"])
def test_rate_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError, match="0 <= k <= n"):
        Rate.of(k, n)


@pytest.mark.parametrize(
    "a, b, p_value, fisher_p, significant",
    [
        pytest.param((9, 161), (19, 158), 0.042271, 0.048636, True, id="27B-vs-35B-real"),
        pytest.param((19, 158), (9, 161), 0.042271, 0.048636, True, id="35B-vs-27B-symmetric"),
        pytest.param((9, 161), (13, 128), 0.145956, 0.181393, False, id="27B-vs-122B-noise"),
        pytest.param((9, 161), (12, 160), 0.488969, 0.508447, False, id="9-vs-12-noise"),
    ],
)
def test_two_proportion_significance_matches_context(a, b, p_value, fisher_p, significant):
    result = compare_rates(*a, *b)
    assert result.p_value == pytest.approx(p_value, abs=1e-6)
    assert result.fisher_p == pytest.approx(fisher_p, abs=1e-6)
    assert result.significant is significant
    assert result.test == Z_TEST == "two-proportion z-test (pooled, no continuity correction)"


def test_difference_is_b_minus_a_with_wald_interval():
    result = compare_rates(9, 161, 19, 158)
    assert result.diff100 == pytest.approx(6.435254, abs=1e-6)
    assert (result.lo100, result.hi100) == pytest.approx((0.245455, 12.625053), abs=1e-6)
    assert result.z == pytest.approx(2.030846, abs=1e-6)
    assert (result.a.k, result.b.k) == (9, 19)


@pytest.mark.parametrize(
    "a, b", [((0, 0), (5, 100)), ((5, 100), (0, 0))], ids=["a-empty", "b-empty"]
)
def test_comparison_with_an_empty_side_has_no_difference(a, b):
    result = compare_rates(*a, *b)
    assert (result.diff100, result.lo100, result.hi100, result.z) == (None, None, None, None)
    assert (result.p_value, result.fisher_p, result.significant) == (1.0, 1.0, False)


def test_comparison_of_two_error_free_groups_is_no_difference():
    result = compare_rates(0, 150, 0, 160)
    assert (result.diff100, result.lo100, result.hi100) == (0.0, 0.0, 0.0)
    assert (result.z, result.p_value, result.fisher_p, result.significant) == (
        None,
        1.0,
        1.0,
        False,
    )


@pytest.mark.parametrize(
    "table, p",
    [
        pytest.param((3, 4, 1, 4), 0.485714, id="tea-tasting-3-of-4"),
        pytest.param((1, 10, 9, 10), 0.001093, id="1-of-10-vs-9-of-10"),
        pytest.param((0, 50, 0, 50), 1.0, id="no-errors"),
        pytest.param((5, 10, 5, 10), 1.0, id="identical"),
    ],
)
def test_fisher_exact_two_sided(table, p):
    assert fisher_exact_p(*table) == pytest.approx(p, abs=1e-6)
    assert FISHER_TEST == "Fisher's exact test (two-sided)"


def test_fisher_exact_handles_a_million_calls_without_overflow():
    p = fisher_exact_p(500, 1_000_000, 1_000, 1_000_000)
    assert 0.0 <= p < 1e-20


@pytest.mark.parametrize(
    "values, q, expected",
    [
        pytest.param([1.0, 2.0, 3.0, 4.0], 50, 2.5, id="p50-even-interpolates"),
        pytest.param([4.0, 1.0, 3.0, 2.0], 50, 2.5, id="p50-unsorted"),
        pytest.param([float(v) for v in range(1, 21)], 95, 19.05, id="p95-of-1-to-20"),
        pytest.param([7.0], 95, 7.0, id="single-value"),
        pytest.param([1.0, 9.0], 0, 1.0, id="p0-is-min"),
        pytest.param([1.0, 9.0], 100, 9.0, id="p100-is-max"),
        pytest.param([], 50, None, id="empty"),
    ],
)
def test_percentile_interpolates_between_closest_ranks(values, q, expected):
    assert percentile(values, q) == (expected if expected is None else pytest.approx(expected))


def test_group_without_calls_has_no_error_rate():
    idle = session(target="idle")
    summary = summarize([idle], [])["idle"]
    assert (summary.sessions, summary.calls, summary.errors) == (1, 0, Rate.of(0, 0))
    assert summary.classes == {}
    assert summary.recovery.denials_per_session == 0.0
    assert summary.handshake.completed == Rate.of(0, 0)
    assert summary.handshake.mean_done_share is None


def test_error_sessions_are_counted_apart_and_excluded_from_model_rates():
    ok = session(status="completed", n_messages=4)
    crashed = session(status="error", n_messages=9, handshake=(3, 0, False, "ralf_spawn.py"))
    calls = [
        call(ok, 0),
        call(ok, 1, "AE301"),
        call(crashed, 0, "AE304"),
        call(crashed, 1, "AE304"),
    ]
    summary = summarize([ok, crashed], calls)["qwen3.6-35b"]
    assert (summary.sessions, summary.error_sessions, summary.messages) == (1, 1, 4)
    assert (summary.errors.k, summary.errors.n) == (1, 2)
    assert list(summary.classes) == ["AE301"]
    assert summary.exit_states == {"completed": 1, "stalled": 0, "abandoned": 0, "error": 1}
    assert summary.handshake.sessions == 0


def test_exit_states_are_counted_per_target():
    sessions = [
        session(target="a", status="completed"),
        session(target="a", status="stalled"),
        session(target="a", status="stalled"),
        session(target="b", status="abandoned"),
    ]
    summaries = summarize(sessions, [])
    assert summaries["a"].exit_states == {"completed": 1, "stalled": 2, "abandoned": 0, "error": 0}
    assert summaries["b"].exit_states == {"completed": 0, "stalled": 0, "abandoned": 1, "error": 0}


def test_calls_of_sessions_not_given_are_ignored():
    kept = session()
    other = session()
    summary = summarize([kept], [call(kept, 0), call(other, 0, "AE301")])["qwen3.6-35b"]
    assert (summary.calls, summary.errors.k) == (1, 0)


def test_handshake_completion_share_mean_steps_and_most_missed_step():
    sessions = [
        session(handshake=(3, 3, True, None)),
        session(handshake=(3, 1, False, "update_stage_status.py")),
        session(handshake=(3, 0, False, "update_attempt_outcome.py")),
        session(handshake=(3, 0, False, "update_attempt_outcome.py")),
        session(handshake=(0, 0, False, None)),  # no handshake asked: not counted
        session(status="error", handshake=(3, 0, False, "ralf_spawn.py")),
    ]
    stats = summarize(sessions, [])["qwen3.6-35b"].handshake
    assert stats.sessions == 4
    assert stats.completed == Rate.of(1, 4)
    assert stats.mean_done_share == pytest.approx((1 + 1 / 3 + 0 + 0) / 4)
    assert stats.missed_steps == {"update_attempt_outcome.py": 2, "update_stage_status.py": 1}
    assert stats.most_missed == "update_attempt_outcome.py"


def test_recovery_after_denial_counts_next_actions_and_burned_turns():
    retrier, pivoter = session(), session()
    calls = [
        call(retrier, 0, "AE301", turn=0, next_action="retry-denied"),  # ls scripts/ | grep
        call(retrier, 1, "AE304", turn=1, next_action="repeat"),  # cd /path && uv run ...
        call(retrier, 2, "AE304", turn=1, next_action="pivot"),
        call(retrier, 3, turn=2),  # turn 2 has an allowed call: not burned
        call(retrier, 4, "AE307", turn=3, next_action="abandon"),  # curl -s 'https://...'
        call(pivoter, 0, turn=0),
        call(pivoter, 1, "AE309", turn=1, next_action="pivot"),  # food_management.py
        call(pivoter, 2, turn=2),
    ]
    recovery = summarize([retrier, pivoter], calls)["qwen3.6-35b"].recovery
    assert recovery.denials == 5
    assert {a: r.k for a, r in recovery.actions.items()} == {
        "pivot": 2, "retry-denied": 1, "repeat": 1, "abandon": 1,
    }  # fmt: skip
    assert recovery.pivot == Rate.of(2, 5)
    assert recovery.denials_per_session == 2.5
    assert recovery.turns_burned == 4  # retrier's turns 0, 1 and 3, pivoter's turn 1


def test_by_tag_counts_a_session_in_each_of_its_tags():
    both = session(tags=("email", "ralf"))
    email_only = session(tags=("email",))
    untagged = session(tags=())
    calls = [call(both, 0, "AE301"), call(email_only, 0), call(untagged, 0, "AE304")]
    summaries = summarize([both, email_only, untagged], calls, by="tag")
    assert list(summaries) == ["email", "ralf"]
    assert (summaries["email"].sessions, summaries["email"].calls) == (2, 2)
    assert (summaries["ralf"].sessions, summaries["ralf"].calls) == (1, 1)
    assert summaries["email"].errors.k + summaries["ralf"].errors.k == 2  # one call, twice


@pytest.mark.parametrize(
    "by, groups",
    [
        pytest.param("all", {"all": 3}, id="all"),
        pytest.param("target", {"qwen3.6-35b": 2, "qwen3.5-27b": 1}, id="target"),
        pytest.param("scenario", {"inbox-triage": 1, "ralf-research": 2}, id="scenario"),
        pytest.param("run", {"7": 1, "8": 2}, id="run"),
    ],
)
def test_grouping_puts_each_session_in_one_group(by, groups):
    sessions = [
        session(target="qwen3.6-35b", scenario="inbox-triage", run_id=7),
        session(target="qwen3.6-35b", scenario="ralf-research", run_id=8),
        session(target="qwen3.5-27b", scenario="ralf-research", run_id=8),
    ]
    summaries = summarize(sessions, [call(s, 0) for s in sessions], by=by)
    assert {group: summary.calls for group, summary in summaries.items()} == groups


def test_unknown_grouping_is_refused():
    with pytest.raises(ValueError, match="unknown grouping 'model'"):
        summarize([], [], by="model")


def test_speed_percentiles_tokens_and_decode_rate_from_turns():
    s = session()
    turns = [
        turn(s, 0, latency=1.0, ttft=0.1, tps=20.0, prompt=30_000, completion=200),
        turn(s, 1, latency=2.0, ttft=0.2, tps=30.0, prompt=31_000, completion=100),
        turn(s, 2, latency=3.0, ttft=0.3, prompt=32_000),
        turn(s, 3, latency=4.0, ttft=0.4),
        turn(s, 4),  # a reply the server reported nothing about
    ]
    speed = summarize([s], [], turns)["qwen3.6-35b"].speed
    assert speed.turns == 5
    assert (speed.latency_p50, speed.latency_p95) == pytest.approx((2.5, 3.85))
    assert (speed.ttft_p50, speed.ttft_p95) == pytest.approx((0.25, 0.385))
    assert speed.decode_tps_mean == 25.0
    assert (speed.prompt_tokens, speed.completion_tokens, speed.reasoning_tokens) == (
        93_000,
        300,
        0,
    )


def test_useful_work_per_minute_over_the_wall_window():
    done = session(
        status="completed", n_turns=6, started_at=T0, finished_at=T0 + timedelta(minutes=2)
    )
    stuck = session(
        status="stalled",
        n_turns=4,
        started_at=T0 + timedelta(minutes=1),
        finished_at=T0 + timedelta(minutes=10),
    )
    crashed = session(  # a fault: neither its time nor its work counts
        status="error", n_turns=9, started_at=T0 - timedelta(hours=1), finished_at=T0
    )
    calls = [call(done, i) for i in range(10)] + [call(stuck, i) for i in range(5)]
    calls += [call(stuck, 5 + i, "AE306") for i in range(3)] + [call(crashed, 0)]
    speed = summarize([done, stuck, crashed], calls)["qwen3.6-35b"].speed
    assert speed.window_s == 600.0
    assert speed.completions_per_min == 1.0  # 10 replies in 10 minutes
    assert speed.allowed_calls_per_min == 1.5  # 15 allowed calls in 10 minutes
    assert speed.completed_sessions_per_hour == 6.0  # 1 completed session in 1/6 hour


def test_naive_timestamps_are_read_as_utc_next_to_aware_ones():
    imported = session(started_at=T0, finished_at=T0 + timedelta(minutes=1))
    live = session(finished_at=(T0 + timedelta(minutes=5)).replace(tzinfo=UTC))
    assert summarize([imported, live], [])["qwen3.6-35b"].speed.window_s == 300.0


def test_throughput_is_unknown_without_timestamps():
    speed = summarize([session(n_turns=3)], [])["qwen3.6-35b"].speed
    assert speed.window_s is None
    assert (speed.completions_per_min, speed.allowed_calls_per_min) == (None, None)
    assert speed.completed_sessions_per_hour is None
    assert (speed.latency_p50, speed.ttft_p95, speed.decode_tps_mean) == (None, None, None)


def repeats(target, scenario, outcomes):
    """Sessions and calls for ``outcomes``: "pass", "denied" (completed but with a denied
    call), "stalled", "error" — one repeat each, in order."""
    sessions, calls = [], []
    for r, outcome in enumerate(outcomes):
        status = {"pass": "completed", "denied": "completed"}.get(outcome, outcome)
        s = session(target=target, scenario=scenario, repeat=r, status=status)
        sessions.append(s)
        calls.append(call(s, 0, "AE301" if outcome == "denied" else None, next_action="pivot"))
    return sessions, calls


def rows_for(spec):
    sessions, calls = [], []
    for (target, scenario), outcomes in spec.items():
        more_sessions, more_calls = repeats(target, scenario, outcomes)
        sessions += more_sessions
        calls += more_calls
    return sessions, calls


REPEAT_SPEC = {
    ("qwen3.6-35b", "inbox-triage"): ["pass", "pass", "pass"],
    ("qwen3.6-35b", "ralf-research"): ["pass", "denied", "pass"],
    ("qwen3.6-35b", "calendar-move"): ["stalled", "denied", "abandoned"],
    ("qwen3.6-35b", "lights-off"): ["pass", "error", "pass"],
}


def test_repeat_outcomes_per_target_and_scenario():
    stats = repeat_stats(*rows_for(REPEAT_SPEC))
    assert stats[("qwen3.6-35b", "inbox-triage")].outcomes == (True, True, True)
    assert stats[("qwen3.6-35b", "ralf-research")].outcomes == (True, False, True)
    assert stats[("qwen3.6-35b", "calendar-move")].outcomes == (False, False, False)
    assert stats[("qwen3.6-35b", "lights-off")].outcomes == (True, True)  # error repeat left out


@pytest.mark.parametrize(
    "outcomes, k, expected",
    [
        pytest.param((True, True, True), 3, 1.0, id="3-of-3-pass^3"),
        pytest.param((True, False, True), 1, 2 / 3, id="2-of-3-pass^1"),
        pytest.param((True, False, True), 2, 1 / 3, id="2-of-3-pass^2"),
        pytest.param((True, False, True), 3, 0.0, id="2-of-3-pass^3"),
        pytest.param((True, True, True, False), 2, 0.5, id="3-of-4-pass^2"),
        pytest.param((True, True), 3, None, id="too-few-repeats"),
    ],
)
def test_pass_hat_k_is_the_unbiased_estimator(outcomes, k, expected):
    assert RepeatStats("t", "s", outcomes).pass_hat(k) == (
        expected if expected is None else pytest.approx(expected)
    )


@pytest.mark.parametrize(
    "outcomes, flipped",
    [
        pytest.param((True, False, True), True, id="mixed"),
        pytest.param((True, True, True), False, id="all-pass"),
        pytest.param((False, False), False, id="all-fail"),
        pytest.param((True,), False, id="single-repeat"),
    ],
)
def test_a_scenario_flips_when_its_repeats_disagree(outcomes, flipped):
    assert RepeatStats("t", "s", outcomes).flipped is flipped


def test_pass_k_and_flip_rate_per_target():
    summary = summarize_repeats(repeat_stats(*rows_for(REPEAT_SPEC)).values())["qwen3.6-35b"]
    assert (summary.scenarios, summary.k) == (4, 2)  # k defaults to the fewest repeats
    assert summary.pass_all == Rate.of(2, 4)  # inbox-triage and lights-off
    assert summary.pass_hat == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    assert summary.flips == Rate.of(1, 4)  # ralf-research


def test_pass_hat_with_explicit_k_skips_scenarios_with_fewer_repeats():
    stats = repeat_stats(*rows_for(REPEAT_SPEC)).values()
    assert summarize_repeats(stats, k=3)["qwen3.6-35b"].pass_hat == pytest.approx(1 / 3)


def test_a_denied_call_in_a_child_session_fails_its_parent_repeat():
    parent = session(scenario="ralf-research", status="completed")
    child = session(scenario="step-evaluator", parent_id=parent.id, status="completed")
    stats = repeat_stats([parent, child], [call(parent, 0), call(child, 0, "AE305")])
    assert list(stats) == [("qwen3.6-35b", "ralf-research")]  # children are not repeats
    assert stats[("qwen3.6-35b", "ralf-research")].outcomes == (False,)


def test_flipped_scenarios_between_two_targets():
    a = rows_for({
        ("qwen3.5-27b", "inbox-triage"): ["pass", "pass"],
        ("qwen3.5-27b", "ralf-research"): ["pass", "pass"],
        ("qwen3.5-27b", "calendar-move"): ["stalled", "pass"],
        ("qwen3.5-27b", "only-in-a"): ["pass"],
    })  # fmt: skip
    b = rows_for({
        ("qwen3.6-35b", "inbox-triage"): ["pass", "pass"],
        ("qwen3.6-35b", "ralf-research"): ["pass", "denied"],
        ("qwen3.6-35b", "calendar-move"): ["pass", "pass"],
    })  # fmt: skip
    flips = flipped_scenarios(*a, *b)
    assert [(f.scenario, f.direction) for f in flips] == [
        ("calendar-move", "fixed"),
        ("ralf-research", "broke"),
    ]
    assert (flips[1].a, flips[1].b) == ((True, True), (True, False))


def test_compare_groups_reports_overall_and_per_class_differences(context_summaries):
    result = compare_groups(context_summaries["qwen3.5-27b"], context_summaries["qwen3.6-35b"])
    assert (result.a, result.b) == ("qwen3.5-27b", "qwen3.6-35b")
    assert result.errors.significant is True
    assert result.errors.p_value == pytest.approx(0.042271, abs=1e-6)
    assert list(result.classes)[:3] == ["AE308", "AE301", "AE304"]
    pipe = result.classes["AE301"]
    assert (pipe.a.k, pipe.a.n, pipe.b.k, pipe.b.n) == (1, 161, 10, 158)
    assert result.classes["AE302"].b == Rate.of(0, 158)  # never hit by b: zero of its calls


def test_compare_groups_compares_handshake_and_pivot_shares():
    steady = [session(target="27b", handshake=(3, 3, True, None)) for _ in range(4)]
    stuck = [session(target="35b", handshake=(3, 0, False, "update_attempt_outcome.py"))]
    stuck.append(session(target="35b", handshake=(3, 3, True, None)))
    calls = [call(steady[0], 0, "AE309", next_action="pivot")]
    calls += [call(stuck[0], i, "AE301", next_action="retry-denied") for i in range(3)]
    summaries = summarize([*steady, *stuck], calls)
    result = compare_groups(summaries["27b"], summaries["35b"])
    assert result.handshake.diff100 == pytest.approx(-50.0)  # 50% against 100%
    assert (result.pivot.a, result.pivot.b) == (Rate.of(1, 1), Rate.of(0, 3))


def test_a_denial_stored_without_a_primary_code_counts_as_unclassified_last():
    s = session()
    bare_denial = replace(call(s, 1, "AE301"), primary=None)
    summary = summarize([s], [call(s, 0, "AE320"), bare_denial])["qwen3.6-35b"]
    assert list(summary.classes) == ["AE320", UNCLASSIFIED]
    assert summary.errors.k == 2


count_pairs = st.integers(0, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@settings(max_examples=200, deadline=None)
@given(count_pairs)
def test_wilson_interval_brackets_the_observed_rate(pair):
    k, n = pair
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= hi <= 1.0
    if n:
        assert lo <= k / n <= hi


@settings(max_examples=100, deadline=None)
@given(count_pairs, count_pairs)
def test_comparison_is_symmetric_and_p_values_are_probabilities(a, b):
    forward, backward = compare_rates(*a, *b), compare_rates(*b, *a)
    assert forward.p_value == pytest.approx(backward.p_value)
    assert forward.fisher_p == pytest.approx(backward.fisher_p)
    assert 0.0 <= forward.p_value <= 1.0 and 0.0 <= forward.fisher_p <= 1.0
    if forward.diff100 is not None:
        assert forward.diff100 == pytest.approx(-backward.diff100)
        assert forward.lo100 <= forward.diff100 <= forward.hi100


codes = st.sampled_from([None, "AE101", "AE301", "AE304", "AE320", "AE999"])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), codes), max_size=40))
def test_class_counts_always_add_up_to_the_total_per_group_and_overall(spec):
    targets = ["a", "b", "c", "d"]
    sessions = {t: session(target=t) for t in targets}
    calls = [call(sessions[targets[t]], i, code) for i, (t, code) in enumerate(spec)]
    per_target = summarize(sessions.values(), calls)
    overall = summarize(sessions.values(), calls, by="all")["all"]
    for summary in [*per_target.values(), overall]:
        assert sum(rate.k for rate in summary.classes.values()) == summary.errors.k
    assert overall.calls == sum(s.calls for s in per_target.values()) == len(spec)
    assert overall.errors.k == sum(s.errors.k for s in per_target.values())


def test_the_cli_starts_without_importing_scipy():
    """Every CLI command (a worker, ``check``, ``--help``) imports the metrics package for
    its tables; scipy.stats costs about a second and loads only when a statistic runs."""
    import subprocess
    import sys

    code = ("import sys, agent_eval.cli, agent_eval.metrics; "
            "print(sorted(m for m in ('scipy', 'numpy', 'statsmodels') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_metrics_package_loads_a_module_when_one_of_its_names_is_used():
    """A run reads a few figures at its end; the gate's, compare's and power's modules
    load only for them.  Every public name still resolves, to its module's object."""
    import importlib
    import json
    import subprocess
    import sys

    code = ("import json, sys; from agent_eval.metrics import summarize, wilson_interval; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('agent_eval.metrics'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["agent_eval.metrics", "agent_eval.metrics.classes",
                                      "agent_eval.metrics.stats", "agent_eval.metrics.summary"]
    metrics = importlib.import_module("agent_eval.metrics")
    for name in metrics.__all__:
        home = importlib.import_module(f"agent_eval.metrics.{metrics._HOME[name]}")
        assert getattr(metrics, name) is getattr(home, name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        metrics.nope  # noqa: B018
