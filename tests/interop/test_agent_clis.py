"""Real agent CLIs from npm (OpenCode, Qwen Code, Codex, Claude Code, Gemini CLI), each run
confined by ``clis.sandbox`` and pointed at the current ``agent-eval proxy``.

These CLIs EXECUTE what the model emits, so every one runs as the unprivileged
``agent-eval-cli`` user in its own namespaces, reaching one loopback port; the first tests
prove that confinement.  Then:

- all five CLIs play a bundled scenario through the proxy in front of
  ``agent-eval sim-server``, which speaks each CLI's protocol (Chat Completions, OpenAI
  Responses, Anthropic Messages, Gemini) and finds the task inside the CLI's wrapped first
  messages: the CLI exits, every body is relayed byte for byte, and every shell command the
  CLI executed (its own JSON event stream) is stored with that command and the verdict
  ``agent-eval check`` gives it;
- all five CLIs play a short scripted session (a shell call, a read, a subagent) through the
  proxy in front of ``clis.upstream``, which speaks each CLI's own protocol: the calls are
  executed, the subagent runs, the session files appear where docs/clients.md says, the
  relay is byte-identical, and the proxy stores the main session and the subagent's,
  linked to the call that spawned it, as the CLI had them, and the CLI's side requests
  (OpenCode's title request) tagged ``side-request`` beside them.

The CLIs come from ``scripts/ci/agent-clis.sh`` (installed here when missing).  Without root,
``unshare`` or the npm registry these tests skip, saying why; with ``CI=true`` they fail.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from clis.capture import Capture, capture
from clis.catalog import CLIS, INSTALL, REPO
from clis.sandbox import CLI_USER, Sandbox, unavailable
from clis.upstream import CHILD_COMMAND, SHELL_COMMAND, SUBAGENT_MARK, route_of

from agent_eval.policy import check_call, load_allowlist
from agent_eval.scenario import load_suite
from agent_eval.scenario.bundled import BUNDLED_SUITE_NAME, data_dir
from agent_eval.store import open_store

CLI_TIMEOUT_S = 400.0
"""A hang guard for each CLI run, not a speed check: a run of the scripted session takes
4-16 s under four busy processes on 2 cores; a CLI still running after this long is stuck
(exit 124, and the test says what it did)."""
SCENARIO = "db-open-attempts"  # one reference call: a `uv run scripts/db_query.py ...`
SESSION_FILES = {  # where each CLI keeps its sessions, under its HOME (docs/clients.md)
    "opencode": ".local/share/opencode/opencode.db",
    "qwen-code": ".qwen/projects/-home-agent-project/chats/*.jsonl",
    "codex": ".codex/sessions/*/*/*/rollout-*.jsonl",
    "claude-code": ".claude/projects/-home-agent-project/*.jsonl",
    "gemini-cli": ".gemini/tmp/project/chats/session-*.jsonl",
}
# ralf plus each CLI's shell, read and subagent tools by their own names (tests/fixtures/clis)
CLI_ALLOWLIST = REPO / "tests" / "fixtures" / "clis" / "allowlist.yaml"
SHELL_TOOL = {"opencode": "bash", "qwen-code": "run_shell_command", "codex": "exec_command",
              "claude-code": "Bash", "gemini-cli": "run_shell_command"}
SUBAGENT_FILES = {
    "qwen-code": ".qwen/projects/-home-agent-project/subagents/*/agent-*.jsonl",
    "codex": ".codex/sessions/*/*/*/rollout-*.jsonl",  # a second rollout: the child thread
    "claude-code": ".claude/projects/-home-agent-project/*/subagents/agent-*.jsonl",
    "gemini-cli": ".gemini/tmp/project/chats/*/*.jsonl",
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _skip(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def sandbox_ok() -> None:
    reason = unavailable()
    if reason:
        _skip(reason)


_installed: dict[str, str | None] = {}


def _ensure_installed(name: str) -> None:
    """Install the pinned CLI (and node) once when missing; skip when npm is unreachable."""
    if name not in _installed:
        if CLIS[name].pin.installed():
            _installed[name] = None
        else:
            done = subprocess.run(["bash", str(INSTALL), name], capture_output=True, text=True,
                                  timeout=900)
            _installed[name] = None if done.returncode == 0 else (
                f"{name} is not installed and scripts/ci/agent-clis.sh {name} failed "
                f"(is the npm registry reachable?): {done.stderr.strip()[-400:]}")
    if _installed[name]:
        _skip(_installed[name])


# --- the sandbox -------------------------------------------------------------------------

PROBE = r"""
import json, os, socket, subprocess
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
       "home": os.environ["HOME"], "cwd": os.getcwd(), "env": sorted(os.environ)}
