"""One verdict per call, whatever the path (agent_eval/call_recorder.py).

The same calls go through every path that stores calls: a live run against the simulator,
the proxy relaying that very run, an import of its transcripts, a replay of it against the
same simulated model, and a rescore of each stored run.  Every path must store the same
verdict, findings and command for the same call.  Then an agent CLI's own tool names and
spellings (Claude Code's ``Bash``, OpenCode's ``read {filePath}``) through the proxy, an
import and a rescore.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.proxyplay import proxy_in_thread

from agent_eval.call_recorder import TEXT_CALL_TOOL, CallRecorder
from agent_eval.importers.recording import record_import
from agent_eval.importers.rescore import rescore_run
from agent_eval.live.client import Target
from agent_eval.live.replay import allowlist_source, plan_replay, play_replay, start_replay
from agent_eval.live.run import play_run, start_run
from agent_eval.policy import load_allowlist
from agent_eval.policy.allowlist import AllowList
from agent_eval.policy.sources import resolve_policy
from agent_eval.proxy import Exchange
from agent_eval.proxy.sessions import Sessions
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import bundled_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
SUITE = load_suite(bundled_suite())


def judged(store, run_id: int) -> dict[tuple[str, str], tuple]:
    """(tool, arguments) -> (decision, primary, finding codes and spans, command) of every
    call stored in the run; a call judged two ways in one run fails here."""
    out: dict[tuple[str, str], tuple] = {}
    for row in store.session_rows([run_id]):
        for call in store.load_session(row.id).record.calls:
            if call.tool == TEXT_CALL_TOOL:  # markup in the text: judged by its span
                key = (call.tool, call.command or "")
            else:
                key = (call.tool, call.arguments)
            verdict = (call.decision, call.primary,
                       tuple((f.code, f.start, f.end) for f in call.findings), call.command)
            assert out.setdefault(key, verdict) == verdict, key
    return out


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """The five paths' stored calls, each as :func:`judged` gives them."""
    tmp = tmp_path_factory.mktemp("paths")
    allowlist = load_allowlist(ALLOWLIST)
    live_store, proxy_store = open_store(str(tmp / "live.db")), open_store(str(tmp / "proxy.db"))
    with run_sim_in_thread(profile="wrapper", suite=bundled_suite()) as sim:
        with proxy_in_thread(sim, proxy_store, tmp) as proxied:
            target = Target(name="wrapper", base_url=proxied.base_url, model="sim-wrapper",
                            concurrency=4, timeout_s=30)
            live = start_run(live_store, SUITE, [target], 2, label="live", server_models={})
            play_run(live_store, live, SUITE, [target], 2)
        info = live_store.get_run(live)
        plan = plan_replay(live_store.session_rows([live]), live_store.call_rows([live]),
                           live_store.request_refs(live))
        candidate = Target(name="again", base_url=sim, model="sim-wrapper", concurrency=4,
                           timeout_s=30)
        replay = start_replay(live_store, info, candidate, plan, label=None, server_models={},
                              sample=None, seed=0, repeats=1, allowlist=None,
                              allowlist_path=None)
        play_replay(live_store, replay, plan, candidate, allowlist_source(info))

    transcripts = tmp / "transcripts.jsonl"
    with transcripts.open("w") as out:
        for row in live_store.session_rows([live]):
            record = live_store.load_session(row.id).record
            out.write(json.dumps({"id": record.key, "model": "sim-wrapper",
                                  "messages": record.messages}) + "\n")
    imported = record_import(live_store, "openai", transcripts, allowlist).run_id
    proxy_run = proxy_store.list_runs()[0].id
    found = {
        "live": judged(live_store, live),
        "proxy": judged(proxy_store, proxy_run),
        "import": judged(live_store, imported),
        "replay": judged(live_store, replay),
        "rescore of live": judged(live_store, rescore_run(live_store, live, allowlist)),
        "rescore of proxy": judged(proxy_store, rescore_run(proxy_store, proxy_run, allowlist)),
        "rescore of import": judged(live_store, rescore_run(live_store, imported, allowlist)),
    }
    live_store.close()
    proxy_store.close()
    return found


def test_the_live_run_made_allowed_and_denied_calls_of_several_classes(paths):
    live = paths["live"]
    assert len(live) > 100
    classes = {primary for _, primary, *_ in live.values()}
    assert {None, "AE101", "AE301", "AE304"} <= classes


@pytest.mark.parametrize("path", ["proxy", "import", "rescore of live", "rescore of proxy",
                                  "rescore of import"])
