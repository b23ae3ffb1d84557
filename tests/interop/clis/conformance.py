"""Record what a real agent CLI does with the commands of the conformance corpus under its
own rules (``tests/fixtures/conformance/``).

For each (CLI, mode) the CLI runs confined by ``clis.sandbox`` (the unprivileged user, its
own namespaces, one loopback port), unattended in the mode given, with a configuration
holding the corpus's rules, in front of a scripted model (``Script``) that asks for the
commands one a turn through the CLI's shell tool, all in one session (a CLI that ends its
session early is started again from the first command it did not answer), then ends.
What the CLI did with each is read from the tool result it sent back: ``ran`` (the
command ran, in the CLI's sandbox or not), ``asked`` (a prompt nobody answered: blocked)
or ``refused``.  The tool result's first line is kept beside the outcome, so every row
can be checked by eye.  One recording takes about 5 s.

    python -m clis.conformance claude-code codex   # from tests/interop, as root

``tests/interop/test_conformance_live.py`` records every (CLI, mode) live in CI and holds
agent-eval's harness verdict to it; ``tests/policy/test_conformance.py`` does the same
with the committed recordings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from .catalog import CLIS_DIR, PINNED, REPO, claude_code, codex, gemini_cli, opencode, qwen_code
from .fixtures import system_text
from .sandbox import Sandbox
from .upstream import (
    SHELL_TOOLS,
    Call,
    Conversation,
    Step,
    _offered,
    arguments_for,
    fill_schema,
    route_of,
    serve_handler,
)

OUT = REPO / "tests" / "fixtures" / "conformance"
CWD = "/home/agent/project"
FINAL = "Done."
PROMPT = "Run the shell commands you are given, one at a time."

CLAUDE_RULES = {"allow": ["Bash(uv run scripts/db_query.py:*)", "Bash(cd:*)",
                          "Bash(echo *)", "Bash(ls *)", "Bash(git diff:*)"],
                "ask": ["Bash(git push:*)"], "deny": ["Bash(curl:*)"]}
CODEX_RULES = """\
prefix_rule(pattern = ["uv", "run", "scripts/db_query.py"], decision = "allow")
prefix_rule(pattern = ["git", "diff"], decision = "allow")
prefix_rule(pattern = ["echo"], decision = "allow")
prefix_rule(pattern = ["git", "push"], decision = "prompt")
prefix_rule(pattern = ["curl"], decision = "forbidden")
"""

GEMINI_SETTINGS = {"tools": {"allowed": [
    "run_shell_command(uv run scripts/db_query.py)", "run_shell_command(cd)",
    "run_shell_command(echo)", "run_shell_command(ls)", "run_shell_command(git diff)"]}}
GEMINI_POLICY = """\
[[rule]]
toolName = "run_shell_command"
commandPrefix = "git push"
decision = "ask_user"
priority = 100

