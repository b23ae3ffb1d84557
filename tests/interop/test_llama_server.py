"""The CI scenarios against llama.cpp's native ``llama-server --jinja``.

The same two real models as the llama-cpp-python tests, served by the ``llama-server``
that ``scripts/ci/llama.sh`` builds from the llama.cpp tree of llama-cpp-python's source
distribution (``conftest.llama_native_servers``).  SmolLM2 plays ``tool_choice: auto``,
Gemma 3 (a base model) ``required`` (llama-server reads ``tool_choice`` as a string only: a named
choice is dropped with a warning and played as ``auto``).

What this build does with these two models (docs/servers.md): neither GGUF's chat
template renders tools (SmolLM2's is plain ChatML, Gemma 3's base GGUF has none and gets
llama-server's ChatML fallback), and with those llama-server drops ``tools`` and
``tool_choice`` without a word.  So both are served with ``scripts/chat-templates/
chatml-tools.jinja`` (Qwen 2.5's Hermes-style template): llama-server then lists the tools
in the prompt, detects the ``<tool_call>`` format ("chat format: peg-native") and builds a
tool-call grammar, but under ``required`` that grammar still lets the model write text
before ``<tool_call>``, and both small models spend their 32 tokens on text: no call.  So this plays what it can:
every request agent-eval shapes is taken (no ``error`` session), the sessions end as the
model's own outcome, and the run says that no call was judged instead of passing silently.
"""

from __future__ import annotations

import pytest
from interop_play import SCENARIOS, play, stack_ended, stored, write_short_suite

pytestmark = pytest.mark.interop


def test_ci_scenarios_against_real_llama_server_models(llama_native_servers, tmp_path_factory):
    suite = write_short_suite(tmp_path_factory.mktemp("suite"))
    played = play(tmp_path_factory.mktemp("interop"), suite, llama_native_servers,
                  {"smollm2": "auto", "gemma3": "required"},
                  {"smollm2": SCENARIOS, "gemma3": SCENARIOS})
    for target, one in played.items():
        sessions, calls = stored(one)
        roots = [s for s in sessions if s.parent_id is None]
        assert sorted(s.scenario for s in roots) == SCENARIOS, (one.output, one.stderr)
        cut = stack_ended(sessions)  # what the serving stack cut or lost: its, counted apart
        errors = [(s.scenario, s.error) for s in sessions if s.status == "error" and s not in cut]
        assert errors == [], errors  # llama-server took every request as shaped
        assert {s.status for s in sessions if s not in cut} <= {"completed", "stalled",
                                                               "abandoned"}
        assert all(c.decision in ("allow", "deny") for c in calls)  # any call is judged
        if not calls:  # the run says so, naming the target, rather than passing silently
            assert one.exit_code == 3, one.output
            assert f"target '{target}' produced no judged tool call" in one.stderr
        else:
            assert one.exit_code == 0, (one.output, one.stderr)
