"""The report in a real browser: headless Chromium opens it from disk.

``--dump-dom`` prints the DOM after the page loaded (and after any script would have
run), so what these tests read is what a reader's browser built, not our HTML source.
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.report_fixtures import IMG_BREAKOUT, SCRIPT_TAG

from agent_eval.report import write_report
from agent_eval.report.pages import session_file
from agent_eval.sim import PROFILES
from agent_eval.store import open_store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not on PATH (Debian: apt-get install chromium)"
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")  # fmt: skip


def chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / "chromium-profile"
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )
    return done.stdout


class DomTable(HTMLParser):
    """Rows of the table with ``id``, every ``<u class="span">`` text, every href."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.rows, self.spans, self.hrefs = table_id, [], [], []
        self.table_hrefs: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._in_table = self._in_cell = self._in_span = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
            if self._in_table:
                self.table_hrefs.append(attrs["href"])
        if tag == "table":
            self._in_table = attrs.get("id") == self.table_id
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag in ("td", "th"):
            self._in_cell = True
            self.rows[-1].append("")
        if tag == "u" and attrs.get("class") == "span":
            self._in_span = True
            self.spans.append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_table = False
        elif tag in ("td", "th"):
            self._in_cell = False
        elif tag == "u":
            self._in_span = False

    def handle_data(self, data):
        if self._in_table and self._in_cell:
            self.rows[-1][-1] += data
        if self._in_span:
            self.spans[-1] += data


def dom(tmp_path: Path, page: Path, table_id: str = "") -> DomTable:
    parsed = DomTable(table_id)
    parsed.text = chromium(tmp_path, "--dump-dom", page.resolve().as_uri())
    parsed.feed(parsed.text)
    return parsed


@pytest.fixture(scope="module")
def demo_report(demo_db, tmp_path_factory) -> Path:
    with open_store(demo_db) as store:
        return write_report(store, [1], tmp_path_factory.mktemp("demo-report"))


def test_class_table_has_a_row_per_class_and_a_column_per_profile(demo_report, tmp_path):
    rows = dom(tmp_path, demo_report, "class-table").rows
    assert rows[0] == ["failure class", *PROFILES]
    assert rows[-1][0] == "total"
    body = rows[1:-1]
    assert body and all(len(r) == 1 + len(PROFILES) for r in body)
    assert all(r[0].startswith("AE") for r in body)


def test_session_link_opens_a_page_with_the_underlined_span(demo_report, tmp_path):
    index = dom(tmp_path, demo_report, "session-table")
    links = [h for h in index.table_hrefs if h.startswith("sessions/")]
    assert len(links) == len(index.rows) - 1
    denied = [row for row in index.rows[1:] if row[6] not in ("0", "")]
    first = next(h for h, row in zip(links, index.rows[1:], strict=True) if row in denied)
    file, anchor = first.split("#")
    page = dom(tmp_path, demo_report.parent / file)
    assert f'id="{anchor}"' in page.text  # the batch file holds the session's section
    assert page.spans and all(span.strip() for span in page.spans)
    assert any(h.startswith("../rules/AE") for h in page.hrefs)


def test_hostile_transcript_renders_as_text_and_runs_no_script(hostile_report, hostile_store,
                                                               tmp_path):
    page = hostile_report / "sessions" / session_file(hostile_store.ids["careful/xss/0"])
    text = chromium(tmp_path, "--dump-dom", page.resolve().as_uri())
    parsed = DomTable("")
    parsed.feed(text)
    assert not [t for t, _ in parsed.tags if t in ("script", "img")]
    assert not [a for _, attrs in parsed.tags for a in attrs if a.startswith("on")]
    assert f"content {SCRIPT_TAG.replace('<', '&lt;').replace('>', '&gt;')}" in text
    assert IMG_BREAKOUT.replace("<", "&lt;").replace(">", "&gt;") in text
    assert parsed.spans == ["| head -5"]


def test_index_screenshot_is_written(demo_report, tmp_path):
    png = tmp_path / "index.png"
    chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000",
             demo_report.resolve().as_uri())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
