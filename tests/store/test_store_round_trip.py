"""The store: a session written and read back exactly, stored text capped visibly.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from sqlalchemy import func, select
from support.factories import INJECTION, ODD_TEXT, T0, allowed, denied, session

from agent_eval.store.schema import (
    NUL_STAND_IN,
    sessions,
)
from agent_eval.transcript import (
    FindingRecord,
    HandshakeResult,
    StackFaultRecord,
    TurnRecord,
)


def test_a_session_reads_back_exactly_as_written(store, run_id):
    huge = '{"command": "uv run scripts/db_query.py --sql \\"' + "x" * 1_000_000 + '\\""}'
    record = session(
        "qwen-27b/email-search/0",
        repeat=2,
        status="stalled",
        tags=["email", "ünïcode"],
        handshake=HandshakeResult(
            required=3, done=1, completed=False, missed_step="update_stage_status.py"
        ),
        messages=[
            {"role": "system", "content": "<script>alert(1)</script>"},
            {"role": "assistant", "content": ODD_TEXT, "tool_calls": [{"id": "c1"}]},
        ],
        turns=[
            TurnRecord(
                index=0,
                content="<script>alert('x')</script>",
                reasoning=ODD_TEXT,
                finish_reason="tool_calls",
                prompt_tokens=41_250,
                completion_tokens=88,
                reasoning_tokens=40,
                cached_tokens=40_960,
                latency_s=2.25,
                ttft_s=0.5,
                decode_tps=51.5,
                started_at=T0,
            ),
            TurnRecord(index=1, content=INJECTION),
        ],
        calls=[
            denied(0, 'ls scripts/ | grep -E "search|web"', "AE301", start=13),
            replace(
                denied(1, "timeout 60 uv run scripts/fetch_context.py", "AE306", turn=1),
                findings=[
                    FindingRecord("AE306", "wrapper prefix `timeout`", 0, 10),
                    FindingRecord("AE307", "program <timeout> not allowed", 0, 7),
                ],
                call_id="call_<script>",
                source_decision="allow",
                source_reason=INJECTION,
                next_action="retry-denied",
            ),
            replace(allowed(2, ODD_TEXT, turn=1), arguments=huge, script=None, command=ODD_TEXT),
        ],
    )
    (sid,) = store.record_sessions(run_id, [record])

    loaded = store.load_session(sid)

    from agent_eval.store.caps import cap_session

    assert loaded.record == cap_session(record)  # the 1 MB arguments come back capped
    assert loaded.record.calls[2].arguments.startswith(huge[:65_536])
    assert (loaded.id, loaded.run_id, loaded.target) == (sid, run_id, "qwen-27b")
    assert loaded.record.turns[0].started_at.tzinfo is not None


def test_stack_faults_read_back_with_their_raw_wire_text(store, run_id):
    faults = [StackFaultRecord(1, "AE501", "call 'bash' cut by the output cap",
                               '{"command": "uv run scripts/lig', ends=True),
              StackFaultRecord(0, "AE506", "call id '<script>' is malformed", "<script>")]
    sid, plain = store.record_sessions(run_id, [
        session("qwen-27b/email-search/0", status="error", stack_faults=faults),
        session("qwen-27b/email-search/1")])
    assert store.load_session(sid).record.stack_faults == faults
    assert store.load_session(plain).record.stack_faults == []
    with store.engine.connect() as conn:  # no fault, SQL NULL: the aggregator skips it
        assert conn.execute(select(func.count()).where(
            sessions.c.run_id == run_id, sessions.c.stack_faults.is_not(None))).scalar() == 1


def test_timestamps_come_back_in_utc_whatever_zone_went_in(store, run_id):
    cest = timezone(timedelta(hours=2))
    sid = store.record_session(
        run_id, session("k", started_at=datetime(2025, 3, 1, 14, 0, tzinfo=cest))
    )

    assert store.load_session(sid).record.started_at == T0
    assert store.load_session(sid).record.started_at.utcoffset() == timedelta(0)


def test_one_session_with_fifty_calls_is_stored_in_bulk(store, run_id):
    calls = [
        denied(i, "cat << REPORT_EOF | uv run scripts/x.py", "AE305")
        if i % 5 == 0
        else allowed(i, "uv run scripts/embedding_search.py --query q")
        for i in range(50)
    ]
    statements = []

    from sqlalchemy import event

    @event.listens_for(store.engine, "before_cursor_execute")
    def count(conn, cursor, statement, *args):
        statements.append(statement)

    store.record_session(run_id, session("fifty", calls=calls))

    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    # session, turns, calls, findings: a few statements each (SQLite: full ones, then the
    # rest in powers of two, store.bulk.chunk_sizes: 50 calls in 3), never one per row
    assert len(inserts) <= 9
    assert len(store.load_session(store.find_session(run_id, "fifty")).record.calls) == 50


def test_a_nul_the_model_emitted_does_not_lose_the_session(store, run_id):
    command = 'uv run scripts/db_query.py --sql "x\x00y"'
    call = replace(denied(0, command, "AE202"), arguments=command, tool="bash\x00")
    record = session(
        "nul",
        calls=[call],
        turns=[TurnRecord(index=0, content="a\x00b")],
        messages=[{"role": "assistant", "content": "a\x00b"}],
    )

    loaded = store.load_session(store.record_session(run_id, record)).record

    kept = "\x00" if store.engine.dialect.name == "sqlite" else NUL_STAND_IN
    assert loaded.calls[0].command == command.replace("\x00", kept)
    assert loaded.calls[0].tool == "bash" + kept
    assert loaded.turns[0].content == "a" + kept + "b"
    assert loaded.messages == record.messages


def test_a_runaway_reply_is_stored_capped_with_a_marker_everywhere_it_appears(store, run_id):
    from agent_eval.store.caps import STORED_TEXT_CHARS

    huge = "x" * 1_000_000
    call = replace(allowed(0, "uv run scripts/db_query.py --sql 'select 1'"),
                   arguments='{"command": "' + huge + '"}', output=huge)
    record = session("runaway", turns=[TurnRecord(index=0, content=huge, reasoning=huge)],
                     calls=[call],
                     messages=[{"role": "assistant", "content": huge, "tool_calls": [
                         {"id": "c0", "type": "function",
                          "function": {"name": "bash", "arguments": call.arguments}}]}])
    marker = f"\n[agent-eval: stored {STORED_TEXT_CHARS} of 1000000 characters; the rest was cut]"

    sid = store.record_session(run_id, record)
    back = store.load_session(sid).record

    assert back.turns[0].content == "x" * STORED_TEXT_CHARS + marker
    assert back.turns[0].reasoning == back.turns[0].content
    assert back.calls[0].output == back.turns[0].content
    assert back.calls[0].arguments.endswith("of 1000015 characters; the rest was cut]")
    assert back.messages[0]["content"] == back.turns[0].content
    assert back.messages[0]["tool_calls"][0]["function"]["arguments"] == back.calls[0].arguments
    assert record.turns[0].content == huge  # the caller's record is left whole
    assert back.calls[0].decision == "allow"  # the verdict was made on the whole text


def test_text_under_the_cap_is_stored_unchanged(store, run_id):
    from agent_eval.store.caps import STORED_TEXT_CHARS

    text = "y" * STORED_TEXT_CHARS
    sid = store.record_session(run_id, session("fits", turns=[TurnRecord(index=0, content=text)]))

    assert store.load_session(sid).record.turns[0].content == text
