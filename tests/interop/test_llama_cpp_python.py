"""The whole bundled suite against real models over HTTP.

llama-cpp-python's OpenAI server (``--chat_format chatml-function-calling``) with
Gemma 3 270M (a base model) under the named tool choice ``bash`` and SmolLM2-135M-Instruct
under ``tool_choice: auto``, both started by ``conftest.py``.  Once the second
request of every session carried ``content: null`` beside the tool calls, the server
answered 500 and every session ended ``error``.  Here Gemma 3 plays all 29 bundled
scenarios (its named choice writes a call every session, and keeps ``max_tokens``) and
SmolLM2 the four shape scenarios (``interop_play.SHAPES``: under ``auto`` its calls run
away until the window is full, ~30 CPU-s each, which made its whole suite the tail of CI's
test run; ``AGENT_EVAL_INTEROP_SCENARIOS=all`` plays all 29 on both), both at once, and
every session must end as the model's own outcome: never ``error``, the calls judged,
failure classes counted.

The suite, its bounds and the checks are shared with the llama-server tests
(``interop_play.py``).  A run-away call under ``auto`` that fills the context ends its
session ``stalled`` with the server's words, not ``error``.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from interop_play import ALL_SCENARIOS, REPO, SCENARIOS, check_played, play, write_short_suite

from agent_eval.cli import main
from agent_eval.store import open_store
from agent_eval.transcript import TRUNCATED

pytestmark = pytest.mark.interop



@pytest.fixture(scope="module")
def played(llama_servers, tmp_path_factory):
    """The runs the tests read: {target: interop_play.Played}."""
    suite = write_short_suite(tmp_path_factory.mktemp("suite"))
    return play(tmp_path_factory.mktemp("interop"), suite, llama_servers,
                {"smollm2": "auto", "gemma3": "bash"},
                {"gemma3": ALL_SCENARIOS, "smollm2": SCENARIOS})


def test_bundled_scenarios_against_real_llama_cpp_python_models(played):
    check_played(played, called="gemma3")
    assert played["gemma3"].exit_code == 0, played["gemma3"].stderr
    from agent_eval.transcript import run_stacks

    for target, one in played.items():  # the run keeps what served it
        with open_store(str(one.db)) as store:
            [run] = store.list_runs()
        stack = run_stacks(run.fingerprint)[target]
        # llama-cpp-python's server is uvicorn's, with no /props: no template to hash
        assert stack["server"] == "uvicorn" and stack["owned_by"], stack
        assert "chat_template_sha256" not in stack, stack
        assert stack["request"]["max_tokens"] == 32, stack


def test_replay_sends_a_stored_context_to_real_llama_cpp_python(played, llama_servers):
    """One stored context of the gemma3 target (``--sample 1``: each real request costs
    seconds on CI's cores; its named tool choice keeps ``max_tokens``, which
    chatml-function-calling ignores under ``auto``) sent again as it was: llama-cpp-python takes it, the reply is judged and paired with
    the original call (agent-eval replay)."""
    db = played["gemma3"].db
    result = CliRunner().invoke(main, [
        "replay", "1", "--base-url", llama_servers["gemma3"], "--model", "gemma3",
        "--target", "gemma3", "--sample", "1", "--timeout", "900", "--db", str(db)])
    assert result.exit_code == 0, result.output + result.stderr
    from agent_eval.analysis.paired_replay import pair_replay

    with open_store(str(db)) as store:
        run = store.resolve_run("latest")
        pr = pair_replay(1, run.id, store.session_rows([1]), store.call_rows([1]),
                         store.session_rows([run.id]), store.call_rows([run.id]))
    assert (run.kind, run.parent_run_id) == ("replay", 1)
    assert (len(pr.pairs), pr.errors, pr.unmatched) == (1, 0, 0)  # the server took it
    assert "1 replies paired with the original turn" in result.output


def test_a_plain_openai_sdk_loop_through_the_proxy_in_front_of_real_llama_cpp_python(
        llama_servers, tmp_path):
    """Against a real server: a two-turn agent loop written with the openai SDK
    gets the same answers through ``agent-eval proxy`` as directly (temperature 0), and
    the proxy stores it as one judged session whose turns keep the requests sent."""
    import json
    import os
    import signal
    import subprocess
    import sys

    import openai

    db = tmp_path / "proxy.db"
    upstream = llama_servers["gemma3"]
    proxy = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "proxy", "--upstream", upstream, "--allowlist",
         str(REPO / "allowlists" / "ralf.yaml"), "--port", "0", "--db", str(db),
         "--journal", str(tmp_path / "journal"), "--label", "llama-proxy"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, COLUMNS="160"))
    base = proxy.stdout.readline().strip()
    assert base.startswith("http://"), proxy.stderr.read()
    tools = [{"type": "function", "function": {
        "name": "bash", "description": "Run an allowed script.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}}]

    def agent_loop(base_url: str) -> list[tuple[str, str]]:
        client = openai.OpenAI(base_url=base_url, api_key="sk-never-stored", timeout=900)
        messages = [{"role": "system", "content": "You run RALF scripts with the bash tool."},
                    {"role": "user", "content": "List the open attempts of stage S2."}]
        calls = []
        for _ in range(2):
            reply = client.chat.completions.create(
                model="gemma3", messages=messages, tools=tools, max_tokens=32,
                temperature=0, seed=7,
                tool_choice={"type": "function", "function": {"name": "bash"}})
            message = reply.choices[0].message
            call = message.tool_calls[0]
            calls.append((call.function.name, call.function.arguments))
            messages.append({"role": "assistant", "content": message.content or "",
                             "tool_calls": [{"id": call.id, "type": "function", "function": {
                                 "name": call.function.name,
                                 "arguments": call.function.arguments}}]})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "0 rows"})
        return calls

    try:
        direct = agent_loop(upstream)
        proxied = agent_loop(base)
    finally:
        proxy.send_signal(signal.SIGINT)
        _, err = proxy.communicate(timeout=120)
    assert proxy.returncode == 0, err
    assert proxied == direct  # the proxy changed nothing the client reads
    assert "0 turns not recorded" in err
    with open_store(str(db)) as store:
        run = store.resolve_run("label:llama-proxy")
        [row] = store.session_rows([run.id])
        session = store.load_session(row.id).record
    assert (run.kind, len(session.turns), len(session.calls)) == ("proxy", 2, 2)
    assert [(c.tool, c.arguments) for c in session.calls] == direct
    assert all(c.decision in ("allow", "deny") for c in session.calls)
    assert session.turns[1].request["messages"][2]["tool_calls"][0]["function"]["arguments"] \
        == direct[0][1]
    assert "sk-never-stored" not in db.read_bytes().decode("utf-8", "replace")
    assert json.dumps(session.turns[0].request["tools"]) == json.dumps(tools)


def test_agent_eval_run_through_the_proxy_in_front_of_real_llama_cpp_python(
        llama_servers, tmp_path):
    """Against a real server with the project's own runner as the client: one
    bundled scenario played by ``agent-eval run`` through ``agent-eval proxy`` in front of
    real Gemma 3; the proxy's stored calls and verdicts are the run's own, call for call."""
    import os
    import signal
    import subprocess
    import sys

    db = tmp_path / "proxied.db"
    (tmp_path / "suite").mkdir()
    short_suite = write_short_suite(tmp_path / "suite")
    proxy = subprocess.Popen(
        [sys.executable, "-m", "agent_eval", "proxy", "--upstream", llama_servers["gemma3"],
         "--allowlist", str(REPO / "allowlists" / "ralf.yaml"), "--port", "0", "--db",
         str(db), "--journal", str(tmp_path / "journal"), "--label", "llama-proxy"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, COLUMNS="160"))
    base = proxy.stdout.readline().strip()
    assert base.startswith("http://"), proxy.stderr.read()
    config = tmp_path / "targets.yaml"
    config.write_text(
        "targets:\n"
        f"  - {{name: gemma3, base_url: '{base}', model: gemma3, tool_choice: bash, "
        "max_tokens: 32, concurrency: 1, timeout_s: 900, retries: 0, "
        "sampling: {temperature: 0, seed: 7}}\n")
    try:
        result = CliRunner().invoke(main, ["run", "--config", str(config), "--suite",
                                           str(short_suite), "--db", str(db), "--label",
                                           "through-proxy", "--scenario=lights-dim-office"])
    finally:
        proxy.send_signal(signal.SIGINT)
        _, err = proxy.communicate(timeout=120)
    assert proxy.returncode == 0, err
    assert "0 turns not recorded" in err

    def calls(store, run_id: int) -> list[tuple]:
        return [(c.tool, c.arguments, c.decision, c.primary)
                for s in store.iter_sessions([run_id]) for c in s.record.calls]

    with open_store(str(db)) as store:
        live = store.resolve_run("label:through-proxy")
        recorded = store.resolve_run("label:llama-proxy")
        [row] = store.session_rows([live.id])
        played_calls, proxied_calls = calls(store, live.id), calls(store, recorded.id)
        assert recorded.kind == "proxy"
        [proxied] = store.session_rows([recorded.id])
        if row.status == "error":
            # Gemma 3 under the named choice can run its one call past max_tokens: the run
            # says so (a truncation, AE501, the stack's, not judged as the model's), and
            # the proxy, reading the same relayed reply, gives it the same verdict
            assert row.error.startswith(TRUNCATED) and ("AE501", True) in row.stack_faults
            assert result.exit_code == 3 and "produced no judged tool call" in result.output
            assert played_calls == [] and proxied_calls == []
            assert (proxied.status, proxied.stack_faults) == ("error", row.stack_faults)
            assert proxied.error.startswith(TRUNCATED)
        else:
            assert result.exit_code == 0, result.output
            assert played_calls and proxied_calls == played_calls
