"""The sums behind the clustered and paired statistics (``metrics.sufficient``, read in SQL by
``store.cluster_stats``) give what per-session units give, on SQLite and PostgreSQL.

Three things are checked separately: the SQL sums equal the sums of the units the Python
pass over every row builds (integers, so exactly); the variance from sums equals the
per-cluster definition and statsmodels' cluster-robust variance (to 1e-9); and gate and
compare figures from SQL sums equal the ones from units.  The seeded runs hold one-session
scenarios, sessions without calls, all-denied sessions, server faults, empty and missing
classes, tags, mixes that differ, and (in one run) child sessions folded into their root.
"""

from __future__ import annotations

import math
import random

import pytest
from support.factories import add_run

from agent_eval.analysis.comparison import analyse_units
from agent_eval.metrics import repeat_stats, units_by_target
from agent_eval.metrics.clustered import (
    clustered_rate,
    ratio_variance,
    session_units,
    summarize_clustered,
    units_rate,
)
from agent_eval.metrics.regression import regression_from_units
from agent_eval.metrics.repeats import repeats_from_outcomes
from agent_eval.metrics.sufficient import Sums, pooled_variance, repeat_pairs, stats_from_units
from agent_eval.store.cluster_stats import cluster_stats, session_outcomes
from agent_eval.transcript import CallRecord, SessionRecord

CODES = ["AE301", "AE304", "AE101", None, ""]  # None and "": both unclassified


def _calls(rng: random.Random, n: int, p_deny: float) -> list[CallRecord]:
    out = []
    for i in range(n):
        denied = rng.random() < p_deny
        out.append(CallRecord(index=i, turn_index=i // 2, tool="bash", arguments="{}",
                              decision="deny" if denied else "allow",
                              primary=rng.choice(CODES) if denied else None, command="ls"))
    return out


REPEATS = {
    "sampled": lambda rng, k: rng.sample(range(10), k),  # gaps, out of storage order
    "consecutive": lambda rng, k: rng.sample(range(k), k),  # 0..k-1: what a run plays
    "from-one": lambda rng, k: list(range(1, k + 1)),
    "twice": lambda rng, k: [rng.choice(range(3)) for _ in range(k)],  # a repeat played twice
    "negative": lambda rng, k: list(range(-2, k - 2)),
}


def _fill(store, seed: int, *, children: bool = False, scenarios: int = 6,
          repeats: str = "sampled") -> int:
    rng = random.Random(seed)
    repeats_mode = repeats
    run_id = add_run(store, label=f"seed{seed}", suite="s", targets=("alpha", "beta"),
                     base_url="http://x/v1")
    records = []
    for target in ("alpha", "beta"):
        for s in range(scenarios):
            scenario = f"s{(s + seed) % 9}"
            repeats = 1 if s == 0 else rng.randint(2, 5)  # s0: a one-session stratum
            for i, repeat in enumerate(REPEATS[repeats_mode](rng, repeats)):
                n = rng.choice([0, 1, 3, 8, 12])
                p_deny = rng.choice([0.0, 0.1, 0.4, 1.0])  # 1.0: every call denied
                status = rng.choice(["completed"] * 6 + ["abandoned", "error"])
                if s == 0:  # the lone cluster of its stratum: with calls, not a fault
                    n, status = 3, "completed"
                key = f"{target}/{scenario}/{repeat}/{i}"
                records.append(SessionRecord(key=key, target=target, scenario=scenario,
                                             repeat=repeat, status=status,
                                             tags=rng.sample(["db", "web", "side-request"],
                                                                rng.randint(0, 2)),
                                             calls=_calls(rng, n, p_deny)))
                if children and rng.random() < 0.3:
                    records.append(SessionRecord(
                        key=key + "/child", target=target, scenario="child", parent_key=key,
                        status=rng.choice(["completed", "error"]), calls=_calls(rng, 3, 0.5)))
    store.record_sessions(run_id, records)
    return run_id


def _by_units(store, run_id: int) -> dict:
    units = session_units(store.session_rows([run_id]), store.call_rows([run_id]))
    return units, units_by_target(units)


