"""The index's "By scenario" and "By tag" tables: errors per 100 tool calls with their
interval and sessions completed, rows = scenarios (tags), columns = targets.

Sessions are judged by the real engine; every expected cell is worked out by hand below.
"""

from __future__ import annotations

import pytest
from support.factories import add_run
from support.report_fixtures import ALLOWED, PIPED, Tables, judged_call, session

from agent_eval.metrics import summarize
from agent_eval.metrics.clustered import Unit, clustered_text, units_rate
from agent_eval.report import write_report
from agent_eval.report.breakdown import breakdown_rows
from agent_eval.report.index import read_figures
from agent_eval.store import open_store

# By hand (Wilson 95%):
#   a · pipes: r0 PIPED + ALLOWED, r1 ALLOWED ×2, both completed -> 1/4 = 25.00 [4.6–69.9]
#   a · reads: r0 ALLOWED, stalled                                -> 0/1 = 0.00 [0.0–79.3]
#   b · pipes: r0 PIPED ×2, abandoned                             -> 2/2 = 100.00 [34.2–100.0]
#              r1 PIPED ×5 but a server fault: left out
#   b · reads: no session                                         -> –
PIPES_A = "25.00 [4.6–69.9] · 2/2 completed"
READS_A = "0.00 [0.0–79.3] · 0/1 completed"
PIPES_B = "100.00 [34.2–100.0] · 0/1 completed"
# Both tables show the clustered interval (sessions as clusters, as gate reads a rate;
# by tag stratified by scenario), not Wilson's above:
#   a · pipes (tags bash, ralf): sessions (1 of 2), (0 of 2): those two units' interval
#   a · reads (tag read), b · pipes: one session each: no interval, "[1 session]"
PIPES_A_CLUSTERED = (clustered_text(units_rate([Unit("a", "pipes", 0, 2, 1),
                                                Unit("a", "pipes", 1, 2, 0)]))
                     + " · 2/2 completed")
READS_A_CLUSTERED = "0.00 [1 session] · 0/1 completed"
PIPES_B_CLUSTERED = "100.00 [1 session] · 0/1 completed"


def fill(db: str) -> None:
    def calls(*commands: str):
        return [judged_call(i, i, c, "out") for i, c in enumerate(commands)]

    records = [
        session("a/pipes/0", "a", "pipes", calls(PIPED, ALLOWED), n_turns=2,
                tags=["bash", "ralf"]),
        session("a/pipes/1", "a", "pipes", calls(ALLOWED, ALLOWED), n_turns=2, repeat=1,
                tags=["bash", "ralf"]),
        session("a/reads/0", "a", "reads", calls(ALLOWED), n_turns=1, status="stalled",
                tags=["read"]),
        session("b/pipes/0", "b", "pipes", calls(PIPED, PIPED), n_turns=2, status="abandoned",
                tags=["bash", "ralf"]),
        session("b/pipes/1", "b", "pipes", calls(*[PIPED] * 5), n_turns=5, repeat=1,
                status="error", error="server answered 500", tags=["bash", "ralf"]),
    ]
    with open_store(db) as store:
        add_run(store, records, label="mix", targets=("a", "b"))


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("breakdown") / "store.db")
    fill(path)
    return path


@pytest.fixture(scope="module")
def tables(db, tmp_path_factory) -> dict[str, list[list[str]]]:
    with open_store(db) as store:
        index = write_report(store, [1], tmp_path_factory.mktemp("reports"))
    return Tables(index.read_text(encoding="utf-8")).tables


def test_by_scenario_table_has_a_row_per_scenario_and_a_column_per_target_clustered(tables):
    assert tables["scenario-table"] == [
        ["scenario", "a", "b"],
        ["pipes", PIPES_A_CLUSTERED, PIPES_B_CLUSTERED],
        ["reads", READS_A_CLUSTERED, "–"],
    ]
    assert PIPES_A_CLUSTERED != PIPES_A  # the two intervals differ here


def test_by_tag_table_counts_a_session_under_each_of_its_tags(tables):
    assert tables["tag-table"] == [
        ["tag", "a", "b"],
        ["bash", PIPES_A_CLUSTERED, PIPES_B_CLUSTERED],
        ["ralf", PIPES_A_CLUSTERED, PIPES_B_CLUSTERED],
        ["read", READS_A_CLUSTERED, "–"],
    ]


def test_untagged_sessions_leave_no_tag_table(hostile_report):
    html = (hostile_report / "index.html").read_text(encoding="utf-8")
    assert "No session carries a tag." in html
    assert ["scenario", "careful", "sloppy"] in Tables(html).tables["scenario-table"]


@pytest.mark.parametrize("by", ["scenario", "tag"])
def test_cells_agree_with_metrics_summarize_for_each_target(db, by):
    """The tables come from the store's aggregator; they must say what
    ``summarize(by=...)`` says over one target's sessions."""
    with open_store(db) as store:
        sessions = list(store.session_rows([1]))
        calls = list(store.call_rows([1]))
        figures = read_figures(store, [1])
    order = [s.scenario for s in sessions] if by == "scenario" else [
        t for s in sessions for t in s.tags]
    rows = breakdown_rows(figures.by_scenario if by == "scenario" else figures.by_tag,
                          ("a", "b"), order)
    for i, target in enumerate(("a", "b")):
        expected = summarize([s for s in sessions if s.target == target], calls, by=by)
        got = {row.name: row.cells[i] for row in rows if row.cells[i] is not None}
        assert {name: cell.errors for name, cell in got.items()} == {
            name: s.errors for name, s in expected.items() if s.sessions}
        assert {name: cell.completed for name, cell in got.items()} == {
            name: s.exit_states["completed"] for name, s in expected.items() if s.sessions}
