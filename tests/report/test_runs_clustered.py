"""The runs lists (``agent-eval runs``, its --json, the viewer's runs index) lead each
errors/100 with the clustered interval, the one ``gate`` and ``compare`` decide on, not
the Wilson interval on calls; and they read the clustered sums of every listed run in one
grouped query, so the page makes as many queries for 2 runs as for 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlalchemy import event

from agent_eval.cli import main
from agent_eval.metrics.clustered import clustered_text, units_rate
from agent_eval.metrics.stats import wilson_interval
from agent_eval.store import open_store


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """Run 1: one target; run 2: two targets (demo profiles, 5 scenarios × 3 repeats)."""
    path = str(tmp_path_factory.mktemp("runs-ci") / "demo.db")
    for profiles in ("piper", "piper,disciplined"):
        result = CliRunner().invoke(main, ["demo", "--profiles", profiles, "--repeats", "3",
                                           "--limit", "5", "--no-report", "--db", path])
        assert result.exit_code == 0, result.output
    return path


def _expected(db: str, run_id: int) -> dict[str, tuple[str, str, tuple[float, float]]]:
    """Per target: (clustered text, Wilson text, clustered [lo, hi]) from the sums gate
    reads (``store.cluster_stats``) and the calls."""
    with open_store(db, create=False) as store:
        stats = store.cluster_stats([run_id])
        figures = store.summarize([run_id], "target", with_turns=False, detail="totals")
    out = {}
    for name, s in stats.items():
        rate = units_rate(s)
        k, n = figures[name].errors.k, figures[name].calls
        lo, hi = wilson_interval(k, n)
        out[name] = (clustered_text(rate), f"{100 * k / n:.2f} [{100 * lo:.1f}–{100 * hi:.1f}]",
                     (rate.lo100, rate.hi100))
    return out


def test_runs_table_shows_the_clustered_interval_not_wilson(db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    out = CliRunner().invoke(main, ["runs", "--db", db]).output
    single = _expected(db, 1)["piper"]
    both = _expected(db, 2)
    assert single[0] != single[1]  # the seeded store tells the two apart
    lines = out.splitlines()
    run1 = next(line for line in lines if line.startswith("│  1 "))
    assert single[0] in run1 and single[1] not in run1
    for name, (clustered, wilson, _) in both.items():
        line = next(line for line in lines if f"· {name} " in line)
        assert clustered in line and wilson not in line


def test_runs_json_names_the_clustered_interval_and_the_wilson_one(db):
    rows = {r["id"]: r for r in json.loads(
        CliRunner().invoke(main, ["runs", "--json", "--db", db]).output)}
    clustered, _, (lo, hi) = _expected(db, 1)["piper"]
    assert rows[1]["errors_ci95"] == [round(lo, 3), round(hi, 3)]
    k, n = rows[1]["errors"], rows[1]["calls"]
    assert rows[1]["errors_ci95_wilson"] == [round(100 * v, 3) for v in wilson_interval(k, n)]
    assert rows[2]["errors_ci95"] is None  # two targets: no pooled figure
    for entry in rows[2]["by_target"]:
        _, _, (lo, hi) = _expected(db, 2)[entry["target"]]
        assert entry["errors_ci95"] == [round(lo, 3), round(hi, 3)]
        assert entry["errors_ci95_wilson"] == [
            round(100 * v, 3) for v in wilson_interval(entry["errors"], entry["calls"])]


def test_viewer_runs_index_shows_the_clustered_interval(db):
    from agent_eval.report.runs import RUN_HEAD
    from agent_eval.view.overview import build_runs_page

    with open_store(db, create=False) as store:
        page = build_runs_page(store, {})
    row = next(r for r in page.rows if r[0].text == "1")
    clustered, wilson, _ = _expected(db, 1)["piper"]
    assert row[RUN_HEAD.index("errors/100 [95% CI]")].text == clustered != wilson


def _queries(db: str, limit: int) -> int:
    with open_store(db, create=False) as store:
        seen: list[str] = []
        event.listen(store.engine, "before_cursor_execute",
                     lambda *args: seen.append(args[2]))
        page = store.list_run_rows(limit=limit)
        assert len(page.rows) == limit
    return len(seen)


def test_the_runs_list_reads_the_clustered_sums_of_all_its_runs_at_once(db):
    assert _queries(db, 2) == _queries(db, 1)


def test_report_json_leads_with_the_clustered_interval(db, tmp_path):
    """``report --json`` (the same ``targets`` as ``run --json``): ``ci95_clustered``
    before the Wilson ``ci95``, from the sums gate reads."""
    out = CliRunner().invoke(main, ["report", "1", "--json", "--out", str(tmp_path / "r"),
                                    "--db", db])
    assert out.exit_code == 0, out.output
    entry = json.loads(out.output)["targets"]["piper"]
    _, _, (lo, hi) = _expected(db, 1)["piper"]
    assert entry["ci95_clustered"] == [round(lo, 4), round(hi, 4)]
    keys = list(entry)
    assert keys.index("ci95_clustered") < keys.index("ci95")
    k, n = entry["errors"], entry["tool_calls"]
    assert entry["ci95"] == [round(100 * v, 4) for v in wilson_interval(k, n)]


def test_summary_json_puts_the_clustered_interval_beside_the_rate(db, tmp_path):
    out = CliRunner().invoke(main, ["report", "1", "--quiet", "--out", str(tmp_path / "r"),
                                    "--db", db])
    assert out.exit_code == 0, out.output
    (summary,) = (tmp_path / "r").rglob("summary.json")
    entry = json.loads(summary.read_text())["targets"]["piper"]
    keys = list(entry)
    assert keys.index("errors_per_100_ci95_clustered") < keys.index("errors_per_100_ci95")
    assert (entry["errors_per_100_ci95_clustered"]
            == entry["clustered"]["errors_per_100_ci95"] is not None)


def test_tag_sums_give_the_interval_of_the_sessions_carrying_the_tag(db):
    """``Store.tag_cluster_stats`` (one GROUP BY) says what the per-session units say: the
    clustered rate of the sessions carrying the tag, stratified by scenario; the demo's
    tags span several scenarios."""
    with open_store(db, create=False) as store:
        units = list(store.session_units([2]))
        sums = store.tag_cluster_stats([2])
    assert {len(s.scenarios) for s in sums.values()} - {1}  # a tag over several scenarios
    expected = {(tag, u.target) for u in units for tag in u.tags}
    assert set(sums) == expected
    for (tag, target), stats in sums.items():
        assert units_rate(stats) == units_rate(
            [u for u in units if u.target == target and tag in u.tags])


def test_report_by_tag_cells_show_the_clustered_interval(db, tmp_path):
    from agent_eval.report import write_report
    from agent_eval.report.breakdown import tag_rates
    from agent_eval.report.index import read_figures

    with open_store(db, create=False) as store:
        index = write_report(store, [2], tmp_path / "r")
        rates = tag_rates(read_figures(store, [2]).by_tag_clustered)
    html = index.read_text(encoding="utf-8")
    table = html[html.index('id="tag-table"'):]
    table = table[:table.index("</table>")]
    for (tag, _target), rate in rates.items():
        assert f"<td>{tag}</td>" in table
        assert clustered_text(rate) in table


def test_reaction_sums_are_the_sessions_denials_and_actions(db):
    """``Store.action_cluster_stats``: per (target, action) the per-scenario sums of
    (denials followed by the action, denials) over the sessions, worked here from the
    call rows; their rate is the summary's share of denials."""
    from agent_eval.metrics.clustered import sums_rate
    from agent_eval.metrics.sufficient import Sums
    from agent_eval.transcript import NEXT_ACTIONS

    with open_store(db, create=False) as store:
        sessions = {s.id: s for s in store.session_rows([2])}
        calls = [c for c in store.call_rows([2]) if c.decision == "deny"]
        got = store.action_cluster_stats([2])
        figures = store.summarize([2], "target")
    per_session: dict[int, list] = {}
    for c in calls:
        if sessions[c.session_id].status != "error":
            n, actions = per_session.setdefault(c.session_id, [0, {}])
            per_session[c.session_id][0] = n + 1
            actions[c.next_action] = actions.get(c.next_action, 0) + 1
    assert per_session  # the demo run denies calls
    for target, by_action in got.items():
        for action in NEXT_ACTIONS:
            expected: dict[str, Sums] = {}
            for sid, (n, actions) in per_session.items():
                if sessions[sid].target == target:
                    k = actions.get(action, 0)
                    scenario = sessions[sid].scenario
                    expected[scenario] = expected.get(scenario, Sums()) + Sums(
                        1, k, n, k * k, k * n, n * n)
            assert sorted(by_action[action], key=repr) == sorted(expected.values(), key=repr)
            rate = sums_rate(by_action[action])
            assert rate.per100 == pytest.approx(
                figures[target].recovery.actions[action].per100)


def test_report_reaction_table_shows_the_clustered_shares(db, tmp_path):
    from agent_eval.metrics.clustered import sums_rate
    from agent_eval.report import write_report
    from agent_eval.report.index import share_text
    from agent_eval.transcript import NEXT_ACTIONS

    with open_store(db, create=False) as store:
        index = write_report(store, [2], tmp_path / "r")
        got = store.action_cluster_stats([2], columns=True)
    html = index.read_text(encoding="utf-8")
    table = html[html.index('id="recovery-table"'):]
    row = table[table.index("<td>piper</td>"):]
    row = row[:row.index("</tr>")]
    for action in NEXT_ACTIONS:
        assert f">{share_text(sums_rate(got['piper'][action]))}<" in row
