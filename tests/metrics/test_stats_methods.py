"""Each statistical method against hand-computed values and scipy on small tables:
Wilson, z-test and Fisher kept by hand, the clustered interval, the paired
difference, exact McNemar, mix matching, the independent clustered test and power."""

from __future__ import annotations

import math

import pytest
from scipy import optimize
from scipy import stats as sps

from agent_eval.metrics import compare_rates, fisher_exact_p, wilson_interval
from agent_eval.metrics.clustered import (
    Unit,
    clustered_rate,
    compare_independent,
    detectable_rise,
    ratio_variance,
    session_units,
    t_quantile,
    units_rate,
    wilson_float,
)
from agent_eval.metrics.paired import (
    ScenarioCell,
    compare_paired,
    match_mix,
    mcnemar_exact,
    paired_difference,
)
from agent_eval.metrics.power import plan_power
from agent_eval.transcript import CallRow, SessionRow

TABLES = [(0, 10), (1, 10), (9, 161), (19, 158), (5, 5), (3, 40), (0, 1), (50, 1000)]


# --- hand-written code against scipy ------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), TABLES)
def test_wilson_matches_scipy(k, n):
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert wilson_float(k, n, t_quantile(math.inf)) == pytest.approx((ci.low, ci.high),
                                                                    abs=1e-12)


@pytest.mark.parametrize("df", [1, 2, 3.5, 9, 40.25, 1e6, math.inf])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.01])
def test_t_quantile_and_detectable_rise_equal_scipy_stats(df, alpha):
    """t_quantile is metrics.distributions' t quantile (the core installs no scipy): the
    same numbers to 1e-13 (at df 1 both are within 2e-15 of tan(0.475π)); 1e-11 at a
    million df, where tests/metrics/test_distributions.py says why."""
    rel = 1e-13 if df < 1e5 else 1e-11
    expected = sps.norm.ppf(1 - alpha / 2) if math.isinf(df) else sps.t.ppf(1 - alpha / 2, df)
    assert t_quantile(df, alpha) == pytest.approx(expected, rel=rel)
    power = sps.norm.ppf(0.8) if math.isinf(df) else sps.t.ppf(0.8, df)
    assert detectable_rise(2.0, df, alpha=alpha) == pytest.approx((expected + power) * 2.0,
                                                                  rel=rel)


@pytest.mark.parametrize(("a", "b"), [((9, 161), (19, 158)), ((9, 161), (13, 128)),
                                      ((0, 20), (2, 20)), ((40, 1000), (100, 1000))])
def test_z_test_and_fisher_match_scipy(a, b):
    cmp = compare_rates(*a, *b)
    table = [[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]]
    chi2 = sps.chi2_contingency(table, correction=False)
    assert cmp.p_value == pytest.approx(chi2.pvalue, rel=1e-9)  # pooled z² = Pearson χ²
    assert cmp.fisher_p == pytest.approx(sps.fisher_exact(table).pvalue, rel=1e-9)
    assert fisher_exact_p(*a, *b) == pytest.approx(sps.fisher_exact(table).pvalue, rel=1e-9)


def test_the_design_doc_pair_is_still_significant_by_z():
    assert compare_rates(9, 161, 19, 158).p_value == pytest.approx(0.042, abs=0.001)


# --- clustered interval -------------------------------------------------------------------