[[rule]]
toolName = "run_shell_command"
commandPrefix = "curl"
decision = "deny"
priority = 100
"""
QWEN_RULES = {"allow": ["Bash(uv run scripts/db_query.py *)", "Bash(cd *)", "Bash(echo *)",
                        "Bash(ls *)", "Bash(git diff *)"],
              "ask": ["Bash(git push *)"], "deny": ["Bash(curl *)"]}

OPENCODE_PERMISSION = {"bash": {"*": "ask", "uv run scripts/db_query.py *": "allow",
                                "cd *": "allow", "echo *": "allow", "ls *": "allow",
                                "git diff *": "allow", "git push *": "ask", "curl *": "deny"}}

CORPUS: list[tuple[str, str]] = [
    # (category, command); the rules above are each CLI's configuration
    ("allowed", "echo conform"),
    ("unmatched", "uname -s"),
    ("read-only", "ls -la"),
    ("read-only", "cat notes.txt"),
    ("read-only", "git status"),
    ("chain", "echo a && uname -s"),
    ("chain", "git diff && echo b"),
    ("pipe", "echo a | tee out.txt"),
    ("pipe", "ls | head -1"),
    ("substitution", "echo $(uname -s)"),
    ("redirection", "echo conform > out.txt"),
    ("redirection", "ls -la > files.txt"),
    ("heredoc", "cat <<EOF\nconform\nEOF"),
    ("wrapper", "timeout 5 echo conform"),
    ("wrapper", "timeout 5 ls"),
    ("wrapper", "env echo conform"),
    ("wrapper", "nice echo conform"),
    ("wrapper", "command echo conform"),
    ("assignment", "FOO=1 echo conform"),
    ("cd", "cd /tmp && uname -s"),
    ("cd", "cd /tmp && ls"),
    ("glob", "ls *.txt"),
    ("variable", "echo $HOME"),
    ("background", "echo conform &"),
    ("subshell", "(echo conform)"),
    ("absolute-path", "/bin/echo conform"),
    ("flags-reordered", "git --no-pager diff"),
    ("prompt-rule", "git push origin main"),
    ("forbidden", "curl http://127.0.0.1:9/"),
    ("protected", "echo x > .git/conform"),
    ("inline-shell", "bash -c 'echo conform'"),
    # the second round: more of each category
    ("unmatched", "date +%Y"),
    ("read-only", "grep -r conform ."),
    ("read-only", "/usr/bin/ls"),
    ("chain", "ls; uname -s"),
    ("chain", "ls || echo b"),
    ("pipe", "cat notes.txt | grep conform"),
    ("substitution", "echo `uname -s`"),
    ("substitution", 'echo "$(ls)"'),
    ("redirection", "echo conform >> out.txt"),
    ("redirection", "ls 2>/dev/null"),
    ("redirection", "cat < notes.txt"),
    ("heredoc", "cat <<'EOF'\nconform\nEOF"),
    ("wrapper", "time echo conform"),
    ("wrapper", "env FOO=1 echo conform"),
    ("wrapper", "xargs echo < notes.txt"),
    ("assignment", "FOO=1 ls"),
    ("cd", "cd . && ls"),
    ("glob", "echo {a,b}"),
    ("variable", "echo $((1+1))"),
    ("variable", "ls ~"),
    ("flags-reordered", "git diff --stat"),
    ("flags-reordered", "git -C . diff"),
    ("protected", "echo x > .claude/conform"),
    ("protected", "ls .git"),
    ("protected", "echo x > .codex/conform"),
    ("protected", "echo x > .gemini/conform"),
    ("protected", "echo x > .qwen/conform"),
    ("protected", "echo x >> ~/.bashrc"),
]


@dataclass
class Script:
    """The scripted model of one session: the commands in order through the shell tool,
    one a turn (the request carrying N tool results is answered with command N), then a
    final text.  ``results[i]`` is the tool result the CLI sent back for command ``i``.
    A request offering no shell tool or not holding the prompt (titles, prefix checks,
    memory agents, JSON side questions) gets a short text or a JSON object filling its
    schema."""

    commands: list[str]
    results: dict[int, str] = field(default_factory=dict)
    main_system: str | None = None  # the system prompt of the main conversation

    def step(self, conv: Conversation, result: str | None, system: str = "",
             prompted: bool = True) -> Step:
        if conv.wants_json is not None:
            return Step(text=json.dumps(fill_schema(conv.wants_json)))
        shell = _offered(conv.tools, SHELL_TOOLS)
        if shell is None and "tool_call" in conv.tools:
            shell = "tool_call"  # Qwen Code defers its shell tool behind tool_call
        if shell is None or not prompted:
            return Step(text="Conformance")
        if self.main_system is None:
            self.main_system = system
        elif system != self.main_system:
            return Step(text="Conformance")  # a side agent (Qwen Code's memory agent)
        done = conv.tool_results
        if done and result is not None and done <= len(self.commands):
            self.results[done - 1] = result
        if done < len(self.commands) and shell == "tool_call":
            return Step(call=Call(shell, {"name": "run_shell_command", "arguments": {
                "command": self.commands[done], "is_background": False}}))
        if done < len(self.commands):
            return Step(call=Call(shell, arguments_for(shell, conv.tools[shell], "shell",
                                                        self.commands[done], CWD)))
        return Step(text=FINAL)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text(c.get("text", "") if isinstance(c, dict) else c)
                        for c in content)
    if isinstance(content, dict):
        return json.dumps(content)
    return ""


def result_text(protocol: str, body: dict[str, Any]) -> str | None:
    """The last tool result of a request, as text (``[error] `` first when the CLI marked
    it an error)."""
    if protocol == "messages":
        for m in reversed(body.get("messages") or []):
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    return ("[error] " if b.get("is_error") else "") + _text(b.get("content"))
        return None
    if protocol == "chat":
        tools = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
        return _text(tools[-1].get("content")) if tools else None
    if protocol == "gemini":
        responses = [p["functionResponse"] for c in body.get("contents") or []
                     for p in c.get("parts") or [] if "functionResponse" in p]
        if not responses:
            return None
        answer = responses[-1].get("response") or {}
        if isinstance(answer, dict) and set(answer) <= {"output", "error"}:
            text = str(answer.get("output") or "")
            return ("[error] " + str(answer["error"]) + " " + text) if answer.get("error") \
                else text
        return _text(answer)
    items = body.get("input") or []
    outputs = [i.get("output") for i in items if isinstance(i, dict)
               and str(i.get("type", "")).endswith("_output")]
    if not outputs:
        return None
    last = outputs[-1]
    return last if isinstance(last, str) else json.dumps(last)


@contextmanager
def serve(script: Script) -> Iterator[int]:
    """The scripted model on a free loopback port, in whichever protocol a request uses."""

    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if request.method == "GET":
            return web.json_response({"object": "list", "data": [
                {"id": "capture", "object": "model", "created": 0, "owned_by": "capture"}]})
        route = route_of(request.path)
        if route is None:
            return web.json_response({"error": {"message": "not here"}}, status=404)
        protocol, read, write = route
        if read is None:
            return web.Response(body=write(body), headers={"Content-Type": "application/json"})
        step = script.step(read(body), result_text(protocol, body), system_text(body),
                           PROMPT in json.dumps(body))
        if protocol == "gemini":
            payload, kind = write(body, step, stream="stream" in request.path)
        else:
            payload, kind = write(body, step)
        return web.Response(body=payload, headers={"Content-Type": kind})

    with serve_handler(handle, 64 * 1024 * 1024, "conformance-model") as port:
        yield port


def _qwen_outcome(low: str) -> str | None:
    """Qwen Code's own refusals: unattended nobody answers a confirmation ("Qwen Code
    requires permission to use ..., but that permission was declined (non-interactive
    mode cannot prompt for confirmation)"); plan mode's shell check: "Plan mode could not
    determine whether this shell command is read-only ... The command was not run"
    (asked), "Plan mode blocked this shell command because it was classified as
    state-modifying" (refused)."""
    if "requires permission" in low and "declined" in low \
            or low.startswith("plan mode could not determine"):
        return "asked"
    if low.startswith("plan mode blocked"):
        return "refused"
    return None


