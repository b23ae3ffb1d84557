"""Post-stratification to a common tag mix, and the hand-kept
ratio variance checked against statsmodels' cluster-robust covariance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.regression.linear_model import WLS

from agent_eval.metrics.clustered import Unit, ratio_variance
from agent_eval.metrics.paired import compare_paired
from agent_eval.metrics.stratified import UNTAGGED, compare_poststratified, tag_stratum


def units(spec: list[tuple[str, int, int]], prefix: str) -> list[Unit]:
    """``(tag, calls, errors)`` per session, each session its own scenario (no pairing)."""
    return [Unit("t", f"{prefix}{i}", 0, n, k, tags=(tag,)) for i, (tag, n, k) in enumerate(spec)]


# run a: half hard; run b: mostly easy.  Within each tag b errs 5 per 100 more, yet the
# pooled rates are equal (20 per 100): only re-weighting to one mix shows the rise.  The
# sessions of a cell spread widely (they err together), so the clustered SE is the one used.
A = units([("hard", 20, k) for k in (2, 10, 4, 8)] + [("easy", 20, k) for k in (0, 4, 0, 4)], "a")
B = units([("hard", 20, k) for k in (3, 11)] + [("easy", 20, k) for k in (0, 6, 0, 6, 1, 5)], "b")


def test_pooled_rates_agree_but_the_common_mix_shows_the_rise():
    pooled = [100 * sum(u.errors for u in s) / sum(u.calls for u in s) for s in (A, B)]
    assert pooled == pytest.approx([20.0, 20.0])
    diff = compare_poststratified(A, B)
    # hard: 0.30 -> 0.35, easy: 0.10 -> 0.15; weights = pooled calls 120/320, 200/320
    assert [(c.stratum, c.weight) for c in diff.cells] == [("hard", 0.375), ("easy", 0.625)]
    assert diff.diff100 == pytest.approx(5.0)


def test_poststratified_se_and_interval_are_the_cr1_formula():
    diff = compare_poststratified(A, B)
    # sandwich per cell: Σ ((k − r·n) / N_cell)², CR1 factor G/(G−1)·(N−1)/(N−K) = G/(G−K)
    cells = [[u for u in side if u.tags == (tag,)] for tag in ("hard", "easy") for side in (A, B)]
    sandwich = []
    for cell in cells:
        big_n = sum(u.calls for u in cell)
        r = sum(u.errors for u in cell) / big_n
        sandwich.append(sum(((u.errors - r * u.calls) / big_n) ** 2 for u in cell))
    g, k = 16, 4
    var = g / (g - k) * (0.375**2 * (sandwich[0] + sandwich[1])
                         + 0.625**2 * (sandwich[2] + sandwich[3]))
    floor = 0.375**2 * (1 / 3 * 2 / 3 * (1 / 80 + 1 / 40)) + 0.625**2 * (
        0.13 * 0.87 * (1 / 80 + 1 / 120))
    assert var > floor  # the library's figure, not the floor
    se = math.sqrt(var)
    assert diff.se100 == pytest.approx(100 * se)
    assert diff.df == g - 1
    half = sps.t.ppf(0.975, g - 1) * se
    assert (diff.lo100, diff.hi100) == pytest.approx((5 - 100 * half, 5 + 100 * half))
    assert diff.p_value == pytest.approx(2 * sps.t.sf(0.05 / se, g - 1))
    assert diff.method.startswith("post-stratified to the shared tag mix")


def test_agreeing_sessions_fall_back_to_the_binomial_floor():
    a = units([("x", 20, 2)] * 2 + [("y", 20, 6)] * 2, "a")
    b = units([("x", 20, 3)] * 2 + [("y", 20, 7)] * 2, "b")
    diff = compare_poststratified(a, b)
    floor = 0.25 * (0.125 * 0.875 * 2 / 40) + 0.25 * (0.325 * 0.675 * 2 / 40)
    assert diff.se100 == pytest.approx(100 * math.sqrt(floor))


def test_too_few_shared_strata_refuse_and_say_why():
    a = units([("x", 20, 2)] * 3 + [("y", 20, 2)], "a")
    b = units([("x", 20, 3)] * 3 + [("z", 20, 2)] * 2, "b")
    diff = compare_poststratified(a, b)
    assert diff.refused == "only 1 tag strata with 2+ sessions on each side (need 2)"
    assert diff.diff100 is None and not diff.significant
    assert diff.statement().startswith("no post-stratified difference called:")


def test_stratum_is_the_sorted_tag_set():
    assert tag_stratum(Unit("t", "s", 0, 1, 0, tags=("b", "a"))) == "a+b"
    assert tag_stratum(Unit("t", "s", 0, 1, 0)) == UNTAGGED


def test_compare_paired_post_stratifies_when_the_scenario_mix_is_refused():
    cmp = compare_paired(A, B)
    assert cmp.errors is None and cmp.mix.refused
    assert cmp.stratified is not None and cmp.stratified.diff100 == pytest.approx(5.0)
    untagged = [Unit("t", u.scenario, 0, u.calls, u.errors) for u in A]
    assert compare_paired(untagged, untagged[::-1]).stratified is None


@pytest.mark.parametrize("pairs", [[(0, 10), (2, 10)], [(1, 7), (4, 12), (0, 9), (3, 30)]])
def test_hand_ratio_variance_equals_statsmodels_cluster_robust(pairs):
    k, n = np.array(pairs, float).T
    fit = WLS(k / n, np.ones((len(k), 1)), weights=n).fit(
        cov_type="cluster", cov_kwds={"groups": np.arange(len(k))})
    assert ratio_variance(pairs)[0] == pytest.approx(fit.bse[0] ** 2)


def statsmodels_fit(cells_a, cells_b, weights, alpha):
    """The fit as it was made with statsmodels (now a test dependency only): the
    reference the closed form in ``stratified._fit`` is held to."""
    rows, cell_of = [], []
    for h, (ua, ub) in enumerate(zip(cells_a, cells_b, strict=True)):
        for side, cell in ((0, ua), (1, ub)):
            rows += cell
            cell_of += [2 * h + side] * len(cell)
    y = np.array([u.errors / u.calls for u in rows])
    n = np.array([u.calls for u in rows], dtype=np.float64)
    design = np.eye(2 * len(weights))[cell_of]
    fit = WLS(y, design, weights=n).fit(
        cov_type="cluster", cov_kwds={"groups": np.arange(len(rows))}, use_t=True)
    contrast = np.zeros(2 * len(weights))
    contrast[0::2], contrast[1::2] = -np.asarray(weights), np.asarray(weights)
    test = fit.t_test(contrast)
    lo, hi = test.conf_int(alpha=alpha)[0]
    return (float(np.squeeze(test.effect)), float(np.squeeze(test.sd)), float(lo), float(hi),
            int(test.df_denom), float(np.squeeze(test.pvalue)))


@pytest.mark.parametrize("seed", range(12))
def test_the_closed_form_fit_is_statsmodels_wls_with_cluster_robust_errors(seed):
    from agent_eval.metrics.stratified import _fit

    rng = np.random.default_rng(seed)
    strata = int(rng.integers(2, 5))
    weights = rng.dirichlet(np.ones(strata))
    cells = [[[Unit("t", f"s{h}{side}{i}", 0, int(n), int(rng.integers(0, n + 1)))
               for i, n in enumerate(rng.integers(1, 40, size=int(rng.integers(2, 9))))]
              for side in range(2)] for h in range(strata)]
    cells_a, cells_b = [c[0] for c in cells], [c[1] for c in cells]
    ours = _fit(cells_a, cells_b, list(weights), 0.05)
    theirs = statsmodels_fit(cells_a, cells_b, list(weights), 0.05)
    assert ours[4] == theirs[4]
    assert ours[:4] == pytest.approx(theirs[:4], rel=1e-9, abs=1e-12)
    assert ours[5] == pytest.approx(theirs[5], rel=1e-7, abs=1e-12)


def test_the_package_no_longer_imports_statsmodels():
    import pathlib

    import agent_eval

    root = pathlib.Path(agent_eval.__file__).parent
    assert [p for p in root.rglob("*.py") if "import statsmodels" in p.read_text()
            or "from statsmodels" in p.read_text()] == []