def test_clustered_interval_by_hand():
    # clusters (0/10) and (2/10): p = 0.1, z = (∓1)/20, V = 2·(0.05² + 0.05²) = 0.01,
    # binomial 0.09/20 = 0.0045, deff = 2.2222, n_eff = 9, t(1) = 12.706
    rate = clustered_rate([(0, 10), (2, 10)])
    assert rate.deff == pytest.approx(0.01 / 0.0045)
    assert rate.n_eff == pytest.approx(9.0)
    assert rate.df == 1
    assert t_quantile(1) == pytest.approx(12.7062047, rel=1e-7)
    # 0.9 effective errors (fewer than 10): Korn–Graubard's Clopper–Pearson at n_eff
    # scaled by (z/t)², t on min(1 df, 0.9 effective errors − 1) = 1 df
    n_eff = 9 * (1.959963984540054 / 12.7062047361747) ** 2
    lo = sps.beta.ppf(0.025, 0.1 * n_eff, n_eff - 0.1 * n_eff + 1)
    hi = sps.beta.ppf(0.975, 0.1 * n_eff + 1, n_eff - 0.1 * n_eff)
    assert (rate.lo100, rate.hi100) == pytest.approx((100 * lo, 100 * hi))
    assert rate.method.startswith("Korn–Graubard (few effective errors)")
    assert rate.few_clusters
    # many effective errors: Wilson at n_eff, t on the clusters − strata df
    many = clustered_rate([(k, 10) for k in (0, 1, 2, 3) * 25])
    lo, hi = wilson_float(many.k / many.deff, many.n / many.deff, t_quantile(99))  # G − H
    assert (many.lo100, many.hi100) == pytest.approx((100 * lo, 100 * hi))


def test_stratified_variance_centres_within_each_stratum():
    # p = 4/40 = 0.1; z = (k − 0.1·10)/40 = (-1, 1, 0, 2)/40 ... strata s: (-1, 1), t: (1, 1)
    pairs = [(0, 10), (2, 10), (2, 10), (2, 10)]
    pairs = [(0, 10), (2, 10), (1, 10), (1, 10)]
    var, g, h = ratio_variance(pairs, ["s", "s", "t", "t"])
    z = [(-1 / 40), (1 / 40), 0.0, 0.0]
    assert (g, h) == (4, 2)
    assert var == pytest.approx(2 * ((z[0] - 0) ** 2 + (z[1] - 0) ** 2))
    unstratified, _, one = ratio_variance(pairs)
    assert one == 1 and unstratified == pytest.approx(4 / 3 * sum(x * x for x in z))


def test_lone_clusters_in_strata_are_pooled_or_the_strata_dropped():
    assert ratio_variance([(0, 10), (1, 10), (2, 10)], ["a", "b", "c"])[2] == 1
    assert ratio_variance([(0, 10), (1, 10), (2, 10)], ["a", "a", "b"])[2] == 1


def test_no_calls_and_one_session_give_no_clustered_interval():
    assert clustered_rate([]).per100 is None
    one = clustered_rate([(3, 10)])
    assert (one.per100, one.lo100, one.deff) == (30.0, None, None)


def test_zero_errors_keep_an_honest_upper_bound():
    rate = clustered_rate([(0, 10)] * 5)
    assert rate.lo100 == 0.0 and rate.deff is None
    assert rate.hi100 == pytest.approx(100 * wilson_float(0, 50, t_quantile(4))[1])


def test_clustering_widens_the_interval_when_sessions_err_together():
    together = units_rate([Unit("t", f"s{i % 3}", i, 20, 10 if i < 3 else 0)
                           for i in range(12)])
    spread = units_rate([Unit("t", f"s{i % 3}", i, 20, 2 if i < 12 else 0) for i in range(15)])
    assert together.deff > 3
    assert together.hi100 - together.lo100 > 2 * (spread.hi100 - spread.lo100)


# --- paired -------------------------------------------------------------------------------


def test_paired_difference_by_hand():
    # d = (0.1, 0, 0.2), D = 0.1, SE² = 3/2 · Σ (1/3)² (d − D)² = 0.01/3, t(2) = 4.3027;
    # permutation: 8 sign flips, |mean| >= 0.1 in 4 of them -> p = 0.5
    diff = paired_difference([0.1, 0.2, 0.3], [0.2, 0.2, 0.5], [1, 1, 1])
    se = math.sqrt(0.01 / 3)
    assert diff.diff100 == pytest.approx(10.0)
    assert diff.se100 == pytest.approx(100 * se)
    assert diff.lo100 == pytest.approx(100 * (0.1 - 4.302652729911275 * se))
    assert (diff.df, diff.scenarios, diff.p_value) == (2, 3, pytest.approx(0.5))


