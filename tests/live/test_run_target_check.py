"""``agent-eval run`` checks the target before any session is played.

A model name the server does not serve is named with the served ones (from
``/v1/models``) and the closest of them, before a session is stored; a base URL pasted
with its endpoint (``.../v1/chat/completions``) gets ``.../v1`` back; ``--resume``
refuses a target that differs from the run's, instead of playing the stored one.
"""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from click.testing import CliRunner
from support.loopback import serve_in_thread

from agent_eval.cli import EXIT_USAGE, main
from agent_eval.live.run import endpoint_root, near_models
from agent_eval.store import open_store

SERVED = ["Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-35B-A3B"]
TOOL_CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "call_1", "type": "function",
    "function": {"name": "bash",
                 "arguments": json.dumps({"command": "uv run scripts/lights.py status"})}}]}


def vllm_like_app(seen: list[dict], served=SERVED, strict: bool = True) -> web.Application:
    """Lists ``served``; like vLLM, refuses any other model name with a 404 (``strict``),
    or like llama-server answers whatever the name (not ``strict``)."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        if strict and body["model"] not in served:
            return web.json_response({"object": "error", "type": "NotFoundError", "code": 404,
                                      "message": f"The model `{body['model']}` does not exist."},
                                     status=404)
        done = any(m["role"] == "tool" for m in body["messages"])
        message = {"role": "assistant", "content": "Done."} if done else TOOL_CALL
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": m, "object": "model"} for m in served]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


def run(*args: str):
    return CliRunner().invoke(main, ["run", "--scenario", "lights-evening-off", *args])


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def test_an_unserved_model_is_refused_with_the_served_names_before_any_session(tmp_path):
    seen: list[dict] = []
    db = str(tmp_path / "s.db")
    with serve_in_thread(vllm_like_app(seen)) as url:
        result = run("--base-url", url, "--model", "qwen3.5-27b", "--db", db)
    assert result.exit_code == EXIT_USAGE, result.output
    [line] = error_lines(result)
    assert "'qwen3.5-27b' is not served" in line
    assert "did you mean 'Qwen/Qwen3.5-27B'?" in line
    assert "served: Qwen/Qwen3.5-27B, Qwen/Qwen3.6-35B-A3B" in line
    assert "Traceback" not in result.output
    assert len(seen) <= 1  # one one-token probe of the name at most, no session
    with open_store(db) as store:
        assert store.list_runs() == []


def test_an_unlisted_name_a_server_answers_anyway_is_played(tmp_path):
    """llama-server lists its file name and answers any model name: not an error."""
    seen: list[dict] = []
    db = str(tmp_path / "s.db")
    with serve_in_thread(vllm_like_app(seen, served=["model.gguf"], strict=False)) as url:
        result = run("--base-url", url, "--model", "qwen", "--db", db)
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        [info] = store.list_runs()
        assert len(list(store.session_rows([info.id]))) == 1


@pytest.mark.parametrize("pasted", [
    "http://127.0.0.1:8000/v1/chat/completions",
    "http://127.0.0.1:8000/v1/chat/completions/",
    "http://127.0.0.1:8000/v1/models",
])
def test_a_pasted_endpoint_url_gets_its_v1_root_suggested(tmp_path, pasted):
    result = run("--base-url", pasted, "--model", "m", "--db", str(tmp_path / "s.db"))
    assert result.exit_code == EXIT_USAGE, result.output
    [line] = error_lines(result)
    assert line.endswith("try --base-url http://127.0.0.1:8000/v1"), line
    assert "/v1/chat/completions/v1" not in line


def test_endpoint_root_keeps_a_root_and_strips_an_endpoint():
    assert endpoint_root("http://h:8000/v1") is None
    assert endpoint_root("http://h:8000/v1/chat/completions") == "http://h:8000/v1"
    assert endpoint_root("https://api.example.com/openai/v1/completions") == \
        "https://api.example.com/openai/v1"


def test_near_models_prefers_the_same_name_in_another_case_or_namespace():
    assert near_models("qwen3.5-27b", SERVED) == ["Qwen/Qwen3.5-27B"]
    assert near_models("Qwen3.6-35B-A3B", SERVED) == ["Qwen/Qwen3.6-35B-A3B"]
    assert near_models("llama", SERVED) == []


@pytest.mark.parametrize("change", [
    pytest.param(("--model", "other"), id="model"),
    pytest.param(("--base-url", "http://127.0.0.1:9/v1"), id="base-url"),
])
def test_resume_refuses_a_changed_target_instead_of_ignoring_it(tmp_path, change):
    seen: list[dict] = []
    db = str(tmp_path / "s.db")
    with serve_in_thread(vllm_like_app(seen, served=["m"])) as url:
        first = run("--base-url", url, "--model", "m", "--db", db)
        assert first.exit_code == 0, first.output
        played = len(seen)
        with open_store(db) as store:
            run_id = store.list_runs()[0].id
        result = CliRunner().invoke(main, ["run", "--resume", str(run_id), *change, "--db", db])
    assert result.exit_code == EXIT_USAGE, result.output
    [line] = error_lines(result)
    assert f"run {run_id} plays its target 'm'" in line
    assert "start a new run" in line
    assert len(seen) == played


def test_resume_with_the_same_target_options_plays_on(tmp_path):
    seen: list[dict] = []
    db = str(tmp_path / "s.db")
    with serve_in_thread(vllm_like_app(seen, served=["m"])) as url:
        first = run("--base-url", url, "--model", "m", "--db", db)
        with open_store(db) as store:
            run_id = store.list_runs()[0].id
        result = CliRunner().invoke(main, ["run", "--resume", str(run_id), "--base-url", url,
                                           "--model", "m", "--db", db])
    assert first.exit_code == 0 and result.exit_code == 0, result.output
