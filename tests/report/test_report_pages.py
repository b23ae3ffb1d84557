"""Page contexts: spans cut at the right characters, links both ways, the index tables."""

from __future__ import annotations

import dataclasses

import pytest
from support.report_fixtures import PIPED, fill_store

from agent_eval.metrics import PRECEDENCE
from agent_eval.report.index import build_index_page, column_namer, read_figures, session_links
from agent_eval.report.pages import (
    SESSIONS_DIR,
    Segment,
    build_session_page,
    mark_spans,
    transcript_page,
)
from agent_eval.store import open_store


@pytest.mark.parametrize(
    ("text", "spans", "expected"),
    [
        ("ls | head", [], (Segment("ls | head"),)),
        ("ls | head", [(3, 9)], (Segment("ls "), Segment("| head", True))),
        ("ls | head", [(0, 2), (5, 9)],
         (Segment("ls", True), Segment(" | "), Segment("head", True))),
        ("ls | head", [(3, 9), (5, 7)], (Segment("ls "), Segment("| head", True))),
        ("ls", [(1, 50)], (Segment("l"), Segment("s", True))),
        ("ls", [(0, 0)], (Segment("ls"),)),
        ("", [(0, 3)], (Segment(""),)),
    ],
    ids=["no-span", "one-span", "two-spans", "nested-merged", "clamped-to-text",
         "empty-span-ignored", "empty-text"],
)
def test_mark_spans_cuts_text_at_finding_offsets(text, spans, expected):
    assert mark_spans(text, spans) == expected
    assert "".join(s.text for s in expected) == text


def _page(fx, key):
    with open_store(fx.db) as store:
        return build_session_page(store.load_session(fx.ids[key]), {})


def test_denied_pipe_is_underlined_exactly_at_the_pipe_into_head(hostile_store):
    call = _page(hostile_store, "careful/xss/0").turns[0].calls[0]
    assert call.decision == "deny" and call.primary == "AE301"
    assert [s.text for s in call.segments if s.marked] == ["| head -5"]
    assert "".join(s.text for s in call.segments) == PIPED
    assert call.primary_href == "../rules/AE301.html"
    assert call.next_action == "pivot"


def test_parent_links_to_child_and_child_back_to_parent(hostile_store):
    parent = _page(hostile_store, "careful/xss/0")
    child = _page(hostile_store, "careful/xss/0/child")
    child_id = hostile_store.ids["careful/xss/0/child"]
    assert [c.id for c in parent.children] == [child_id]
    assert parent.turns[1].calls[0].child.id == child_id
    assert child.parent.id == parent.id
    assert child.parent.href == f"0-99.html#s{parent.id}"  # its batch file, same folder


def test_a_page_from_transcript_rows_equals_the_page_from_the_record(hostile_store):
    """The report's session files read rows (``iter_transcripts``), ``show`` and the
    viewer whole records: every session's page is the same either way."""
    with open_store(hostile_store.db) as store:
        run = [hostile_store.run_id]
        links = session_links(store.session_rows(run), from_dir=SESSIONS_DIR)
        from_rows = [transcript_page(rows, links) for rows in store.iter_transcripts(run)]
        from_records = [build_session_page(s, links) for s in store.iter_sessions(run)]
    assert len(from_rows) == len(hostile_store.ids)
    assert from_rows == from_records
    assert any(t.burned for page in from_rows for t in page.turns)
    assert any(page.children for page in from_rows) and any(page.parent for page in from_rows)


def test_a_turn_summary_names_the_parts_known():
    from agent_eval.report.pages import TurnView

    full = TurnView(2, "", "", (), "stop", 1.844, 0.3, 32800, 120)
    bare = TurnView(0, "", "", (), None, None, None, None, None)
    assert full.summary == "reply 2 · 1.84 s · TTFT 0.30 s · 32800 prompt / 120 completion tokens · stop"
    assert bare.summary == "reply 0"


def test_system_prompt_and_task_come_from_the_messages(hostile_store):
    page = _page(hostile_store, "careful/xss/0")
    assert page.system_prompt.startswith("system prompt ")
    assert page.task.startswith("task ")
    assert page.handshake_text == "—"


def test_missed_handshake_names_the_step(hostile_store):
    page = _page(hostile_store, "sloppy/handshake/0")
    assert page.handshake_text == "1/3, missed update_attempt_outcome.py"


def _index(db, run_ids):
    with open_store(db) as store:
        name = column_namer(run_ids)
        rows = [dataclasses.replace(s, target=name(s)) for s in store.session_rows(run_ids)]
        runs = [store.get_run(r) for r in run_ids]
        return build_index_page(runs, rows, store.call_rows(run_ids),
                                read_figures(store, run_ids))


def test_index_has_a_column_per_target_and_lists_error_sessions_apart(hostile_store):
    page = _index(hostile_store.db, [hostile_store.run_id])
    assert page.columns == ("careful", "sloppy")
    assert [i.link.scenario for i in page.error_sessions] == ["fault"]
    assert page.error_sessions[0].error.startswith("server answered 500")
    careful = next(r for r in page.target_rows if r[0] == "careful")
    # sessions, messages, calls, errors: 3 sessions, 4 replies, 4 calls, 1 denied
    assert careful[1:5] == ("3", "4", "4", "1")
    # errors/100 leads with the clustered interval (what gate and compare decide on),
    # Wilson's on calls after it as detail
    clustered = page.clustered["careful"].errors
    assert careful[5] == f"25.00 [{clustered.lo100:.1f}–{clustered.hi100:.1f}]" != (
        "25.00 [4.6–69.9]")
    assert careful[6] == "[4.6–69.9]"


def test_several_runs_sit_side_by_side_as_run_named_columns(hostile_store):

    # a second run in the same store, same target names
    import tempfile
    from pathlib import Path

    db = str(Path(tempfile.mkdtemp()) / "two.db")
    first, second = fill_store(db), fill_store(db)
    page = _index(db, [first.run_id, second.run_id])
    assert page.columns == (f"careful · run {first.run_id}", f"sloppy · run {first.run_id}",
                            f"careful · run {second.run_id}", f"sloppy · run {second.run_id}")


def test_demo_class_table_has_a_row_per_class_in_precedence_and_a_column_per_profile(demo_db):
    from agent_eval.sim import PROFILES

    page = _index(demo_db, [1])
    assert page.columns == tuple(PROFILES)
    codes = [row.code for row in page.class_rows]
    assert codes[-1] == "total"
    assert codes[:-1] == sorted(codes[:-1], key=PRECEDENCE.index)
    assert all(len(row.cells) == len(PROFILES) for row in page.class_rows)
    assert all(row.href == f"rules/{row.code}.html" for row in page.class_rows[:-1])