def outcome_of(name: str, text: str | None) -> str:
    """``ran``, ``asked`` or ``refused`` from the tool result the CLI sent back."""
    if text is None:
        return "none"
    low = text.lower()
    if name == "claude-code":
        # a refused call comes back as an error result saying why ("requires approval",
        # "needs approval", "was blocked", "can't be checked"...); a command that ran
        # and failed comes back as an error result starting with its exit code
        if "has been denied" in low:
            return "refused"
        if text.startswith("[error] ") and not text.startswith("[error] Exit code"):
            return "asked"
        return "ran"
    if name == "opencode":
        # `opencode run` rejects every ask itself (nobody to answer); a deny rule's
        # refusal names the rule (permission/next.ts: RejectedError, DeniedError)
        if "prevents you from using" in low or "denied" in low and "rule" in low:
            return "refused"
        if "rejected permission" in low:
            return "asked"
        return "ran"
    if name == "gemini-cli":
        # the scheduler's own errors: a deny decision, an ask_user nobody can answer
        if text.startswith("[error] Tool execution denied by policy"):
            return "refused"
        if "requires user confirmation" in low:
            return "asked"
        return "ran"
    if name == "qwen-code" and _qwen_outcome(low) is not None:
        return _qwen_outcome(low) or ""
    if "rejected" in low or "blocked by policy" in low or "forbidden" in low \
            or "denied by permission rules" in low or "is not registered" in low:
        return "refused"
    if "requires approval" in low or "requires user confirmation" in low:
        return "asked"
    return "ran"


