"""End to end over real HTTP: one model through two serving stacks, and stream parity.

``agent-eval run`` in a subprocess plays the bundled suite against the simulator.  The
same model (the ``piper`` profile, which makes model errors of its own) is played under
one target name through a clean stack and through stacks that fail (``sim/stack.py``):

* stream parity (``stream_parity: true``): every turn answered whole and streamed from the
  same context; through a clean stack no parity fault, through an SGLang-style stack
  whose streamed path serves other arguments (``+sglang:stream-differs``) AE510 only,
  never ending a session, with the model's figures those of a whole run;
* ``compare`` of the clean run against one whose stack cuts calls (``+vllm:cut-length``)
  says the model's errors are the same within their interval and the stack faults apart.
"""

from __future__ import annotations

import json

import pytest
from test_run_e2e import SUITE, agent_eval_cli

from agent_eval.sim import Faults, run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

RUNS = {  # label -> (model through its stack, stream parity)
    "clean": ("sim-piper", False),
    "parity-clean": ("sim-piper", True),
    "parity-sglang": ("sim-piper+sglang:stream-differs", True),
    "vllm-cut": ("sim-piper+vllm:cut-length", False),
}


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity-e2e")
    db = str(tmp / "runs.db")
    tables = {}
    with run_sim_in_thread("piper", suite=SUITE, faults=Faults(stack_rate=0.1)) as base_url:
        for label, (model, parity) in RUNS.items():
            config = tmp / f"{label}.yaml"
            config.write_text(
                "targets:\n"
                f"  - {{name: piper, base_url: '{base_url}', model: '{model}', "
                f"max_tokens: 4096, stream_parity: {str(parity).lower()}, "
                "sampling: {temperature: 0, seed: 7}, concurrency: 4, timeout_s: 30, "
                "retries: 1}\n")
            done = agent_eval_cli("run", "--config", str(config), "--suite", str(SUITE),
                                  "--repeats", "2", "--label", label, "--db", db, "--json",
                                  timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            out = json.loads(done.stdout)
            tables[label] = out.get("targets", out)["piper"]
    return db, tables


def test_stream_parity_through_a_clean_stack_finds_no_fault(played):
    _, tables = played
    assert tables["parity-clean"]["stack_faults"] == 0
    assert tables["parity-clean"]["tool_calls"] > 0


def test_a_streamed_path_that_serves_other_arguments_is_a_parity_fault_only(played):
    db, tables = played
    sglang = tables["parity-sglang"]
    assert sglang["stack_faults"] > 0 and set(sglang["stack_classes"]) == {"AE510"}
    assert sglang["error_sessions"] == 0  # the session goes on with the whole reply
    with open_store(db) as store:
        run = store.resolve_run("label:parity-sglang")
        faults = [f for s in store.iter_sessions([run.id]) for f in s.record.stack_faults]
    assert faults and all(f.code == "AE510" and not f.ends for f in faults)
    assert all("arguments differ" in f.message for f in faults)


def test_the_model_figures_of_a_parity_run_are_those_of_a_whole_run(played):
    """The session goes on with the whole reply, from the same seeds: the same calls."""
    db, tables = played
    with open_store(db) as store:
        def calls(label):
            run = store.resolve_run(f"label:{label}")
            return sorted((s.record.key, c.index, c.arguments, c.decision, c.primary)
                          for s in store.iter_sessions([run.id]) for c in s.record.calls)
        assert calls("parity-sglang") == calls("parity-clean") == calls("clean")
    assert tables["parity-sglang"]["errors"] == tables["clean"]["errors"]


def test_compare_says_the_model_is_the_same_and_the_stack_loses_calls(played):
    db, tables = played
    assert tables["clean"]["stack_faults"] == 0 and tables["vllm-cut"]["stack_faults"] > 0
    done = agent_eval_cli("compare", "label:clean", "label:vllm-cut", "--db", db)
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "the serving stacks differ" not in text or "model" in text
    assert "So the model is the same (errors/100 b − a" in text
    assert "not significant); the stack loses" in text and "calls per 100 more in b" in text
    compared = agent_eval_cli("compare", "label:clean", "label:vllm-cut", "--db", db, "--json")
    data = json.loads(compared.stdout)
    group = next(iter(data["groups"].values()))
    assert not group["errors"]["significant"] and group["stack_faults"]["significant"]


def test_run_stream_parity_flag_sets_every_target_and_the_fingerprint_says_so(tmp_path):
    db = str(tmp_path / "flag.db")
    with run_sim_in_thread("disciplined", suite=SUITE) as base_url:
        done = agent_eval_cli("run", "--base-url", base_url, "--model", "sim-disciplined",
                              "--suite", str(SUITE), "--stream-parity", "--plan-only",
                              "--limit", "1", "--db", db)
    assert done.returncode == 0, done.stdout + done.stderr
    from agent_eval.transcript import run_stacks

    with open_store(db) as store:
        [run] = store.list_runs()
        [target] = store.run_targets(run.id)
    assert run_stacks(run.fingerprint)["sim-disciplined"]["request"]["stream"] == "parity"
    assert target.settings["stream_parity"] is True