def test_paired_floor_stops_a_zero_width_interval():
    diff = paired_difference([0.0, 0.0], [0.1, 0.1], [1, 1], floor=[0.01, 0.01])
    assert diff.se100 == pytest.approx(100 * math.sqrt(0.25 * 0.01 * 2))


def test_mcnemar_is_the_exact_binomial_on_discordant_pairs():
    # 1 pair a-only, 7 b-only: p = 2·(C(8,0) + C(8,1))/2^8 = 18/256
    result = mcnemar_exact([(True, False)] + [(False, True)] * 7 + [(True, True)] * 5)
    assert (result.pairs, result.a_only, result.b_only) == (13, 1, 7)
    assert result.p_value == pytest.approx(18 / 256)
    assert mcnemar_exact([(True, True)]).p_value == 1.0


def cells(spec: dict[str, int]) -> dict[str, ScenarioCell]:
    return {s: ScenarioCell(calls, 0, None) for s, calls in spec.items()}


def test_mix_matching_restricts_to_the_shared_mix_and_says_so():
    a = cells({"x": 100, "y": 100, "z": 100, "only-a": 50})
    b = cells({"x": 100, "y": 100, "z": 100, "only-b": 10})
    mix = match_mix(a, b)
    assert mix.shared == ("x", "y", "z") and mix.refused is None and mix.reweighted
    assert (mix.share_a, mix.share_b) == (pytest.approx(300 / 350), pytest.approx(300 / 310))
    assert "3 shared scenarios covering 86% of a's calls and 97% of b's" in mix.statement()


def test_mix_matching_refuses_a_small_overlap():
    few = match_mix(cells({"x": 10, "y": 10}), cells({"x": 10, "y": 10}))
    assert "only 2 shared scenarios" in few.refused
    thin = match_mix(cells({"x": 10, "y": 10, "z": 10, "w": 500}),
                     cells({"x": 10, "y": 10, "z": 10}))
    assert "covers 6% of a's calls" in thin.refused
    assert thin.statement().startswith("no paired difference called")


def units(spec, *, target="t"):
    """spec: {scenario: [(errors, calls, passed), ...]} -> Units in repeat order."""
    return [Unit(target, s, r, n, k, passed=p) for s, rows in spec.items()
            for r, (k, n, p) in enumerate(rows)]


def test_compare_paired_weights_by_pooled_calls_and_uses_sessions_within_scenarios():
    a = units({"x": [(1, 10, False), (0, 10, True)], "y": [(0, 20, True), (2, 20, False)],
               "z": [(1, 10, False), (1, 10, False)]})
    b = units({"x": [(2, 10, False), (1, 10, False)], "y": [(2, 20, False), (2, 20, False)],
               "z": [(1, 10, False), (1, 10, False)]})
    cmp = compare_paired(a, b)
    # rates a: x .05 y .05 z .1; b: x .15 y .1 z .1; weights 40, 80, 40
    assert cmp.errors.diff100 == pytest.approx(100 * (40 * 0.1 + 80 * 0.05 + 0) / 160)
    assert "sessions inside each scenario" in cmp.errors.method
    # the matched unit is the scenario, its outcome every repeat passed: none did in a
    assert (cmp.mcnemar.pairs, cmp.mcnemar.a_only, cmp.mcnemar.b_only) == (3, 0, 0)


def test_mcnemar_and_the_permutation_p_do_not_move_when_the_same_sessions_are_reordered():
    a = {f"s{i}": [(0, 10, True), (1, 10, i % 2 == 0), (0, 10, True)] for i in range(16)}
    b = {f"s{i}": [(2, 10, False), (0, 10, True), (1, 10, i % 3 == 0)] for i in range(16)}
    first = compare_paired(units(a), units(b))
    # repeats in another order, scenarios stored in another order: the same data
    shuffled_a = {s: cells[::-1] for s, cells in reversed(a.items())}
    shuffled_b = {s: [cells[1], cells[2], cells[0]] for s, cells in reversed(b.items())}
    again = compare_paired(units(shuffled_a), units(shuffled_b))
    assert again.mcnemar == first.mcnemar
    assert again.errors.p_value == first.errors.p_value
    assert again.passes.p_value == first.passes.p_value


