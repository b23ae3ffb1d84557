"""The SQL store, against a fresh SQLite file and a fresh PostgreSQL database each.

Commands and failure classes are the real ones from docs/design.md.  The ``store`` fixture
(tests/conftest.py) runs each store test once per backend.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text

from agent_eval.errors import ConfigError
from agent_eval.store import database as store_database
from agent_eval.store import (
    head_revision,
    open_store,
    resolve_db_url,
    scrub_secrets,
    upgrade,
)
from agent_eval.store.schema import (
    NUL_STAND_IN,
    findings,
    is_modelled,
    metadata,
    sessions,
    tool_calls,
    turns,
)
from agent_eval.transcript import (
    CallRecord,
    FindingRecord,
    HandshakeResult,
    SessionRecord,
    StackFaultRecord,
    TurnRecord,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ODD_TEXT = 'naïve 🚀 \u202eRTL\u202c tab\there\r\nquote\' "dq" back\\slash ；semicolon'
INJECTION = "'; DROP TABLE sessions; --"


def allowed(index: int, command: str, *, turn: int = 0) -> CallRecord:
    return CallRecord(
        index=index,
        turn_index=turn,
        tool="bash",
        arguments=f'{{"command": {command!r}}}',
        decision="allow",
        command=command,
        script=command.split()[2].removeprefix("scripts/"),
        output='{"rows": 3}',
    )


def denied(index: int, command: str, code: str, *, turn: int = 0, start: int = 0) -> CallRecord:
    return CallRecord(
        index=index,
        turn_index=turn,
        tool="bash",
        arguments=f'{{"command": {command!r}}}',
        decision="deny",
        primary=code,
        findings=[FindingRecord(code, f"{code} in command", start, len(command))],
        command=command,
        output="Denied by policy: run a listed script through `uv run`.",
        next_action="pivot",
    )


def session(key: str, target: str = "qwen-27b", **changes) -> SessionRecord:
    base = SessionRecord(
        key=key,
        target=target,
        scenario="email-search",
        calls=[allowed(0, 'uv run scripts/db_query.py --sql "select 1"')],
        turns=[TurnRecord(index=0, content="ok", latency_s=1.5)],
        messages=[{"role": "user", "content": "find the email"}],
        started_at=T0,
        finished_at=T0 + timedelta(seconds=30),
    )
    return replace(base, **changes)


@pytest.fixture
def run_id(store) -> int:
    rid = store.create_run(
        label="nightly",
        kind="live",
        suite="scenarios/",
        config={"repeats": 3},
        fingerprint={"suite_sha256": "ab12", "engine": "0.1.0"},
    )
    for name in ("qwen-27b", "qwen-35b-moe"):
        store.add_target(
            rid, name=name, model=name, base_url="http://127.0.0.1:8000/v1", settings={}
        )
    return rid


# --- round trip -------------------------------------------------------------------------


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


# --- parents, children, transactions ----------------------------------------------------


def test_a_parent_and_its_children_link_up_in_one_batch(store, run_id):
    spawn = replace(
        allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"), child_key="p/child-0"
    )
    parent = session("p", calls=[allowed(0, "uv run scripts/db_query.py --sql q"), spawn])
    child = session("p/child-0", parent_key="p", scenario="step-evaluator")

    child_id, parent_id = store.record_sessions(run_id, [child, parent])

    loaded_parent = store.load_session(parent_id)
    assert loaded_parent.child_ids == (child_id,)
    assert loaded_parent.child_links == ((1, child_id),)
    assert loaded_parent.record.calls[1].child_key == "p/child-0"
    loaded_child = store.load_session(child_id)
    assert loaded_child.parent_id == parent_id
    assert loaded_child.record.parent_key == "p"


def test_streamed_sessions_equal_sessions_loaded_one_by_one(store, run_id):
    spawn = replace(
        allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"), child_key="p/child-0"
    )
    parent = session("p", calls=[denied(0, "ls | head", "AE301", start=3), spawn])
    child = session("p/child-0", parent_key="p", scenario="step-evaluator")
    other = session("q", target="qwen-35b-moe")
    ids = store.record_sessions(run_id, [child, parent, other])

    streamed = list(store.iter_sessions([run_id]))

    assert [s.id for s in streamed] == sorted(ids)
    assert streamed == [store.load_session(i) for i in sorted(ids)]


def test_streamed_transcripts_hold_the_rows_of_the_sessions(store, run_id):
    parent = session("p", calls=[denied(0, "ls | head", "AE301", start=3)])
    other = session("q", target="qwen-35b-moe")
    ids = store.record_sessions(run_id, [parent, other])

    rows = list(store.iter_transcripts([run_id]))
    ranged = list(store.iter_transcripts([run_id], (max(ids), max(ids))))

    assert [r.session.id for r in rows] == sorted(ids)
    assert [r.session.id for r in ranged] == [max(ids)]
    first = rows[0]
    assert (first.session.key, first.session.target_name) == ("p", "qwen-27b")
    assert [(c.index, c.decision, c.primary, c.command) for c in first.calls] == [
        (0, "deny", "AE301", "ls | head")]
    assert [(f.code, f.start) for f in first.findings[first.calls[0].id]] == [("AE301", 3)]
    assert [m["role"] for m in first.messages] == [
        m["role"] for m in parent.messages[:2]]


def test_streams_of_a_run_leave_out_another_runs_sessions_between_its_own(store, run_id):
    other = store.create_run(label="other", kind="live", suite="s", config={}, fingerprint={})
    store.add_target(other, name="qwen-27b", model="m", base_url="http://127.0.0.1:8000/v1",
                     settings={})
    mine, theirs = [], []
    for n in range(3):  # ids interleave: mine, theirs, mine, theirs, ...
        mine += store.record_sessions(run_id, [session(f"m{n}", calls=[
            denied(0, f"ls {n} | head", "AE301", start=5)])])
        theirs += store.record_sessions(other, [session(f"t{n}", calls=[
            allowed(0, f"uv run scripts/db_query.py --sql {n}")])])

    rows = list(store.iter_transcripts([run_id]))
    whole = list(store.iter_sessions([run_id]))

    assert [r.session.id for r in rows] == [s.id for s in whole] == mine
    assert [c.command for r in rows for c in r.calls] == ["ls 0 | head", "ls 1 | head",
                                                           "ls 2 | head"]
    assert [c.command for s in whole for c in s.record.calls] == ["ls 0 | head",
                                                                  "ls 1 | head", "ls 2 | head"]
    assert all(len(r.findings) == 1 for r in rows)


@pytest.mark.parametrize(
    ("text", "roles"),
    [
        ('[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, '
         '{"role": "assistant", "content": "a"}]', ["system", "user"]),
        ('[ {"role":"user","content":"u"} ,\n{"role":"system","content":[1]},{"x":1}]',
         ["user", "system"]),
        ('[{"role": "user", "content": "u"}, {"role": "tool", "content": "t"}]',
         ["user", "tool"]),
        ("[]", []),
        ('{"role": "user"}', ["user"]),
    ],
    ids=["stops-after-both", "spaced-any-order", "no-system-whole-list", "empty", "not-a-list"],
)
def test_leading_messages_decodes_up_to_the_first_of_each_role(text, roles):
    import json

    from agent_eval.store.streaming import leading_messages

    found = leading_messages(text, ("system", "user"))
    assert [m.get("role") for m in found] == roles
    whole = json.loads(text)
    assert found == (whole[: len(found)] if isinstance(whole, list) else [whole])


def test_ids_are_taken_before_the_rows_go_in_and_every_link_holds(store, run_id):
    """A session's, call's and finding's ids are allocated before the insert (SQLite: after
    the largest, under the write lock; PostgreSQL: from the table's sequence), so links go
    in the rows: a parent before its child in the batch, a grandchild, findings on the
    right calls; a later batch continues after them, and a row the database numbers
    itself afterwards does not collide."""
    from sqlalchemy import func, insert, select

    from agent_eval.store.schema import targets

    def family(tag: str) -> list:
        parent = session(f"{tag}", calls=[
            denied(0, "ls | head", "AE301", start=3),
            replace(allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"),
                    child_key=f"{tag}/child")])
        child = session(f"{tag}/child", parent_key=tag, calls=[
            denied(0, "cat x | grep y", "AE302", start=6),
            replace(allowed(1, "uv run scripts/ralf_spawn.py step_evaluator"),
                    child_key=f"{tag}/child/grand")])
        grand = session(f"{tag}/child/grand", parent_key=f"{tag}/child",
                        calls=[denied(0, "rm -rf /", "AE303", start=0)])
        return [parent, child, grand]

    first = store.record_sessions(run_id, family("a"))
    second = store.record_sessions(run_id, family("b"))
    assert first == sorted(first) and min(second) > max(first)
    for ids in (first, second):
        parent, child, grand = (store.load_session(i) for i in ids)
        assert (child.parent_id, grand.parent_id) == (ids[0], ids[1])
        assert parent.child_links == ((1, ids[1]),) and child.child_links == ((1, ids[2]),)
        assert [(c.findings[0].code if c.findings else None) for c in parent.record.calls] == [
            "AE301", None]
        assert grand.record.calls[0].findings[0].code == "AE303"
    with store.engine.begin() as conn:  # the database numbers a row itself after them
        target_id = conn.execute(select(targets.c.id).where(targets.c.run_id == run_id)).scalar()
        new_id = conn.execute(insert(sessions).values(
            run_id=run_id, target_id=target_id, key="direct", scenario="s", repeat=0,
            status="completed", tags=[], handshake_required=0, handshake_done=0,
            handshake_completed=False, n_turns=0, n_messages=0, n_calls=0, n_denied=0,
            messages=[], source="live", schema_version=1, started_at=T0,
            finished_at=T0).returning(sessions.c.id)).scalar()
        assert new_id > max(second)
        assert conn.execute(select(func.count()).select_from(sessions)).scalar() == 7


def test_a_child_may_link_to_a_parent_stored_earlier(store, run_id):
    parent_id = store.record_session(run_id, session("p"))

    child_id = store.record_session(run_id, session("p/child-0", parent_key="p"))

    assert store.load_session(child_id).parent_id == parent_id


@pytest.mark.parametrize(
    "bad_record, field",
    [
        pytest.param(session("b", target="llama-70b"), "target", id="unknown-target"),
        pytest.param(session("b", parent_key="nowhere"), "parent_key", id="unknown-parent"),
        pytest.param(
            session("b", calls=[replace(allowed(0, "uv run scripts/a.py"), child_key="gone")]),
            "child_key",
            id="unknown-child",
        ),
    ],
)
def test_a_batch_that_fails_midway_leaves_nothing_behind(store, run_id, bad_record, field):
    good = session("a", calls=[denied(0, "cd /path && uv run scripts/a.py", "AE304")])

    with pytest.raises(ConfigError, match=re.escape(field)) as caught:
        store.record_sessions(run_id, [good, bad_record])

    assert caught.value.field == field
    assert store.finished_keys(run_id) == set()
    with store.engine.connect() as conn:
        for table in (sessions, turns, tool_calls, findings):
            assert conn.execute(select(func.count()).select_from(table)).scalar() == 0


def test_a_session_key_is_stored_only_once(store, run_id):
    store.record_session(run_id, session("qwen-27b/email-search/0"))

    with pytest.raises(ConfigError, match="already holds session 'qwen-27b/email-search/0'"):
        store.record_session(run_id, session("qwen-27b/email-search/0"))


def test_a_batch_repeating_a_key_is_refused(store, run_id):
    with pytest.raises(ConfigError, match="appears twice"):
        store.record_sessions(run_id, [session("k"), session("k")])


def test_finished_keys_lists_every_stored_session_of_the_run_only(store, run_id):
    other = store.create_run(label=None, kind="live", suite=None, config={}, fingerprint={})
    store.add_target(other, name="qwen-27b", model="m", base_url="http://127.0.0.1", settings={})
    store.record_sessions(run_id, [session("a"), session("b", status="error", error="500")])
    store.record_session(other, session("c"))

    assert store.finished_keys(run_id) == {"a", "b"}
    assert store.find_session(run_id, "c") is None


# --- runs and targets -------------------------------------------------------------------


def test_resolve_run_finds_by_id_latest_and_label(store):
    def new_run(label):
        return store.create_run(label=label, kind="live", suite=None, config={}, fingerprint={})

    first, second, third = new_run("nightly"), new_run("nightly"), new_run("adhoc")

    assert store.resolve_run(first).id == first
    assert store.resolve_run(str(second)).id == second
    assert store.resolve_run("latest").id == third
    assert store.resolve_run("label:nightly").id == second
    assert [r.id for r in store.list_runs(limit=2)] == [third, second]


@pytest.mark.parametrize(
    "ref, message",
    [
        pytest.param("999", "no run with id 999", id="missing-id"),
        pytest.param("label:weekly", "'label:weekly'", id="missing-label"),
        pytest.param("yesterday", "'yesterday' is not a run", id="not-a-reference"),
    ],
)
def test_resolve_run_names_the_reference_it_cannot_find(store, ref, message):
    store.create_run(label="nightly", kind="live", suite=None, config={}, fingerprint={})

    with pytest.raises(ConfigError, match=message):
        store.resolve_run(ref)


def test_latest_on_an_empty_store_is_a_config_error(store):
    with pytest.raises(ConfigError, match="no runs yet"):
        store.resolve_run("latest")


def test_a_run_keeps_its_fingerprint_status_and_parent(store, run_id):
    rescore = store.create_run(
        label=None, kind="rescore", suite=None, config={}, fingerprint={}, parent_run_id=run_id
    )
    store.set_run_status(run_id, "finished")

    run = store.get_run(run_id)
    assert (run.status, run.kind, run.label) == ("finished", "live", "nightly")
    assert run.fingerprint == {"suite_sha256": "ab12", "engine": "0.1.0"}
    assert run.finished_at is not None and run.finished_at >= run.created_at
    assert store.get_run(rescore).parent_run_id == run_id


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda s: s.create_run(
                label=None, kind="nightly", suite=None, config={}, fingerprint={}
            ),
            id="bad-kind",
        ),
        pytest.param(lambda s: s.set_run_status(1, "done"), id="bad-status"),
    ],
)
def test_closed_vocabularies_are_enforced(store, call):
    with pytest.raises(ConfigError, match="use one of"):
        call(store)


def test_adding_a_target_twice_returns_the_same_id(store, run_id):
    again = store.add_target(run_id, name="qwen-27b", model="other", base_url="x", settings={})

    assert again == store.run_targets(run_id)[0].id
    assert [t.name for t in store.run_targets(run_id)] == ["qwen-27b", "qwen-35b-moe"]


def test_credentials_never_reach_the_store(store, run_id):
    settings = {
        "api_key": "sk-live-123",
        "headers": {"Authorization": "Bearer sk-live-456", "X-Trace": "on"},
        "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
        "clients": [{"access_token": "tok-789", "name": "a"}],
        "DB_PASSWORD": "hunter2",
        "temperature": 1.0,
        "max_tokens": 4096,
    }
    tid = store.add_target(
        run_id, name="secret", model="m", base_url="http://127.0.0.1", settings=settings
    )

    (target,) = [t for t in store.run_targets(run_id) if t.id == tid]
    assert target.settings == {
        "headers": {"X-Trace": "on"},
        "extra_body": {"chat_template_kwargs": {"enable_thinking": True}},
        "clients": [{"name": "a"}],
        "temperature": 1.0,
        "max_tokens": 4096,
    }
    with store.engine.connect() as conn:
        raw = conn.execute(text("SELECT settings FROM targets WHERE id = :i"), {"i": tid})
        assert "sk-live" not in str(raw.scalar())


def test_run_config_and_fingerprint_are_scrubbed_too(store):
    rid = store.create_run(
        label=None,
        kind="live",
        suite=None,
        config={"targets": [{"name": "a", "api_key": "sk-1"}]},
        fingerprint={"secret_token": "t"},
    )

    assert store.get_run(rid).config == {"targets": [{"name": "a"}]}
    assert store.get_run(rid).fingerprint == {}


def test_scrub_secrets_leaves_values_that_merely_mention_keys():
    assert scrub_secrets({"prompt": "use your api_key", "tags": ["token"]}) == {
        "prompt": "use your api_key",
        "tags": ["token"],
    }


# --- aggregates and readers -------------------------------------------------------------


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


# --- server logs ------------------------------------------------------------------------


def test_server_samples_read_back_by_time_window(store):
    rows = [
        {
            "source": "vllm.log",
            "ts": T0 + timedelta(seconds=10 * i),
            "prompt_tps": 1200.5,
            "generation_tps": 45.0 + i,
            "running": i,
            "waiting": 0,
            "kv_cache_pct": 12.5,
        }
        for i in range(6)
    ]

    assert store.add_server_samples(rows) == 6
    window = store.server_samples(
        since=T0 + timedelta(seconds=20), until=T0 + timedelta(seconds=40)
    )
    assert [(s["running"], s["ts"]) for s in window] == [
        (2, T0 + timedelta(seconds=20)),
        (3, T0 + timedelta(seconds=30)),
    ]
    assert window[0]["raw"] is None and window[0]["source"] == "vllm.log"


def test_server_requests_round_trip(store):
    store.add_server_requests(
        [
            {
                "source": "a.log",
                "ts": T0,
                "method": "POST",
                "path": "/v1/chat/completions",
                "status": 200,
                "duration_s": 3.5,
            },
            {"source": "b.log", "ts": T0, "method": "GET", "path": "/v1/models", "status": 200},
        ]
    )

    assert [(r["path"], r["duration_s"]) for r in store.server_requests(source="a.log")] == [
        ("/v1/chat/completions", 3.5)
    ]


@pytest.mark.parametrize(
    "row, field",
    [
        pytest.param({"source": "s", "ts": T0, "gpu_temp": 80}, "gpu_temp", id="unknown-field"),
        pytest.param({"source": "s", "running": 1}, "ts", id="missing-ts"),
    ],
)
def test_a_bad_server_sample_is_refused_and_nothing_written(store, row, field):
    good = {"source": "s", "ts": T0}

    with pytest.raises(ConfigError, match=re.escape(field)) as caught:
        store.add_server_samples([good, row])

    assert caught.value.field == field
    assert store.server_samples() == []


# --- schema, migrations, URLs ------------------------------------------------------------


def test_a_new_sqlite_file_is_created_at_head_in_wal_mode(tmp_path):
    path = tmp_path / "sub.db"

    with open_store(str(path)) as store:
        assert store_database.current_revision(store.engine) == head_revision()
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_migrations_build_exactly_the_tables_the_code_uses(backend, tmp_path, request):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    assert upgrade(url) == head_revision()
    engine = store_database.connect(resolve_db_url(url))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(
            conn, opts={"include_name": is_modelled}), metadata)
    engine.dispose()

    assert diff == []


@pytest.mark.postgres
def test_postgresql_keeps_the_leak_index_partial_as_its_migration_builds_it(pg_url):
    """metadata names only SQLite's predicate of ix_tool_calls_run_leak (naming
    PostgreSQL's imports that dialect in every process); PostgreSQL's index, built by
    the migrations, is partial all the same."""
    assert upgrade(pg_url) == head_revision()
    engine = store_database.connect(resolve_db_url(pg_url))
    with engine.connect() as conn:
        indexdef = conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_tool_calls_run_leak'").scalar()
    engine.dispose()
    assert "WHERE (leak IS NOT NULL)" in indexdef


def test_a_sqlite_store_never_imports_the_postgresql_dialect(tmp_path):
    """A run against a SQLite file writes sessions and request blobs without importing
    SQLAlchemy's PostgreSQL dialect (~15 ms of every process's start)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from agent_eval.store import open_store\n"
        "from agent_eval.transcript import SessionRecord, TurnRecord\n"
        f"store = open_store({str(tmp_path / 's.db')!r})\n"
        "rid = store.create_run(label=None, kind='live', suite=None, config={}, fingerprint={})\n"
        "store.add_target(rid, name='t', model='m', base_url='http://x', settings={})\n"
        "turn = TurnRecord(index=0, content='ok', request={'model': 'm', 'messages': "
        "[{'role': 'user', 'content': 'hi'}]})\n"
        "store.record_sessions(rid, [SessionRecord(key='k', target='t', scenario='s', "
        "repeat=0, status='completed', turns=[turn])])\n"
        "print(sorted(m for m in sys.modules if 'postgresql' in m))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.fixture
