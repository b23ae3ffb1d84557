"""One model through two stack settings: the real ``llama-server`` with and without its
jinja template engine, then ``compare``.

SmolLM2, the same GGUF and the same template file (scripts/chat-templates/
chatml-tools.jinja), the same targets settings, one server started with ``--jinja`` and
one with ``--no-jinja`` (``conftest.llama_native_no_jinja``).  Without jinja llama-server
answers every request that offers tools with a 500 ``tools param requires --jinja flag``:
the stack lost the turn before the model saw it, a stack fault (AE509), never a model
error, and the run stops the target after its first sessions with the likely fix.
What must hold:

- the two runs' fingerprints differ, and ``compare`` names how: the operator's
  ``stack.template`` notes name the jinja setting (llama-server's ``/props`` is the same
  either way: the same build, the same template text, hashed alike);
- ``compare`` splits the stack's figures from the model's: the stack faults per 100
  calls of each side on their own line, said before the model's table, and the model's
  errors/100 computed without them.  With these two small models llama-server yields no
  tool call even with jinja (docs/servers.md: SmolLM2 answers in text), so the jinja
  side's stack lost nothing because it was given no call, the no-jinja side's lost every
  turn, and neither side has a model error: ``compare`` says exactly that rather than
  an interval of the model's errors, which no call can give.  (The case with calls on
  both sides, model errors equal within their interval and the stack's loss apart, is
  played by the simulator's stack profiles: tests/test_stack_parity_e2e.py and
  tests/analysis/test_stack_fault_figures.py.)

Kept small for 2 CI cores: the four shape scenarios, 32 tokens a reply, temperature 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from interop_play import SHAPES, write_short_suite

from agent_eval.store import open_store
from agent_eval.transcript import run_stacks

pytestmark = pytest.mark.interop

SETTINGS = ("max_tokens: 32, concurrency: 1, timeout_s: 900, retries: 0, "
            "tool_choice: auto, sampling: {temperature: 0, seed: 7}")
JINJA = "chatml-tools.jinja under --jinja"
NO_JINJA = "chatml-tools.jinja under --no-jinja (legacy chatml)"


def run_against(folder: Path, suite: Path, db: Path, url: str, label: str,
                template_note: str) -> subprocess.CompletedProcess:
    config = folder / f"{label}.yaml"
    config.write_text(
        f"targets:\n  - {{name: smollm2, base_url: '{url}', model: smollm2, {SETTINGS}, "
        f"stack: {{server: llama-server, template: '{template_note}'}}}}\n")
    return subprocess.run(
        [sys.executable, "-m", "agent_eval", "run", "--config", str(config), "--suite",
         str(suite), "--db", str(db), "--label", label,
         *(f"--scenario={name}" for name in SHAPES)],
        cwd=folder, capture_output=True, text=True, timeout=3600,
        env=dict(os.environ, COLUMNS="200"))


def test_compare_splits_the_stack_from_the_model_with_and_without_jinja(
        llama_native_servers, llama_native_no_jinja, tmp_path_factory):
    folder = tmp_path_factory.mktemp("jinja")
    suite = write_short_suite(tmp_path_factory.mktemp("suite"))
    db = folder / "jinja.db"
    with_jinja = run_against(folder, suite, db, llama_native_servers["smollm2"], "jinja",
                             JINJA)
    without = run_against(folder, suite, db, llama_native_no_jinja["smollm2"], "no-jinja",
                          NO_JINJA)

    # without jinja: every session the stack's, each refused before the model saw it
    assert without.returncode == 3, (without.stdout, without.stderr)
    assert "produced no judged tool call" in without.stderr
    assert "tools param requires --jinja flag" in without.stderr
    with open_store(str(db)) as store:
        a, b = sorted(store.list_runs(), key=lambda r: r.id)
        sessions_a = list(store.session_rows([a.id]))
        sessions_b = list(store.session_rows([b.id]))
        calls_b = list(store.call_rows([b.id]))
        stacks_a, stacks_b = run_stacks(a.fingerprint), run_stacks(b.fingerprint)
    assert (a.label, b.label) == ("jinja", "no-jinja")
    assert sessions_b and calls_b == []
    assert all(s.status == "error" and s.stack_faults == (("AE509", True),)
               for s in sessions_b), [(s.status, s.stack_faults) for s in sessions_b]

    # the fingerprints: the same server, build and template text; the notes name jinja
    sa, sb = stacks_a["smollm2"], stacks_b["smollm2"]
    assert (sa["build"], sa.get("chat_template_sha256")) == \
        (sb["build"], sb.get("chat_template_sha256")), (sa, sb)
    assert (sa["notes"]["template"], sb["notes"]["template"]) == (JINJA, NO_JINJA)

    out = subprocess.run([sys.executable, "-m", "agent_eval", "compare", str(a.id),
                          str(b.id), "--db", str(db)], capture_output=True, text=True,
                         env=dict(os.environ, COLUMNS="400"), timeout=600)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"the serving stacks differ (b against a): template: {JINJA} -> {NO_JINJA}" in text
    n_b = len(sessions_b)
    stack_line = next(line for line in text.splitlines()
                      if line.startswith("stack faults/100 calls"))
    # with jinja the stack carried every reply (SmolLM2 answered in text: no call, no
    # fault); without it the stack lost every turn: said on its own line, before the
    # model's table, which has nothing of the model's to compare
    assert stack_line == (
        "stack faults/100 calls (the server's, AE5xx): a – (no call reached the stack), "
        f"b 100.00 ({n_b}/{n_b}). The model's figures below never count them. So the "
        f"stack of b lost every one of the {n_b} calls it was given and no call of the "
        "model's reached a's: the model made no error through either, and nothing of the "
        "model's can be compared; fix the stack of b."), text
    assert text.index(stack_line) < text.index("errors/100 calls")
    model_row = next(line for line in text.splitlines() if line.startswith("errors/100 calls"))
    assert model_row.split()[2:4] == ["–", "–"], model_row  # no model error on either side
    assert all(s.stack_faults == () and s.status != "error" for s in sessions_a), \
        [(s.scenario, s.status, s.stack_faults) for s in sessions_a]
    assert with_jinja.returncode == 3, (with_jinja.stdout, with_jinja.stderr)
    assert "produced no judged tool call" in with_jinja.stderr
