"""The label trends: on the run page and the runs index, each run is labelled by its date,
and by date and time where several runs share a day (to the second where they share the
minute); each point links to its run and
carries its clustered 95% interval; both panels have axes; every text is escaped."""

from __future__ import annotations

import re
import urllib.request
from datetime import UTC, datetime

import pytest
from sqlalchemy import update
from support.factories import add_run
from support.view_fixtures import SCRIPT_TAG, judged, record

from agent_eval.metrics.clustered import units_rate
from agent_eval.store import open_store
from agent_eval.store.schema import runs
from agent_eval.view.trend import run_stamps, trend_chart

WHEN = [datetime(2026, 11, 27, 23, 50, tzinfo=UTC), datetime(2026, 11, 28, 21, 4, tzinfo=UTC),
        datetime(2026, 11, 28, 22, 10, tzinfo=UTC), datetime(2026, 11, 28, 23, 31, tzinfo=UTC)]
HOSTILE_TARGET = 't<img src=x onerror=alert(1)>&"'  # no "/": it ends a session key


def test_stamps_give_the_time_only_where_runs_share_a_day():
    assert run_stamps(list(enumerate(WHEN, 1))) == [
        (1, "11-27"), (2, "11-28 21:04"), (3, "11-28 22:10"), (4, "11-28 23:31")]
    assert run_stamps([(1, WHEN[0]), (2, WHEN[1])]) == [(1, "11-27"), (2, "11-28")]
    same_minute = [(1, WHEN[1]), (2, WHEN[1].replace(second=7))]
    assert run_stamps(same_minute) == [(1, "11-28 21:04:00"), (2, "11-28 21:04:07")]


@pytest.fixture
def trend_db(tmp_path):
    """Four runs of label "nightly", three on one day; two targets, one with a hostile
    name; two sessions per target and run (so each has a clustered interval)."""
    db = str(tmp_path / "trend.db")
    with open_store(db) as store:
        for n, when in enumerate(WHEN):
            targets = ("careful", HOSTILE_TARGET)
            run_id = add_run(store, label="nightly", suite="s",
                             targets=dict.fromkeys(targets, "m"), base_url="u")
            for target in targets:
                for rep in range(2):
                    calls = [judged(0, 0, "ls scripts/"),
                             judged(1, 0, "ls | head -5" if (rep + n) % 2 else "ls")]
                    store.record_session(run_id, record(f"{target}/sc{rep}/0", calls))
            with store.engine.begin() as conn:
                conn.execute(update(runs).where(runs.c.id == run_id).values(
                    created_at=when, status="finished"))
    return db


def _get(base: str, path: str) -> str:
    with urllib.request.urlopen(base + path) as response:
        return response.read().decode()


def _trend_svg(html: str) -> str:
    start = html.index('<svg class="chart trend"')
    return html[start:html.index("</svg>", start)]


def test_run_page_trend_is_dated_timed_linked_and_carries_intervals(trend_db):
    from agent_eval.view.app import run_view_in_thread

    with open_store(trend_db) as store, run_view_in_thread(store) as base:
        svg = _trend_svg(_get(base, "/runs/4"))
        expected = {run_id: units_rate(store.cluster_stats([run_id])["careful"])
                    for run_id in range(1, 5)}
    labels = re.findall(r'<text class="tick x"[^>]*>([^<]*)</text>', svg)
    assert labels[:4] == ["11-27", "11-28 21:04", "11-28 22:10", "11-28 23:31"]
    for run_id in range(1, 5):  # both targets' error points open their run (no handshake)
        assert svg.count(f'<a class="point" href="/runs/{run_id}">') == 2
        rate = expected[run_id]
        assert (f"careful: {rate.per100:.1f} [{rate.lo100:.1f}–{rate.hi100:.1f}] "
                f"(run {run_id}, ") in svg
    assert svg.count('<line class="ci"') == 8  # one whisker per error point
    assert svg.count('class="axis"') == 4  # x and y of both panels
    assert "errors/100 [clustered 95% CI]" in svg and "run (oldest left)" in svg
    assert HOSTILE_TARGET not in svg and "t&lt;img src=x onerror=alert(1)&gt;&amp;" in svg


def test_runs_index_trend_has_axes_and_links_to_each_run(trend_db):
    from agent_eval.view.app import run_view_in_thread

    with open_store(trend_db) as store, run_view_in_thread(store) as base:
        html = _get(base, "/")
    svg = _trend_svg(html)
    assert [int(i) for i in re.findall(r'<a class="point" href="/runs/(\d+)">', svg)] == (
        [1, 2, 3, 4] * 2)  # per target, oldest first
    assert svg.count('class="axis"') == 4
    assert re.findall(r'<text class="tick x"[^>]*>([^<]*)</text>', svg)[:4] == [
        "11-27", "11-28 21:04", "11-28 22:10", "11-28 23:31"]
    assert HOSTILE_TARGET not in html


def test_trend_chart_escapes_every_text_and_draws_each_interval():
    from agent_eval.metrics.summary import Tally

    hostile = f'x"{SCRIPT_TAG}&'
    point = {hostile: Tally().freeze(hostile, False)}
    svg = str(trend_chart(hostile, [point, point], [(1, f"<{hostile}>"), (2, "b")],
                          [{hostile: (1.0, 9.0)}, {}]))
    assert SCRIPT_TAG not in svg and '"<' not in svg
    assert svg.count('<a class="point" href="/runs/') == 0  # no calls: no error point
    assert "&lt;x&#34;&lt;script&gt;" in svg or "&lt;x&quot;&lt;script&gt;" in svg


def test_trend_labels_are_readable_and_a_point_opens_its_run(trend_db, browser):
    """At 1280 px the run page's trend labels do not overlap each other, and clicking a
    point opens that run's page."""
    from agent_eval.view.app import run_view_in_thread

    with open_store(trend_db) as store, run_view_in_thread(store) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{base}/runs/4")
            labels = page.locator("svg.trend text.tick.x")
            boxes = [labels.nth(i).bounding_box() for i in range(4)]
            assert all(b is not None and b["width"] > 0 for b in boxes)
            texts = [labels.nth(i).text_content() for i in range(4)]
            assert texts == ["11-27", "11-28 21:04", "11-28 22:10", "11-28 23:31"]
            for n, a in enumerate(boxes):  # no two labels overlap (rows may stagger)
                for b in boxes[n + 1:]:
                    assert a is not None and b is not None
                    apart_x = a["x"] + a["width"] <= b["x"] + 1 or b["x"] + b["width"] <= a["x"] + 1
                    apart_y = (a["y"] + a["height"] <= b["y"] + 1
                               or b["y"] + b["height"] <= a["y"] + 1)
                    assert apart_x or apart_y, (a, b)
            # the targets' points coincide here: the one drawn last is on top
            page.locator('svg.trend a.point[href="/runs/2"] circle').last.click()
            page.wait_for_url(f"{base}/runs/2")
            assert page.locator("h1").first.text_content().startswith("Run 2")
            page.goto(f"{base}/")
            assert page.locator("svg.trend a.point").count() == 8
            assert page.locator("svg.trend line.axis").count() == 4
        finally:
            page.close()