def newer_migrations(tmp_path, monkeypatch):
    """This code's migrations plus a 0002, as a later agent-eval would ship them."""
    copy = tmp_path / "migrations"
    shutil.copytree(
        store_database.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    (copy / "versions" / "0002_probe.py").write_text(
        f'revision = "0002"\ndown_revision = "{head_revision()}"\n'
        "branch_labels = depends_on = None\n\n"
        "import sqlalchemy as sa\nfrom alembic import op\n\n"
        'def upgrade():\n    op.create_table("probe", sa.Column("id", sa.Integer, primary_key=True))\n\n'
        'def downgrade():\n    op.drop_table("probe")\n'
    )

    shipped, shipped_head = store_database.MIGRATIONS_DIR, store_database.HEAD_REVISION

    def use_newer(yes: bool) -> None:
        target = copy if yes else shipped
        monkeypatch.setattr(store_database, "MIGRATIONS_DIR", target)
        monkeypatch.setattr(store_database, "HEAD_REVISION", "0002" if yes else shipped_head)

    return use_newer


def test_the_head_revision_is_alembics_head():
    from alembic.script import ScriptDirectory

    assert head_revision() == ScriptDirectory.from_config(
        store_database._alembic_config()).get_current_head()


def test_opening_a_store_at_head_reads_its_revision_without_importing_alembic(tmp_path):
    """Alembic and its migration scripts cost every command a tenth of a second of start-up;
    only an older or newer database (or a new PostgreSQL one) needs them."""
    import subprocess
    import sys

    db = tmp_path / "head.db"
    open_store(str(db)).close()
    probe = ("import sys\nfrom agent_eval.store import open_store\n"
             f"open_store({str(db)!r}).close()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_database_at_an_older_revision_is_refused_with_the_fix(tmp_path, newer_migrations):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_store(url).close()
    shipped = head_revision()
    newer_migrations(True)

    with pytest.raises(ConfigError, match="database at revision") as caught:
        open_store(url)

    assert f"database at revision {shipped}, this agent-eval needs 0002" in str(caught.value)
    assert f"run `agent-eval db upgrade --db {url}`" in str(caught.value)
    assert upgrade(url) == "0002"
    open_store(url).close()


def test_a_database_newer_than_the_code_is_refused(tmp_path, newer_migrations):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    newer_migrations(True)
    upgrade(url)
    newer_migrations(False)

    with pytest.raises(ConfigError, match="revision 0002, newer than this agent-eval"):
        open_store(url)
    with pytest.raises(ConfigError, match="newer than this agent-eval"):
        upgrade(url)


def test_a_foreign_database_is_not_taken_over(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")

    with pytest.raises(ConfigError, match=r"has tables \(invoices\) but no agent-eval revision"):
        open_store(str(path))


def test_db_upgrade_command_prints_the_head_revision(tmp_path):
    from agent_eval.cli import main

    db = tmp_path / "cli.db"
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", f"sqlite:///{db}"])

    assert result.exit_code == 0, result.output
    assert result.output == f"database at revision {head_revision()} (head)\n"
    assert db.exists()


def test_db_upgrade_reads_agent_eval_db_and_reports_bad_urls_in_one_line(tmp_path):
    from agent_eval.cli import main

    result = CliRunner().invoke(main, ["db", "upgrade"], env={"AGENT_EVAL_DB": "mysql://h/db"})

    assert result.exit_code == 2
    assert result.output.startswith("Error: --db: unsupported database URL 'mysql://...'")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "value, url",
    [
        pytest.param("runs.db", "sqlite:///runs.db", id="relative-path"),
        pytest.param("/tmp/x.db", "sqlite:////tmp/x.db", id="absolute-path"),
        pytest.param("sqlite:///a/b.db", "sqlite:///a/b.db", id="sqlite-url"),
        pytest.param(
            "postgresql://postgres@127.0.0.1:5432/evals",
            "postgresql+psycopg://postgres@127.0.0.1:5432/evals",
            id="postgresql-gets-psycopg",
        ),
        pytest.param(
            "postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d", id="psycopg-url-kept"
        ),
    ],
)
def test_resolve_db_url(value, url):
    assert resolve_db_url(value) == url


@pytest.mark.parametrize(
    "env, url",
    [
        pytest.param(None, "sqlite:///agent_eval.db", id="default-file"),
        pytest.param("nightly.db", "sqlite:///nightly.db", id="env-path"),
        pytest.param(
            "postgresql://ci@127.0.0.1/evals",
            "postgresql+psycopg://ci@127.0.0.1/evals",
            id="env-postgresql",
        ),
    ],
)
def test_resolve_db_url_without_a_value_uses_agent_eval_db(monkeypatch, env, url):
    if env is None:
        monkeypatch.delenv("AGENT_EVAL_DB", raising=False)
    else:
        monkeypatch.setenv("AGENT_EVAL_DB", env)

    assert resolve_db_url(None) == url


@pytest.mark.parametrize(
    "value", ["mysql://u@h/db", "postgresql+psycopg2://u@h/db", "http://127.0.0.1/x", "  "]
)
def test_resolve_db_url_refuses_what_it_cannot_open(value):
    with pytest.raises(ConfigError, match="^--db: ") as caught:
        resolve_db_url(value)

    assert caught.value.field == "--db"


# --- latest and label:NAME skip runs that stored nothing ----------------------


def _run_with_sessions(store, label: str, keys: tuple[str, ...], kind: str = "import") -> int:
    rid = store.create_run(label=label, kind=kind, suite=None, config={}, fingerprint={})
    store.add_target(rid, name="qwen-27b", model="qwen-27b", base_url="import:openai", settings={})
    if keys:
        store.record_sessions(rid, [session(k) for k in keys])
    return rid


@pytest.mark.parametrize("ref", ["latest", "label:nightly"], ids=["latest", "label"])
def test_resolve_run_skips_newer_runs_that_hold_no_sessions(store, ref):
    full = _run_with_sessions(store, "nightly", ("a", "b"))
    store.set_run_status(full, "finished")
    empty = _run_with_sessions(store, "nightly", ())
    store.set_run_status(empty, "failed")

    assert store.resolve_run(ref).id == full
    assert store.resolve_run(empty).id == empty


@pytest.mark.parametrize("status", ["running", "interrupted"])
def test_resolve_run_keeps_an_empty_run_that_may_still_get_sessions(store, status):
    _run_with_sessions(store, "nightly", ("a",))
    resumable = _run_with_sessions(store, "nightly", (), kind="live")
    store.set_run_status(resumable, status)

    assert store.resolve_run("latest").id == resumable


@pytest.mark.parametrize("status", ["running", "interrupted"])
@pytest.mark.parametrize("ref", ["latest", "label:nightly"], ids=["latest", "label"])
def test_latest_never_names_an_import_that_did_not_finish(store, status, ref):
    complete = _run_with_sessions(store, "nightly", ("a",))
    store.set_run_status(complete, "finished")
    killed = _run_with_sessions(store, "nightly", ("b", "c"))  # sessions, but half the file
    store.set_run_status(killed, status)

    assert store.resolve_run(ref).id == complete
    assert store.resolve_run(killed).id == killed  # by id it is still there to inspect


def test_latest_on_a_store_holding_only_a_killed_import_says_there_is_no_complete_run(store):
    _run_with_sessions(store, "nightly", ("a",))  # status stays running: the import was killed

    with pytest.raises(ConfigError, match="no runs yet .an import that never finished"):
        store.resolve_run("latest")


def test_resolve_run_falls_back_to_the_newest_run_when_none_qualifies(store):
    for _ in range(2):
        newest = _run_with_sessions(store, "nightly", ())
        store.set_run_status(newest, "failed")

    assert store.resolve_run("latest").id == newest


# --- stored model text is capped, visibly -----------------------------------


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


# --- db upgrade on what is not an agent-eval store: one Error line, exit 2 ---


def _sqlite_not_a_store(tmp_path, kind: str) -> str:
    path = tmp_path / f"{kind}.db"
    if kind == "garbage":
        path.write_bytes(bytes(range(256)) * 40)
    elif kind == "text":
        path.write_text("name,amount\ninvoice-1,12.50\n" * 200)
    else:
        with sqlite3.connect(path) as conn:
            if kind == "foreign":
                conn.execute("CREATE TABLE invoices (id INTEGER)")
            else:  # newer: an alembic revision this agent-eval never shipped
                conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
                conn.execute("INSERT INTO alembic_version VALUES ('ffee99')")
    return str(path)


NOT_A_STORE = {
    "garbage": "file is not a database",
    "text": "file is not a database",
    "foreign": "has tables (invoices) but no agent-eval revision",
    "newer": "database at revision ffee99, newer than this agent-eval",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_STORE))
def test_db_upgrade_on_what_is_not_a_store_prints_one_error_line(tmp_path, kind):
    from agent_eval.cli import main

    url = _sqlite_not_a_store(tmp_path, kind)
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", url])

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --db: ") and result.stderr.count("\n") == 1
    assert NOT_A_STORE[kind] in result.stderr
    assert "Traceback" not in result.output
    if kind in ("foreign", "newer"):  # left as it was: no agent-eval table added
        with sqlite3.connect(url) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert names == ({"invoices"} if kind == "foreign" else {"alembic_version"})


@pytest.fixture
def pg_scratch(pg_url):
    """A second, brand-new PostgreSQL database (not the shared test store), dropped after."""
    import secrets as _secrets

    import psycopg
    admin_url = pg_url.replace("+psycopg", "").rsplit("/", 1)[0] + "/test"
    name = f"agent_eval_scratch_{_secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    try:
        yield url, psycopg.connect(url.replace("+psycopg", ""), autocommit=True)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["foreign", "newer"])