@pytest.mark.parametrize("children", [False, True], ids=["sql-sums", "child-sessions"])
def test_sums_equal_the_units_of_the_python_pass(store, children):
    run_id = _fill(store, 5, children=children)
    units, by_target = _by_units(store, run_id)
    outcomes = session_outcomes(store.engine, [run_id])
    sql = cluster_stats(store.engine, [run_id], classes=True, passes=True)
    assert list(sql) == list(by_target)
    for name, us in by_target.items():
        expected = stats_from_units(us).scenarios
        assert list(sql[name].scenarios) == list(expected)  # first-seen scenario order
        assert sql[name].scenarios == expected, name
        assert sql[name].load_units() == us
    pooled = cluster_stats(store.engine, [run_id], by="all", classes=True, passes=True)
    assert pooled["all"].scenarios == stats_from_units(units).scenarios
    assert (repeats_from_outcomes(outcomes)
            == repeat_stats(store.session_rows([run_id]), store.call_rows([run_id])))


def test_the_seeded_run_covers_the_edge_cases(store):
    units, by_target = _by_units(store, _fill(store, 5))
    assert any(u.calls == 0 for u in units) and any(u.calls and u.errors == u.calls
                                                      for u in units)
    assert any(u.classes.get("unclassified") for u in units)
    assert any(s.errors.g == 1 for us in by_target.values()
               for s in stats_from_units(us).scenarios.values())


def test_sums_without_outcomes_or_classes(store):
    run_id = _fill(store, 6)
    sql = cluster_stats(store.engine, [run_id])
    assert all(s.passes is None and not s.classes
               for t in sql.values() for s in t.scenarios.values())


def _reference_variance(pairs, strata=None):
    """The per-cluster definition (the code the sums replaced): residuals
    ``z = (k − p n)/N`` centred within each stratum, CR1 ``G_h/(G_h−1)``."""
    total_n = sum(n for _, n in pairs)
    g = len(pairs)
    if g < 2 or total_n <= 0:
        return (0.0, g, 1)
    p = sum(k for k, _ in pairs) / total_n
    z = [(k - p * n) / total_n for k, n in pairs]
    groups = [list(range(g))]
    if strata is not None:
        by: dict[str, list[int]] = {}
        for i, label in enumerate(strata):
            by.setdefault(label, []).append(i)
        groups = [m for m in by.values() if len(m) >= 2]
        lone = [m[0] for m in by.values() if len(m) == 1]
        if len(lone) >= 2:
            groups.append(lone)
        elif lone:
            groups = [list(range(g))]
    var = 0.0
    for members in groups:
        mean = sum(z[i] for i in members) / len(members)
        var += len(members) / (len(members) - 1) * sum((z[i] - mean) ** 2 for i in members)
    return (var, g, len(groups))


def _random_clusters(rng: random.Random):
    g = rng.choice([1, 2, 3, 10, 200])
    pairs = []
    for _ in range(g):
        n = rng.choice([1, 2, 8, 40, 1000])
        k = rng.choice([0, n, rng.randint(0, n)])  # none, all, some denied
        pairs.append((k, n))
    strata = [rng.choice(["a", "b", "c", f"lone{rng.randint(0, 99)}"]) for _ in pairs]
    return pairs, strata


