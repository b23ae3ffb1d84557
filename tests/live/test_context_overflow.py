"""A server's "context length exceeded" answer: read in each server's words,
a reply budget cut to what fits, and a conversation that outgrew the window ending its
session ``stalled`` with the server's words, never ``error``.

The replies are the servers' exact texts: llama-cpp-python 0.3.36
(``llama_cpp/server/errors.py``, the reply that ended SmolLM2's session ``error`` in the
interop run), vLLM before and after 0.10 (vllm#20409 and the 0.10 wording), llama.cpp's
``llama-server`` (``exceed_context_size_error``).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from support.loopback import serve_in_thread
from test_run_fail_fast import llama_like_app, suite_of

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.live.context import ContextOverflow, context_overflow
from agent_eval.live.orchestrator import CONTEXT_FULL, CONTEXT_FULL_WRITING
from agent_eval.store import open_store

LLAMA_CPP_PYTHON = ("This model's maximum context length is 2560 tokens. However, you "
                    "requested 2584 tokens (2560 in the messages, 24 in the completion). "
                    "Please reduce the length of the messages or completion.")
VLLM_OLD = ("This model's maximum context length is 6048 tokens. However, you requested 6616 "
            "tokens (568 in the messages, 6048 in the completion). Please reduce the length "
            "of the messages or completion.")
VLLM_MAX_TOKENS = ("'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's "
                   "maximum context length is 4096 tokens and your request has 2778 input "
                   "tokens (8000 > 4096 - 2778). None")
VLLM_PROMPT = ("This model's maximum context length is 1536 tokens. However, your request has "
               "4176 input tokens. Please reduce the length of the input messages.")
LLAMA_SERVER = "request (4476 tokens) exceeds the available context size (4096 tokens)"
# llama-cpp-python 0.3.36's 500 when SmolLM2 135M (a 49,152-token vocabulary) wrote a
# run-away tool call to the end of its 2,432-token window (the interop run, docs/servers.md)
LLAMA_CPP_PYTHON_FULL = "could not broadcast input array from shape (49152,) into shape (0,)"
# its 400 when chatml-function-calling wrote a call's arguments to the end of the window and
# asked for the next step with them and a newline: one token over (the CI interop run of
# the whole suite, SmolLM2 on research-tech-radar's first turn, 2026-11-24)
LLAMA_CPP_PYTHON_RAN_AWAY = ("This model's maximum context length is 2816 tokens. However, you "
                             "requested 2849 tokens (2817 in the messages, 32 in the "
                             "completion). Please reduce the length of the messages or "
                             "completion.")


@pytest.mark.parametrize(("message", "expected"), [
    (LLAMA_CPP_PYTHON, ContextOverflow(2560, 2560)),
    (VLLM_OLD, ContextOverflow(6048, 568)),
    (VLLM_MAX_TOKENS, ContextOverflow(4096, 2778)),
    (VLLM_PROMPT, ContextOverflow(1536, 4176)),
    (LLAMA_SERVER, ContextOverflow(4096, 4476)),
    ("Requested tokens (2601) exceed context window of 2560", ContextOverflow(2560, 2601)),
    ("the request exceeds the available context size, try increasing it", ContextOverflow()),
    (LLAMA_CPP_PYTHON_FULL, ContextOverflow(writing=True)),
    (LLAMA_CPP_PYTHON_RAN_AWAY, ContextOverflow(2816, 2817, writing=True)),
], ids=["llama-cpp-python", "vllm-old", "vllm-max-tokens", "vllm-prompt", "llama-server",
        "llama-cpp-python-raw", "llama-server-old", "llama-cpp-python-window-full",
        "llama-cpp-python-handler-ran-away"])
def test_each_servers_wording_is_read_with_its_numbers(message, expected):
    assert context_overflow(message) == expected


@pytest.mark.parametrize("message", [
    "Invalid assistant message: role='assistant' content=None",
    "The model `gemma3` does not exist",
    "max_tokens must be at least 1, got -186.",
    "could not broadcast input array from shape (49152,) into shape (3,)",
    "operands could not be broadcast together with shapes (2,) (3,)",
])
def test_other_refusals_are_not_overflows(message):
    assert context_overflow(message) is None


def llama_cpp_python_body(message: str) -> dict:
    return {"message": message, "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}


def play(url: str, tmp_path, *extra: str):
    suite = suite_of(tmp_path, ("lights-evening-off", "lights-dim-office"))
    return CliRunner().invoke(main, [
        "run", "--suite", str(suite), "--db", str(tmp_path / "a.db"), "--base-url", url,
        "--model", "m", "--concurrency", "1", *extra])


def stored(tmp_path):
    with open_store(str(tmp_path / "a.db")) as store:
        [run] = store.list_runs()
        return list(store.session_rows([run.id])), list(store.call_rows([run.id]))


def test_a_conversation_that_outgrows_the_window_ends_stalled_with_the_servers_words(tmp_path):
    """llama-cpp-python's exact 400 on the second turn: stored ``stalled``, not ``error``,
    the first call judged, no retry of the refusal, ``show`` says why it ended."""
    seen: list[dict] = []

    def refuse(body):
        if any(m["role"] == "tool" for m in body["messages"]):
            return 400, llama_cpp_python_body(LLAMA_CPP_PYTHON)
        return None

    with serve_in_thread(llama_like_app(refuse, seen)) as url:
        result = play(url, tmp_path, "--max-tokens", "24")
    assert result.exit_code == 0, result.output
    sessions, calls = stored(tmp_path)
    assert [(s.status, s.error) for s in sessions] == [
        ("stalled", CONTEXT_FULL + LLAMA_CPP_PYTHON)] * 2
    assert len(calls) == 2 and all(c.decision == "allow" for c in calls)
    assert len(seen) == 4  # two turns a session: the refusal was not retried
    assert "target 'm': 2 sessions ended stalled when the server's context window was full" in (
        result.stderr)
    shown = CliRunner().invoke(main, ["show", str(sessions[0].id), "--db", str(tmp_path / "a.db")])
    assert shown.exit_code == 0, shown.output
    assert "ended: context window full" in shown.output and "error:" not in shown.output


def test_llama_cpp_pythons_500_for_a_full_window_ends_the_session_stalled_unretried(tmp_path):
    """The 500 llama-cpp-python answers when the model's own run-away reply filled the
    window (its ``internal_server_error`` body, word for word): the session ends
    ``stalled`` with the server's words, not ``error``, and the 500 is sent once (a full
    window does not empty itself on a retry)."""
    seen: list[dict] = []

    def refuse(body):
        if any(m["role"] == "tool" for m in body["messages"]):
            return 500, {"message": LLAMA_CPP_PYTHON_FULL, "type": "internal_server_error",
                         "param": None, "code": None}
        return None

    with serve_in_thread(llama_like_app(refuse, seen)) as url:
        result = play(url, tmp_path)
    assert result.exit_code == 0, result.output
    sessions, calls = stored(tmp_path)
    assert [(s.status, s.error) for s in sessions] == [
        ("stalled", CONTEXT_FULL_WRITING + LLAMA_CPP_PYTHON_FULL)] * 2
    assert len(calls) == 2 and all(c.decision == "allow" for c in calls)
    assert len(seen) == 4  # two turns a session: the 500 was not retried
    assert "2 sessions ended stalled when the server's context window was full" in result.stderr


@pytest.mark.parametrize(("code", "message"), [
    (500, LLAMA_CPP_PYTHON_FULL), (400, LLAMA_CPP_PYTHON_RAN_AWAY)], ids=["500", "400"])
def test_a_first_reply_that_fills_the_window_is_the_models_run_away_not_the_setup(
        tmp_path, code, message):
    """On the first turn too: the prompt fitted (the server was writing), so the session
    ends ``stalled``, no call judged, and the target is not stopped as misconfigured.  Both
    of llama-cpp-python's answers: the 500 when the reply reached the window's last row, the
    400 one token over when its handler asked for the next step after a run-away call."""
    def refuse(body):
        if code == 400:
            return 400, llama_cpp_python_body(message)
        return 500, {"message": message, "type": "internal_server_error",
                     "param": None, "code": None}

    seen: list[dict] = []
    with serve_in_thread(llama_like_app(refuse, seen)) as url:
        result = play(url, tmp_path)
    sessions, calls = stored(tmp_path)
    assert [(s.status, s.error) for s in sessions] == [
        ("stalled", CONTEXT_FULL_WRITING + message)] * 2
    assert calls == [] and len(seen) == 2
    assert "stopped" not in result.output + result.stderr
    assert result.exit_code == EXIT_FAULT  # still: no judged call never exits 0


def test_a_reply_budget_past_the_window_is_cut_to_the_room_left(tmp_path):
    """vLLM counts max_tokens against the window: the request goes again once with the
    room the server names, and the stored request says what was sent."""
    seen: list[dict] = []

    said = ("This model's maximum context length is 6048 tokens. However, you requested 10096 "
            "tokens (4000 in the messages, 6096 in the completion). Please reduce the length "
            "of the messages or completion.")

    def refuse(body):
        if body.get("max_tokens", 0) > 6048 - 4000:
            return 400, {"message": said, "type": "BadRequestError", "param": None, "code": 400}
        return None

    with serve_in_thread(llama_like_app(refuse, seen)) as url:
        result = play(url, tmp_path, "--max-tokens", "6096")
    assert result.exit_code == 0, result.output
    sessions, _ = stored(tmp_path)
    assert {(s.status, s.error) for s in sessions} == {("abandoned", None)}  # played to its end
    assert [b["max_tokens"] for b in seen[:4]] == [6096, 2048, 6096, 2048]


def test_a_task_that_does_not_fit_at_all_stops_the_target_and_says_to_lengthen_the_context(tmp_path):
    """On the first turn nothing the model did can be the cause: a refused request, and
    the target stops with the fix."""
    def refuse(body):
        return 400, {"message": LLAMA_SERVER, "type": "exceed_context_size_error",
                     "n_prompt_tokens": 4476, "n_ctx": 4096}

    with serve_in_thread(llama_like_app(refuse, [])) as url:
        result = play(url, tmp_path)
    assert result.exit_code == EXIT_FAULT, result.output
    sessions, _ = stored(tmp_path)
    assert [s.status for s in sessions] == ["error", "error"]
    assert "longer context" in result.output + result.stderr