def test_db_upgrade_on_a_postgresql_database_that_is_not_a_store_is_one_error(pg_scratch, kind):
    from agent_eval.cli import main

    url, conn = pg_scratch
    with conn:
        if kind == "foreign":
            conn.execute("CREATE TABLE invoices (id INTEGER)")
        else:
            conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
            conn.execute("INSERT INTO alembic_version VALUES ('ffee99')")
    result = CliRunner().invoke(main, ["db", "upgrade", "--db", url])

    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --db: ") and result.stderr.count("\n") == 1
    assert NOT_A_STORE[kind] in result.stderr


# --- run leases: one process plays a run at a time --------------------------


def _lease_row(store, run_id):
    from agent_eval.store.schema import run_leases

    with store.engine.connect() as conn:
        return conn.execute(select(run_leases).where(run_leases.c.run_id == run_id)).first()


def _age_lease(store, run_id, **values):
    from sqlalchemy import update

    from agent_eval.store.schema import run_leases

    with store.engine.begin() as conn:
        conn.execute(update(run_leases).where(run_leases.c.run_id == run_id).values(**values))


def test_a_held_lease_refuses_a_second_holder_naming_pid_and_host(store, run_id):
    import os
    import socket

    from agent_eval.store.leases import RunLeased, acquire_lease

    first = acquire_lease(store.engine, run_id)
    _age_lease(store, run_id, pid=os.getppid())  # held by another live process here

    with pytest.raises(RunLeased, match="is being resumed by pid") as caught:
        acquire_lease(store.engine, run_id)

    assert str(caught.value).startswith(
        f"run {run_id} is being resumed by pid {os.getppid()} on host {socket.gethostname()}")
    assert caught.value.exit_code == 2
    assert _lease_row(store, run_id).token == first.token