def test_independent_clustered_difference_by_hand():
    a = units({"x": [(0, 10, True), (2, 10, False)]})
    b = units({"y": [(2, 10, False), (2, 10, False)]})
    ind = compare_independent(a, b)
    # a: p .1, V 0.01; b: p .2, V 0 -> floored at max(.2·.8/20, .15·.85/20) = 0.008
    se = math.sqrt(0.01 + 0.008)
    df = (0.018**2) / (0.01**2 / 1 + 0.008**2 / 1)
    assert ind.se100 == pytest.approx(100 * se)
    assert ind.df == pytest.approx(df)
    assert ind.p_value == pytest.approx(2 * sps.t.sf(0.1 / se, df))


def test_detectable_rise_is_t_alpha_plus_t_power_times_se():
    assert detectable_rise(1.0, 10) == pytest.approx(sps.t.ppf(0.975, 10) + sps.t.ppf(0.8, 10))
    assert detectable_rise(None, 10) is None


def test_power_plan_by_hand():
    # 2 scenarios, 10 calls per session, rates 0.1 each, no extra session spread (deff 1),
    # each rate from n = 40 calls: p(1 − p) unbiased is 0.09 / (1 − 1/40) = 0.0923, and
    # p'(1 − p') is 0.12·0.88 + that / 40 (the baseline rate's own variance):
    # SE²(R) = Σ (1/2)² · (0.0923 + 0.1056 + 0.0023)/(10 R)
    base = units({"x": [(1, 10, False)] * 4, "y": [(1, 10, False)] * 4})
    plan = plan_power(base, detect=2)
    factor = sps.t.ppf(0.975, 1) + sps.t.ppf(0.8, 1)
    q = 0.09 / (1 - 1 / 40)
    # the margin plan: the SE under no change, rates 0.1 on both sides
    unit_se = 100 * math.sqrt(0.5 * (q + 0.1 * 0.9 + q / 40) / 10)
    assert plan.repeats == math.ceil((factor * unit_se / 2) ** 2)
    assert plan.total_calls == plan.repeats * 20
    # the smallest rise detectable now takes the SE at that rise (rates 0.1 + δ), not at no
    # change: the root of δ = factor · SE(δ), found here by scipy's brentq
    def gap(delta):
        r = 0.1 + delta / 100
        return delta - factor * 100 * math.sqrt(0.5 * (q + r * (1 - r) + q / 40) / 40)

    assert plan.detectable_now == pytest.approx(optimize.brentq(gap, 1, 90), rel=1e-7)
    assert plan.detectable_now != pytest.approx(factor * 100 * math.sqrt(0.5 * 0.18 / 40))
    # sessions that never differ hold no spread to say how uncertain the plan is
    assert plan.repeats_range is None
    assert plan.variance_df == 6


def test_plan_spread_by_hand():
    """Each scenario's term is w² · 2 · (its CR1 ratio variance × its sessions), the
    sample variance of its sessions' error shares; single-session scenarios take their
    squared deviation from the single sessions' pooled rate, times L/(L − 1)."""
    from agent_eval.metrics.power import plan_spread, variance_components

    base = units({"x": [(0, 10, True), (2, 10, False), (1, 10, False)],
                  "y": [(1, 10, False), (1, 10, False), (4, 10, False)]})
    spread = plan_spread(base, *variance_components(base))
    # shares x: .0 .2 .1 (sample variance .01), y: .1 .1 .4 (.03); weights 1/2 each
    assert spread.terms == pytest.approx((0.25 * 2 * 0.01, 0.25 * 2 * 0.03))
    assert spread.variance == pytest.approx(0.02)
    lone = units({"x": [(0, 10, True)], "y": [(2, 10, False)], "z": [(4, 10, False)]})
    spread = plan_spread(lone, *variance_components(lone))
    # pooled rate .2; deviations -.2 0 .2; times 3/2; weights 1/3
    assert spread.terms == pytest.approx(tuple(2 / 9 * 1.5 * d * d for d in (0.2, 0, 0.2)))


