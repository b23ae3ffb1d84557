"""Record what a real agent CLI does with one command under its own rules: the conformance
corpus (``tests/fixtures/conformance/``).

For each command of ``CORPUS`` the CLI runs once, confined by ``clis.sandbox`` (the
unprivileged user, its own namespaces, one loopback port), unattended in the mode given,
with a configuration holding the case's rules, in front of a scripted model that emits
exactly that command through the CLI's shell tool and then ends.  What the CLI did is read
from the tool result it sent back: ``ran`` (the command ran, in the CLI's sandbox or
not), ``asked`` (a prompt nobody answered: blocked) or ``refused``.  The tool result's
first line is kept beside the outcome, so every row can be checked by eye.

    python -m clis.conformance claude-code codex   # from tests/interop, as root

Never run by the test suite (each CLI run takes seconds); the recorded files are, by
``tests/policy/test_conformance.py``.
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

from .catalog import CLIS, CLIS_DIR, PINNED, REPO, claude_code, codex
from .sandbox import Sandbox
from .upstream import (
    SHELL_TOOLS,
    Call,
    Step,
    _offered,
    arguments_for,
    read_messages,
    read_responses,
    reply_messages,
    reply_responses,
    serve_handler,
)

OUT = REPO / "tests" / "fixtures" / "conformance"
CWD = "/home/agent/project"
FINAL = "Done."

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
]


@dataclass
class OneCommand:
    """The scripted model: the command once through the shell tool, then a final text;
    the tool result the CLI sent back is kept."""

    command: str
    results: list[str] = field(default_factory=list)

    def step(self, tools: dict[str, Any], done: int) -> Step:
        shell = _offered(tools, SHELL_TOOLS)
        if shell is None:
            return Step(text="Conformance")
        if done == 0:
            return Step(call=Call(shell, arguments_for(shell, tools[shell], "shell",
                                                        self.command, CWD)))
        return Step(text=FINAL)


def _result_text(protocol: str, body: dict[str, Any]) -> str | None:
    """The last tool result of a request, as text."""
    if protocol == "messages":
        for m in reversed(body.get("messages") or []):
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    content = b.get("content")
                    text = content if isinstance(content, str) else " ".join(
                        c.get("text", "") for c in content or [] if isinstance(c, dict))
                    return ("[error] " if b.get("is_error") else "") + text
        return None
    items = body.get("input") or []
    outputs = [i.get("output") for i in items if isinstance(i, dict)
               and str(i.get("type", "")).endswith("_output")]
    if not outputs:
        return None
    last = outputs[-1]
    return last if isinstance(last, str) else json.dumps(last)


@contextmanager
def serve(model: OneCommand, protocol: str) -> Iterator[int]:
    read, write = {"messages": (read_messages, reply_messages),
                   "responses": (read_responses, reply_responses)}[protocol]

    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        if request.method == "GET":
            return web.json_response({"object": "list", "data": [{"id": "capture"}]})
        if request.path.endswith("count_tokens"):
            return web.json_response({"input_tokens": 10})
        conv = read(body)
        if conv.tool_results:
            text = _result_text(protocol, body)
            if text is not None:
                model.results.append(text)
        payload, kind = write(body, model.step(conv.tools, conv.tool_results))
        return web.Response(body=payload, headers={"Content-Type": kind})

    with serve_handler(handle, 64 * 1024 * 1024, "conformance-model") as port:
        yield port


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
    if "rejected" in low or "blocked by policy" in low or "forbidden" in low:
        return "refused"
    if "requires approval" in low:
        return "asked"
    return "ran"


def invocation(name: str, box: Sandbox, mode: str):
    """The CLI's invocation with the case's rules in its HOME, unattended in ``mode``."""
    prompt = "Run the one shell command you are given."
    if name == "claude-code":
        inv = claude_code(box.home, box.base_url, prompt)
        settings = {"permissions": {**CLAUDE_RULES, "defaultMode": mode}}
        (box.home / ".claude" / "settings.json").write_text(json.dumps(settings))
        argv = [a for a in inv.argv if a != "--dangerously-skip-permissions"]
        return argv, inv.env
    inv = codex(box.home, box.base_url, prompt)
    rules = box.home / ".codex" / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "default.rules").write_text(CODEX_RULES)
    approval, _, sandbox = mode.partition("/")
    argv = [a for a in inv.argv if a != "--dangerously-bypass-approvals-and-sandbox"]
    argv[-1:-1] = ["--sandbox", sandbox, "-c", f"approval_policy={json.dumps(approval)}"]
    return argv, inv.env


def record(name: str, mode: str, timeout: float = 90.0) -> Path:
    protocol = CLIS[name].protocol
    rows = []
    for category, command in CORPUS:
        model = OneCommand(command)
        with serve(model, protocol) as port, Sandbox(port, clis_dir=CLIS_DIR) as box:
            (box.home / "project" / "notes.txt").write_text("conformance notes\n")
            (box.home / "project" / ".git").mkdir()
            argv, env = invocation(name, box, mode)
            done = box.run(argv, env, timeout=timeout)
        text = model.results[0] if model.results else None
        shown = text if text is not None else f"(no tool result; exit {done.returncode})"
        rows.append({"category": category, "command": command,
                     "outcome": outcome_of(name, text),
                     "result": " ⏎ ".join(line for line in shown.strip().splitlines()
                                          if line.strip())[:240]})
        print(f"{name} {mode}: {rows[-1]['outcome']:7} {command!r}", file=sys.stderr)
    version = PINNED[name].version
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}-{version}-{mode.replace('/', '_')}.json"
    rules = CLAUDE_RULES if name == "claude-code" else CODEX_RULES
    path.write_text(json.dumps({"cli": name, "version": version, "mode": mode,
                                "rules": rules, "cases": rows}, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("clis", nargs="+", choices=["claude-code", "codex"])
    parser.add_argument("--mode", default=None,
                        help="default: claude-code `default`, codex `never/workspace-write`")
    args = parser.parse_args(argv)
    for name in args.clis:
        mode = args.mode or ("default" if name == "claude-code" else "never/workspace-write")
        print(record(name, mode))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