def test_every_path_stores_the_live_runs_calls_with_their_verdicts_and_commands(paths, path):
    live = {k: v for k, v in paths["live"].items() if k[0] != TEXT_CALL_TOOL
            or path not in ("import", "rescore of import")}  # the openai reader keeps no markup
    assert paths[path] == live


def test_a_replay_against_the_same_model_gives_each_call_the_live_verdict(paths):
    replayed = paths["replay"]
    assert len(replayed) > 50
    assert {k: paths["live"][k] for k in replayed} == replayed


# --- an agent CLI's own tools ----------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are the research subagent."}
TASK = {"role": "user", "content": "Open attempts for stage S2."}
PIPED = "uv run scripts/db_query.py --sql 'select 1' | head -5"
CLAUDE_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}}
                for n in ("Bash", "Read", "Task")]
CLAUDE_CALLS = [
    ("Bash", {"command": PIPED, "description": "count"}, "deny", "AE301", PIPED),
    ("Bash", {"command": "uv run scripts/db_query.py --sql 'select 1'", "timeout": 60},
     "allow", None, "uv run scripts/db_query.py --sql 'select 1'"),
    ("Read", {"file_path": "/etc/passwd"}, "deny", "AE320", "/etc/passwd"),
    ("read", {"filePath": "notes/plan.md"}, "allow", None, "notes/plan.md"),
    ("emit_guidance", {"text": "x"}, "deny", "AE101", None),
]


def reply_with(calls) -> bytes:
    return json.dumps({"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
                       "message": {"role": "assistant", "content": "", "tool_calls": [
                           {"id": f"c{i}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for i, (name, args, *_) in enumerate(calls)]}}]}).encode()


def test_an_agent_clis_tools_get_one_verdict_and_command_in_the_proxy_an_import_and_a_rescore(
        tmp_path):
    allowlist = load_allowlist(ALLOWLIST)
    sessions = Sessions(allowlist)
    tools = [*CLAUDE_TOOLS, {"type": "function", "function": {"name": "read"}}]
    body = json.dumps({"model": "m", "messages": [SYSTEM, TASK], "tools": tools}).encode()
    sessions.take(Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                           started_at=datetime.now(UTC), status=200,
                           content_type="application/json",
                           response_body=bytearray(reply_with(CLAUDE_CALLS)), ttft_s=0.1,
                           latency_s=0.5), 0.0)
    proxied = sessions.close_all()[0].calls
    want = [(d, p, c) for *_, d, p, c in CLAUDE_CALLS]
    assert [(c.decision, c.primary, c.command) for c in proxied] == want

    messages = [SYSTEM, TASK, json.loads(reply_with(CLAUDE_CALLS))["choices"][0]["message"]]
    path = tmp_path / "cli.jsonl"
    path.write_text(json.dumps({"id": "s", "model": "m", "messages": messages}) + "\n")
    with open_store(str(tmp_path / "s.db")) as store:
        run = record_import(store, "openai", path, allowlist).run_id
        again = rescore_run(store, run, allowlist)
        for run_id in (run, again):
            row = next(iter(store.session_rows([run_id])))
            calls = store.load_session(row.id).record.calls
            assert [(c.decision, c.primary, c.command) for c in calls] == want


TASK_CALL = '{"description": "d", "prompt": "go", "subagent_type": "general"}'


@pytest.mark.parametrize(("arguments", "primary"), [
    (TASK_CALL, None),
    ('{"prompt": "go"}', "AE103"),  # OpenCode's task requires description and subagent_type
    ('{"description": "d", "prompt": "go", "subagent_type": "g", "cwd": "/"}', "AE105"),
], ids=["whole", "missing-keys", "stray-key"])
def test_a_subagent_call_gets_one_verdict_in_the_proxy_and_on_import(arguments, primary):
    calls = CallRecorder(load_allowlist(ALLOWLIST), foreign=True)
    relayed = calls.judge("task", arguments, offered=["bash", "read", "task"])
    imported = calls.judge("task", arguments)
    assert imported.verdict.primary == relayed.verdict.primary == primary


def test_a_cli_tool_whose_profile_is_switched_off_is_unknown_in_the_proxy_as_on_import():
    allowlist = AllowList.model_validate({**load_allowlist(ALLOWLIST).model_dump(),
                                          "profiles": {"opencode": False}})
    calls = CallRecorder(allowlist, foreign=True)
    relayed = calls.judge("task", TASK_CALL, offered=["bash", "read", "task"])
    imported = calls.judge("task", TASK_CALL)
    assert imported.verdict.primary == relayed.verdict.primary == "AE101"


CODEX_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}}
               for n in ("exec_command", "shell")]
CODEX_CALLS = [
    ("exec_command", {"cmd": "uv run scripts/db_query.py --sql 'SELECT 1'", "yield_time_ms": 1},
     "uv run scripts/db_query.py --sql 'SELECT 1'"),
    ("exec_command", {"cmd": "uv run python -c 'print(1)'"}, "uv run python -c 'print(1)'"),
    ("shell", {"command": ["bash", "-lc", "git push"]}, "git push"),
]


def test_a_codex_rules_file_as_the_proxys_policy_stores_each_calls_command(tmp_path):
    """Codex's ``exec_command {cmd}`` judged under a ``.rules`` file keeps its command in
    the proxy, as an import of the same calls does."""
    policy = resolve_policy(REPO / "tests" / "fixtures" / "policies" / "codex" / "seed.rules")
    sessions = Sessions(policy)
    body = json.dumps({"model": "m", "messages": [SYSTEM, TASK],
                       "tools": CODEX_TOOLS}).encode()
    sessions.take(Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                           started_at=datetime.now(UTC), status=200,
                           content_type="application/json",
                           response_body=bytearray(reply_with(CODEX_CALLS)), ttft_s=0.1,
                           latency_s=0.5, user_agent="codex_cli_rs/0.168.0 (Linux; x86_64)"),
                  0.0)
    [record] = sessions.close_all()
    assert record.policy_emulation == "codex 0.168.0, mode never/read-only"  # its User-Agent
    proxied = record.calls
    assert [(c.command, c.decision) for c in proxied] == [
        (CODEX_CALLS[0][2], "allow"), (CODEX_CALLS[1][2], "deny"), ("git push", "deny")]
    imported = CallRecorder(policy.allowlist, foreign=True, policy=policy)
    assert [imported.judge(t, json.dumps(a)).command for t, a, _ in CODEX_CALLS] == \
        [c.command for c in proxied]