def test_power_plan_rejects_a_non_positive_rise():
    with pytest.raises(ValueError, match="> 0"):
        plan_power(units({"x": [(1, 10, False)]}), detect=0)


# --- session units ------------------------------------------------------------------------


def session(id_, scenario="s", *, parent=None, status="completed", repeat=0):
    return SessionRow(id=id_, run_id=1, target="t", scenario=scenario, repeat=repeat,
                      status=status, error=None, parent_id=parent, tags=(),
                      handshake_required=0, handshake_done=0, handshake_completed=False,
                      handshake_missed_step=None, n_turns=1, n_messages=1, n_calls=0,
                      started_at=None, finished_at=None)


def call(sid, deny=False, code="AE301"):
    return CallRow(session_id=sid, run_id=1, target="t", scenario="s", index=0, turn_index=0,
                   tool="bash", decision="deny" if deny else "allow",
                   primary=code if deny else None, next_action=None)


def test_session_units_fold_children_and_drop_faulted_sessions():
    sessions = [session(1), session(2, parent=1), session(3, status="error"), session(4)]
    calls = [call(1), call(2, deny=True), call(3, deny=True), call(4)]
    got = {(u.calls, u.errors, u.passed, tuple(u.classes.items())) for u in
           session_units(sessions, calls)}
    assert got == {(2, 1, False, (("AE301", 1),)), (1, 0, True, ())}


def test_a_comparison_without_fishers_p_keeps_every_other_figure():
    import dataclasses

    from agent_eval.metrics.stats import compare_rates

    full, quick = compare_rates(9, 161, 19, 158), compare_rates(9, 161, 19, 158, exact=False)
    assert math.isnan(quick.fisher_p) and 0 < full.fisher_p < 1
    assert dataclasses.replace(quick, fisher_p=full.fisher_p) == full


def test_repeats_to_decide_is_the_fewest_repeats_at_which_the_excess_is_detectable():
    from agent_eval.metrics.regression import repeats_to_decide

    # SE 9.1 at 1 repeat on 2 df, an excess of 8 over the limit: detectable needs
    # (t_.975 + t_.8) * SE / sqrt(R) <= 8
    needed = repeats_to_decide(8.0, 9.1, 2, 1)
    factor = sps.t.ppf(0.975, 2) + sps.t.ppf(0.8, 2)
    assert factor * 9.1 / math.sqrt(needed) <= 8.0 < factor * 9.1 / math.sqrt(needed - 1)
    assert repeats_to_decide(-1.0, 9.1, 2, 1) is None


def test_expected_flips_under_no_change_sums_each_scenarios_flip_chance():
    from agent_eval.analysis.comparison import expected_flips
    from agent_eval.metrics.sufficient import Passes, ScenarioStats, Sums, TargetStats

    def side(**outcomes):
        return TargetStats({s: ScenarioStats(len(o), Sums(), passes=Passes.of(enumerate(o)))
                            for s, o in outcomes.items()})

    # s1: 2 of 4 passed pooled, 2 repeats each: q² is estimated without bias by
    # C(2, 2)/C(4, 2) = 1/6 and q⁴ by C(2, 4)/C(4, 4) = 0, so 1/6 + 1/6 − 2·0 = 1/3 (the
    # plug-in q = .5 gave 2 · .25 · .75 = .375); s2: every repeat passed: never flips
    a = side(s1=(True, False), s2=(True, True))
    b = side(s1=(False, True), s2=(True, True))
    assert expected_flips(a, b) == pytest.approx(1 / 3)


