"""The static report navigates like the viewer: failed sessions right under the headline
tables, class and scenario cells open pre-filtered lists, each list row opens the call inside its session's batch
file, and sessions share files a hundred at a time."""

from __future__ import annotations

from support.report_fixtures import Tables, session_section

from agent_eval.report.pages import call_href, session_file


def page(report, name: str) -> str:
    return (report / name).read_text(encoding="utf-8")


def test_failed_sessions_follow_the_headline_with_status_words(hostile_report, hostile_store):
    html = page(hostile_report, "index.html")
    assert html.index('id="targets"') < html.index('id="classes"') < html.index('id="failed"')
    rows = Tables(html).tables["failed-table"][1:]
    ids = hostile_store.ids
    assert [int(r[0]) for r in rows] == sorted(
        [ids["careful/xss/0"], ids["sloppy/handshake/0"], ids["sloppy/fault/0"]])
    status = {int(r[0]): r[3] for r in rows}
    assert status[ids["careful/xss/0"]] == "completed with 1 denial"
    assert status[ids["sloppy/handshake/0"]] == "abandoned"


def test_session_table_says_completed_with_denials(hostile_report, hostile_store):
    rows = Tables(page(hostile_report, "index.html")).tables["session-table"][1:]
    assert rows[0][0].startswith(str(hostile_store.ids["careful/xss/0"]))  # failed first
    assert rows[0][4] == "completed with 1 denial"


def test_class_cell_opens_the_list_of_that_columns_calls(hostile_report, hostile_store):
    tables = Tables(page(hostile_report, "index.html"))
    assert "lists/class-AE301.html#col-0" in tables.hrefs
    listed = page(hostile_report, "lists/class-AE301.html")
    sid = hostile_store.ids["careful/xss/0"]
    target = "../" + call_href(sid, 0, from_dir=None)
    assert f'href="{target}"' in listed
    assert '<h2 id="col-0">careful (1)</h2>' in listed
    # the anchor exists in the batch file, on the denied call
    section = session_section(hostile_report, sid)
    assert f'id="s{sid}-call-0"' in section and '<u class="span">| head -5</u>' in section
    assert "AE301 pipe-to-filter:</strong>" in section  # the rule's text inline


def test_scenario_cells_open_the_scenarios_sessions(hostile_report, hostile_store):
    tables = Tables(page(hostile_report, "index.html"))
    scenarios = sorted({"xss", "evaluator-step", "clean", "handshake", "fault"})
    n = scenarios.index("handshake")
    assert f"lists/scenario-{n}.html#col-1" in tables.hrefs
    listed = page(hostile_report, f"lists/scenario-{n}.html")
    assert "Scenario handshake" in listed and '<h2 id="col-1">sloppy (1)</h2>' in listed
    assert f"#s{hostile_store.ids['sloppy/handshake/0']}" in listed


def test_sessions_are_batched_a_hundred_to_a_file(hostile_report, hostile_store):
    files = sorted(p.name for p in (hostile_report / "sessions").iterdir())
    assert files == sorted({session_file(i) for i in hostile_store.ids.values()}) == [
        "0-99.html"]
    assert session_file(1234) == "1200-1299.html"
