"""``agent-eval rescore RUN --allowlist permissive.yaml`` then ``agent-eval compare RUN NEW``:
the comparison shows what the policy change moved, per class, overall and per scenario.

The original run is live-like: sessions whose calls are docs/design.md's habits, judged by
the real engine under allowlists/ralf.yaml, written to a real SQLite store.  The
permissive list (read it: pipes into ``head -n N``, ``timeout N``; no ``curl``, and
``head`` takes only ``-n``) then judges the same calls again.

Per target ``qwen``, two repeats of five scenarios, two calls each (20 calls):

=============  ==========================================  =============  ==============
scenario       denied call (then an allowed one)           under ralf     under permissive
=============  ==========================================  =============  ==============
pipes          ``uv run ... --sql "SELECT 1" | head -n 5``  AE301          allowed
wrapper        ``timeout 60 uv run ... --sql "SELECT 1"``   AE306          allowed
web            ``curl -s 'https://...'``                    AE307          AE307
head-short     ``uv run ... | head -5``                     AE301          AE310 (-5 unknown)
clean          (none: two allowed calls)                    –              –
=============  ==========================================  =============  ==============

So errors go from 8/20 (40.00) to 4/20 (20.00), AE301 from 4/20 (20.00) to 0/20, and
``pipes`` and ``wrapper`` flip to passing ("fixed"); ``head-short`` still fails.  As both
runs hold the same calls, compare also counts exactly which classes moved (6 calls).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run, judged_bash

from agent_eval.cli import main
from agent_eval.policy import load_allowlist
from agent_eval.store import open_store
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    assign_next_actions,
)

ROOT = Path(__file__).resolve().parents[2]
RALF = ROOT / "allowlists" / "ralf.yaml"
PERMISSIVE = ROOT / "allowlists" / "permissive.yaml"

ALLOWED = "uv run scripts/fetch_context.py --no-attach --agent researcher"
SCENARIOS = {
    "pipes": 'uv run scripts/db_query.py --sql "SELECT 1" | head -n 5',
    "wrapper": 'timeout 60 uv run scripts/db_query.py --sql "SELECT 1"',
    "web": "curl -s 'https://example.com/search?q=web'",
    "head-short": 'uv run scripts/db_query.py --sql "SELECT 1" | head -5',
    "clean": 'uv run scripts/db_query.py --sql "SELECT 1"',
}
REPEATS = 2


def judged(index: int, command: str, allowlist) -> CallRecord:
    """A bash call as the live orchestrator stores it: the engine's verdict on it."""
    call = judged_bash(index, index, command, allowlist)
    return call if call.decision == "allow" else replace(call, output="Permission denied")


def live_session(scenario: str, repeat: int, allowlist) -> SessionRecord:
    calls = [judged(0, SCENARIOS[scenario], allowlist), judged(1, ALLOWED, allowlist)]
    assign_next_actions(calls)
    return SessionRecord(
        key=f"qwen/{scenario}/{repeat}", target="qwen", scenario=scenario, repeat=repeat,
        status="completed", calls=calls, handshake=HandshakeResult(3, 3, True),
    )  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """A finished live run (id 1) judged under ralf.yaml."""
    path = str(tmp_path_factory.mktemp("rescore-compare") / "store.db")
    ralf = load_allowlist(RALF)
    with open_store(path) as store:
        run_id = add_run(store, label="nightly", suite="ralf",
                         fingerprint={"allowlist": ralf.fingerprint},
                         targets={"qwen": "Qwen3.6-35B-A3B"}, base_url="http://127.0.0.1:8000/v1")
        for scenario in SCENARIOS:
            for repeat in range(REPEATS):
                store.record_session(run_id, live_session(scenario, repeat, ralf))
        store.set_run_status(run_id, "finished")
    assert run_id == 1
    return path


@pytest.fixture(scope="module")
def rescored(db):
    """``agent-eval rescore 1 --allowlist allowlists/permissive.yaml``: its output."""
    result = CliRunner().invoke(main, ["rescore", "1", "--allowlist", str(PERMISSIVE), "--db", db])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def compared(db, rescored) -> str:
    """``agent-eval compare 1 2``: the original against its rescore."""
    result = CliRunner().invoke(main, ["compare", "1", "2", "--db", db])
    assert result.exit_code == 0, result.output
    return result.output


def row(output: str, label: str) -> list[str]:
    """The cells of the row starting with ``label`` (cells are separated by 2+ spaces)."""
    for line in output.splitlines():
        if line.strip().startswith(label):
            return re.split(r"\s{2,}", line.strip())
    raise AssertionError(f"no row {label!r} in:\n{output}")


def test_rescore_writes_run_2_and_prints_the_rate_before_and_after(rescored):
    assert rescored.splitlines() == [
        "run 2: rescored run 1 under permissive: 20 calls, 4 changed verdict",
        "  errors/100 calls: 40.00 -> 20.00",
    ]


def test_rescore_run_is_linked_and_keeps_the_target_name(db, rescored):
    with open_store(db) as store:
        new = store.get_run(2)
        targets = [t.name for t in store.run_targets(2)]
    assert (new.kind, new.parent_run_id, new.config["allowlist"]) == ("rescore", 1, "permissive")
    assert targets == ["qwen"]