def invocation(name: str, box: Sandbox, mode: str, config: str = ""
               ) -> tuple[list[str], dict[str, str], str]:
    """The CLI's invocation with the case's rules in its HOME, unattended in ``mode``."""
    prompt = PROMPT
    if name == "claude-code":
        inv = claude_code(box.home, box.base_url, prompt)
        settings = {"permissions": {**CLAUDE_RULES, "defaultMode": mode}}
        (box.home / ".claude" / "settings.json").write_text(json.dumps(settings))
        argv = [a for a in inv.argv if a != "--dangerously-skip-permissions"]
        return argv, inv.env, ""
    if name == "gemini-cli":
        inv = gemini_cli(box.home, box.base_url, prompt)
        rules = rules_of(name, config)
        path = box.home / ".gemini" / "settings.json"
        settings = json.loads(path.read_text())
        for key, value in rules["settings"].items():  # one level deep: keep security.auth
            settings[key] = {**settings.get(key, {}), **value}
        path.write_text(json.dumps(settings))
        (box.home / ".gemini" / "policies").mkdir()
        for file, text in rules["policies"].items():
            (box.home / ".gemini" / "policies" / file).write_text(text)
        argv = [a for a in inv.argv if a != "--yolo"]
        argv[1:1] = ["--approval-mode", {"autoEdit": "auto_edit"}.get(mode, mode)]
        return argv, inv.env, ""
    if name == "qwen-code":
        inv = qwen_code(box.home, box.base_url, prompt)
        path = box.home / ".qwen" / "settings.json"
        # the shell tool rides in the first request (tools.eager; else it is deferred
        # behind tool_search), which changes no permission
        settings = {**json.loads(path.read_text()), **rules_of(name, config)}
        settings["tools"] = {**settings.get("tools", {}), "eager": ["run_shell_command"]}
        path.write_text(json.dumps(settings))
        argv = [a for a in inv.argv if a != "--yolo"]
        argv[1:1] = ["--approval-mode", mode]
        return argv, inv.env, ""
    if name == "opencode":
        inv = opencode(box.home, box.base_url, prompt)
        path = box.home / ".config" / "opencode" / "opencode.json"
        config = json.loads(path.read_text())
        config["permission"] = {**OPENCODE_PERMISSION, "external_directory": "ask"}
        # a refused call ends the turn unless the loop goes on (session/processor.ts);
        # which call is refused does not change
        config["experimental"] = {"continue_loop_on_deny": True}
        path.write_text(json.dumps(config))
        argv = [a for a in inv.argv if a != "--auto"]
        argv[2:2] = ["--agent", mode]
        return argv, inv.env, inv.stdin
    inv = codex(box.home, box.base_url, prompt)
    rules = box.home / ".codex" / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "default.rules").write_text(CODEX_RULES)
    approval, _, sandbox = mode.partition("/")
    argv = [a for a in inv.argv if a != "--dangerously-bypass-approvals-and-sandbox"]
    argv[-1:-1] = ["--sandbox", sandbox, "-c", f"approval_policy={json.dumps(approval)}"]
    return argv, inv.env, ""


RULES = {"claude-code": CLAUDE_RULES, "codex": CODEX_RULES,
         "gemini-cli": {"settings": GEMINI_SETTINGS, "policies": {"conform.toml": GEMINI_POLICY}},
         "qwen-code": {"permissions": QWEN_RULES},  # the whole settings.json
         "opencode": {"permission": {**OPENCODE_PERMISSION, "external_directory": "ask"}}}
DEFAULT_MODES = {"claude-code": "default", "codex": "never/workspace-write",
                 "gemini-cli": "default", "qwen-code": "default", "opencode": "build"}
GEMINI_TOML_ONLY = """\
[[rule]]
toolName = "run_shell_command"
commandPrefix = ["uv run scripts/db_query.py", "cd", "echo", "ls", "git diff"]
decision = "allow"
priority = 100

""" + GEMINI_POLICY
CONFIGS: dict[tuple[str, str], Any] = {
    # Gemini CLI with its rules in a TOML policy only (tools.allowed is deprecated)
    ("gemini-cli", "toml"): {"settings": {}, "policies": {"conform.toml": GEMINI_TOML_ONLY}},
    # a second configuration: Qwen Code with its shell tool registered by tools.core, so
    # the rules and the read-only analysis decide unattended
    ("qwen-code", "core"): {"permissions": QWEN_RULES, "tools": {"core": ["run_shell_command"]}},
}


