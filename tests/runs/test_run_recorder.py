"""The run recorder (agent_eval/runs/recorder.py): the run's status is its alone, every
session handed over is stored by one writer thread, in batches, and a refused session
never takes the others of its batch with it."""

from __future__ import annotations

import asyncio
import threading

import pytest
from support.factories import add_run

from agent_eval.errors import ConfigError
from agent_eval.runs import RunRecorder
from agent_eval.store import open_store
from agent_eval.transcript import SessionRecord


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "runs.db")) as s:
        yield s


@pytest.fixture
def run_id(store) -> int:
    return add_run(store, label=None, targets={"t": "m"}, base_url="http://x")


def session(key: str, **fields) -> list[SessionRecord]:
    return [SessionRecord(key=key, target="t", scenario="s", **fields)]


def hand_over(recorder: RunRecorder, *families: list[SessionRecord]) -> None:
    async def go() -> None:
        for records in families:
            await recorder.session(records)

    asyncio.run(go())


def stored_keys(store, run_id: int) -> list[str]:
    return sorted(s.key for s in store.session_rows([run_id]))


def test_sessions_are_stored_by_one_writer_thread_in_one_batch_and_the_run_finished(
        store, run_id, monkeypatch):
    batches, threads = [], set()
    real = store.record_sessions

    def spy(rid, records):
        batches.append([r.key for r in records])
        threads.add(threading.current_thread().name)
        return real(rid, records)

    monkeypatch.setattr(store, "record_sessions", spy)
    recorder = RunRecorder(store, run_id)
    with recorder.recording():
        assert store.get_run(run_id).status == "running"
        hand_over(recorder, *(session(f"k{i}") for i in range(20)))
    assert batches == [[f"k{i}" for i in range(20)]]  # all handed over within the linger
    assert threads == {f"agent-eval-writer-{run_id}"}
    assert store.get_run(run_id).status == "finished"
    assert recorder.counts.stored == 20


def test_a_refused_session_is_written_alone_and_the_rest_of_its_batch_is_stored(
        store, run_id):
    store.record_sessions(run_id, session("taken"))
    recorder = RunRecorder(store, run_id)
    with pytest.raises(ConfigError, match="already holds session 'taken'"):
        with recorder.recording():
            hand_over(recorder, session("a"), session("taken"), session("b"))
    assert stored_keys(store, run_id) == ["a", "b", "taken"]
    assert store.get_run(run_id).status == "failed"


def test_ctrl_c_stores_what_was_handed_over_and_leaves_the_run_interrupted(store, run_id):
    recorder = RunRecorder(store, run_id)
    with pytest.raises(KeyboardInterrupt, match="^$"):
        with recorder.recording():
            hand_over(recorder, session("a"), session("b"))
            raise KeyboardInterrupt
    assert stored_keys(store, run_id) == ["a", "b"]
    assert store.get_run(run_id).status == "interrupted"


def test_the_closing_status_is_asked_when_the_run_ends(store, run_id):
    left = []
    recorder = RunRecorder(store, run_id)
    with recorder.recording(lambda: "interrupted" if left else "finished"):
        hand_over(recorder, session("a"))
        left.append("a target's server went away")
    assert store.get_run(run_id).status == "interrupted"