def test_compare_matches_the_target_of_a_run_and_its_rescore(compared):
    assert "== qwen ==" in compared
    assert "only in" not in compared and "nothing to compare" not in compared
    assert compared.splitlines()[0] == (
        "b = run 2 (rescore of run 1 under permissive) against a = run 1 (nightly):")


def test_pipe_rate_drops_to_zero_for_the_target(compared):
    # 4/20 -> 0/20: Wald ±1.96·sqrt(.2·.8/20) = ±17.53; pooled z = .2/sqrt(.1·.9·.1) = 2.11,
    # p = 0.035; Fisher: (C(20,4) + C(20,4)) / C(40,4) = 2·4845/91390 = 0.106; called on
    # the Rao–Scott p (z over the class's design effect from the sessions, on t) Holm-
    # adjusted over the table's 4 classes: 0.245, not significant (4 × 0.035 on the
    # per-call z-test)
    assert row(compared, "AE301 pipe-to-filter") == [
        "AE301 pipe-to-filter", "20.00 (4/20)", "0.00 (0/20)", "-20.00 [-37.53 to -2.47]",
        "0.035", "0.106", "no (Holm p 0.245)",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "a", "b", "diff"),
    [
        ("AE306 wrapper-prefix", "10.00 (2/20)", "0.00 (0/20)", "-10.00"),
        ("AE307 disallowed-program", "10.00 (2/20)", "10.00 (2/20)", "+0.00"),
        ("AE310 unknown-flag", "0.00 (0/20)", "10.00 (2/20)", "+10.00"),
    ],
    ids=["timeout-now-allowed", "curl-still-denied", "head-5-now-an-unknown-flag"],
)
def test_other_classes_moved_as_the_permissive_list_says(compared, label, a, b, diff):
    cells = row(compared, label)
    assert cells[1:3] == [a, b]
    assert cells[3].split(" [")[0] == diff


def test_overall_errors_per_100_difference_with_its_interval(compared):
    # 8/20 -> 4/20: Wald ±1.96·sqrt(.4·.6/20 + .2·.8/20) = ±27.72; pooled z = -.2/sqrt(.3·.7·.1)
    # = -1.38, p = 0.168; Fisher 0.301: not significant at 20 calls a side (docs/design.md "Noise")
    assert row(compared, "errors/100 calls") == [
        "errors/100 calls", "40.00 (8/20)", "20.00 (4/20)", "-20.00 [-47.72 to +7.72]",
        "0.168", "0.301", "no (paired)",
    ]  # fmt: skip


def test_scenarios_that_only_failed_on_allowed_habits_flip_to_fixed(compared):
    flips = compared[compared.index("flipped scenarios:"):].split("\n\n")[0].splitlines()
    assert flips == [
        "flipped scenarios: 2 (about 0.7 expected from repeat noise alone if nothing changed)",
        "  pipes: fixed (a FF -> b PP)",
        "  wrapper: fixed (a FF -> b PP)",
    ]


def test_pooled_comparison_shows_the_same_move(db, rescored):
    result = CliRunner().invoke(main, ["compare", "1", "2", "--by", "all", "--db", db])
    assert result.exit_code == 0, result.output
    assert "== all ==" in result.output
    assert row(result.output, "AE301 pipe-to-filter")[1:3] == ["20.00 (4/20)", "0.00 (0/20)"]


def test_compare_counts_exactly_which_verdicts_the_rescore_moved(compared):
    moved = compared[compared.index("== rescore: what moved =="):].splitlines()
    assert moved == [
        "== rescore: what moved ==",
        "a and b judge the same 20 calls (one is agent-eval rescore of the other): 6 moved "
        "class (a -> b), an exact count, not a sample; the tests above treat the runs as "
        "independent samples.",
        "  AE301 -> AE310: 2 calls",
        "  AE301 -> allowed: 2 calls",
        "  AE306 -> allowed: 2 calls",
    ]


def test_markdown_carries_the_moves_too(db, rescored, tmp_path):
    out = tmp_path / "compare.md"
    result = CliRunner().invoke(main, ["compare", "1", "2", "--db", db, "--markdown", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "### Rescore: what moved" in text
    assert "- AE301 -> allowed: 2 calls" in text


def test_two_independent_runs_get_no_moves_section(tmp_path):
    """A second live run is a new sample, not the same calls: nothing is paired."""
    path = str(tmp_path / "two-runs.db")
    ralf, permissive = load_allowlist(RALF), load_allowlist(PERMISSIVE)
    with open_store(path) as store:
        for label, allowlist in (("ralf", ralf), ("permissive", permissive)):
            add_run(store, [live_session("pipes", 0, allowlist)], label=label,
                    targets={"qwen": "m"})
    result = CliRunner().invoke(main, ["compare", "1", "2", "--db", path])
    assert result.exit_code == 0, result.output
    assert row(result.output, "AE301 pipe-to-filter")[1:3] == ["50.00 (1/2)", "0.00 (0/2)"]
    assert "rescore" not in result.output
