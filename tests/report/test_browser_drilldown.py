"""The two-click drill-down in a real browser: Playwright driving Debian's Chromium.

From a fresh demo run: the run page's AE301 cell, then the first failed call, reaches the
session page with the offending span highlighted and the rule's text beside it; "next
failed" walks on; a list filters by scenario; a compare view opens.  Once through
``agent-eval view``, once through the static report opened from disk.

Needs Chromium and the playwright package: ``scripts/ci/browser.sh`` installs both.
Skips without them, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.store import open_store

SCREENSHOTS = os.environ.get("AGENT_EVAL_SCREENSHOTS")  # e.g. docs/ to refresh docs/view.png


@pytest.fixture(scope="module")
def two_runs(demo_db, tmp_path_factory) -> str:
    """The demo store (copied) plus a rescore of its run under the permissive allow-list,
    so there are two runs to compare."""
    import sqlite3

    db = str(tmp_path_factory.mktemp("drill") / "demo.db")
    # SQLite's backup, not a file copy: the run's last writes may still sit in demo.db-wal
    # (a copy of demo.db alone showed the finished run as running)
    with sqlite3.connect(demo_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    with open_store(db) as store:
        assert store.get_run(1).status == "finished"
    allowlist = Path(__file__).resolve().parents[2] / "allowlists" / "permissive.yaml"
    result = CliRunner().invoke(main, ["rescore", "1", "--allowlist", str(allowlist),
                                       "--db", db])
    assert result.exit_code == 0, result.output
    return db


def _check_session_page(page, rule_code: str = "AE301") -> None:
    spans = page.locator("u.span")
    assert spans.count() >= 1 and spans.first.inner_text().strip()
    rule = page.locator("p.rule-text", has_text=f"{rule_code} pipe-to-filter:")
    assert rule.count() >= 1
    assert "Output piped into another program" in rule.first.inner_text()


def test_view_two_clicks_from_the_ae301_cell_to_the_transcript(browser, two_runs, tmp_path):
    from agent_eval.view.app import run_view_in_thread

    with open_store(two_runs) as store, run_view_in_thread(store) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/runs/1")
        if SCREENSHOTS:
            page.screenshot(path=str(Path(SCREENSHOTS) / "view.png"), full_page=False)
        page.screenshot(path=str(tmp_path / "view.png"))
        assert (tmp_path / "view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # click 1: the piper column of the AE301 row
        head = page.locator("#class-table tr").first.locator("th").all_inner_texts()
        row = page.locator("#class-table tr", has_text="AE301 pipe-to-filter")
        row.locator("td").nth(head.index("piper")).locator("a").click()
        page.wait_for_url("**/calls?**code=AE301**")
        first = page.locator("#calls-table tr").nth(1)
        assert first.locator("td").nth(6).inner_text() == "deny"
        assert first.locator("td").nth(7).inner_text() == "AE301"
        # click 2: the first failed call opens its session's transcript
        first.locator("td").first.locator("a").click()
        page.wait_for_url("**/sessions/*.html**")
        _check_session_page(page)
        if SCREENSHOTS:
            page.screenshot(path=str(Path(SCREENSHOTS) / "view-session.png"))
        here = page.url

        page.locator("#next-failed").click()
        page.wait_for_url(lambda url: url != here and "/sessions/" in url)
        assert page.locator("h1").inner_text().startswith("Session ")
        assert page.locator("p.rule-text", has_text="AE301").count() >= 1  # same filter

        page.goto(f"{base}/sessions?run_id=1")
        page.fill("input[name=scenario]", "evaluator-step")
        page.locator("form.filters button").click()
        page.wait_for_url("**scenario=evaluator-step**")
        scenarios = page.locator("#sessions-table tr td:nth-child(3)").all_inner_texts()
        assert scenarios and set(scenarios) == {"evaluator-step"}

        page.goto(f"{base}/compare?a=1&b=2")
        if SCREENSHOTS:
            page.screenshot(path=str(Path(SCREENSHOTS) / "view-compare.png"))
        assert page.locator("#compare-table tr").count() > 1
        page.locator("#compare-table a").first.click()
        page.wait_for_url("**/calls?run_id=*")
        assert page.locator("#calls-table tr").count() > 1
        page.close()


def test_static_report_two_clicks_from_the_ae301_cell_to_the_transcript(browser, two_runs,
                                                                        tmp_path):
    from agent_eval.report import write_report

    with open_store(two_runs) as store:
        index = write_report(store, [1], tmp_path / "reports")
    assert sum(1 for p in index.parent.rglob("*") if p.is_file()) < 300
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(index.resolve().as_uri())
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "report-index.png"))
    assert page.locator("#failed-table tr").count() > 1

    # click 1: the piper column of the AE301 row opens that column's AE301 calls
    head = page.locator("#class-table tr").first.locator("th").all_inner_texts()
    column = head.index("piper")
    row = page.locator("#class-table tr", has_text="AE301 pipe-to-filter")
    row.locator("td").nth(column).locator("a").click()
    page.wait_for_url(f"**/lists/class-AE301.html#col-{column - 1}")
    section = page.locator(f"h2#col-{column - 1} + table")
    first = section.locator("tr").nth(1).locator("td").first.locator("a")
    # click 2: the first call opens its session's section, at the call
    first.click()
    page.wait_for_url("**/sessions/*.html#s*-call-*")
    anchor = page.url.split("#", 1)[1]
    session_id = anchor.split("-")[0]
    call = page.locator(f"[id='{anchor}']")
    assert call.locator("u.span").count() >= 1
    assert "AE301 pipe-to-filter:" in call.locator("p.rule-text").inner_text()
    assert page.locator(f"section#{session_id} h1").inner_text().startswith("Session ")
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "report-session.png"))

    # a scenario cell opens that scenario's sessions
    page.goto(index.resolve().as_uri())
    page.locator("#scenario-table a", has_text="evaluator-step").first.click()
    page.wait_for_url("**/lists/scenario-*.html")
    assert "Scenario evaluator-step" in page.locator("h1").inner_text()
    page.close()


def test_view_run_page_shows_results_drawn_before_the_method(browser, two_runs, tmp_path):
    from agent_eval.view.app import run_view_in_thread

    with open_store(two_runs) as store, run_view_in_thread(store) as base:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/runs/1")
        page.screenshot(path=str(tmp_path / "run-page.png"), full_page=True)
        charts = page.locator("svg.chart")
        assert charts.count() >= 2
        first_chart = charts.first.bounding_box()
        assert first_chart and first_chart["height"] > 40 and first_chart["width"] > 300
        assert first_chart["y"] < page.locator("#class-table").bounding_box()["y"]
        method = page.locator("#method p")
        assert not method.is_visible()  # behind its disclosure
        page.locator("#method summary").click()
        assert method.is_visible()
        page.goto(f"{base}/compare?a=1&b=2")
        page.screenshot(path=str(tmp_path / "compare-page.png"), full_page=True)
        change = page.locator("svg.chart").first.bounding_box()
        assert change and change["y"] < page.locator("#compare-table").bounding_box()["y"]
        page.close()


def test_report_opens_with_the_headline_and_draws_failures_red(browser, demo_db, tmp_path):
    from agent_eval.report import write_report

    with open_store(demo_db) as store:
        index = write_report(store, [1], tmp_path / "report")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(index.resolve().as_uri())
    page.screenshot(path=str(tmp_path / "report.png"))
    assert page.locator("#target-table").bounding_box()["y"] < \
        page.locator("#failed-table").bounding_box()["y"]
    completed = page.locator("#failed-table td.st-failed").first
    assert completed.inner_text().startswith("completed with")
    assert completed.evaluate("e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
    # its own page says so too, in the same red
    completed.locator("xpath=..").locator("a.session-link").click()
    target = page.url.split("#", 1)[1]
    status = page.locator(f"[id='{target}'] td.st-failed").first
    assert status.inner_text().startswith("completed with")
    assert status.evaluate("e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
    page.close()
