"""The viewer's run page lists stack faults apart from the model's errors."""

from __future__ import annotations

from support.factories import add_run

from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord, StackFaultRecord
from agent_eval.view.overview import build_run_page


def test_the_run_page_has_stack_fault_rows_and_errors_stay_the_models(tmp_path):
    with open_store(str(tmp_path / "v.db")) as store:
        calls = [CallRecord(index=i, turn_index=i, tool="bash", arguments="{}",
                            decision="allow") for i in range(3)]
        run = add_run(store, [SessionRecord(
            key="a", target="sglang", scenario="s", calls=calls,
            stack_faults=[StackFaultRecord(0, "AE502", "finish reason 'stop' beside 1 call")])],
            label="n", suite="s", targets={"sglang": "m"}, base_url="http://x/v1")
        page = build_run_page(store, run)
    assert [tuple(c.text for c in row) for row in page.stack_rows] == [
        ("AE502 finish-reason-mismatch", "1"), ("per 100 calls", "33.33 [6.1–79.2]")]
    assert page.stack_rows[0][0].href == "/rules/AE502.html"
    assert [c.text for c in page.target_rows[0]][3] == "0"  # no model error
