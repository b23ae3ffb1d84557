"""`agent-eval compare` on a real SQLite store: differences with intervals and tests,
hand-checked against docs/design.md's numbers, and the scenarios that flipped."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.factories import add_run as stored_run

from agent_eval.analysis.comparison import compare_runs
from agent_eval.cli import main
from agent_eval.metrics import flipped_scenarios, repeat_stats, summarize
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, HandshakeResult, SessionRecord


def session(target: str, scenario: str, repeat: int = 0, *, allowed: int = 10,
            denied: tuple[str, ...] = (), handshake: bool = True,
            status: str = "completed") -> SessionRecord:
    """A session with ``denied`` calls first (each followed by a pivot), then ``allowed``."""
    calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}", decision="deny",
                        primary=code, next_action="pivot") for i, code in enumerate(denied)]
    calls += [CallRecord(index=len(calls) + i, turn_index=len(calls) + i, tool="bash",
                         arguments="{}", decision="allow") for i in range(allowed)]
    return SessionRecord(
        key=f"{target}/{scenario}/{repeat}", target=target, scenario=scenario, repeat=repeat,
        status=status, calls=calls,
        handshake=HandshakeResult(required=3, done=3 if handshake else 1, completed=handshake,
                                  missed_step=None if handshake else "update_stage_status.py"))


def spread(target: str, calls: int, denied: dict[str, int], *, handshakes: int,
           sessions: int = 10) -> list[SessionRecord]:
    """``calls`` over ``sessions`` scenarios s0..s9; denials packed into the first ones."""
    codes = [code for code, n in denied.items() for _ in range(n)]
    per = -(-calls // sessions)
    out, used = [], 0
    for s in range(sessions):
        n = min(per, calls - used)
        mine = tuple(codes[used:used + n])
        out.append(session(target, f"s{s}", allowed=n - len(mine), denied=mine,
                           handshake=s < handshakes))
        used += n
    return out


def add_run(db: str, label: str, records: list[SessionRecord]) -> int:
    with open_store(db) as store:
        return stored_run(store, records, label=label)


@pytest.fixture
def db(tmp_path) -> str:
    """Run 1: 9 errors in 161 calls (docs/design.md's 27B); run 2: 19 in 158 (the 35B)."""
    path = str(tmp_path / "compare.db")
    add_run(path, "nightly", spread("qwen", 161, {"AE320": 9}, handshakes=8))
    add_run(path, "pr-7", spread("qwen", 158, {"AE301": 10, "AE304": 9}, handshakes=6))
    return path


def compare(db: str, *args: str):
    return CliRunner().invoke(main, ["compare", "--db", db, *args])


def row(output: str, label: str) -> list[str]:
    """The cells of the row starting with ``label`` (cells are separated by 2+ spaces)."""
    import re

    for line in output.splitlines():
        if line.strip().startswith(label):
            return re.split(r"\s{2,}", line.strip())
    raise AssertionError(f"no row {label!r} in:\n{output}")


def test_overall_difference_has_interval_z_and_fisher_p_and_one_verdict_the_paired_one(db):
    result = compare(db, "1", "2")
    assert result.exit_code == 0, result.output
    # 19/158 − 9/161 = +6.44 per 100; Wald CI ±1.96 × 3.16; z = 2.03, p = 0.042
    # (docs/design.md); Fisher p = 0.0486 by direct hypergeometric summation.  The z-test
    # treats calls as independent: it is detail; the row is called by the paired method,
    # as the verdict line under the table is, never "yes" above and "not significant" below
    assert row(result.stdout, "errors/100 calls") == [
        "errors/100 calls", "5.59 (9/161)", "12.03 (19/158)", "+6.44 [+0.25 to +12.63]",
        "0.042", "0.049", "no (paired)"]
    assert ("paired verdict on errors/100: not significant (permutation p 0.500, alpha 0.05)"
            in result.stdout.splitlines())


def test_per_class_differences_cover_classes_either_run_hit(db):
    out = compare(db, "1", "2").stdout
    assert row(out, "AE301 pipe-to-filter")[1:4] == ["0.00 (0/161)", "6.33 (10/158)",
                                                     "+6.33 [+2.53 to +10.13]"]
    assert row(out, "AE304 shell-chain")[1:3] == ["0.00 (0/161)", "5.70 (9/158)"]
    assert row(out, "AE320 blocked-read-path")[1:4] == ["5.59 (9/161)", "0.00 (0/158)",
                                                        "-5.59 [-9.14 to -2.04]"]


def test_handshake_and_recovery_differences_are_shown(db):
    out = compare(db, "1", "2").stdout
    assert row(out, "handshake completed %")[1:4] == ["80.00 (8/10)", "60.00 (6/10)",
                                                      "-20.00 [-59.20 to +19.20]"]
    assert row(out, "handshake completed %")[-1] == "no"
    assert row(out, "pivot after denial %")[1:3] == ["100.00 (9/9)", "100.00 (19/19)"]


def test_flipped_scenarios_are_listed_with_their_direction(db):
    # run 1 packs 9 denials into s0 (17 calls each); run 2 packs 19 into s0 and s1 (16 each)
    out = compare(db, "1", "2").stdout.splitlines()
    at = out.index("flipped scenarios: 1 (about 1.0 expected from repeat noise alone if "
                   "nothing changed)")
    assert out[at + 1] == "  s1: broke (a P -> b F)"


def test_the_verdict_and_numbers_come_first_and_the_method_in_one_line(db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = compare(db, "1", "2").stdout.splitlines()
    assert out[0] == "b = run 2 (pr-7) against a = run 1 (nightly):"
    assert out[1].startswith("  qwen: errors/100 5.59 -> 12.03, not significant (paired)")
    method = [line for line in out if line.startswith("method:")]
    assert len(method) == 1 and len(method[0]) <= 80 and "--explain" in method[0]
    assert out.index(method[0]) < out.index("== qwen ==") < 12
    assert not any("Korn–Graubard" in line or "Fisher's exact" in line for line in out)


def test_explain_prints_every_method_in_full(db):
    out = compare(db, "1", "2", "--explain").stdout
    assert "Korn–Graubard" in out and "Holm's method" in out


def test_runs_with_no_target_in_common_are_refused_naming_each_runs_targets(tmp_path):
    db = str(tmp_path / "apart.db")
    add_run(db, "a", [session("qwen-27b", "s0"), session("qwen-35b", "s0")])
    add_run(db, "b", [session("qwen-122b", "s0")])
    result = compare(db, "1", "2")
    assert result.exit_code == 2, result.output
    [line] = [x for x in result.stderr.splitlines() if x.startswith("Error:")]
    assert "run 1 (a) has 'qwen-27b', 'qwen-35b', run 2 (b) has 'qwen-122b'" in line
    assert "--by all" in line and "Traceback" not in result.output


def test_the_test_used_is_named(db):
    out = compare(db, "label:nightly", "latest", "--explain").stdout
    assert "two-proportion z-test (pooled, no continuity correction) at alpha 0.05" in out
    assert "Fisher's exact test (two-sided)" in out
    assert out.startswith("b = run 2 (pr-7) against a = run 1 (nightly)")


def test_targets_are_matched_by_name_and_the_rest_named(tmp_path):
    db = str(tmp_path / "two.db")
    add_run(db, "a", [session("qwen", "s0"), session("old", "s0")])
    add_run(db, "b", [session("qwen", "s0", denied=("AE301",)), session("new", "s0")])
    out = compare(db, "1", "2").stdout
    assert "only in a (run 1 (a)): old" in out
    assert "only in b (run 2 (b)): new" in out
    assert "== qwen ==" in out and "== old ==" not in out
    assert row(out, "errors/100 calls")[1:3] == ["0.00 (0/10)", "9.09 (1/11)"]
    assert "  s0: broke (a P -> b F)" in out


def test_by_all_pools_every_target_of_each_run(tmp_path):
    db = str(tmp_path / "pooled.db")
    add_run(db, "a", [session("m1", "s0"), session("m2", "s0", denied=("AE301",))])
    add_run(db, "b", [session("m3", "s0"), session("m4", "s0")])
    out = compare(db, "1", "2", "--by", "all").stdout
    assert "== all ==" in out
    assert row(out, "errors/100 calls")[1:3] == ["4.76 (1/21)", "0.00 (0/20)"]
    assert "  s0: fixed (a PF -> b PP)" in out


def test_faulted_sessions_are_left_out(tmp_path):
    db = str(tmp_path / "faults.db")
    add_run(db, "a", [session("qwen", "s0")])
    add_run(db, "b", [session("qwen", "s0"),
                      session("qwen", "s1", denied=("AE301",) * 5, status="error")])
    out = compare(db, "1", "2").stdout
    assert row(out, "errors/100 calls")[1:3] == ["0.00 (0/10)", "0.00 (0/10)"]
    assert "flipped scenarios: 0" in out


def test_markdown_file_holds_the_same_tables(db, tmp_path):
    md_path = tmp_path / "compare.md"
    assert compare(db, "1", "2", "--markdown", str(md_path)).exit_code == 0
    md = md_path.read_text()
    assert md.startswith("## agent-eval compare: run 1 (nightly) → run 2 (pr-7)\n")
    assert ("| errors/100 calls | 5.59 (9/161) | 12.03 (19/158) | +6.44 [+0.25 to +12.63] "
            "| 0.042 | 0.049 | no (paired) |") in md
    assert "- s1: broke (a P -> b F)" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [pytest.param(["1", "9"], "no run with id 9", id="unknown-run"),
     pytest.param(["1", "label:weekly"], "no run has that label", id="unknown-label"),
     pytest.param(["1", "newest"], "is not a run", id="bad-reference")],
)
def test_a_run_that_does_not_exist_exits_2_with_one_line(db, args, message):
    result = compare(db, *args)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: ") and message in line


def test_per_target_flips_agree_with_metrics_flipped_scenarios(db):
    """compare_runs builds flips from repeat_stats in one pass; the result must be what
    flipped_scenarios says for the same rows."""
    with open_store(db) as store:
        sessions = {rid: list(store.session_rows([rid])) for rid in (1, 2)}
        calls = {rid: list(store.call_rows([rid])) for rid in (1, 2)}
    result = compare_runs(summarize(sessions[1], calls[1]), summarize(sessions[2], calls[2]),
                          repeat_stats(sessions[1], calls[1]), repeat_stats(sessions[2], calls[2]))
    assert result.flips["qwen"] == flipped_scenarios(sessions[1], calls[1], sessions[2], calls[2])


def reactions(target: str, actions: list[str]) -> SessionRecord:
    """One session: a denied call followed by each of ``actions`` in turn (as stored)."""
    calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments=f'{{"n": {i}}}',
                        decision="deny", primary="AE301", next_action=a)
             for i, a in enumerate(actions)]
    return SessionRecord(key=f"{target}/s0/0", target=target, scenario="s0", calls=calls)