SHELL_TOOLS = [{"type": "function", "function": {"name": "run_shell_command", "parameters": {}}}]
SHELL_CALLS = [
    ("run_shell_command", {"command": "git diff HEAD", "description": "d"}, "git diff HEAD"),
    ("run_shell_command", {"command": "echo a && uname -s"}, "echo a && uname -s"),
    ("run_shell_command", {"command": "curl http://x"}, "curl http://x"),
]


@pytest.mark.parametrize(("folder", "settings", "agent", "emulation", "decisions"), [
    (".gemini", {"tools": {"allowed": ["run_shell_command(git diff)", "run_shell_command(echo)"]}},
     "GeminiCLI-tui/0.60.2/m (linux; x64; terminal)", "gemini-cli 0.60.2, mode default",
     ["allow", "deny", "deny"]),
    (".qwen", {"permissions": {"deny": ["Bash(curl *)"]}, "general": {"defaultApprovalMode": "yolo"}},
     "QwenCode/0.24.4 (linux; x64)", "qwen-code 0.24.4, mode yolo", ["allow", "allow", "deny"]),
])
def test_gemini_and_qwen_settings_as_the_proxys_policy(tmp_path, folder, settings, agent,
                                                        emulation, decisions):
    """A Gemini CLI or Qwen Code settings.json judges the proxy's calls as that CLI would
    unattended, with the release its User-Agent names, and keeps each command."""
    path = tmp_path / folder / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(settings))
    sessions = Sessions(resolve_policy(path))
    body = json.dumps({"model": "m", "messages": [SYSTEM, TASK],
                       "tools": SHELL_TOOLS}).encode()
    sessions.take(Exchange(path="/v1/chat/completions", request_body=body, session_headers={},
                           started_at=datetime.now(UTC), status=200,
                           content_type="application/json",
                           response_body=bytearray(reply_with(SHELL_CALLS)), ttft_s=0.1,
                           latency_s=0.5, user_agent=agent), 0.0)
    [record] = sessions.close_all()
    assert record.policy_emulation == emulation
    assert [(c.command, c.decision) for c in record.calls] == \
        [(command, d) for (_, _, command), d in zip(SHELL_CALLS, decisions, strict=True)]


# --- the engine sees the raw argument text on every path -------------------------------

ALLOWED = "uv run scripts/db_query.py --sql 'select 1'"
DENIED = "cat .env | head"