def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.sendall(b"ping")
            return "reached:" + s.recv(16).decode()
    except OSError as exc:
        return type(exc).__name__ + ":" + str(exc.errno)
out["allowed"] = connect("127.0.0.1", PORT)
out["other_port"] = connect("127.0.0.1", OTHER)
out["other_port_v6"] = connect("::1", OTHER)
out["postgres_tcp"] = connect("127.0.0.1", 5432)
out["internet"] = connect("192.0.2.1", 443)  # TEST-NET-1: never routed anywhere
try:
    socket.getaddrinfo("registry.npmjs.org", 443)
    out["dns"] = "resolved"
except OSError:
    out["dns"] = "failed"
out["unix_sockets"] = [p for p in ("/run/postgresql/.s.PGSQL.5432",
                                   "/var/run/postgresql/.s.PGSQL.5432",
                                   "/run/mysqld/mysqld.sock") if os.path.exists(p)]
out["work_listing"] = os.listdir("/work") if os.path.isdir("/work") else None
out["root_readable"] = os.access("/root", os.R_OK)
out["no_new_privs"] = open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0]
out["write_outside"] = []
for path in ("/etc/agent-eval-probe", "/usr/agent-eval-probe", "/opt/agent-clis/probe"):
    try:
        open(path, "w").close()
        out["write_outside"].append(path)
    except OSError:
        pass
out["sudo"] = subprocess.run(["sh", "-c", "command -v sudo >/dev/null && sudo -n true"],
                             capture_output=True).returncode