@pytest.mark.parametrize("seed", range(40))
def test_variance_from_sums_is_the_per_cluster_definition(seed):
    pairs, strata = _random_clusters(random.Random(seed))
    for labels in (None, strata, ["one"] * len(pairs)):
        got = ratio_variance(pairs, labels)
        want = _reference_variance(pairs, labels)
        assert got[1:] == want[1:]
        assert got[0] == pytest.approx(want[0], rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("pairs", [[(0, 10), (0, 10)], [(5, 5), (7, 7)], [(3, 10), (3, 10)],
                                   [(2, 10)], [(0, 10), (2, 10)]],
                         ids=["no-errors", "all-denied", "identical", "one-cluster", "hand"])
def test_edge_cases_of_the_variance(pairs):
    assert ratio_variance(pairs) == pytest.approx(_reference_variance(pairs), rel=1e-12,
                                                  abs=1e-18)
    assert clustered_rate(pairs).clusters == len(pairs)


def test_the_hand_example_is_exact():
    """clustered_rate's docstring: 2·(0.05² + 0.05²) = 0.01, exactly (the float pass over
    clusters gave 0.010000000000000002)."""
    assert ratio_variance([(0, 10), (2, 10)]) == (0.01, 2, 1)


def test_unstratified_variance_is_statsmodels_cluster_robust():
    import numpy as np
    from statsmodels.regression.linear_model import WLS

    pairs, _ = _random_clusters(random.Random(11))
    pairs += [(3, 9), (0, 4), (7, 7)]
    k = np.array([a for a, _ in pairs], float)
    n = np.array([b for _, b in pairs], float)
    fit = WLS(k / n, np.ones((len(pairs), 1)), weights=n).fit(
        cov_type="cluster", cov_kwds={"groups": np.arange(len(pairs))})
    assert pooled_variance([Sums.of(pairs)])[0] == pytest.approx(float(fit.bse[0]) ** 2,
                                                                  rel=1e-9)


def test_sums_add_exactly():
    a, b = Sums.of([(1, 3), (0, 2)]), Sums.of([(4, 4)])
    assert a + b == Sums.of([(1, 3), (0, 2), (4, 4)]) == Sums(3, 5, 9, 17, 19, 29)


def _figures(analysis):
    return (analysis.clustered_a, analysis.clustered_b, analysis.paired, analysis.independent)


@pytest.mark.parametrize("seeds", [(5, 5), (5, 6), (7, 8)], ids=["same", "shifted", "other"])
def test_gate_and_compare_figures_from_sql_sums_equal_units(store, seeds):
    a, b = (_fill(store, seed, scenarios=8) for seed in seeds)
    ua, ub = (_by_units(store, r)[1] for r in (a, b))
    sa, sb = (cluster_stats(store.engine, [r], classes=True, passes=True) for r in (a, b))
    common = [name for name in ua if name in ub]
    from_units, from_sums = analyse_units(ua, ub, common), analyse_units(sa, sb, common)
    for name in common:
        assert _figures(from_sums[name]) == _figures(from_units[name])
        assert regression_from_units(sb[name], sa[name], 0.0) == \
            regression_from_units(ub[name], ua[name], 0.0)
        codes = ["AE301", "unclassified"]
        assert summarize_clustered(sa[name], codes) == summarize_clustered(ua[name], codes)
        assert units_rate(sa[name], by="scenario") == units_rate(ua[name], by="scenario")
        rate = units_rate(sa[name])
        assert rate.per100 is None or math.isfinite(rate.per100)


def _zip_pairs(a: tuple, b: tuple) -> tuple[int, int, int]:
    """The pairing ``compare`` did before the bits: each side's ``(repeat, passed)``
    sorted, zipped (the longer side's extra repeats unpaired)."""
    pairs = list(zip([p for _, p in sorted(a)], [p for _, p in sorted(b)], strict=False))
    return (len(pairs), sum(1 for x, y in pairs if x and not y),
            sum(1 for x, y in pairs if y and not x))


@pytest.mark.parametrize("repeats", list(REPEATS))
def test_outcome_bits_in_sql_equal_the_sorted_outcomes(store, repeats, monkeypatch):
    """Distinct repeats, with gaps or not, are read off the repeat itself (no window
    function: the ranked query is not called); a repeat played twice or a negative one is
    ranked; both equal the units' outcomes, and pair as the sorted outcomes zipped."""
    import agent_eval.store.cluster_stats as module

    runs = [_fill(store, seed, scenarios=8, repeats=repeats) for seed in (5, 6)]
    if repeats in ("sampled", "consecutive", "from-one"):
        def refuse(*args, **kwargs):
            raise AssertionError("distinct repeats need no ranking")
        monkeypatch.setattr(module, "_ranked_passes", refuse)
    outcomes = []
    for run_id in runs:
        units, by_target = _by_units(store, run_id)
        sql = cluster_stats(store.engine, [run_id], passes=True)
        for name, us in by_target.items():
            assert {k: v.passes for k, v in sql[name].scenarios.items()} == \
                {k: v.passes for k, v in stats_from_units(us).scenarios.items()}
        outcomes.append(session_outcomes(store.engine, [run_id]))
    monkeypatch.undo()
    for run_id in runs:
        units, _ = _by_units(store, run_id)
        pooled = cluster_stats(store.engine, [run_id], by="all", classes=True, passes=True)["all"]
        assert pooled.scenarios == stats_from_units(units).scenarios
    a, b = (cluster_stats(store.engine, [r], passes=True) for r in runs)
    for name in a.keys() & b.keys():
        for scenario in a[name].scenarios.keys() & b[name].scenarios.keys():
            got = repeat_pairs(a[name].scenarios[scenario].passes,
                               b[name].scenarios[scenario].passes)
            assert got == _zip_pairs(outcomes[0][(name, scenario)],
                                     outcomes[1][(name, scenario)])


def test_two_runs_read_together_pool_their_targets_by_repeat(store):
    runs = [_fill(store, seed, repeats="consecutive") for seed in (5, 6)]
    units = [u for r in runs for u in _by_units(store, r)[0]]
    sql = cluster_stats(store.engine, runs, classes=True, passes=True)
    for name, us in units_by_target(units).items():
        assert sql[name].scenarios == stats_from_units(us).scenarios


def test_flip_outcomes_of_chosen_scenarios_only(store):
    run_id = _fill(store, 5)
    every = session_outcomes(store.engine, [run_id])
    chosen = {"s5", "s7"}
    assert session_outcomes(store.engine, [run_id], chosen) == \
        {k: v for k, v in every.items() if k[1] in chosen}
    assert session_outcomes(store.engine, [run_id], ()) == {}


@pytest.mark.parametrize("seed", range(30))
def test_squeezing_keeps_the_bits_of_the_occupied_repeats_in_order(seed):
    from agent_eval.store.cluster_stats import _squeeze

    rng = random.Random(seed)
    width = rng.choice([1, 5, 31, 32, 33, 64, 200])
    occupied = rng.getrandbits(width) | (1 << (width - 1) if rng.random() < 0.5 else 0)
    bits = rng.getrandbits(width) & occupied
    kept = [bits >> i & 1 for i in range(width) if occupied >> i & 1]
    assert _squeeze(bits, occupied) == sum(b << i for i, b in enumerate(kept))


def test_grandchildren_fold_into_their_root_through_a_faulted_child(store):
    """Three levels: a child that faulted leaves its own calls out but not its child's
    (``session_units``: each session is judged by its own status); a faulted root takes
    its whole tree out.  The recursive CTE gives what the units give."""
    rng = random.Random(3)
    run_id = add_run(store, label="tree", suite="s", targets={"alpha": "a"}, base_url="http://x/v1")
    records = []
    for i, (root_status, child_status) in enumerate(
            [("completed", "completed"), ("completed", "error"), ("error", "completed"),
             ("abandoned", "completed"), ("completed", "completed")]):
        key = f"r{i}"
        records.append(SessionRecord(key=key, target="alpha", scenario=f"s{i % 2}", repeat=i,
                                     status=root_status, calls=_calls(rng, 4, 0.3)))
        records.append(SessionRecord(key=key + "/c", target="alpha", scenario="child",
                                     parent_key=key, status=child_status,
                                     calls=_calls(rng, 3, 0.5)))
        records.append(SessionRecord(key=key + "/c/g", target="alpha", scenario="grandchild",
                                     parent_key=key + "/c", status="completed",
                                     calls=_calls(rng, 2, 1.0 if i == 4 else 0.0)))
    store.record_sessions(run_id, records)
    units, by_target = _by_units(store, run_id)
    assert len(units) == 4 and any(u.errors for u in units)
    sql = cluster_stats(store.engine, [run_id], classes=True, passes=True)
    assert sql["alpha"].scenarios == stats_from_units(by_target["alpha"]).scenarios
    assert (repeats_from_outcomes(session_outcomes(store.engine, [run_id]))
            == repeat_stats(store.session_rows([run_id]), store.call_rows([run_id])))