def test_a_lease_whose_process_died_is_taken_over_at_once(store, run_id):
    import subprocess
    import sys

    from agent_eval.store.leases import acquire_lease

    acquire_lease(store.engine, run_id)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _age_lease(store, run_id, pid=gone.pid)

    second = acquire_lease(store.engine, run_id)

    assert _lease_row(store, run_id).token == second.token


def test_a_lease_on_another_host_lapses_only_when_its_heartbeat_is_old(store, run_id):
    from agent_eval.store.leases import STALE_AFTER_S, RunLeased, acquire_lease

    acquire_lease(store.engine, run_id)
    _age_lease(store, run_id, host="gpu-node-7", pid=1)
    with pytest.raises(RunLeased, match="on host gpu-node-7"):
        acquire_lease(store.engine, run_id)

    old = datetime.now(UTC) - timedelta(seconds=STALE_AFTER_S + 5)
    _age_lease(store, run_id, heartbeat_at=old)
    taken = acquire_lease(store.engine, run_id)

    import socket

    row = _lease_row(store, run_id)
    assert (row.token, row.host) == (taken.token, socket.gethostname())


def test_a_released_lease_frees_the_run_and_a_lost_one_cannot_be_renewed(store, run_id):
    from agent_eval.store.leases import acquire_lease, release_lease, renew_lease

    first = acquire_lease(store.engine, run_id)
    assert renew_lease(store.engine, first)
    release_lease(store.engine, first)
    assert _lease_row(store, run_id) is None

    second = acquire_lease(store.engine, run_id)
    assert not renew_lease(store.engine, first)  # not ours any more
    release_lease(store.engine, first)  # and releasing it does not free someone else's
    assert _lease_row(store, run_id).token == second.token