subprocess.Popen(["sleep", "600"], start_new_session=True)  # must not outlive the run
print(json.dumps(out))
"""


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(16)
                conn.sendall(b"pong")

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def _left_behind(marker: str) -> list[int]:
    """The sandbox user's processes that carry ``marker`` in their environment: those one
    box started, not another test's running beside it in the other xdist worker (the same
    user plays the conformance recordings and the CLIs meanwhile)."""
    found = subprocess.run(["pgrep", "-u", CLI_USER], capture_output=True, text=True)
    pids = []
    for pid in found.stdout.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:  # gone since pgrep listed it
            continue
        if marker.encode() in environ.split(b"\0"):
            pids.append(int(pid))
    return pids


def test_a_sandboxed_program_reaches_its_one_port_and_nothing_else(sandbox_ok) -> None:
    allowed, allowed_port = _echo_server()
    other, other_port = _echo_server()  # a host service on another loopback port
    try:
        with Sandbox(allowed_port) as box:
            probe = PROBE.replace("PORT", str(box.port)).replace("OTHER", str(other_port))
            (box.home / "project" / "probe.py").write_text(probe)
            marker = f"AGENT_EVAL_BOX={os.getpid()}-{box.port}-probe"
            outcome = box.run(["python3", "probe.py"],
                              {"SECRET_FROM_HOST": "no", marker.split("=")[0]: marker.split("=")[1]},
                              timeout=60)
            assert outcome.returncode == 0, outcome.stderr
            seen = json.loads(outcome.stdout)
            uid = box.uid
    finally:
        allowed.close()
        other.close()
    assert seen["uid"] == uid != 0 and seen["gid"] != 0 and seen["groups"] == []
    assert (seen["home"], seen["cwd"]) == ("/home/agent", "/home/agent/project")
    assert seen["allowed"] == "reached:pong"
    assert seen["other_port"].startswith("ConnectionRefusedError")
    assert seen["other_port_v6"].startswith("ConnectionRefusedError")
    assert seen["postgres_tcp"].startswith("ConnectionRefusedError")
    assert seen["internet"] == "OSError:101"  # ENETUNREACH: no route out of the namespace
    assert seen["dns"] == "failed"
    assert seen["unix_sockets"] == [] and seen["work_listing"] == []
    assert seen["root_readable"] is False and seen["no_new_privs"] == "1"
    assert seen["write_outside"] == [] and seen["sudo"] != 0
    assert "SECRET_FROM_HOST" in seen["env"] and "CI" not in seen["env"]  # only what is given
    assert _left_behind(marker) == []  # the pid namespace took what it started with it


def test_a_second_port_asked_for_is_reached_and_still_nothing_else(sandbox_ok) -> None:
    """The telemetry collector beside the model: ``extra_ports`` opens exactly that one."""
    model, model_port = _echo_server()
    collector, collector_port = _echo_server()
    other, other_port = _echo_server()
    try:
        with Sandbox(model_port, extra_ports={4318: collector_port}) as box:
            probe = PROBE.replace("PORT", "4318").replace("OTHER", str(other_port))
            (box.home / "project" / "probe.py").write_text(probe)
            outcome = box.run(["python3", "probe.py"], {}, timeout=60)
            assert outcome.returncode == 0, outcome.stderr
            seen = json.loads(outcome.stdout)
            relayed = len(box.extra_relays[4318].connections)
    finally:
        for server in (model, collector, other):
            server.close()
    assert seen["allowed"] == "reached:pong" and relayed == 1
    assert seen["other_port"].startswith("ConnectionRefusedError")
    assert seen["internet"] == "OSError:101" and seen["dns"] == "failed"


def test_a_sandboxed_program_is_killed_at_its_deadline(sandbox_ok) -> None:
    marker = f"AGENT_EVAL_BOX={os.getpid()}-deadline"
    with Sandbox(9) as box:
        outcome = box.run(["sh", "-c", "sleep 300 & sleep 300"],
                          {"AGENT_EVAL_BOX": marker.split("=")[1]}, timeout=2)
    assert outcome.timed_out
    assert _left_behind(marker) == []  # both sleeps went with the pid namespace


# --- OpenCode and Qwen Code, through the proxy, in front of the simulator ----------------

def _relayed_byte_for_byte(run: Capture) -> None:
    pairs = run.relayed()
    assert pairs, "the CLI sent nothing"
    for mine, twin in pairs:
        assert twin is not None, f"{mine.request.target}: no identical request reached the sim"
        assert mine.response is not None and twin.response is not None
        assert mine.response.status == twin.response.status == 200
        if mine.response.complete and twin.response.complete:
            assert mine.response.body == twin.response.body
        else:  # a CLI (Codex) may hang up once it has the event it waits for: what it got
            # is then every byte sent, up to whole events, and nothing else
            shorter, longer = sorted((mine.response.body, twin.response.body), key=len)
            assert longer.startswith(shorter) and mine.response.body == shorter
            assert shorter.endswith((b"\n\n", b"\r\n\r\n")), shorter[-200:]
    assert len(run.upstream_exchanges()) == len(pairs)
    # the proxy's own questions: its start-up questions of the stack, GETs without the
    # CLI's credentials, asked before the first request it relayed
    asked = run.proxy_questions()
    assert all(x.request.method == "GET" and x.request.header("authorization") is None
               and x.request.header("x-api-key") is None for x in asked), asked
    first = min(twin.started for _, twin in pairs if twin is not None)
    assert all(x.started < first for x in asked), asked


def _event_strings(stdout: str) -> set[str]:
    """Every string value in the CLI's own JSON event stream (its commands among them)."""
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for line in stdout.splitlines():
        if line.startswith("{"):
            walk(json.loads(line))
    return found


def _ran(command: str, executed: set[str]) -> bool:
    """The CLI's event stream names ``command`` as run: as is, or (Codex) as the script of
    ``/usr/bin/bash -lc SCRIPT``."""
    if command in executed:
        return True
    for text in executed:
        if "-lc" in text:
            try:
                words = shlex.split(text)
            except ValueError:
                continue
            if len(words) == 3 and words[1] == "-lc" and words[2] == command:
                return True
    return False


def _stored(work: Path, label: str) -> list:
    """The stored session records of the proxy's run."""
    with open_store(f"sqlite:///{work / 'proxy.db'}") as store:
        run_id = store.resolve_run(f"label:{label}").id
        return [s.record for s in store.iter_sessions([run_id])]


def _stored_calls(work: Path, label: str) -> list[tuple[str, str | None, str]]:
    return [(c.tool, c.command, c.decision) for r in _stored(work, label) for c in r.calls]