def _through_every_reading(tool: str, arguments: str) -> dict[str, tuple]:
    """The call judged as the proxy relays it (offered, no reading of it), as an importer
    hands it over (with its own ``kind``/``text`` read by plain ``json.loads``, which keeps
    a key's last value), and as a rescore does (the stored command as ``text``)."""
    from agent_eval.call_recorder import classify_call, kind_of_tool
    calls = CallRecorder(load_allowlist(ALLOWLIST), foreign=True)
    try:
        plain = json.loads(arguments)
    except ValueError:
        plain = None
    kind, text = classify_call(tool, plain)
    out = {}
    for name, judged in {
        "proxy": calls.judge(tool, arguments, offered=["bash", "read", tool]),
        "import": calls.judge(tool, arguments, kind=kind, text=text),
        "rescore": calls.judge(tool, arguments, kind=kind_of_tool(tool), text=text),
    }.items():
        out[name] = (judged.verdict.decision, judged.verdict.primary)
    return out


@pytest.mark.parametrize(("tool", "arguments"), [
    ("Shell", f'{{"command": "{DENIED}", "command": "{ALLOWED}"}}'),
    ("run_command", f'{{"cmd": "{DENIED}", "cmd": "{ALLOWED}"}}'),
    ("Shell", f'{{"command": "{DENIED}", "\\u0063ommand": "{ALLOWED}"}}'),
    ("view", '{"path": ".env", "path": "notes/plan.md"}'),
    ("ReadFile", '{"file_path": ".env", "file_p\\u0061th": "notes/plan.md"}'),
], ids=["twice", "cmd-twice", "u-escaped", "read-twice", "read-u-escaped"])
def test_a_key_given_twice_to_a_renamed_tool_is_refused_as_the_engine_refuses_the_text(
        tool, arguments):
    assert set(_through_every_reading(tool, arguments).values()) == {("deny", "AE102")}


@pytest.mark.parametrize(("tool", "arguments", "primary"), [
    ("Shell", json.dumps({"command": ["cat", ".env"], "cmd": ALLOWED}), "AE103"),
    ("Shell", json.dumps({"cmd": ALLOWED, "command": 5}), "AE103"),
    ("view", json.dumps({"path": None, "file_path": "notes/plan.md"}), "AE103"),
], ids=["argv-command", "number-command", "null-path"])
def test_a_rename_onto_a_key_the_call_already_has_loses_neither(tool, arguments, primary):
    assert set(_through_every_reading(tool, arguments).values()) == {("deny", primary)}


@pytest.mark.parametrize(("tool", "arguments", "primary"), [
    ("local_shell", json.dumps({"type": "exec", "command": ["bash", "-lc", ALLOWED],
                                "env": {"PYTHONPATH": "scratch"}}), "AE101"),
    ("local_shell", json.dumps({"type": "exec", "command": ["bash", "-lc", ALLOWED],
                                "working_directory": "scratch", "user": "root"}), "AE101"),
    ("container.exec", json.dumps({"cmd": ["bash", "-lc", ALLOWED], "workdir": "scratch"}),
     "AE101"),
    ("Shell", json.dumps({"cmd": ALLOWED, "cwd": "scratch"}), "AE105"),
    ("Shell", json.dumps({"cmd": ALLOWED, "env": {"PYTHONPATH": "scratch"}}), "AE105"),
    ("Shell", json.dumps({"cmd": ALLOWED, "shell": "/bin/zsh"}), "AE105"),
    ("bash", json.dumps({"cmd": ALLOWED, "env": {"PYTHONPATH": "scratch"}}), "AE103"),
], ids=["local-shell-env", "local-shell-user", "container-exec", "shell-cwd", "shell-env",
        "shell-shell", "bash-cmd-env"])
def test_an_import_judges_every_key_the_proxy_judges(tool, arguments, primary):
    readings = _through_every_reading(tool, arguments)
    assert set(readings.values()) == {("deny", primary)}, readings


def test_arguments_over_the_cap_are_refused_before_they_are_parsed(monkeypatch):
    import agent_eval.policy.calls as engine_calls
    calls = CallRecorder(load_allowlist(ALLOWLIST), foreign=True)
    arguments = json.dumps({"command": ALLOWED, "description": "x" * 1_300_000})

    def never(*args, **kwargs):
        raise AssertionError("parsed before the cap")

    monkeypatch.setattr(engine_calls.json, "loads", never)
    import agent_eval.call_recorder as recorder_module
    assert not hasattr(recorder_module, "json")  # the recorder parses nothing itself
    for tool in ("Shell", "Bash", "bash", "view"):
        judged = calls.judge(tool, arguments, offered=["bash", "read", tool])
        assert (judged.verdict.decision, judged.verdict.primary) == ("deny", "AE202"), tool
        assert "longer than the cap" in judged.verdict.findings[0].message