def test_expected_flips_is_unbiased_under_no_change():
    from itertools import product

    from agent_eval.analysis.comparison import expected_flips
    from agent_eval.metrics.sufficient import Passes, ScenarioStats, Sums, TargetStats

    # one scenario passing with q = 0.6, 3 repeats against 2: average the estimate over
    # every outcome by its probability; it equals the true flip chance q³(1−q²)+q²(1−q³)
    q, expected = 0.6, 0.0
    for outcome in product((True, False), repeat=5):
        chance = q ** sum(outcome) * (1 - q) ** (5 - sum(outcome))
        a = TargetStats({"s": ScenarioStats(3, Sums(), passes=Passes.of(enumerate(outcome[:3])))})
        b = TargetStats({"s": ScenarioStats(2, Sums(), passes=Passes.of(enumerate(outcome[3:])))})
        expected += chance * expected_flips(a, b)
    assert expected == pytest.approx(q**3 * (1 - q**2) + q**2 * (1 - q**3))


def test_holm_equals_statsmodels_and_the_step_down_by_hand():
    from statsmodels.stats.multitest import multipletests

    from agent_eval.analysis.comparison import holm

    adjusted = holm({"AE301": 0.01, "AE304": 0.04, "AE320": 0.03})
    # sorted 0.01, 0.03, 0.04 -> 3·0.01, max(0.03, 2·0.03), max(0.06, 1·0.04)
    assert adjusted == pytest.approx({"AE301": 0.03, "AE320": 0.06, "AE304": 0.06})
    family = {f"C{i}": p for i, p in enumerate(
        [0.001, 0.2, 0.04, 0.04, 0.9, 0.012, 0.5, 0.3, 0.0049, 1.0, 0.06, 0.02, 0.7, 0.011])}
    expected = multipletests(list(family.values()), method="holm")[1]
    assert list(holm(family).values()) == pytest.approx(list(expected))


def test_pooled_within_equals_scipys_pooled_two_sample_t_for_sessions_of_equal_size():
    from agent_eval.metrics.paired import pooled_within
    from agent_eval.metrics.sufficient import Sums

    # a baseline of 3 repeats against a run of 10, sessions of 10 calls each
    base = [1, 0, 2]
    run = [0, 1, 1, 3, 0, 2, 1, 0, 4, 1]
    var, df = pooled_within(Sums.of((k, 10) for k in base), Sums.of((k, 10) for k in run))
    t = (sum(run) / 100 - sum(base) / 30) / math.sqrt(var)
    expected = sps.ttest_ind([k / 10 for k in run], [k / 10 for k in base], equal_var=True)
    assert (t, df) == (pytest.approx(expected.statistic), 11)


def test_unequal_repeats_pool_the_within_scenario_variance_and_name_it():
    from agent_eval.metrics.clustered import Unit
    from agent_eval.metrics.paired import POOLED_METHOD, compare_paired

    def units(repeats, errors):
        return [Unit("t", f"s{s}", r, 10, errors[(s + r) % len(errors)])
                for s in range(4) for r in range(repeats)]

    cmp = compare_paired(units(3, [0, 1, 2]), units(10, [0, 1, 1, 2, 0]))
    assert cmp.errors.method == POOLED_METHOD
    equal = compare_paired(units(3, [0, 1, 2]), units(3, [0, 1, 1]))
    assert equal.errors.method != POOLED_METHOD


def test_one_scenario_with_a_single_session_is_collapsed_into_its_nearest_stratum():
    from agent_eval.metrics.clustered import ratio_variance

    # 10 scenarios of 3 sessions at very different rates, and one with a single session
    pairs, strata = [], []
    for s in range(10):
        for k in (s, s + 1, s):
            pairs.append((k, 10))
            strata.append(f"s{s}")
    pairs.append((4, 10))
    strata.append("lone")
    var, clusters, used = ratio_variance(pairs, strata)
    # the lone (4, 10) joins s4 (rate 0.43, nearest to 0.4): its stratum then holds 4
    collapsed = [label if label != "lone" else "s4" for label in strata]
    assert (var, clusters, used) == (ratio_variance(pairs, collapsed)[0], 31, 10)
    unstratified, _, _ = ratio_variance(pairs)
    assert var < unstratified / 4  # dropping the strata kept the spread between scenarios