@pytest.fixture
def recovery_db(tmp_path) -> str:
    """Run 1: 4 denials, 3 pivots and 1 retry; run 2: 6 denials, 1 pivot, 2 retries,
    2 repeats, 1 abandon."""
    path = str(tmp_path / "recovery.db")
    add_run(path, "a", [reactions("qwen", ["pivot"] * 3 + ["retry-denied"])])
    add_run(path, "b", [reactions("qwen", ["pivot", "retry-denied", "retry-denied", "repeat",
                                           "repeat", "abandon"])])
    return path


@pytest.mark.parametrize(
    ("label", "a", "b"),
    [("pivot after denial %", "75.00 (3/4)", "16.67 (1/6)"),
     ("retry-denied after denial %", "25.00 (1/4)", "33.33 (2/6)"),
     ("repeat after denial %", "0.00 (0/4)", "33.33 (2/6)"),
     ("abandon after denial %", "0.00 (0/4)", "16.67 (1/6)")],
    ids=["pivot", "retry-denied", "repeat", "abandon"],
)
def test_every_next_action_share_is_compared(recovery_db, label, a, b):
    assert row(compare(recovery_db, "1", "2").stdout, label)[1:3] == [a, b]


def test_a_next_action_difference_has_its_interval_and_p_values(recovery_db):
    # repeat: 0/4 -> 2/6 = +33.33; Wald ±1.96 × 19.25 = [-4.39, +71.05]; pooled 2/10,
    # z = 1.29, p = 0.197; Fisher over the tables with 2 repeats in 10: 15/45 + 6/45 = 0.467
    assert row(compare(recovery_db, "1", "2").stdout, "repeat after denial %") == [
        "repeat after denial %", "0.00 (0/4)", "33.33 (2/6)", "+33.33 [-4.39 to +71.05]",
        "0.197", "0.467", "no"]


