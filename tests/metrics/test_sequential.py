"""The sequential boundary (metrics/sequential.py) against values computed independently:
the Lan–DeMets O'Brien–Fleming-type boundaries published for five equally spaced looks,
and the crossing probabilities by scipy's multivariate normal."""

from __future__ import annotations

import math

import pytest

from agent_eval.metrics.sequential import SequentialPlan, boundaries, spent


def test_five_equal_looks_match_the_published_obrien_fleming_type_boundary():
    # Two-sided alpha 0.05, O'Brien-Fleming-type spending on each side (Lan & DeMets
    # 1983); the values printed by gsDesign (sfLDOF) and ldbounds for K = 5, and in
    # Jennison & Turnbull (2000), table 7.6: 4.877, 3.357, 2.680, 2.290, 2.031.
    found = [b.critical for b in boundaries([0.2, 0.4, 0.6, 0.8, 1.0])]
    assert found == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=2e-3)


def test_spending_function_closed_form():
    from scipy import stats

    z = stats.norm.isf(0.05 / 4)
    assert spent(1.0) == pytest.approx(0.05)
    assert spent(0.25) == pytest.approx(4 * stats.norm.sf(z / 0.5))
    assert spent(0.0) == 0.0


@pytest.mark.parametrize("fractions", [[0.3, 1.0], [0.25, 0.5, 1.0], [0.4, 0.7, 0.9]])
def test_exit_probabilities_equal_the_alpha_spent_by_scipy_multivariate_normal(fractions):
    """P(some |Z_j| >= c_j, j <= k) under no change, with corr(Z_i, Z_j) = sqrt(t_i/t_j),
    computed by scipy's multivariate normal CDF over the box, equals spent(t_k)."""
    import numpy as np
    from scipy import stats

    found = boundaries(fractions)
    for k in range(1, len(fractions) + 1):
        t = np.array(fractions[:k])
        cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
        c = np.array([b.critical for b in found[:k]])
        inside = stats.multivariate_normal(mean=np.zeros(k), cov=cov, abseps=1e-7,
                                           releps=1e-7).cdf(c, lower_limit=-c)
        assert 1 - inside == pytest.approx(spent(fractions[k - 1]), abs=2e-5)
        assert found[k - 1].spent == pytest.approx(spent(fractions[k - 1]), abs=1e-6)
        assert found[k - 1].nominal_alpha == pytest.approx(2 * stats.norm.sf(c[-1]))


def test_a_single_look_at_the_cap_is_the_fixed_interval():
    (only,) = boundaries([1.0])
    assert only.critical == pytest.approx(1.959964, abs=1e-5)
    assert only.nominal_alpha == pytest.approx(0.05)


def test_fractions_must_increase():
    with pytest.raises(ValueError, match="increase"):
        boundaries([0.5, 0.5])


def test_plan_round_trips_through_the_run_config_and_continues():
    plan = SequentialPlan(max_repeats=10, look_every=2, checks={"max_error_rate": 8.0})
    assert plan.next_repeats() == 2
    first = plan.boundary_at(2)
    assert first.critical == pytest.approx(boundaries([0.2])[0].critical)
    from agent_eval.metrics.sequential import Look

    plan = SequentialPlan(10, 2, {"max_error_rate": 8.0},
                          (Look(2, first.nominal_alpha, first.spent, 1),))
    again = SequentialPlan.from_config({"sequential": plan.stored()})
    assert again == plan
    assert again.next_repeats() == 4
    assert again.boundary_at(4).critical == pytest.approx(
        boundaries([0.2, 0.4])[1].critical)
    assert again.boundary_at(2) == first
    assert math.isclose(SequentialPlan(5, 4, {}).boundary_at(5).nominal_alpha, 0.05)


def test_the_gate_reads_a_run_at_its_last_look_or_at_the_batch_it_was_cut_in():
    from agent_eval.cli.gate import sequential_alpha
    from agent_eval.metrics.sequential import Look

    first = boundaries([0.2])[0]
    plan = SequentialPlan(10, 2, {}, (Look(2, first.nominal_alpha, first.spent, 1),))
    assert sequential_alpha(plan, {"repeats": 2}) == first.nominal_alpha
    # cut within the second batch (the run holds part of repeats 2-3): one more look at 4
    assert sequential_alpha(plan, {"repeats": 4}) == pytest.approx(
        boundaries([0.2, 0.4])[1].nominal_alpha)
    # cut within the first batch: a first look at what it planned
    assert sequential_alpha(SequentialPlan(10, 2, {}), {"repeats": 2}) == pytest.approx(
        first.nominal_alpha)