def test_store_lease_holds_the_run_for_the_with_block(store, run_id):
    from agent_eval.store.leases import RunLeased, acquire_lease

    with store.lease(run_id) as lease:
        import os

        _age_lease(store, run_id, pid=os.getppid())
        with pytest.raises(RunLeased, match="is being resumed by pid"):
            acquire_lease(store.engine, run_id)
        _age_lease(store, run_id, pid=lease.pid)
    assert _lease_row(store, run_id) is None


def test_two_processes_racing_for_a_lease_get_it_once(store, run_id):
    import threading

    from agent_eval.store.leases import RunLeased, acquire_lease

    start = threading.Barrier(4)
    won, refused = [], []

    def race() -> None:
        start.wait()
        try:
            won.append(acquire_lease(store.engine, run_id))
        except RunLeased:
            refused.append(1)

    threads = [threading.Thread(target=race) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert (len(won), len(refused)) == (1, 3)
    assert _lease_row(store, run_id).token == won[0].token


def _sqlite_schema(path) -> dict:
    """Every table's columns (type, not null, default, key), foreign keys, indexes (unique,
    partial, columns, WHERE) and CHECKs, and the stamped revision, as SQLite reports them."""
    import re

    with sqlite3.connect(path) as conn:
        out: dict = {"revision": conn.execute("SELECT * FROM alembic_version").fetchall()}
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        for name in tables:
            columns = sorted(tuple(r[1:7]) for r in conn.execute(f"PRAGMA table_xinfo('{name}')"))
            keys = sorted(tuple(r[2:]) for r in conn.execute(f"PRAGMA foreign_key_list('{name}')"))
            indexes = []
            for _, index, unique, origin, partial in conn.execute(f"PRAGMA index_list('{name}')"):
                cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info('{index}')"))
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                   (index,)).fetchone()
                where = (" ".join(sql[0].split(" WHERE ", 1)[1].split())
                         if sql and sql[0] and " WHERE " in sql[0] else None)
                indexes.append((index if origin == "c" else origin, unique, partial, cols, where))
            table_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                     (name,)).fetchone()[0]
            checks = sorted(" ".join(c.split()) for c in re.findall(r"CHECK\s*\((.*?)\)",
                                                                    table_sql))
            out[name] = (columns, keys, sorted(indexes), checks)
    return out