def test_markdown_compares_every_next_action(recovery_db, tmp_path):
    md_path = tmp_path / "compare.md"
    assert compare(recovery_db, "1", "2", "--markdown", str(md_path)).exit_code == 0
    md = md_path.read_text()
    assert ("| abandon after denial % | 0.00 (0/4) | 16.67 (1/6) | +16.67 [-13.15 to +46.49] "
            in md)


def test_two_targets_of_one_run_are_compared_paired_over_their_shared_scenarios(tmp_path):
    path = str(tmp_path / "targets.db")
    add_run(path, "nightly", [*spread("qwen3.5-27b", 161, {"AE320": 9}, handshakes=8),
                              *spread("qwen3.6-35b", 158, {"AE301": 10, "AE304": 9},
                                      handshakes=6)])
    one_run = compare(path, "1", "--targets", "qwen3.5-27b,qwen3.6-35b")
    assert one_run.exit_code == 0, one_run.output
    out = one_run.stdout.splitlines()
    assert out[0].startswith("b = qwen3.6-35b in run 1 (nightly) against a = qwen3.5-27b in "
                             "run 1 (nightly)")
    assert "== qwen3.5-27b -> qwen3.6-35b ==" in out
    # the same figures as the same sessions stored as two runs (the fixture above)
    two_runs = str(tmp_path / "runs.db")
    add_run(two_runs, "nightly", spread("qwen", 161, {"AE320": 9}, handshakes=8))
    add_run(two_runs, "pr-7", spread("qwen", 158, {"AE301": 10, "AE304": 9}, handshakes=6))
    across = compare(two_runs, "1", "2").stdout
    assert row(one_run.stdout, "errors/100 calls") == row(across, "errors/100 calls")
    assert ("compared on 10 shared scenarios (the same mix in both runs), weighted by pooled "
            "calls") in out
    paired = [line for line in across.splitlines() if line.startswith("errors/100 paired")]
    assert paired and paired[0] in out
    assert "  s1: broke (a P -> b F)" in out