@pytest.mark.parametrize("name", sorted(CLIS))
def test_cli_plays_a_bundled_scenario_through_the_proxy_to_the_simulator(
        sandbox_ok, name: str, tmp_path: Path) -> None:
    _ensure_installed(name)
    suite = load_suite(data_dir() / "scenarios" / BUNDLED_SUITE_NAME)
    scenario = suite.scenarios[SCENARIO].spec
    first_command = scenario.reference[0].bash
    with capture(name, upstream="sim", prompt=scenario.task.strip(), work=tmp_path,
                 timeout=CLI_TIMEOUT_S, allowlist=CLI_ALLOWLIST) as run:
        assert run.outcome.returncode == 0, run.outcome.stderr[-2000:]
        _relayed_byte_for_byte(run)
        executed = _event_strings(run.outcome.stdout)
        proxy_said = run.proxy_said
    # the simulator found the task inside the CLI's wrapped messages: the CLI ran the
    # scenario's reference command (it fails in the sandbox: no uv) ...
    assert _ran(first_command, executed)
    # ... and the proxy stored it, judged, under the CLI's own shell tool, with the verdict
    # `agent-eval check` gives the same command
    allowlist = load_allowlist(CLI_ALLOWLIST)
    records = _stored(tmp_path, f"cli-{name}")
    shell = [(c.command, c.decision, c.primary) for c in
             (c for r in records for c in r.calls) if c.tool == SHELL_TOOL[name]]
    assert (first_command, "allow", None) in shell, (
        [(r.key, r.tags, [(c.tool, c.command, c.decision) for c in r.calls]) for r in records],
        proxy_said)
    for command, decision, primary in shell:
        verdict = check_call("bash", json.dumps({"command": command}), allowlist)
        assert (decision, primary) == (verdict.decision, verdict.primary)
        assert _ran(command, executed)  # nothing stored that the CLI did not run
    protocol = CLIS[name].protocol
    assert f"{protocol} " in proxy_said and f"{protocol} 0 recorded" not in proxy_said
    # one conversation, as the CLI had it (the scenario spawns no subagent); the CLI's
    # side requests (OpenCode's title, Qwen Code's memory extraction) tagged beside it
    conversations = [r for r in records if "side-request" not in r.tags]
    assert len(conversations) == 1, [(r.key, r.tags) for r in records]
    assert conversations[0].parent_key is None
    assert first_command in [c.command for c in conversations[0].calls]
    for side in (r for r in records if "side-request" in r.tags):
        assert side.parent_key is None and len(side.turns) == 1
        assert not [c for c in side.calls if c.decision == "allow"]  # it ran nothing
    if name == "opencode":
        assert sum("side:title" in r.tags for r in records) == 1


QWEN_SHELL_REPORT = (f"Command: {SHELL_COMMAND}", "Exit Code: 0")
"""Qwen Code 0.24.4 settles a shell command on the child's ``exit`` event without waiting
for its stdout pipe to drain (``childProcessFallback`` in its shell execution service,
chunks/chunk-QXQMBRGL.js: ``exitHandler`` calls ``handleExit`` at once when output is not
streamed; Node's ``exit`` can come before the last ``data``).  On a busy machine the
listing then comes back as ``Output: (empty)``: its own report of the finished command,
with the exit code the process gave, is what proves the command ran."""


def _shell_answered(name: str, request: str) -> bool:
    """``request`` carries the result of the scripted shell call: the listing (it names
    notes.txt) or, for Qwen Code, the CLI's own report that the command exited 0."""
    if "notes.txt" in request and "drwx" in request:
        return True
    return name == "qwen-code" and all(mark in request for mark in QWEN_SHELL_REPORT)


