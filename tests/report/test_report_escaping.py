"""Everything the model wrote renders as text: no tag from a transcript survives as a tag."""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser

import pytest
from support.report_fixtures import IMG_BREAKOUT, PIPED, SCRIPT_TAG, session_section

ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
ESCAPED_IMG = "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"


def _session_html(report, fx, key="careful/xss/0") -> str:
    return session_section(report, fx.ids[key])


@pytest.mark.parametrize("raw", [SCRIPT_TAG, "<img src=x onerror", "<script"], ids=str)
def test_session_page_holds_no_raw_tag_from_the_transcript(hostile_report, hostile_store, raw):
    assert raw not in _session_html(hostile_report, hostile_store)


@pytest.mark.parametrize(
    "where", ["content ", "reasoning ", "system prompt ", "task ", "Permission denied ",
              "context pack "],
)
def test_every_model_field_appears_escaped_on_the_session_page(hostile_report, hostile_store,
                                                                where):
    assert f"{where}{ESCAPED_SCRIPT} {ESCAPED_IMG}" in _session_html(hostile_report,
                                                                     hostile_store)


def test_raw_arguments_appear_escaped(hostile_report, hostile_store):
    html = _session_html(hostile_report, hostile_store)
    assert escape('"note": "<script>alert(1)</script>', quote=True).replace("&quot;", "&#34;") \
        .replace("&#x27;", "&#39;") in html


def test_underline_wraps_exactly_the_offending_characters(hostile_report, hostile_store):
    html = _session_html(hostile_report, hostile_store)
    before = escape(PIPED[: PIPED.index("| head")]).replace("&quot;", "&#34;") \
        .replace("&#x27;", "&#39;")
    assert f'{before}<u class="span">| head -5</u>' in html


def test_error_reason_is_escaped_on_the_index(hostile_report):
    html = (hostile_report / "index.html").read_text(encoding="utf-8")
    assert f"server answered 500 {ESCAPED_SCRIPT}" in html
    assert SCRIPT_TAG not in html


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.extend(attrs)


def test_pages_carry_no_script_and_no_external_resource(hostile_report):
    for page in hostile_report.rglob("*.html"):
        parsed = _Tags()
        parsed.feed(page.read_text(encoding="utf-8"))
        assert not parsed.tags & {"script", "img", "iframe", "link", "object", "embed"}, page
        names = {name for name, _ in parsed.attrs}
        assert "src" not in names and not any(n.startswith("on") for n in names), page
        hrefs = [v for n, v in parsed.attrs if n == "href"]
        assert not any(h.startswith(("http:", "https:", "//", "javascript:")) for h in hrefs)


def test_summary_markdown_and_junit_escape_the_error_reason(hostile_report):
    md = (hostile_report / "summary.md").read_text(encoding="utf-8")
    junit = (hostile_report / "junit.xml").read_text(encoding="utf-8")
    assert SCRIPT_TAG not in md
    assert SCRIPT_TAG not in junit and "&lt;script&gt;alert(1)&lt;/script&gt;" in junit
    assert IMG_BREAKOUT not in junit
