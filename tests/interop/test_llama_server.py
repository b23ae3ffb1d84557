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

import asyncio
import re

import pytest
from interop_play import SCENARIOS, play, stack_ended, stored, write_short_suite

from agent_eval.live.client import Target
from agent_eval.live.run import probe_identities, probe_targets
from agent_eval.live.stackprint import stack_fingerprint
from agent_eval.store import open_store
from agent_eval.transcript import run_stacks

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
        with open_store(str(one.db)) as store:  # the run keeps what served it
            [run] = store.list_runs()
            stack = run_stacks(run.fingerprint)[target]
        assert stack["server"] == "llama.cpp" and stack["build"], stack
        assert re.fullmatch(r"[0-9a-f]{16}", stack["chat_template_sha256"]), stack
        assert stack["template_markup"] == ["<tool_call>"], stack  # chatml-tools.jinja's
        assert stack["request"]["max_tokens"] == 32, stack


def fingerprint(url: str) -> dict:
    """The stack fingerprint ``run`` stores for SmolLM2 at ``url``."""
    target = Target(name="smollm2", base_url=url, model="smollm2", timeout_s=120)
    models = asyncio.run(probe_targets([target]))
    identity = asyncio.run(probe_identities([target]))
    return stack_fingerprint(target, identity["smollm2"], models["smollm2"])


def test_the_template_hash_changes_with_the_template(llama_native_servers,
                                                     llama_native_own_template):
    """The same llama-server and SmolLM2, served with chatml-tools.jinja and with the GGUF's
    own template: the stored template hash differs, nothing else of the server does."""
    tools = fingerprint(llama_native_servers["smollm2"])
    own = fingerprint(llama_native_own_template["smollm2"])
    assert tools["chat_template_sha256"] != own["chat_template_sha256"]
    assert (tools["server"], tools["build"]) == (own["server"], own["build"])
    assert tools["template_markup"] == ["<tool_call>"]
    assert own["template_markup"] == []  # SmolLM2's plain ChatML writes no call format
