"""The viewer's calls list, the page a drill-down lands on: the command is the point of it.

Each command cell is left-aligned, wraps, and shows the span its finding points at
(underlined), cut around that span when the command is long, for every class (AE301,
AE309, AE311 alike); a call whose arguments are not JSON (AE102) shows the raw arguments.
In Chromium at 1280 px every command cell is on screen and holds its denied span.
Refresh the screenshot in docs with AGENT_EVAL_SCREENSHOTS=docs.
"""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import pytest
from support.factories import add_run
from support.view_fixtures import ALLOWLIST

from agent_eval.policy import check_call
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, FindingRecord, SessionRecord, assign_next_actions
from agent_eval.view.lists import command_window

LONG_SQL = ("SELECT a.attempt_id, a.stage_id, a.outcome, a.summary, s.status, s.moved_by "
            "FROM attempts a JOIN stage_events s ON s.stage_id = a.stage_id WHERE a.stage_id "
            "= 'S3-market-scan' AND s.at > '2026-11-01' ORDER BY s.at DESC, a.attempt_id")
COMMANDS = {  # command: (class, the denied span's text)
    'uv run scripts/db_query.py --sql "SELECT 1" | head -n 20': ("AE301", "| head -n 20"),
    f'uv run scripts/db_query.py --sql "{LONG_SQL}" --limit 500 | head -n 20':
        ("AE301", "| head -n 20"),
    f'uv run scripts/food_management.py --query "{LONG_SQL}"': ("AE309", None),
    f'uv run scripts/db_query.py --sql "{LONG_SQL}" --format yaml': ("AE311", None),
}
BROKEN_ARGUMENTS = '{"command": "uv run scripts/db_query.py --sql \\"SELECT 1\\"'


def judged(index: int, arguments: str) -> CallRecord:
    import json

    verdict = check_call("bash", arguments, ALLOWLIST)
    try:
        command = json.loads(arguments)["command"]
    except ValueError:
        command = None
    return CallRecord(index=index, turn_index=index, tool="bash", arguments=arguments,
                      decision=verdict.decision, primary=verdict.primary,
                      findings=[FindingRecord(f.code, f.message, f.start, f.end)
                                for f in verdict.findings],
                      command=command, output="denied")


@pytest.fixture(scope="module")
def calls_db(tmp_path_factory) -> str:
    import json

    db = str(tmp_path_factory.mktemp("calls") / "calls.db")
    calls = [judged(i, json.dumps({"command": c})) for i, c in enumerate(COMMANDS)]
    calls.append(judged(len(calls), BROKEN_ARGUMENTS))
    assign_next_actions(calls)
    with open_store(db) as store:
        add_run(store, [SessionRecord(
            key="qwen3.5-27b/research-benchmark-data-missing/0", target="qwen3.5-27b",
            scenario="research-benchmark-data-missing", status="completed", calls=calls)],
            label="x", suite="s", targets={"qwen3.5-27b": "m"}, base_url="http://x/v1",
            status="finished")
    assert [c.primary for c in calls] == [*(v[0] for v in COMMANDS.values()), "AE102"]
    return db


def denied_span(command: str, code: str) -> str:
    verdict = check_call("bash", __import__("json").dumps({"command": command}), ALLOWLIST)
    f = next(f for f in verdict.findings if f.code == code)
    return command[f.start:f.end]


def test_command_window_keeps_the_span_of_a_long_command_in_view():
    command = f'uv run scripts/db_query.py --sql "{LONG_SQL}" | head -n 20'
    start = command.index("| head")
    head, span, tail = command_window(command, (start, len(command)), limit=80)
    assert span == "| head -n 20" and head.startswith("…") and len(head + span + tail) <= 80


def test_calls_page_cells_are_left_aligned_marked_and_raw_for_ae102(calls_db):
    from agent_eval.view.app import run_view_in_thread

    with open_store(calls_db) as store, run_view_in_thread(store) as base:
        html = urllib.request.urlopen(f"{base}/calls?run_id=1").read().decode()
    table = html[html.index('<table id="calls-table">'):]
    assert '<th class="num">command</th>' not in table and "<th>command</th>" in table
    assert "<th>target</th>" in table and "<th>scenario</th>" in table
    marked = re.findall(r'<td class="cmd">.*?<u class="span">(.*?)</u>', table)
    assert marked.count("| head -n 20") == 2
    for command, (code, _) in COMMANDS.items():
        if code != "AE301":
            assert denied_span(command, code).replace('"', "&#34;") in marked
    # the AE102 row: the raw arguments, escaped, never an empty cell
    assert "{&#34;command&#34;: &#34;uv run scripts/db_query.py" in table


def test_at_1280_px_every_command_cell_is_visible_and_holds_its_denied_span(browser,
                                                                          calls_db):
    from agent_eval.view.app import run_view_in_thread

    with open_store(calls_db) as store, run_view_in_thread(store) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/calls?run_id=1")
        shots = os.environ.get("AGENT_EVAL_SCREENSHOTS")
        if shots:
            page.screenshot(path=str(Path(shots) / "view-calls.png"))
        head = page.locator("#calls-table tr").first.locator("th").all_inner_texts()
        column = head.index("command")
        rows = page.locator("#calls-table tr")
        assert rows.count() == len(COMMANDS) + 2
        for i in range(1, rows.count()):
            row = rows.nth(i)
            code = row.locator("td").nth(head.index("class")).inner_text()
            cell = row.locator("td").nth(column)
            box = cell.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (code, box)
            assert cell.evaluate("e => getComputedStyle(e).textAlign") in ("left", "start")
            text = cell.inner_text()
            assert text.strip(), code
            if code == "AE102":
                assert text.startswith('{"command": "uv run scripts/db_query.py'), text
                continue
            span = cell.locator("u.span")
            assert span.count() == 1, (code, text)
            command = next(c for c, v in COMMANDS.items() if v[0] == code
                           and denied_span(c, code) == span.inner_text())
            assert span.is_visible() and span.inner_text() == denied_span(command, code)
            span_box = span.bounding_box()
            assert span_box and span_box["x"] + span_box["width"] <= 1280
        page.close()