@pytest.mark.parametrize(("args", "message"), [
    (["1", "--targets", "qwen"], "'qwen' is not two different target names A,B"),
    (["1", "--targets", "qwen,llama"], "run 1 has no sessions of 'llama'; it holds qwen"),
    (["1", "2", "--targets", "qwen,llama"], "--targets compares two targets of ONE run"),
    (["1"], "give RUN_B, or --targets A,B"),
])
def test_targets_usage_errors_exit_2_with_one_line(db, args, message):
    result = compare(db, *args)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert message in line


def test_json_carries_the_one_verdict_and_the_holm_adjusted_class_p(db):
    import json

    data = json.loads(compare(db, "1", "2", "--json").stdout)
    assert data["units"]["qwen"]["verdict"] == {"method": "paired", "significant": False}
    # each class on its Rao–Scott p (the z statistic over the class's design effect, on
    # t), never below the per-call z-test's, then Holm across the table's classes
    assert data["class_method"].startswith("Rao–Scott")
    assert data["class_p_holm"]["qwen"]["AE301"] >= min(
        1.0, 3 * data["groups"]["qwen"]["classes"]["AE301"]["p_value"])


# --- at 80, 100 and 200 columns -----------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 100, 200])
def test_every_line_keeps_to_the_terminal_width_and_every_number_stays(db, monkeypatch,
                                                                         columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    out = compare(db, "1", "2").stdout
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    text = " ".join(out.split())  # a wrapped line read as one
    for number in ("5.59 (9/161)", "12.03 (19/158)", "+6.44 [+0.25 to +12.63]",
                   "6.33 (10/158)", "no (paired)",
                   "paired verdict on errors/100: not significant (permutation p 0.500, "
                   "alpha 0.05)"):
        assert number in text
    whole = compare(db, "1", "2").stdout if columns == 200 else None
    if columns >= 200:  # wide enough: the table with both p columns, one row a line
        assert row(whole, "errors/100 calls")[4:6] == ["0.042", "0.049"]
    else:  # the p columns move under each measure, "head value" never split
        assert "p (z-test) 0.042" in out and "p (Fisher) 0.049" in out


def test_through_a_pipe_without_columns_lines_stay_whole(db):
    out = compare(db, "1", "2").stdout
    assert max(map(len, out.splitlines())) > 120  # the legend's lines, unwrapped
    assert row(out, "errors/100 calls")[4:6] == ["0.042", "0.049"]
