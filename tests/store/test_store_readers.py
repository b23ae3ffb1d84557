"""The store: the aggregates and the row readers.

The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

from support.factories import allowed, denied, session

from agent_eval.transcript import (
    HandshakeResult,
    TurnRecord,
)


def test_summaries_count_calls_per_target_by_primary_code(store, run_id):
    store.record_sessions(
        run_id,
        [
            session(
                "27b/0",
                calls=[
                    allowed(0, "uv run scripts/db_query.py --sql q"),
                    denied(1, "uv run scripts/db_query.py --sql q | head", "AE301"),
                    allowed(2, "uv run scripts/context_cache.py get"),
                ],
            ),
            session(
                "27b/1",
                calls=[
                    denied(0, "uv run scripts/x.py 2>&1", "AE302"),
                    denied(1, "ls | grep x", "AE301"),
                ],
            ),
            session(
                "27b/2-faulted",
                status="error",
                error="server 500",
                calls=[
                    denied(0, "pkill vllm || true", "AE304"),
                    allowed(1, "uv run scripts/db_query.py --sql q"),
                ],
            ),
            session(
                "35b/0",
                target="qwen-35b-moe",
                calls=[
                    denied(0, "timeout 60 uv run scripts/fetch_context.py", "AE306"),
                ],
            ),
        ],
    )

    figures = store.summarize([run_id], "target", with_turns=False, detail="rates")
    assert {name: (s.calls, {code: r.k for code, r in s.classes.items()})
            for name, s in figures.items()} == {
        "qwen-27b": (5, {"AE301": 2, "AE302": 1}),  # the faulted session's calls left out
        "qwen-35b-moe": (1, {"AE306": 1}),
    }


def test_summaries_give_states_messages_and_calls_outside_faults(store, run_id):
    # "messages" counts model replies, as docs/design.md does: 2 per session here
    two_messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "tool", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    store.record_sessions(
        run_id,
        [
            session("a", messages=two_messages),
            session("b", status="stalled", messages=two_messages),
            session("c", status="error", messages=two_messages),
        ],
    )

    [(name, s)] = store.summarize([run_id], "target", with_turns=False).items()
    assert name == "qwen-27b"  # a target without sessions has no figures
    assert s.exit_states == {"completed": 1, "stalled": 1, "abandoned": 0, "error": 1}
    assert (s.sessions, s.error_sessions, s.messages, s.calls) == (2, 1, 4, 2)


def test_row_readers_stream_flat_rows_for_metrics(store, run_id):
    parent = session(
        "p",
        tags=["email"],
        handshake=HandshakeResult(required=3, done=3, completed=True),
        calls=[
            allowed(0, "uv run scripts/db_query.py --sql q"),
            denied(1, "curl -s 'https://example.com'", "AE307", turn=1),
        ],
        turns=[TurnRecord(index=0, prompt_tokens=30_000, ttft_s=0.4), TurnRecord(index=1)],
    )
    pid, cid = store.record_sessions(run_id, [parent, session("p/c", parent_key="p")])

    rows = list(store.session_rows([run_id]))
    calls = list(store.call_rows([run_id]))
    turn_rows = list(store.turn_rows([run_id]))

    assert [(r.id, r.key, r.parent_id, r.n_calls, r.tags) for r in rows] == [
        (pid, "p", None, 2, ("email",)),
        (cid, "p/c", pid, 1, ()),
    ]
    assert rows[0].handshake_completed is True
    assert [
        (c.session_id, c.index, c.decision, c.primary, c.target, c.scenario) for c in calls
    ] == [
        (pid, 0, "allow", None, "qwen-27b", "email-search"),
        (pid, 1, "deny", "AE307", "qwen-27b", "email-search"),
        (cid, 0, "allow", None, "qwen-27b", "email-search"),
    ]
    assert calls[0].script == "db_query.py"
    assert [(t.session_id, t.index, t.prompt_tokens) for t in turn_rows] == [
        (pid, 0, 30_000),
        (pid, 1, None),
        (cid, 0, None),
    ]


def test_a_writer_is_not_blocked_by_a_reader_half_way_through(store, run_id):
    store.record_sessions(run_id, [session("a"), session("b")])
    reading = store.session_rows([run_id])
    first = next(reading)

    store.record_session(run_id, session("c"))

    assert [first.key] + [r.key for r in reading] == ["a", "b"]  # the reader's snapshot
    assert store.finished_keys(run_id) == {"a", "b", "c"}


def test_readers_of_no_runs_yield_nothing(store, run_id):
    store.record_session(run_id, session("a"))

    assert list(store.call_rows([])) == []
    assert store.summarize([]) == {}
