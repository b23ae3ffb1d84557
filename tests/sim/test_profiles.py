"""Profiles: lookup, and whether each one's error rate and class mix over a suite resemble
the docs/design.md column it imitates (errors per 100 tool calls, retries included)."""

from __future__ import annotations

from collections import Counter

import pytest
from support.simplay import FIXTURE_SUITE, REPO, offline_ask, play_session

from agent_eval.errors import ConfigError
from agent_eval.scenario import Suite, load_suite
from agent_eval.sim import PROFILES, get_profile


def test_get_profile_accepts_the_served_model_id():
    assert get_profile("sim-piper") is PROFILES["piper"]


def test_unknown_profile_is_a_config_error_listing_the_valid_names():
    with pytest.raises(ConfigError, match="disciplined, piper, wrapper, inventor"):
        get_profile("sloppy")


def test_every_profile_says_which_column_it_imitates():
    assert all(p.imitates for p in PROFILES.values())
    assert {"disciplined", "piper", "wrapper", "inventor"} <= set(PROFILES)


def _calibration_suite() -> Suite:
    ralf = REPO / "scenarios" / "ralf"
    if ralf.is_dir() and any(ralf.glob("*.yaml")):
        return load_suite(ralf)
    return load_suite(FIXTURE_SUITE)


@pytest.fixture(scope="module")
def rates() -> dict[str, tuple[float, Counter]]:
    """Per profile: errors per 100 calls and calls per class, over 30 repeats of the suite."""
    suite = _calibration_suite()
    out = {}
    for name, profile in PROFILES.items():
        calls = errors = 0
        classes: Counter = Counter()
        for scenario in suite.top_level():
            for repeat in range(30):
                intended: dict[str, str | None] = {}
                ask = offline_ask(scenario, profile, f"{scenario.name}/{repeat}", intended)
                for _, arguments, allowed in play_session(scenario, ask):
                    calls += 1
                    if not allowed:
                        errors += 1
                        classes[intended[arguments]] += 1
        out[name] = (100 * errors / calls, Counter({c: 100 * n / calls for c, n in classes.items()}))
    return out


@pytest.mark.parametrize(
    "profile, low, high",
    [("disciplined", 3.0, 9.0), ("piper", 8.0, 17.0), ("wrapper", 7.0, 15.0), ("inventor", 9.0, 25.0)],
    ids=["disciplined~5.6", "piper~12", "wrapper~10", "inventor"],
)
def test_errors_per_100_calls_are_near_the_imitated_column(rates, profile, low, high):
    assert low <= rates[profile][0] <= high


def test_disciplined_errs_least(rates):
    assert rates["disciplined"][0] == min(rate for rate, _ in rates.values())


@pytest.mark.parametrize(
    "profile, expected",
    [
        ("disciplined", {"AE301", "AE302", "AE308", "AE309", "AE311", "AE320"}),
        ("piper", {"AE301", "AE304", "AE307", "AE311"}),
        ("wrapper", {"AE301", "AE304", "AE305", "AE306", "AE101", "AE309", "AE320"}),
        ("inventor", {"AE307", "AE309", "AE310", "AE311"}),
    ],
)
def test_class_mix_stays_within_the_profile_classes(rates, profile, expected):
    classes = set(rates[profile][1]) - {"AE104"}
    assert classes <= expected
    assert len(classes) >= len(expected) - 2  # nearly every class of the column shows up


@pytest.mark.parametrize(
    "profile, dominant",
    [("piper", {"AE301"}), ("wrapper", {"AE304", "AE301", "AE306", "AE101"}),
     ("inventor", {"AE309", "AE310", "AE311"})],
)
def test_dominant_class_is_the_columns(rates, profile, dominant):
    top, _ = rates[profile][1].most_common(1)[0]
    assert top in dominant
