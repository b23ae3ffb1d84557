"""End to end over real HTTP: one behaviour through the simulator's server-family stacks.

``agent-eval run`` in a subprocess plays the bundled suite against the simulator with
stack faults on (``sim/stack.py``): the same disciplined model served vLLM-style,
llama-cpp-python-style, SGLang-style and Ollama-style.  The model's errors stay its own
(none: it is disciplined), each stack's faults are stored apart, a llama-cpp-python cut
and a vLLM cut get the same verdict (truncation, not AE102, with the warning), and
``compare`` and ``gate`` read them."""

from __future__ import annotations

import json

import pytest
from test_run_e2e import SUITE, agent_eval_cli

from agent_eval.sim import Faults, run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

STACKS = {"vllm-cut": "vllm:cut-length", "llamacpp-cut": "llamacpp:cut-at-cap",
          "sglang": "sglang", "ollama": "ollama"}


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack-e2e")
    db = str(tmp / "runs.db")
    lines = ["targets:"]
    with run_sim_in_thread("disciplined", suite=SUITE,
                           faults=Faults(stack_rate=0.25)) as base_url:
        for name, stack in STACKS.items():
            stream = "true" if name == "ollama" else "false"
            lines.append(f"  - {{name: {name}, base_url: '{base_url}', "
                         f"model: 'sim-disciplined+{stack}', max_tokens: 4096, "
                         f"stream: {stream}, concurrency: 4, timeout_s: 30, retries: 1}}")
        (tmp / "targets.yaml").write_text("\n".join(lines) + "\n")
        done = agent_eval_cli("run", "--config", str(tmp / "targets.yaml"), "--suite",
                              str(SUITE), "--repeats", "1", "--label", "stacks", "--db", db,
                              "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return db, done


def test_the_model_errors_stay_the_models_and_each_stack_has_its_faults(played):
    db, done = played
    tables = json.loads(done.stdout)
    tables = tables.get("targets", tables)
    for name in STACKS:  # what a stack loses is never the model's AE101/AE102
        assert not {"AE101", "AE102"} & set(tables[name]["classes"]), name
        assert tables[name]["stack_faults"] > 0, name
        assert tables[name]["error_sessions"] > 0, name  # the faults that lost a call
    assert set(tables["vllm-cut"]["stack_classes"]) == {"AE501"}
    assert set(tables["llamacpp-cut"]["stack_classes"]) == {"AE501"}
    assert set(tables["sglang"]["stack_classes"]) <= {"AE501", "AE507"}
    assert set(tables["ollama"]["stack_classes"]) <= {"AE502", "AE503", "AE508"}


def test_a_llama_cpp_python_cut_and_a_vllm_cut_are_the_same_truncation(played):
    db, done = played
    for name in ("vllm-cut", "llamacpp-cut"):
        assert f"Warning: target {name!r}: " in done.stderr
    assert "counted apart as truncations (AE501)" in done.stderr
    with open_store(db) as store:
        run = store.resolve_run("label:stacks")
        calls = list(store.call_rows([run.id]))
        sessions = list(store.session_rows([run.id]))
    assert not any(c.primary == "AE102" for c in calls)
    for name in ("vllm-cut", "llamacpp-cut"):
        cut = [s for s in sessions if s.target == name and s.status == "error"]
        assert cut and all(s.error.startswith("reply cut by the token limit") for s in cut)
        assert all(s.stack_faults == (("AE501", True),) for s in cut)


def test_the_gate_fails_on_stack_faults_on_a_line_of_their_own(played):
    db, _ = played
    gate = agent_eval_cli("gate", "--db", db, "--run", "label:stacks",
                          "--max-error-rate", "0", "--max-stack-faults", "0")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "stack faults/100 <= 0" in gate.stdout and "errors/100 <= 0" in gate.stdout