def rules_of(name: str, config: str = "") -> Any:
    """The configuration a recording runs under: ``RULES[name]``, or a named other one."""
    return CONFIGS[(name, config)] if config else RULES[name]


SESSIONS = 4
"""Sessions at most per recording: a CLI that ends its session before the last command
(a crash, a turn limit) is started again from the first command it did not answer."""


@dataclass
class Recording:
    """What one CLI did with the corpus in one mode, and how the sessions ended."""

    cli: str
    version: str
    mode: str
    rules: Any
    cases: list[dict[str, str]]
    sessions: list[str] = field(default_factory=list)  # "exit N, K commands answered"
    config: str = ""  # a named configuration of CONFIGS; "" for RULES

    def as_json(self) -> dict[str, Any]:
        return {"cli": self.cli, "version": self.version, "mode": self.mode,
                **({"config": self.config} if self.config else {}),
                "rules": self.rules, "cases": self.cases}

    @property
    def file_name(self) -> str:
        tail = f"-{self.config}" if self.config else ""
        return f"{self.cli}-{self.version}-{self.mode.replace('/', '_')}{tail}.json"


def _shown(text: str | None) -> str:
    return " ⏎ ".join(line for line in (text or "").strip().splitlines() if line.strip())[:240]


def record(name: str, mode: str, corpus: list[tuple[str, str]] | None = None, *,
           timeout: float = 300.0, log: Any = None, config: str = "") -> Recording:
    """Run ``name`` on every command of ``corpus`` (default ``CORPUS``) in ``mode``:
    batched, all commands in one session when the CLI keeps going."""
    corpus = CORPUS if corpus is None else corpus
    commands = [command for _, command in corpus]
    results: dict[int, str] = {}
    sessions: list[str] = []
    start = 0
    while start < len(commands) and len(sessions) < SESSIONS:
        script = Script(commands[start:])
        with serve(script) as port, Sandbox(port, clis_dir=CLIS_DIR) as box:
            (box.home / "project" / "notes.txt").write_text("conformance notes\n")
            (box.home / "project" / ".git").mkdir()
            argv, env, stdin = invocation(name, box, mode, config)
            done = box.run(argv, env, timeout=timeout, stdin=stdin.encode())
        for index, text in script.results.items():
            results[start + index] = text
        answered = len(script.results)
        sessions.append(f"exit {done.returncode}, {answered} of {len(script.commands)} "
                        "commands answered")
        if log is not None:
            print(f"{name} {mode}: session {len(sessions)}: {sessions[-1]}", file=log)
        if answered == 0 and not done.returncode == 0:
            start += 1  # the CLI failed on this one: record it unanswered, go on
        else:
            start += max(answered, 1)
    cases = []
    for index, (category, command) in enumerate(corpus):
        text = results.get(index)
        cases.append({"category": category, "command": command,
                      "outcome": outcome_of(name, text),
                      "result": _shown(text) if text is not None else "(no tool result)"})
    return Recording(name, PINNED[name].version, mode, rules_of(name, config), cases, sessions,
                     config)


def write(recording: Recording) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / recording.file_name
    path.write_text(json.dumps(recording.as_json(), indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("clis", nargs="+", choices=sorted(DEFAULT_MODES))
    parser.add_argument("--mode", default=None,
                        help="the CLI's mode (OpenCode: its agent); default: claude-code "
                             "`default`, codex `never/workspace-write`, gemini-cli and "
                             "qwen-code `default`, opencode `build`")
    parser.add_argument("--config", default="", help="a named other configuration "
                        f"({', '.join(f'{c} {n}' for c, n in CONFIGS)})")
    args = parser.parse_args(argv)
    for name in args.clis:
        mode = args.mode or DEFAULT_MODES[name]
        recording = record(name, mode, log=sys.stderr, config=args.config)
        for case in recording.cases:
            print(f"{name} {mode}: {case['outcome']:7} {case['command']!r}", file=sys.stderr)
        print(write(recording))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
