"""`agent-eval view` over real HTTP, on SQLite and PostgreSQL: every number links to the
rows behind it, lists filter and page in the URL, the session page walks failed sessions,
and nothing a model wrote runs, links or moves the cursor."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.request
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest
from sqlalchemy import insert
from support.view_fixtures import ESC, JS_LINK, SCRIPT_TAG

from agent_eval.analysis.comparison import analyse_units, unit_lines
from agent_eval.metrics.clustered import (
    CLUSTERED_METHOD,
    session_units,
    summarize_clustered,
    units_by_target,
)
from agent_eval.metrics.stats import wilson_interval
from agent_eval.store.schema import runs
from agent_eval.view import overview
from agent_eval.view.app import run_view_in_thread
from agent_eval.view.trend import run_stamps


class Page(HTMLParser):
    """Tables by id as rows of (text, href) cells; every href; ids of elements."""

    def __init__(self, html: str):
        super().__init__()
        self.html, self.tables, self.hrefs, self.ids = html, {}, [], {}
        self._rows = None
        self._cell = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids[attrs["id"]] = attrs
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
            if self._cell:
                text, _ = self._rows[-1][-1]
                self._rows[-1][-1] = (text, attrs["href"])
        if tag == "table":
            self._rows = self.tables.setdefault(attrs.get("id") or "", [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = True
            self._rows[-1].append(("", None))

    def handle_endtag(self, tag):
        if tag == "table":
            self._rows = None
        elif tag in ("td", "th"):
            self._cell = False

    def handle_data(self, data):
        if self._cell and self._rows:
            text, href = self._rows[-1][-1]
            self._rows[-1][-1] = (text + data, href)

    def cell(self, table: str, row_head: str, column: str):
        rows = self.tables[table]
        col = [t for t, _ in rows[0]].index(column)
        return next(r[col] for r in rows[1:] if r[0][0] == row_head)


@pytest.fixture
def viewer(filled):
    store, f = filled
    with run_view_in_thread(store) as base:
        def get(path: str, status: int = 200) -> Page:
            try:
                with urllib.request.urlopen(base + path, timeout=30) as resp:
                    code, body, headers = resp.status, resp.read().decode(), resp.headers
            except urllib.error.HTTPError as exc:
                code, body, headers = exc.code, exc.read().decode(), exc.headers
            assert code == status, body
            assert "script-src" not in headers["Content-Security-Policy"]
            assert headers["Content-Security-Policy"].startswith("default-src 'none'")
            return Page(body)
        yield get, store, f


def test_runs_page_lists_runs_newest_first_with_links(viewer):
    get, _, f = viewer
    page = get("/")
    rows = page.tables["runs-table"][1:]
    assert [r[0] for r in rows] == [(str(f.run_id), f"/runs/{f.run_id}"),
                                    (str(f.old_run_id), f"/runs/{f.old_run_id}")]
    assert rows[0][5] == ("–", None)  # the serving stack's mark: none kept by this run
    assert rows[0][6] == ("5", f"/sessions?run_id={f.run_id}")
    assert rows[0][8][0] == "careful 25.00; sloppy 100.00"  # never one pooled figure
    assert rows[1][8][0].startswith("0.00 [")
    assert "<svg" in page.html and "Trend of “nightly”" in page.html
    assert [r[0][0] for r in get("/?status=failed").tables["runs-table"][1:]] == [
        str(f.old_run_id)]


def test_run_page_numbers_link_to_the_rows_behind_them(viewer):
    get, _, f = viewer
    page = get(f"/runs/{f.run_id}")
    r = f.run_id
    assert page.cell("class-table", "AE301 pipe-to-filter", "careful") == (
        "25.00 (1)", f"/calls?run_id={r}&target=careful&code=AE301")
    assert page.cell("class-table", "AE304 shell-chain", "sloppy") == (
        "50.00 (1)", f"/calls?run_id={r}&target=sloppy&code=AE304")
    assert page.cell("class-table", "AE304 shell-chain", "careful") == ("0.00 (0)", None)
    assert page.cell("target-table", "sloppy", "handshake completed") == (
        "0/1", f"/sessions?run_id={r}&target=sloppy&handshake=1&sort=handshake")
    assert page.cell("target-table", "sloppy", "error sessions") == (
        "1", f"/sessions?run_id={r}&target=sloppy&status=error")
    assert page.cell("scenario-table", "pipe", "sloppy") == (
        "100.00 · 0/1", f"/sessions?run_id={r}&target=sloppy&scenario=pipe")
    assert page.cell("recovery-table", "sloppy", "retry-denied") == (
        "50% (1)", f"/calls?run_id={r}&target=sloppy&next_action=retry-denied")
    assert f"/compare?a={f.old_run_id}&b={r}" in page.hrefs


def test_class_cell_then_first_call_reaches_the_transcript(viewer):
    get, _, f = viewer
    run_page = get(f"/runs/{f.run_id}")
    _, calls_href = run_page.cell("class-table", "AE301 pipe-to-filter", "sloppy")
    calls = get(calls_href)
    first = calls.tables["calls-table"][1]
    assert [first[6][0], first[7][0]] == ["deny", "AE301"]
    session = get(first[0][1])
    assert re.search(r'<u class="span">\| head -5</u>', session.html)
    assert "AE301 pipe-to-filter:</strong> Output piped into another program" in session.html
    assert f"/sessions/{f.ids['sloppy/pipe/0']}.html" in first[0][1]


def test_sessions_list_failed_first_filtered_and_paged(viewer):
    get, _, f = viewer
    page = get(f"/sessions?run_id={f.run_id}")
    ids = [int(r[0][0]) for r in page.tables["sessions-table"][1:]]
    assert ids[:3] == [f.ids["careful/pipe/0"], f.ids["sloppy/pipe/0"], f.ids["sloppy/fault/0"]]
    assert page.tables["sessions-table"][1][4][0] == "completed with 1 denial"
    one = get(f"/sessions?run_id={f.run_id}&scenario=evaluator-step")
    assert [int(r[0][0]) for r in one.tables["sessions-table"][1:]] == [
        f.ids["careful/pipe/0/child"]]
    calls = get(f"/calls?run_id={f.run_id}&sort=id&offset=5")
    assert len(calls.tables["calls-table"]) == 2 and "prev-page" in calls.ids


def test_session_page_steps_through_failed_sessions_of_the_same_list(viewer):
    get, _, f = viewer
    ids = f.ids
    page = get(f"/sessions/{ids['careful/pipe/0']}.html?run_id={f.run_id}&code=AE301")
    assert page.ids["next-failed"]["href"] == (
        f"/sessions/{ids['sloppy/pipe/0']}.html?run_id={f.run_id}&code=AE301")
    assert "prev-failed" not in page.ids
    assert 'class="child-session"' in page.html  # the child nested under its call
    assert "child session" in page.html


def test_session_page_draws_a_completed_session_with_a_denial_as_failed(viewer):
    get, _, f = viewer
    failed = get(f"/sessions/{f.ids['careful/pipe/0']}.html")
    assert '<td class="st-failed">completed with 1 denial</td>' in failed.html
    assert 'class="st-completed"' not in failed.html.split('class="child-session"')[0]
    clean = get(f"/sessions/{f.ids['careful/clean/0']}.html")
    assert '<td class="st-completed">completed</td>' in clean.html
    abandoned = get(f"/sessions/{f.ids['sloppy/pipe/0']}.html")
    assert '<td class="st-abandoned">abandoned with 2 denials</td>' in abandoned.html


def test_compare_links_each_side_to_its_calls(viewer):
    get, _, f = viewer
    page = get(f"/compare?a={f.old_run_id}&b={f.run_id}")
    rows = page.tables["compare-table"]
    total = next(r for r in rows[1:] if r[0][0] == "careful" and r[1][0] == "total")
    assert total[3] == ("25.00 (1)", f"/calls?run_id={f.run_id}&target=careful&decision=deny")
    assert total[2] == ("0.00 (0)", None)


def test_hostile_transcript_renders_as_text(viewer):
    get, _, f = viewer
    page = get(f"/sessions/{f.ids['careful/pipe/0']}.html")
    assert SCRIPT_TAG not in page.html and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.html
    assert not [h for h in page.hrefs if "javascript" in h.lower()]
    assert JS_LINK in page.html  # shown, as text
    assert "\x1b" not in page.html and "␛[31mRED␛[0m" in page.html
    assert ESC not in get(f"/sessions/{f.ids['sloppy/fault/0']}.html").html


def test_no_stored_key_on_any_page(viewer):
    get, _, f = viewer
    for path in ("/", f"/runs/{f.old_run_id}", f"/sessions?run_id={f.old_run_id}",
                 f"/calls?run_id={f.old_run_id}"):
        assert "sk-secret" not in get(path).html


def test_typed_filters_are_bound_parameters(viewer):
    get, store, f = viewer
    page = get(f"/calls?run_id={f.run_id}&search=%27%3B+DROP+TABLE+runs%3B+--")
    assert len(page.tables["calls-table"]) == 1
    assert "none match" in page.html
    assert len(get("/").tables["runs-table"]) == 3


def test_bad_values_are_a_page_not_a_traceback(viewer):
    get, _, f = viewer
    assert "run_id must be a whole number" in get("/sessions?run_id=1%20OR%201=1", 400).html
    assert "unknown sort" in get(f"/calls?run_id={f.run_id}&sort=evil", 400).html
    assert "no session with id 999999" in get("/sessions/999999.html", 404).html
    assert "no run with id 424242" in get("/runs/424242", 404).html
    get("/rules/AE999.html", 404)


def test_the_viewer_cannot_write(viewer):
    _, store, _ = viewer
    with pytest.raises(Exception, match="(?i)read.only|readonly|attempt to write"):
        with store.engine.begin() as conn:
            conn.execute(insert(runs).values(kind="live", status="running", config={},
                                             fingerprint={}, created_at=datetime.now(UTC)))


def _units(store, run_id):
    return units_by_target(session_units(store.session_rows([run_id]),
                                         store.call_rows([run_id])))


def test_run_page_clustered_intervals_are_the_librarys(viewer):
    get, store, f = viewer
    page = get(f"/runs/{f.run_id}")
    careful = summarize_clustered(_units(store, f.run_id)["careful"], ["AE301"])
    e = careful.errors
    assert (e.k, e.n, e.clusters) == (1, 4, 2)  # the child's call folded into its root
    lo, hi = wilson_interval(1, 4)
    row = [t for t, _ in page.tables["clustered-table"][1]]
    assert row == ["careful", "25.00", f"[{e.lo100:.2f}–{e.hi100:.2f}] few clusters",
                   f"[{100 * lo:.2f}–{100 * hi:.2f}]", f"{e.deff:.2f}", "2",
                   f"[{careful.across_tasks.lo100:.2f}–{careful.across_tasks.hi100:.2f}] "
                   "few clusters"]
    assert page.cell("clustered-table", "sloppy", "clustered 95% CI (sessions)") == (
        "no interval (1 session)", None)
    ae301 = careful.classes["AE301"]
    assert page.cell("clustered-class-table", "AE301 pipe-to-filter", "careful")[0] == (
        f"[{ae301.lo100:.2f}–{ae301.hi100:.2f}] few clusters")
    assert f"Method: {CLUSTERED_METHOD}" in page.html


def test_compare_page_prints_the_session_level_analysis_of_compare(viewer):
    get, store, f = viewer
    page = get(f"/compare?a={f.old_run_id}&b={f.run_id}")
    expected = unit_lines(analyse_units(_units(store, f.old_run_id), _units(store, f.run_id),
                                        ["careful"])["careful"])
    shown = re.findall(r'<ul class="small" id="analysis-1">(.*?)</ul>', page.html, re.S)[0]
    assert [html.unescape(li) for li in re.findall(r"<li>(.*?)</li>", shown)] == expected
    assert expected[0].startswith("errors/100 clustered (sessions): a 0.00")
    assert expected[-1] == ("no verdict on errors/100: the runs hold different mixes and the "
                            "overlap is too small to compare them fairly")


def test_a_big_run_links_to_its_intervals_instead_of_reading_every_session(viewer, monkeypatch):
    get, _, f = viewer
    monkeypatch.setattr(overview, "INLINE_SESSIONS", 0)
    page = get(f"/runs/{f.run_id}")
    assert "clustered-table" not in page.tables
    assert page.ids["clustered-link"]["href"] == f"/runs/{f.run_id}?intervals=1"
    assert "clustered-table" in get(f"/runs/{f.run_id}?intervals=1").tables
    compare = get(f"/compare?a={f.old_run_id}&b={f.run_id}")
    href = compare.ids["analysis-link"]["href"]
    assert "analysis-1" not in compare.ids and "analysis-1" in get(href.replace("&amp;", "&")).ids


def test_a_big_compare_page_does_not_import_scipy_stats(viewer):
    """Its table shows the z-test only, so its first request does not pay the second
    that importing scipy.stats (Fisher's exact test) takes; the rows are unchanged."""
    import subprocess
    import sys

    _, store, f = viewer
    code = (
        "import sys\n"
        "from agent_eval.store import open_store\n"
        "from agent_eval.view import overview\n"
        "overview.INLINE_SESSIONS = 0\n"
        f"with open_store({store.url!r}) as store:\n"
        f"    page = overview.build_compare_page(store, {f.old_run_id}, {f.run_id})\n"
        "print(len(page.rows), 'scipy.stats' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    rows = len(overview.build_compare_page(store, f.old_run_id, f.run_id).rows)
    assert rows > 0 and done.stdout.split() == [str(rows), "False"]


def test_run_page_leads_with_the_clustered_interval_and_keeps_wilson_as_detail(viewer):
    """The target table's errors/100 cell and the forest plot's whiskers are the clustered
    interval (sessions as clusters, the one gate and compare decide on); Wilson's on calls
    sits in the next column and as a thin grey line."""
    get, store, f = viewer
    page = get(f"/runs/{f.run_id}")
    e = summarize_clustered(_units(store, f.run_id)["careful"]).errors
    lo, hi = wilson_interval(1, 4)
    assert page.cell("target-table", "careful", "errors/100 [95% CI]")[0] == (
        f"25.00 [{e.lo100:.1f}–{e.hi100:.1f}]")
    assert page.cell("target-table", "careful", "Wilson CI (calls)")[0] == (
        f"[{100 * lo:.1f}–{100 * hi:.1f}]")
    assert page.cell("target-table", "sloppy", "errors/100 [95% CI]")[0] == (
        "100.00 [1 session]")
    heads = page.tables["target-table"][0]
    assert [h for h, _ in heads].index("errors/100 [95% CI]") < [
        h for h, _ in heads].index("Wilson CI (calls)")
    whiskers = re.findall(r'<g class="rate" data-lo="([\d.]+)" data-hi="([\d.]+)">',
                          page.html)
    assert whiskers[0] == (f"{e.lo100:.2f}", f"{e.hi100:.2f}")
    assert whiskers[1] == (f"{100 * wilson_interval(2, 2)[0]:.2f}", "100.00")  # 1 session


def test_run_page_shows_results_first_drawn_and_the_method_behind_a_disclosure(viewer):
    get, store, f = viewer
    html = get(f"/runs/{f.run_id}").html
    order = [html.index(mark) for mark in (
        'id="target-table"', "Errors per 100 tool calls with clustered 95% intervals",
        'id="class-table"', "Errors per 100 tool calls by failure class, per target",
        'id="clustered-table"', '<details id="method">')]
    assert order == sorted(order)
    assert html.index("Calls of one session err together") > html.index('<details id="method">')
    assert "<script" not in html


def test_run_page_trend_has_dates_and_each_point_opens_its_run(viewer):
    get, store, f = viewer
    if store.get_run(f.run_id).label != store.get_run(f.old_run_id).label:
        pytest.skip("the fixture's runs do not share a label")
    html = get(f"/runs/{f.run_id}").html
    trend = html[html.index('id="trend"'):]
    assert f'<a class="point" href="/runs/{f.old_run_id}">' in trend
    assert f'<a class="point" href="/runs/{f.run_id}">' in trend
    stamp = dict(run_stamps([(r, store.get_run(r).created_at)
                             for r in (f.old_run_id, f.run_id)]))[f.old_run_id]
    assert f'">{stamp}</text>' in trend  # with the time if the runs share a day


def test_compare_page_draws_the_change_per_class_with_its_interval(viewer):
    from agent_eval.metrics.stats import compare_rates

    get, _, f = viewer
    html = get(f"/compare?a={f.old_run_id}&b={f.run_id}").html
    assert html.index("Change B − A in errors per 100 tool calls") < html.index(
        'id="compare-table"')
    cmp = compare_rates(0, 4, 1, 4, exact=False)  # careful: 0/4 calls denied in A, 1/4 in B
    assert (f"<title>careful · total: {cmp.diff100:+.2f} [{cmp.lo100:+.1f}, "
            f"{cmp.hi100:+.1f}] per 100</title>") in html
