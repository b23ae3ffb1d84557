"""Stack faults shown beside the model's figures, never in them: the run tables and
``compare`` (the gate's check is in tests/analysis/test_gate_stack_faults.py)."""

from __future__ import annotations

from agent_eval.analysis.comparison import compare_runs, render_comparison_text, stack_line
from agent_eval.cli.tables import render_class_table, stack_text, tables_json
from agent_eval.metrics import summarize
from agent_eval.transcript import CallRow, SessionRow


def summaries(target: str, sessions: list[tuple[int, int, tuple[tuple[str, bool], ...]]]):
    """One target's sessions as ``(calls, denied, stack faults)``."""
    rows, calls = [], []
    for n, (n_calls, denied, faults) in enumerate(sessions):
        rows.append(SessionRow(n, 1, target, f"s{n}", 0, "completed", None, None, (), 0, 0,
                               False, None, 1, 1, n_calls, None, None, stack_faults=faults))
        calls += [CallRow(n, 1, target, f"s{n}", i, 0, "bash",
                          "deny" if i < denied else "allow", "AE301" if i < denied else None,
                          None) for i in range(n_calls)]
    return summarize(rows, calls)


CLEAN = [(10, 1, ())] * 20
LOSSY = [(10, 1, (("AE501", True),)), (10, 1, (("AE502", False), ("AE506", False)))] * 10


def test_stack_faults_are_counted_beside_errors_never_in_them():
    (lossy,) = summaries("llama-server", LOSSY).values()
    assert (lossy.errors.k, lossy.errors.n) == (20, 200)  # the model's: unchanged
    assert (lossy.stack_faults.k, lossy.stack_faults.n) == (30, 210)  # + 10 lost calls
    assert lossy.stack_classes == {"AE501": 10, "AE502": 10, "AE506": 10}
    assert stack_text(lossy) == "30 (14.29)"
    data = tables_json({"llama-server": lossy})["llama-server"]
    assert (data["errors"], data["stack_faults"], data["stack_faults_per_100"]) == (20, 30, 14.2857)


def test_the_class_table_names_the_stack_faults_apart_from_the_rates():
    table = render_class_table(summaries("llama-server", LOSSY))
    assert "Stack faults (the server's, not the model's" in str(table.caption)
    assert "AE501 10, AE502 10, AE506 10" in str(table.caption)


def test_compare_of_one_model_through_two_stacks_says_the_stack_loses_more():
    a, b = summaries("qwen", CLEAN), summaries("qwen", LOSSY)
    cmp = compare_runs(a, b, {}, {}, label_a="vllm", label_b="llama-server")
    group = cmp.groups["qwen"]
    assert group.errors.diff100 == 0  # the model is the same
    line = stack_line(group)
    assert line.startswith("stack faults/100 calls (the server's, AE5xx): a 0.00 (0/200), "
                           "b 14.29 (30/210), b − a +14.29")
    assert "(significant); the stack loses more in b" in line
    text = render_comparison_text(cmp)
    assert text.index("stack faults/100") < text.index("errors/100 calls")


def test_compare_without_stack_faults_says_nothing_of_them():
    cmp = compare_runs(summaries("qwen", CLEAN), summaries("qwen", CLEAN), {}, {})
    assert stack_line(cmp.groups["qwen"]) is None
    assert "stack faults" not in render_comparison_text(cmp)


def test_the_run_table_has_a_stack_column_only_when_a_target_had_a_fault():
    from rich.console import Console

    from agent_eval.cli.tables import render_target_table

    def text(summaries) -> str:
        console = Console(width=200, record=True)
        console.print(render_target_table(summaries, width=200))
        return console.export_text()

    assert "stack faults/100" not in text(summaries("qwen", CLEAN))
    lossy = text(summaries("qwen", LOSSY))
    assert "stack faults/100" in lossy and "30 (14.29)" in lossy


def test_a_stack_that_lost_every_call_against_one_that_saw_none_says_so():
    """llama-server without jinja (every turn refused: AE509) against the same model with
    it (text replies, no call): no rate of either to compare, and the line says why."""
    a = summaries("smollm2", [(0, 0, ())] * 4)
    b = summaries("smollm2", [(0, 0, (("AE509", True),))] * 4)
    line = stack_line(compare_runs(a, b, {}, {}).groups["smollm2"])
    assert line == ("stack faults/100 calls (the server's, AE5xx): a – (no call reached the "
                    "stack), b 100.00 (4/4). The model's figures below never count them. "
                    "So the stack of b lost every one of the 4 calls it was given and no "
                    "call of the model's reached a's: the model made no error through "
                    "either, and nothing of the model's can be compared; fix the stack of b.")
