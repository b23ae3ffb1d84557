"""The report shows the clustered interval beside Wilson's and names it."""

from __future__ import annotations

import json

import pytest
from test_cli_stats import add_mixed_run

from agent_eval.metrics.clustered import clustered_rate
from agent_eval.report.writing import write_report
from agent_eval.store import open_store


def test_index_and_summary_json_carry_the_clustered_interval(tmp_path):
    db = str(tmp_path / "r.db")
    # two scenarios, two sessions each; errors pile into one session per scenario
    add_mixed_run(db, None, [("s0", 10, 0), ("s0", 10, 4), ("s1", 10, 0), ("s1", 10, 4)])
    with open_store(db) as store:
        index = write_report(store, [1], tmp_path / "reports")
    expected = clustered_rate([(0, 10), (4, 10), (0, 10), (4, 10)],
                              strata=["s0", "s0", "s1", "s1"])
    # p = 0.2; residuals ∓2/40 in each stratum: V = 2 strata · 2/(2−1) · 2·0.05² = 0.02,
    # against the binomial 0.2·0.8/40 = 0.004: deff 5
    assert expected.deff == pytest.approx(0.02 / 0.004)
    assert (expected.clusters, expected.strata, expected.df) == (4, 2, 2)
    html = index.read_text()
    assert '<table id="clustered-table"' in html
    assert (f"[{expected.lo100:.1f}–{expected.hi100:.1f}] few clusters") in html
    data = json.loads((index.parent / "summary.json").read_text())
    clustered = data["targets"]["qwen"]["clustered"]
    assert clustered["errors_per_100_ci95"] == [round(expected.lo100, 2),
                                                round(expected.hi100, 2)]
    assert (clustered["design_effect"], clustered["sessions"], clustered["few_clusters"]) == (
        5.0, 4, True)
    assert clustered["classes"]["AE301"]["design_effect"] == 5.0
    assert data["statistics"]["interval_to_trust"].startswith("clustered:")
    assert "Korn–Graubard" in data["statistics"]["clustered_interval"]
    assert "Clustered intervals (sessions as clusters" in (index.parent / "summary.md").read_text()


def test_report_and_run_tables_lead_with_the_clustered_interval(tmp_path, monkeypatch):
    """The terminal's per-target table (report, run, demo) and the HTML report's target
    table and forest plot lead with the interval the gate decides on (sessions as
    clusters); Wilson's on calls, which treats a session's calls as independent, follows
    as detail.  Seeded so that the two differ: errors pile into one session per scenario."""
    import re

    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.metrics.stats import wilson_interval

    db = str(tmp_path / "r.db")
    add_mixed_run(db, None, [("s0", 10, 0), ("s0", 10, 4), ("s1", 10, 0), ("s1", 10, 4)])
    expected = clustered_rate([(0, 10), (4, 10), (0, 10), (4, 10)],
                              strata=["s0", "s0", "s1", "s1"])
    lo, hi = (100 * x for x in wilson_interval(8, 40))
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(main, ["report", "1", "--db", db, "--out",
                                       str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    head = next(line for line in result.stdout.splitlines() if "errors/100" in line)
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("│ qwen")]
    cells = dict(zip((c.strip() for c in head.split("┃")[1:-1]),
                     (c.strip() for c in row.split("│")[1:-1]), strict=True))
    assert cells["errors/100 [95% CI]"] == (
        f"20.00 [{expected.lo100:.1f}–{expected.hi100:.1f}]")
    assert cells["Wilson CI (calls)"] == f"[{lo:.1f}–{hi:.1f}]"
    assert list(cells).index("errors/100 [95% CI]") < list(cells).index("Wilson CI (calls)")
    assert "sessions as clusters" in result.stdout
    html = (tmp_path / "reports" / "1" / "index.html").read_text()
    table = html[html.index('<table id="target-table"'):]
    table = table[:table.index("</table>")]
    assert table.index(f"20.00 [{expected.lo100:.1f}–{expected.hi100:.1f}]") < table.index(
        f"[{lo:.1f}–{hi:.1f}]")
    whisker = re.search(r'<g class="rate" data-lo="([\d.]+)" data-hi="([\d.]+)">', html)
    assert whisker is not None and whisker.groups() == (f"{expected.lo100:.2f}",
                                                        f"{expected.hi100:.2f}")
    assert "with clustered 95% intervals" in html
