"""A nightly whose stack faults rose says so before it says anything about the model.

A stored pair of runs of one target: the baseline night and a night whose serving stack
left the template's own call markup unparsed in 8 replies (AE511, each ending its
session) while the model's own calls erred as often as before.  ``gate --baseline`` and
``compare`` both lead with the stack's rise, its codes and how the two stacks differ;
the model's figures come after.  With the runs the other way round (the stack got
better) nothing leads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.store import open_store
from agent_eval.transcript import (
    STACK_FAULT,
    STACK_KEY,
    CallRecord,
    SessionRecord,
    StackFaultRecord,
)

SESSIONS = 12
CALLS = 4  # per session, one denied: the model errs 25 per 100 both nights


def night(store, label: str, *, faults: int, stack: dict) -> int:
    run = store.create_run(label=label, kind="live", suite="s", config={},
                           fingerprint={STACK_KEY: {"qwen": stack}})
    store.add_target(run, name="qwen", model="qwen3", base_url="http://x/v1", settings={})
    records = []
    for n in range(SESSIONS):
        calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}",
                            decision="deny" if i == 0 else "allow",
                            primary="AE301" if i == 0 else None) for i in range(CALLS)]
        records.append(SessionRecord(key=f"s{n}", target="qwen", scenario=f"sc{n}",
                                     calls=calls))
    for n in range(faults):  # the markup left in text: the parser's, the session ended
        records.append(SessionRecord(
            key=f"f{n}", target="qwen", scenario=f"sc{n}", repeat=1, status="error",
            error=f"{STACK_FAULT}AE511 template-markup-unparsed: <tool_call> left",
            stack_faults=[StackFaultRecord(0, "AE511", "<tool_call> left in content",
                                           "<tool_call>{}", ends=True)]))
    store.record_sessions(run, records)
    store.set_run_status(run, "finished")
    return run


@pytest.fixture
def pair(tmp_path):
    db = str(tmp_path / "nightly.db")
    with open_store(db) as store:
        a = night(store, "nightly", faults=0, stack={"server": "vLLM", "notes": {
            "parser": "hermes"}})
        b = night(store, "nightly", faults=8, stack={"server": "vLLM", "notes": {
            "parser": "qwen3_coder"}})
    return db, a, b


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_gate_leads_with_the_stacks_rise(pair):
    db, a, b = pair
    out = invoke("gate", "--db", db, "--run", str(b), "--baseline", str(a),
                 "--max-regression", "10", "--min-coverage", "0.5")
    lines = out.output.splitlines()
    assert lines[0].startswith(f"Run {b} (nightly) against baseline run {a}")
    rose = lines[1]
    assert rose.startswith("STACK FAULTS ROSE for qwen: 0.00 (0/48) in the baseline -> "
                           "14.29 (8/56) in this run per 100 calls"), rose
    assert "AE511 0 -> 8" in rose and "(significant)" in rose
    assert "the serving stacks differ: parser: hermes -> qwen3_coder" in rose
    # every check, the model's regression among them, comes after it
    assert all("STACK FAULTS" not in line for line in lines[2:])
    assert any("regression vs baseline" in line for line in lines[2:])
    # the model's errors did not move: its regression check is not failed by the stack
    assert "errors/100" not in rose
    data = json.loads(invoke("gate", "--db", db, "--run", str(b), "--baseline", str(a),
                             "--max-regression", "10", "--min-coverage", "0.5",
                             "--json").output)
    assert data["stack_rose"] == [rose]


def test_gate_markdown_and_junit_lead_with_it_too(pair, tmp_path):
    db, a, b = pair
    md, xml = tmp_path / "gate.md", tmp_path / "gate.xml"
    invoke("gate", "--db", db, "--run", str(b), "--baseline", str(a), "--max-regression",
           "10", "--min-coverage", "0.5", "--markdown", str(md), "--junit", str(xml))
    text = md.read_text()
    assert text.index("**STACK FAULTS ROSE for qwen") < text.index("| result |")
    assert "STACK FAULTS ROSE for qwen" in xml.read_text()


def test_compare_leads_with_the_stacks_rise_and_the_stack_change(pair):
    db, a, b = pair
    out = invoke("compare", str(a), str(b), "--db", db).output
    lines = out.splitlines()
    assert lines[0].startswith("b = ") and "against a = " in lines[0]
    rose = lines[1]
    assert rose.startswith("  STACK FAULTS ROSE for qwen: 0.00 (0/48) in a -> 14.29 (8/56) "
                           "in b per 100 calls, b − a +14.29"), rose
    assert "AE511 0 -> 8" in rose
    assert "the serving stacks differ: parser: hermes -> qwen3_coder" in rose
    assert lines[2].startswith("  qwen: errors/100 25.00 -> 25.00")  # the model after


def test_a_stack_that_got_better_leads_with_nothing(pair):
    db, a, b = pair
    out = invoke("compare", str(b), str(a), "--db", db).output
    assert "STACK FAULTS ROSE" not in out
    assert out.splitlines()[1].startswith("  qwen: errors/100")
    gate = invoke("gate", "--db", db, "--run", str(a), "--baseline", str(b),
                  "--max-regression", "10", "--min-coverage", "0.5").output
    assert "STACK FAULTS ROSE" not in gate