def test_a_new_sqlite_store_built_at_head_is_the_schema_the_migrations_build(tmp_path):
    """A new SQLite file is built from ``metadata`` and stamped (no Alembic run); the
    twelve migrations from empty give exactly the same tables, columns, keys, indexes
    (the partial one built outside ``metadata`` too) and revision."""
    import subprocess
    import sys

    from alembic import command

    fast, migrated = tmp_path / "fast.db", tmp_path / "migrated.db"
    probe = ("import sys\nfrom agent_eval.store import open_store\n"
             f"open_store({str(fast)!r}).close()\n"
             "print('alembic' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"  # no migration ran
    engine = store_database.connect(resolve_db_url(str(migrated)))
    with engine.connect() as conn, conn.begin():
        command.upgrade(store_database._alembic_config(conn), "head")
    engine.dispose()
    built, expected = _sqlite_schema(fast), _sqlite_schema(migrated)
    assert built == expected
    assert expected["revision"] == [(head_revision(),)]
    assert len(expected) > 8  # the tables were read


def test_a_new_sqlite_store_is_readable_by_its_owner_only(tmp_path):
    """Transcripts are private: a store the tool creates is 0600 (SQLite's own default is
    0644), and so are the WAL files SQLite makes beside it, whatever the umask lets by."""
    from agent_eval.store import open_store

    old = os.umask(0o022)
    try:
        with open_store(str(tmp_path / "new.db")) as store:
            run_id = store.create_run(label="l", kind="live", suite="s", config={},
                                      fingerprint={})
            assert run_id
            made = sorted(p.name for p in tmp_path.iterdir())
            modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        os.umask(old)
    assert "new.db" in made and "new.db-wal" in made
    assert modes == dict.fromkeys(made, 0o600)


def test_an_existing_store_keeps_the_mode_its_owner_gave_it(tmp_path):
    path = tmp_path / "shared.db"
    open_store(str(path)).close()
    path.chmod(0o640)
    open_store(str(path)).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
