"""The one run writer (agent_eval/runs/writer.py): how every source's run ends, a run
created only when a session with a call arrives, and each target added once."""

from __future__ import annotations

import pytest

from agent_eval.runs import RunSpec, RunWriter, SessionBatches, TargetDefaults
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord

SPEC = RunSpec(kind="import", label="t", suite="f.jsonl", config={"format": "openai"},
               fingerprint={"source": "openai"})


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "runs.db")) as s:
        yield s


def session(key: str, target: str = "m", calls: int = 1) -> SessionRecord:
    return SessionRecord(key=key, target=target, scenario="s", calls=[
        CallRecord(turn_index=0, index=i, tool="bash", arguments='{"command": "ls"}',
                   decision="allowed") for i in range(calls)])


def test_a_block_that_ends_leaves_the_run_finished(store):
    run = RunWriter(store, SPEC, targets=TargetDefaults(base_url="import:openai"))
    with run.writing():
        run.write([session("a")])
    assert run.run_id is not None
    assert store.get_run(run.run_id).status == "finished"
    assert run.counts.sessions == 1 and run.counts.calls == 1


@pytest.mark.parametrize(("raised", "on_interrupt", "status"), [
    (KeyboardInterrupt, "interrupted", "interrupted"),
    (KeyboardInterrupt, "failed", "failed"),  # rescore: not resumable
    (ValueError, "interrupted", "failed"),
])
def test_a_block_stopped_leaves_the_run_interrupted_or_failed(store, raised, on_interrupt,
                                                              status):
    run = RunWriter(store, SPEC, targets=TargetDefaults(base_url="import:openai"))
    with pytest.raises(raised, match="stop"), run.writing(on_interrupt=on_interrupt):
        run.write([session("a")])
        raise raised("stop")
    assert run.run_id is not None
    assert store.get_run(run.run_id).status == status
    assert [s.key for s in store.session_rows([run.run_id])] == ["a"]


def test_a_run_never_created_stays_uncreated(store):
    run = RunWriter(store, SPEC)
    with pytest.raises(ValueError, match="nothing read"), run.writing():
        raise ValueError("nothing read")
    assert run.run_id is None
    assert store.list_runs() == []


def test_batches_create_the_run_at_the_first_call_and_add_each_target_once(store):
    run = RunWriter(store, SPEC, targets=TargetDefaults(base_url="import:openai"))
    batches = SessionBatches(run, batch_sessions=2)
    batches.add(session("no-calls", calls=0))
    assert run.run_id is None  # a file of sessions without calls may be another format
    batches.add(session("a", target="m1"))
    assert run.run_id is not None and batches.written == 2
    batches.add(session("b", target="m2"))
    batches.add(session("c", target="m1"))  # full: written
    batches.flush()
    targets = store.run_targets(run.run_id)
    assert [(t.name, t.base_url) for t in targets] == [("m", "import:openai"),
                                                      ("m1", "import:openai"),
                                                      ("m2", "import:openai")]
    assert sorted(s.key for s in store.session_rows([run.run_id])) == ["a", "b", "c",
                                                                       "no-calls"]