def test_a_qwen_code_shell_result_whose_output_it_lost_still_proves_the_command_ran() -> None:
    """The exact tool result Qwen Code 0.24.4 sent back for `ls -la` on a loaded machine
    (CI, and four busy processes here): no listing, the command's exit code."""
    lost = ("Command: ls -la\nDirectory: (root)\nOutput: (empty)\nError: (none)\n"
            "Exit Code: 0\nSignal: (none)\nProcess Group PGID: (none)")
    request = json.dumps({"messages": [
        {"role": "user", "content": "Run the shell command `ls -la`, then ..."},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": lost}]}]})
    assert _shell_answered("qwen-code", request)
    assert not _shell_answered("gemini-cli", request)  # only Qwen Code's report counts
    assert not _shell_answered("qwen-code", request.replace("Exit Code: 0", "Exit Code: 127"))
    asked = json.dumps({"messages": [{"role": "user", "content": "Run `ls -la`"}]})
    assert not _shell_answered("qwen-code", asked)  # the task alone is no result
    listing = request.replace("Output: (empty)", "Output: total 8\\ndrwxr-xr-x 2 agent "
                              "agent 4096 .\\n-rw-r--r-- 1 agent agent 67 notes.txt")
    assert _shell_answered("gemini-cli", listing) and _shell_answered("qwen-code", listing)


def _story(run: Capture) -> str:
    """What happened, for a failure message: each request the scripted upstream answered
    (its tools, the tool results it carried, the step it got), the tool results the CLI
    sent back, and the end of the CLI's own output."""
    lines = ["", "the upstream's steps:"]
    for seen in (run.upstream.captured if run.upstream else []):
        try:
            body = json.loads(seen.body or b"{}")
        except ValueError:
            body = {}
        route = route_of(seen.path) if seen.method == "POST" else None
        try:
            conv = route[1](body) if route and route[1] and isinstance(body, dict) else None
        except (KeyError, TypeError, AttributeError):  # a body the upstream could not read
            conv = None
        texts = [str(m.get("content"))[:300] for m in body.get("messages") or []
                 if isinstance(m, dict) and m.get("role") == "tool"] \
            if isinstance(body, dict) else []  # Chat Completions: the results' texts too
        said = (f"{len(conv.tools)} tools, {conv.tool_results} tool results {texts!r}, "
                if conv else "")
        lines.append(f"  {seen.method} {seen.path}: {said}answered {seen.answer!r}")
    lines.append(f"the CLI's stdout ends: {run.outcome.stdout[-1500:]!r}")
    lines.append(f"the CLI's stderr ends: {run.outcome.stderr[-800:]!r}")
    return "\n".join(lines)


# --- all five, through the proxy, in front of the scripted upstream ----------------------

@pytest.mark.parametrize("name", sorted(CLIS))
def test_cli_runs_shell_read_and_subagent_calls_through_the_proxy(
        sandbox_ok, name: str, tmp_path: Path) -> None:
    _ensure_installed(name)
    with capture(name, work=tmp_path, timeout=CLI_TIMEOUT_S, allowlist=CLI_ALLOWLIST) as run:
        _relayed_byte_for_byte(run)
        requests = [x.request.decoded_body().decode() for x in run.client_exchanges()]
        executed = _event_strings(run.outcome.stdout)
        files = {"sessions": sorted(run.home.glob(SESSION_FILES[name])),
                 "children": sorted(run.home.glob(SUBAGENT_FILES.get(name, "none")))}
        # the CLI ended well; the shell call ran and its result went back; the subagent ran
        # its own shell call and sent its result back
        assert run.outcome.returncode == 0, (
            f"{name} exited {run.outcome.returncode}{_story(run)}")
        assert [r for r in requests if _shell_answered(name, r)], (
            f"no request carried the result of `{SHELL_COMMAND}`{_story(run)}")
        assert [r for r in requests if SUBAGENT_MARK in r and "subagent shell call" in r
                and CHILD_COMMAND in r], f"the subagent's shell call never came back{_story(run)}"
    assert files["sessions"], f"no session file at ~/{SESSION_FILES[name]}"
    if name == "codex":
        assert len(files["children"]) == 2  # the parent's rollout and the child's
    elif name in SUBAGENT_FILES:
        assert files["children"], f"no subagent file at ~/{SUBAGENT_FILES[name]}"
    records = _stored(tmp_path, f"cli-{name}")
    stored = [(c.tool, c.command) for r in records for c in r.calls]
    assert stored, "the proxy stored no call"
    assert (SHELL_TOOL[name], SHELL_COMMAND) in stored
    # every shell call stored is judged as `agent-eval check` judges its command, and is
    # one the CLI ran: the main session's as its own event stream names them, the
    # subagent's as its output came back (above; most CLIs leave a subagent's steps out
    # of the main event stream)
    allowlist = load_allowlist(CLI_ALLOWLIST)
    for record in records:
        for call in (c for c in record.calls if c.tool == SHELL_TOOL[name]):
            verdict = check_call("bash", json.dumps({"command": call.command}), allowlist)
            assert (call.decision, call.primary) == (verdict.decision, verdict.primary)
            if record.parent_key is None:
                assert _ran(call.command, executed), call.command
            else:
                assert call.command == CHILD_COMMAND
    # the main session and the subagent's, as the CLI had them: the child's shell call in
    # its own session, linked to the call that spawned it; the CLI's side requests
    # (OpenCode's title) tagged, not counted among them
    main = [r for r in records if (SHELL_TOOL[name], SHELL_COMMAND) in
            [(c.tool, c.command) for c in r.calls]]
    child = [r for r in records if (SHELL_TOOL[name], CHILD_COMMAND) in
             [(c.tool, c.command) for c in r.calls]]
    assert len(main) == 1 and len(child) == 1 and child[0] is not main[0]
    assert child[0].parent_key == main[0].key
    assert any(c.child_key == child[0].key for c in main[0].calls)
    assert {r.protocol or "chat" for r in (main[0], child[0])} == {CLIS[name].protocol}
    conversations = [r for r in records if "side-request" not in r.tags]
    assert sorted(r.key for r in conversations) == sorted([main[0].key, child[0].key])
    sides = [r for r in records if "side-request" in r.tags]
    assert all(not r.calls and r.parent_key is None for r in sides)
    if name == "opencode":
        assert [t for r in sides for t in r.tags if t.startswith("side:")] == ["side:title"]


# --- the CLIs' own telemetry, to `agent-eval collect`, against the proxy's record ---------

TELEMETRY_CLIS = ("claude-code", "codex", "gemini-cli")


def _collected(work: Path, label: str) -> list:
    with open_store(f"sqlite:///{work / 'collect.db'}") as store:
        run = store.resolve_run(f"label:{label}")
        return [s.record for s in store.iter_sessions([run.id])]


def _judged(records: list) -> list[tuple[str, str | None, str, str | None]]:
    """Every judged call as (tool, command, decision, primary), in order."""
    return [(c.tool, c.command, c.decision, c.primary) for r in records for c in r.calls]


@pytest.mark.parametrize("name", TELEMETRY_CLIS)
def test_cli_telemetry_lands_as_the_sessions_and_verdicts_the_proxy_recorded(
        sandbox_ok, name: str, tmp_path: Path) -> None:
    """The CLI plays a bundled scenario through the proxy to the simulator with its own
    OpenTelemetry export pointed at `agent-eval collect` (a second sandbox port): the
    telemetry path stores one session per conversation the proxy stored, and the same
    calls with the same verdicts; a call telemetry could not carry whole is counted as not
    judged, never as allowed."""
    _ensure_installed(name)
    suite = load_suite(data_dir() / "scenarios" / BUNDLED_SUITE_NAME)
    scenario = suite.scenarios[SCENARIO].spec
    with capture(name, upstream="sim", prompt=scenario.task.strip(), work=tmp_path,
                 timeout=CLI_TIMEOUT_S, allowlist=CLI_ALLOWLIST, telemetry=True) as run:
        assert run.outcome.returncode == 0, run.outcome.stderr[-2000:]
        collect_said = run.collect_said
        posted = [x.request.target for c in run.telemetry for x in _exchanges(c)]
    assert posted, f"{name} sent no telemetry: {collect_said[-1000:]}"
    assert "0 refused" in collect_said, collect_said[-1000:]
    proxied = [r for r in _stored(tmp_path, f"cli-{name}") if "side-request" not in r.tags]
    collected = _collected(tmp_path, f"otlp-{name}")
    assert len(collected) == len(proxied) == 1, (
        [(r.key, r.tags) for r in collected], [(r.key, r.tags) for r in proxied])
    not_judged = sum(int(t.split(":")[1]) for r in collected for t in r.tags
                     if t.startswith("skipped_calls:"))
    assert not_judged == 0, [m["content"] for r in collected for m in r.messages]
    assert _judged(proxied), "the proxy judged no call"
    assert _judged(collected) == _judged(proxied)
    assert collected[0].source == "otlp" and any(
        t.startswith("otlp_events:") for t in collected[0].tags)


def _exchanges(connection):
    from clis.wire import exchanges

    return exchanges(connection)
