"""The recorder in its own process (agent_eval/proxy/recorder_process.py): what the relay hands
over is judged and stored there exactly as in process; a full queue drops and counts
without waiting; the child's counters reach the status page."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.proxyplay import ALLOWLIST
from test_recorder import GOOD, PIPED, SYSTEM, completion, exchange

from agent_eval.errors import AgentEvalError
from agent_eval.proxy.recorder_process import FLUSH_S, RecorderConfig, RecorderProcess
from agent_eval.store import open_store


def config(tmp_path, **fields) -> RecorderConfig:
    return RecorderConfig(db=str(tmp_path / "proxy.db"), allowlist_path=str(ALLOWLIST),
                          upstream="http://up/v1", label="worker",
                          journal=str(tmp_path / "journal"), **fields)


def test_the_recorder_process_judges_and_stores_what_the_relay_hands_over(tmp_path):
    recorder = RecorderProcess(config(tmp_path))
    recorder.start()
    try:
        assert recorder.run_id is not None
        for i, command in enumerate((GOOD, PIPED, GOOD)):
            task = {"role": "user", "content": f"Open attempts for stage S{i}."}
            assert recorder.submit(exchange([SYSTEM, task], completion(command)))
    finally:
        recorder.stop()
    status = recorder.status()
    assert (status["stored_sessions"], status["stored_turns"], status["lost_turns"]) == (3, 3, 0)
    with open_store(str(tmp_path / "proxy.db")) as store:
        run = store.resolve_run("label:worker")
        assert (run.id, run.kind, run.status) == (recorder.run_id, "proxy", "finished")
        decisions = sorted(c.decision for s in store.iter_sessions([run.id])
                           for c in s.record.calls)
    assert decisions == ["allow", "allow", "deny"]


def test_a_full_queue_drops_the_exchange_counts_it_and_never_waits(tmp_path):
    recorder = RecorderProcess(config(tmp_path), queue_size=1)  # never started: nothing drains
    task = {"role": "user", "content": "Open attempts."}
    assert recorder.submit(exchange([SYSTEM, task], completion(GOOD)))
    assert not recorder.submit(exchange([SYSTEM, task], completion(GOOD)))
    assert recorder.status()["lost_turns"] == 1 and recorder.status()["run_id"] is None
    recorder.stop()  # not started: nothing to stop


def test_on_an_event_loop_exchanges_go_over_in_one_batch_soon_after(tmp_path):
    recorder = RecorderProcess(config(tmp_path))  # not started: the test reads the queue
    task = {"role": "user", "content": "Open attempts."}

    async def relay_two() -> None:
        assert recorder.submit(exchange([SYSTEM, task], completion(GOOD)))
        assert recorder.submit(exchange([SYSTEM, task], completion(PIPED)))
        assert recorder.queue.empty()  # gathered, not yet handed over
        await asyncio.sleep(FLUSH_S * 5)

    asyncio.run(relay_two())
    batch = recorder.queue.get(timeout=5)
    assert [json.loads(bytes(ex.response_body))["choices"][0]["message"]["tool_calls"][0]
            ["function"]["arguments"] for ex in batch] == [
        json.dumps({"command": GOOD}), json.dumps({"command": PIPED})]


def test_a_recorder_process_that_cannot_start_is_an_error_not_a_hang(tmp_path):
    broken = RecorderConfig(db=str(tmp_path / "proxy.db"), upstream="http://up/v1",
                            allowlist_path=str(tmp_path / "gone.yaml"))
    recorder = RecorderProcess(broken)
    with pytest.raises(AgentEvalError, match="recorder process could not start"):
        recorder.start(timeout=60)
    recorder.stop()  # nothing left to stop


def test_the_child_gets_the_stack_notes_and_the_parity_setting(tmp_path):
    """What `proxy --stack-parser/--stack-template/--stream-parity` hand the child: the
    notes reach its Recorder (and judge markup as AE511), parity is turned on."""
    from agent_eval.proxy.recorder_process import build_recorder
    from agent_eval.wire.markup import parser_markers

    recorder = build_recorder(config(tmp_path, stack_notes=(("parser", "hermes"),),
                                     stream_parity=True))
    try:
        assert (recorder.stack_notes, recorder.stream_parity) == ({"parser": "hermes"}, True)
        recorder._read_upstream()  # what start() does first: "up" answers nothing
        assert recorder.sessions.template_markers == parser_markers("hermes")
        assert recorder.run.spec.fingerprint["stacks"] == {
            "(upstream)": {"notes": {"parser": "hermes"}}}
    finally:
        recorder.store.close()
