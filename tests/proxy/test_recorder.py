"""Off the request path (agent_eval/proxy/recorder.py, sessions.py): exchanges become
judged sessions; a store that is down sends them to the journal, and they are written
when it returns; what cannot be kept is counted."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import select
from support.factories import add_run
from support.proxyplay import ALLOWLIST

from agent_eval.policy import load_allowlist
from agent_eval.proxy import Exchange, Recorder
from agent_eval.proxy.recorder import record_from_json, record_to_json
from agent_eval.proxy.sessions import Sessions
from agent_eval.store.requests import save_blobs
from agent_eval.store.schema import request_blobs

SYSTEM = {"role": "system", "content": "You are the research subagent."}
TASK = {"role": "user", "content": "Open attempts for stage S2."}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}},
         {"type": "function", "function": {"name": "read", "parameters": {}}}]
GOOD = "uv run scripts/db_query.py --sql 'select 1'"
PIPED = "uv run scripts/db_query.py --sql 'select 1' | head -5"


def completion(*commands: str, content: str = "", ids: tuple[str, ...] = ()) -> bytes:
    calls = [{"id": ids[i] if ids else f"chatcmpl-tool-{i:012x}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
             for i, c in enumerate(commands)]
    return json.dumps({"model": "qwen", "choices": [{"index": 0, "finish_reason": "tool_calls",
                       "message": {"role": "assistant", "content": content,
                                   "tool_calls": calls}}],
                       "usage": {"prompt_tokens": 900, "completion_tokens": 40}}).encode()


def exchange(messages: list, reply: bytes, **fields) -> Exchange:
    body = json.dumps({"model": "qwen", "messages": messages, "tools": TOOLS}).encode()
    ex = Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                  started_at=datetime.now(UTC), status=200, content_type="application/json",
                  response_body=bytearray(reply), ttft_s=0.1, latency_s=0.5)
    for key, value in fields.items():
        setattr(ex, key, value)
    return ex


@pytest.fixture
def sessions() -> Sessions:
    return Sessions(load_allowlist(ALLOWLIST))


def test_each_call_of_a_reply_is_judged_and_its_output_comes_from_the_next_request(sessions):
    first = completion(GOOD, PIPED, ids=("c-1", "c-2"))
    sessions.take(exchange([SYSTEM, TASK], first), 0.0)
    reply = json.loads(first)["choices"][0]["message"]
    back = [SYSTEM, TASK, reply, {"role": "tool", "tool_call_id": "c-1", "content": "3 rows"},
            {"role": "tool", "tool_call_id": "c-2", "content": "denied"}]
    sessions.take(exchange(back, completion(GOOD, ids=("c-3",))), 1.0)
    [record] = sessions.close_all()
    assert [(c.turn_index, c.decision, c.primary) for c in record.calls] == [
        (0, "allow", None), (0, "deny", "AE301"), (1, "allow", None)]
    assert record.calls[0].output == "3 rows" and record.calls[0].script == "db_query.py"
    assert record.calls[1].next_action == "pivot" and record.calls[1].command == PIPED
    assert [t.prompt_tokens for t in record.turns] == [900, 900]
    assert record.turns[1].request["messages"] == back
    assert record.tags == ["link:new", "link:continuation"] and record.status == "completed"


def test_a_tool_the_request_did_not_offer_is_an_unknown_tool(sessions):
    body = json.loads(completion(GOOD))
    body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "emit_guidance"
    sessions.take(exchange([SYSTEM, TASK], json.dumps(body).encode()), 0.0)
    [record] = sessions.close_all()
    assert record.calls[0].primary == "AE101"


def test_tool_call_markup_in_the_text_is_one_erroneous_call(sessions):
    text = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "<tool_call>{\"name\": \"bash\"}</tool_call>"}}]})
    sessions.take(exchange([SYSTEM, TASK], text.encode()), 0.0)
    [record] = sessions.close_all()
    assert [c.primary for c in record.calls] == ["AE104"]


def streamed(command: str, *, end: bool) -> bytes:
    """A Chat Completions stream of one bash call; with its finish reason and ``[DONE]``
    only when ``end``."""
    args = json.dumps({"command": command})
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                  {"index": 0, "id": "c-1", "type": "function",
                   "function": {"name": "bash", "arguments": args[:20]}}]}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [
                  {"index": 0, "function": {"arguments": args[20:]}}]}}]}]
    if end:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if end else "")).encode()


def test_calls_of_an_aborted_reply_are_kept_in_the_transcript_but_never_judged(sessions):
    sessions.take(exchange([SYSTEM, TASK], streamed(PIPED, end=False), outcome="client-abort",
                           content_type="text/event-stream"), 0.0)
    [record] = sessions.close_all()
    assert record.calls == [] and "reply:client-abort" in record.tags
    assert record.messages[-1]["tool_calls"][0]["function"]["arguments"] == \
        json.dumps({"command": PIPED})
    assert record.turns[0].finish_reason == "client-abort" and record.status == "completed"


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_leaves_after_the_end_marker_got_a_complete_reply(sessions, stream):
    # Codex closes its stream on `response.completed`, before the chunked body's end: the
    # relay's last write fails, yet the reply it relayed was whole (a real interop run
    # stored its session with no call, tagged reply:client-abort)
    reply = streamed(PIPED, end=True) if stream else completion(PIPED)
    sessions.take(exchange([SYSTEM, TASK], reply, outcome="client-abort",
                           content_type="text/event-stream" if stream else "application/json"),
                  0.0)
    [record] = sessions.close_all()
    assert [(c.command, c.decision, c.primary) for c in record.calls] == [
        (PIPED, "deny", "AE301")]
    assert "reply:client-abort" not in record.tags
    assert record.turns[0].finish_reason == "tool_calls"


def test_a_malformed_request_or_reply_is_counted_not_raised(sessions):
    sessions.take(exchange([SYSTEM, TASK], b"not json"), 0.0)
    bad = exchange([SYSTEM, TASK], b"")
    bad.request_body = b"\xff{not json"
    sessions.take(bad, 0.0)
    [record] = sessions.close_all()
    assert sessions.unparseable == 1
    assert record.status == "error" and record.turns[0].finish_reason == "unparseable"


def test_a_journal_line_reads_back_as_the_same_record(sessions):
    sessions.take(exchange([SYSTEM, TASK], completion(PIPED)), 0.0)
    [record] = sessions.close_all()
    again = record_from_json(json.loads(json.dumps(record_to_json(record))))
    assert again == record


class FlakyStore:
    """A real store that refuses every write while ``down``."""

    def __init__(self, store) -> None:
        self.store, self.down = store, False

    def __getattr__(self, name):
        method = getattr(self.store, name)

        def call(*args, **kwargs):
            if self.down:
                raise ConnectionError("connection refused (store stopped)")
            return method(*args, **kwargs)
        return call


def test_sessions_wait_in_the_journal_while_the_store_is_down_and_are_written_after(
        store, tmp_path):
    flaky = FlakyStore(store)
    journal = tmp_path / "proxy.journal"
    recorder = Recorder(flaky, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=journal, idle_s=0.0, retry_s=0.0, tick_s=0.01)
    recorder.start()
    flaky.down = True
    for i in range(3):
        recorder.submit(exchange([SYSTEM, {"role": "user", "content": f"task {i}"}],
                                 completion(PIPED)))
    for _ in range(1000):  # the writer thread journals them as the sessions close
        if recorder.status()["journaled_sessions"] == 3:
            break
        time.sleep(0.01)
    assert journal.exists() and journal.read_text().count("\"key\": \"proxy/") == 3
    flaky.down = False
    recorder.stop()
    assert not journal.exists()
    run = store.resolve_run("latest")
    assert run.kind == "proxy" and run.status == "finished"
    rows = list(store.session_rows([run.id]))
    assert len(rows) == 3 and sum(r.n_calls for r in rows) == 3
    assert recorder.status()["lost_turns"] == 0


def test_a_full_queue_drops_the_exchange_and_counts_it(store, tmp_path):
    recorder = Recorder(store, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=tmp_path / "j", queue_size=1)
    assert recorder.submit(exchange([SYSTEM, TASK], completion(GOOD)))
    assert not recorder.submit(exchange([SYSTEM, TASK], completion(GOOD)))
    assert recorder.status()["lost_turns"] == 1


class RefusingStore(FlakyStore):
    def record_sessions(self, run_id, records):
        from sqlalchemy.exc import IntegrityError

        raise IntegrityError("INSERT INTO sessions", {}, Exception("duplicate key"))


def test_records_the_store_refuses_are_counted_not_journaled_forever(store, tmp_path):
    journal = tmp_path / "proxy.journal"
    recorder = Recorder(RefusingStore(store), load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=journal, tick_s=0.01)
    recorder.start()
    recorder.submit(exchange([SYSTEM, TASK], completion(PIPED)))
    recorder.stop()
    assert not journal.exists()
    assert recorder.status()["lost_turns"] == 1 and recorder.status()["stored_sessions"] == 0


CHILD_TASK = "Evaluate stage S2-literature against its acceptance criteria and report."


def spawning_reply() -> bytes:
    call = {"id": "toolu_01", "type": "function",
            "function": {"name": "task", "arguments": json.dumps({"prompt": CHILD_TASK})}}
    return json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "tool_calls": [call]}}]}).encode()


def test_a_subagent_whose_task_is_a_calls_argument_is_that_calls_child(store):
    sessions = Sessions(load_allowlist(ALLOWLIST), idle_s=10)
    parent = exchange([SYSTEM, TASK], spawning_reply())
    parent.request_body = json.dumps({"model": "qwen", "messages": [SYSTEM, TASK], "tools": [
        *TOOLS, {"type": "function", "function": {"name": "task", "parameters": {}}}]}).encode()
    sessions.take(parent, 0.0)
    evaluator = {"role": "system", "content": "You are the step evaluator."}
    sessions.take(exchange([evaluator, {"role": "user", "content": CHILD_TASK}],
                           completion(GOOD)), 5.0)
    reply = json.loads(spawning_reply())["choices"][0]["message"]
    sessions.take(exchange([SYSTEM, TASK, reply, {"role": "tool", "tool_call_id": "toolu_01",
                                                  "content": "evaluated"}],
                           completion(GOOD)), 8.0)
    assert sessions.expire(16.0) == []  # the child is idle, its parent is not: it waits
    family = sessions.expire(20.0)
    by_key = {r.key: r for r in family}
    parent_rec, child_rec = by_key["proxy/1"], by_key["proxy/2"]
    assert child_rec.parent_key == "proxy/1" and parent_rec.calls[0].child_key == "proxy/2"
    run = add_run(store, family, label="p", kind="proxy", targets=("qwen",), base_url="u")
    rows = {r.key: r for r in store.session_rows([run])}
    assert rows["proxy/2"].parent_id == rows["proxy/1"].id


def test_with_protocols_a_proxied_session_stores_how_far_its_closing_sequence_got(tmp_path):
    """``proxy --protocols``: the same rule as ``import --protocols`` (docs/protocols.md),
    here chosen by the system prompt; a denied call never advances it."""
    from agent_eval.scenario.protocols import load_protocols

    path = tmp_path / "protocols.yaml"
    path.write_text("protocols:\n  - name: research\n    when: {system_prompt: research subagent}\n"
                    "    steps:\n      - {script: db_query.py}\n"
                    "      - {script: update_stage_status.py, args: {--status: done}}\n")
    sessions = Sessions(load_allowlist(ALLOWLIST), protocols=load_protocols(path))
    first = completion(PIPED, GOOD, ids=("c-1", "c-2"))
    sessions.take(exchange([SYSTEM, TASK], first), 0.0)
    [record] = sessions.close_all()
    assert [c.decision for c in record.calls] == ["deny", "allow"]
    h = record.handshake
    assert (h.required, h.done, h.completed, h.missed_step) == (
        2, 1, False, "update_stage_status.py --status done")
    other = Sessions(load_allowlist(ALLOWLIST), protocols=load_protocols(path))
    other.take(exchange([{"role": "system", "content": "You are the writer."}, TASK], first), 0.0)
    [unrelated] = other.close_all()
    assert unrelated.handshake.required == 0


def test_the_retention_setting_deletes_prompt_texts_unused_for_that_many_days(store, tmp_path):
    with store.engine.begin() as conn:  # a prompt text last used by a turn in 2020
        save_blobs(conn, {"0" * 64: '{"role":"system","content":"old"}'}, today=date(2020, 1, 1))
    recorder = Recorder(store, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=tmp_path / "j", tick_s=0.01, keep_requests_days=30)
    recorder.start()
    recorder.submit(exchange([SYSTEM, TASK], completion(GOOD)))
    recorder.stop()
    with store.engine.connect() as conn:
        kept = set(conn.execute(select(request_blobs.c.hash)).scalars())
    assert "0" * 64 not in kept and len(kept) == 3  # this traffic's system, task and tools
    assert recorder.status()["pruned_request_texts"] == 1
    run = store.resolve_run("latest")
    sid, = [r.id for r in store.session_rows([run.id])]
    assert store.load_session(sid).record.turns[0].request["messages"] == [SYSTEM, TASK]


def test_without_a_retention_setting_no_prompt_text_is_ever_deleted(store, tmp_path):
    with store.engine.begin() as conn:
        save_blobs(conn, {"0" * 64: '{"role":"system","content":"old"}'}, today=date(2020, 1, 1))
    recorder = Recorder(store, load_allowlist(ALLOWLIST), upstream="http://up/v1",
                        journal=tmp_path / "j", tick_s=0.01)
    recorder.start()
    recorder.submit(exchange([SYSTEM, TASK], completion(GOOD)))
    recorder.stop()
    with store.engine.connect() as conn:
        assert "0" * 64 in set(conn.execute(select(request_blobs.c.hash)).scalars())
    assert recorder.status()["pruned_request_texts"] == 0


def test_a_call_cut_by_max_tokens_is_a_truncation_kept_in_the_transcript_not_ae102(sessions):
    body = json.loads(completion(GOOD, PIPED))
    choice = body["choices"][0]
    choice["finish_reason"] = "length"
    cut = choice["message"]["tool_calls"][1]["function"]
    cut["arguments"] = cut["arguments"][:20]  # max_tokens: 48 ended it mid-arguments
    sessions.take(exchange([SYSTEM, TASK], json.dumps(body).encode()), 0.0)
    [record] = sessions.close_all()
    assert [(c.decision, c.primary) for c in record.calls] == [("allow", None)]
    assert "reply:length-cut" in record.tags
    assert record.messages[-1]["tool_calls"][1]["function"]["arguments"] == cut["arguments"]