@pytest.mark.parametrize(("k", "n"), [(0, 522), (3, 522), (7, 40), (40, 40)])
def test_clopper_pearson_float_equals_scipys_exact_interval_for_integer_counts(k, n):
    from agent_eval.metrics.clustered import clopper_pearson_float

    ci = sps.binomtest(k, n).proportion_ci(method="exact")
    assert clopper_pearson_float(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_a_class_with_0_errors_in_522_calls_borrows_the_totals_design_effect():
    from agent_eval.metrics.clustered import CLASS_METHOD, units_rate

    # 58 sessions of 9 calls (522) over 29 scenarios; denials of another class pile up in
    # a few sessions, so the total's design effect is large; AE304 is never hit
    units = [Unit("t", f"s{s}", r, 9, 6 if (s + r) % 9 == 0 else 0,
                  {"AE301": 6} if (s + r) % 9 == 0 else {})
             for s in range(29) for r in range(2)]
    total = units_rate(units)
    rate = units_rate(units, code="AE304")
    assert (rate.k, rate.n, rate.method) == (0, 522, CLASS_METHOD)
    assert rate.deff == pytest.approx(total.deff) and total.deff > 4
    n_eff = 522 / total.deff * (sps.norm.ppf(0.975) / sps.t.ppf(0.975, 58 - 29)) ** 2
    assert rate.hi100 == pytest.approx(100 * (1 - 0.025 ** (1 / n_eff)))
    wilson_independent = sps.binomtest(0, 522).proportion_ci(method="wilson").high
    assert rate.hi100 > 3 * 100 * wilson_independent  # 0.73 per 100 read as independent


def test_the_gate_decides_without_drawing_the_permutation_p(monkeypatch):
    """The regression check reads the interval only; the permutation p (scipy's resamples,
    most of a check's time) is drawn when something reads it, and is then the same p."""
    import agent_eval.metrics.paired as paired
    from agent_eval.metrics.clustered import Unit
    from agent_eval.metrics.regression import regression_from_units

    def units(errors):
        return [Unit("t", f"s{s}", r, 10, errors[s][r], {}, passed=errors[s][r] == 0)
                for s in range(len(errors)) for r in range(3)]

    a = units([[0, 1, 0], [2, 1, 1], [0, 0, 1], [1, 0, 0]])
    b = units([[1, 2, 1], [3, 2, 2], [1, 0, 1], [1, 1, 2]])
    calls = []
    real = paired.permutation_p
    monkeypatch.setattr(paired, "permutation_p", lambda *a, **k: calls.append(1) or real(*a, **k))
    reg = regression_from_units(a, b, 0.0)
    assert reg.regressed and calls == []
    p = reg.paired.errors.p_value
    assert calls == [1] and reg.paired.errors.p_value == p and calls == [1]
    assert p == real(*_arrays(a, b)) == 2 / 16  # every scenario rose: 2 of 2⁴ sign flips as far


def _arrays(a, b):
    import numpy as np

    def rates(units):
        return np.array([sum(u.errors for u in units if u.scenario == f"s{s}") /
                         sum(u.calls for u in units if u.scenario == f"s{s}") for s in range(4)])
    return rates(a), rates(b), np.full(4, 60.0) / 240.0


def test_a_spread_that_cannot_be_resampled_gives_the_closed_form_plan_and_no_range():
    """Two scenarios cannot be resampled into a spread (a bootstrap over 2 values): the
    plan is the closed form at the estimate and no range is printed, rather than a range
    of one value that claims a certainty the baseline does not have."""
    from agent_eval.metrics.power import plan_spread, repeats_for_margin, variance_components

    base = units({"x": [(0, 10, True), (2, 10, False), (1, 10, False)],
                  "y": [(1, 10, False), (1, 10, False), (4, 10, False)]})
    assert plan_spread(base, *variance_components(base)).quantiles == ()
    plan = plan_power(base, detect=2)
    assert plan.repeats_range is None
    assert plan.repeats == max(2, repeats_for_margin(100 * math.sqrt(0.02), 2, 1))
