"""The static report's first screen: the headline tables before the failed-session list,
failed sessions never drawn green, and the suite named without the runner's paths."""

from __future__ import annotations

import re

from sqlalchemy import update
from support.report_fixtures import fill_store

from agent_eval.report import write_report
from agent_eval.report.index import suite_shown
from agent_eval.scenario.bundled import data_dir
from agent_eval.store import open_store
from agent_eval.store.schema import runs


def written_index(tmp_path, suite: str) -> str:
    fixture = fill_store(str(tmp_path / "r.db"))
    with open_store(fixture.db) as store:
        with store.engine.begin() as conn:
            conn.execute(update(runs).values(suite=suite))
        path = write_report(store, [fixture.run_id], tmp_path / "out")
    return path.read_text(encoding="utf-8")


def test_the_headline_tables_come_before_the_failed_sessions(tmp_path):
    html = written_index(tmp_path, "suite")
    assert html.index('id="target-table"') < html.index('id="class-table"') \
        < html.index('id="failed-table"')


def test_a_failed_session_that_completed_is_drawn_as_a_failure(tmp_path):
    html = written_index(tmp_path, "suite")
    failed = html[html.index('id="failed-table"'):]
    failed = failed[:failed.index("</table>")]
    cells = re.findall(r'<td class="(st-[a-z]+)">completed with 1 denial</td>', failed)
    assert cells == ["st-failed"]
    assert "st-completed" not in failed


def test_a_failed_session_that_completed_is_drawn_as_a_failure_on_its_own_page(tmp_path):
    written_index(tmp_path, "suite")
    pages = "".join(p.read_text(encoding="utf-8")
                    for p in sorted((tmp_path / "out").rglob("sessions/*.html")))
    status = re.findall(r'<th>status</th><td class="(st-[a-z]+)">([^<]*)</td>', pages)
    assert ("st-failed", "completed with 1 denial") in status
    assert [text for cls, text in status if cls == "st-completed"] and all(
        text == "completed" for cls, text in status if cls == "st-completed")


def test_a_bundled_suite_is_named_not_its_path_inside_the_venv(tmp_path):
    bundled = str(data_dir() / "scenarios" / "ralf")
    html = written_index(tmp_path, bundled)
    assert "suite ralf (bundled)" in html
    assert bundled not in html


def test_a_suite_elsewhere_is_its_folder_name_and_a_relative_one_is_kept(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suites" / "mine").mkdir(parents=True)
    assert suite_shown(str(tmp_path / "suites" / "mine")) == "suites/mine"
    assert suite_shown("/srv/ci/runner-7/checkout/evals/nightly") == "nightly"
    assert suite_shown("scenarios/ralf") == "scenarios/ralf"
