"""Mutations: the wrong calls a simulated model makes instead of the right reference step.

Each :class:`Mutation` turns one reference step into a call that the policy engine denies
under the step's allow-list, and is named by the AE code it is meant to produce (the
registry in ``agent_eval.policy`` owns the codes; a test checks every mutation against
``check_call``).  The variants are the real signatures from docs/design.md: ``| head``,
``2>&1``, ``cd ... &&``, ``cat << REPORT_EOF``, ``timeout 60``, bare ``ls``/``curl``,
``python -c``, invented scripts and flags, blocked read paths, a script called as a tool.

Pure functions of (step, allow-list, random generator): no I/O, nothing is executed.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal
from urllib.parse import quote_plus

from agent_eval.policy.allowlist import AllowList, CommandSpec
from agent_eval.scenario import ReferenceStep

StepKind = Literal["bash", "read"]


@dataclass(frozen=True)
class PlannedCall:
    """One tool call the simulated model will emit.  ``intended`` is the AE code a
    mutation aims at (``None`` for the right reference step)."""

    tool: str
    arguments: dict[str, Any]
    intended: str | None = None

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class Step:
    """A reference step with what a mutation needs to know about its harness."""

    ref: ReferenceStep
    allowlist: AllowList
    task: str = ""
    offered: frozenset[str] | None = None  # tool names the scenario offers; None = all

    def offers(self, kind: StepKind) -> bool:
        name = self.tool_name(kind)
        return any(t.name == name for t in self.allowlist.tools) and (
            self.offered is None or name in self.offered
        )

    @property
    def kind(self) -> StepKind:
        return "bash" if self.ref.bash is not None else "read"

    @property
    def text(self) -> str:
        """The bash command or the read path."""
        return self.ref.bash if self.ref.bash is not None else (self.ref.read or "")

    def tool_name(self, kind: StepKind) -> str:
        for tool in self.allowlist.tools:
            if tool.kind == kind:
                return tool.name
        return kind

    def tool_argument(self, kind: StepKind) -> str:
        for tool in self.allowlist.tools:
            if tool.kind == kind:
                return tool.judged_key or ("command" if kind == "bash" else "path")
        return "command" if kind == "bash" else "path"

    def bash(self, command: str, intended: str | None) -> PlannedCall:
        return PlannedCall(self.tool_name("bash"), {self.tool_argument("bash"): command}, intended)

    def read(self, path: str, intended: str | None) -> PlannedCall:
        return PlannedCall(self.tool_name("read"), {self.tool_argument("read"): path}, intended)

    def right_call(self) -> PlannedCall:
        """The reference step itself, as the disciplined model emits it."""
        if self.kind == "bash":
            return self.bash(self.text, None)
        return self.read(self.text, None)

    def as_shell(self) -> str:
        """A shell command doing the step: the command itself, or ``cat PATH`` for a read."""
        return self.text if self.kind == "bash" else f"cat {shlex.quote(self.text)}"


@dataclass(frozen=True)
class Mutation:
    """One failure class a simulated model can fall into, and how it writes it."""

    code: str
    name: str
    kinds: frozenset[StepKind]
    make: Callable[[Step, random.Random], PlannedCall] = field(repr=False)

    def applies(self, step: Step) -> bool:
        if step.kind not in self.kinds or not step.offers(self.tool_kind):
            return False
        return step.kind == "read" or self.code not in _NEEDS_SCRIPT or _parse(step) is not None

    @property
    def tool_kind(self) -> StepKind:
        """The offered tool the mistaken call goes through (AE101 invents its own name)."""
        return "read" if self.code == "AE320" else "bash"


# --- parsing the reference command ----------------------------------------------------


@dataclass(frozen=True)
class _Parsed:
    words: list[str]
    script_at: int  # index of the `scripts/x.py` word
    script: str
    spec: CommandSpec
    args_at: int  # index of the first word after the script (and its subcommands)


_NEEDS_SCRIPT = {"AE310", "AE311", "AE101"}


def _parse(step: Step) -> _Parsed | None:
    if step.kind != "bash":
        return None
    try:
        words = shlex.split(step.text)
    except ValueError:
        return None
    runner = list(step.allowlist.runner)
    at = len(runner)
    if words[:at] != runner or len(words) <= at:
        return None
    prefix = step.allowlist.script_dir.rstrip("/") + "/"
    if not words[at].startswith(prefix):
        return None
    script = words[at][len(prefix):]
    spec = step.allowlist.scripts.get(script)
    if spec is None:
        return None
    args_at = at + 1
    while args_at < len(words) and words[args_at] in spec.subcommands:
        spec = spec.subcommands[words[args_at]]
        args_at += 1
    return _Parsed(words, at, script, spec, args_at)


def _join(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _flag_values(parsed: _Parsed) -> list[tuple[int, str]]:
    """(index, flag) of every flag word in the argument part."""
    return [(i, w) for i, w in enumerate(parsed.words) if i >= parsed.args_at and w.startswith("-")]


# --- the mutations, one per failure class ----------------------------------------------


def pipe_to_filter(step: Step, rng: random.Random) -> PlannedCall:
    word = rng.choice(["error", "status", "session", step.task.split()[0].lower() or "id"])
    tail = rng.choice([
        "| head -n 20", "| tail -5", f"| grep -i {shlex.quote(word)}",
        "| jq '.attempt.session_id'", "| sed -n '1,20p'",
    ])
    return step.bash(f"{step.as_shell()} {tail}", "AE301")


def stderr_redirect(step: Step, rng: random.Random) -> PlannedCall:
    return step.bash(f"{step.as_shell()} {rng.choice(['2>&1', '2>/dev/null'])}", "AE302")


def shell_chain(step: Step, rng: random.Random) -> PlannedCall:
    cmd = step.as_shell()
    form = rng.choice([f"cd /work/project && {cmd}", f"{cmd} || true", f"{cmd}; echo done"])
    return step.bash(form, "AE304")


_FREE_TEXT = ("--summary", "--message", "--body", "--value", "--append", "--sql", "--query")


def heredoc(step: Step, rng: random.Random) -> PlannedCall:
    parsed = _parse(step)
    if parsed is not None:
        for i, w in _flag_values(parsed):
            if w in _FREE_TEXT and i + 1 < len(parsed.words):
                text = parsed.words[i + 1]
                words = parsed.words[:i + 1]
                rest = _join(parsed.words[i + 2:])
                head = _join(words) + ' "$(cat)"' + (f" {rest}" if rest else "")
                return step.bash(f"cat << REPORT_EOF | {head}\n{text}\nREPORT_EOF", "AE305")
    argv = ", ".join(repr(w) for w in shlex.split(step.as_shell()))
    code = f"import subprocess\nsubprocess.run([{argv}], check=True)"
    return step.bash(f"uv run python - << EOF\n{code}\nEOF", "AE305")


def wrapper_prefix(step: Step, rng: random.Random) -> PlannedCall:
    prefix = rng.choice(["timeout 60", "timeout 120", "env PYTHONUNBUFFERED=1"])
    return step.bash(f"{prefix} {step.as_shell()}", "AE306")


def disallowed_program(step: Step, rng: random.Random) -> PlannedCall:
    forms = ["ls scripts/", "find . -name '*.py'", "ls -la notes/"]
    if step.kind == "read":
        forms.append(f"cat {shlex.quote(step.text)}")
    if step.task:
        query = quote_plus(" ".join(step.task.split()[:6]))
        forms.append(f"curl -s 'https://duckduckgo.com/html/?q={query}'")
    return step.bash(rng.choice(forms), "AE307")


def inline_code(step: Step, rng: random.Random) -> PlannedCall:
    if step.kind == "read":
        code = f"print(open({step.text!r}).read()[:2000])"
    else:
        argv = ", ".join(repr(w) for w in shlex.split(step.text))
        code = (
            "import json, subprocess; "
            f"out = subprocess.run([{argv}], capture_output=True, text=True).stdout; "
            "print(json.dumps(json.loads(out), indent=1)[:2000])"
        )
    quoted = f'"{code}"' if not any(ch in code for ch in '"$`\\') else shlex.quote(code)
    return step.bash(f"uv run python -c {quoted}", "AE308")


_INVENTED_SCRIPTS = {
    "web_search.py": "--query",
    "food_management.py": "--item",
    "data_query.py": "--sql",
    "thought_transfer.py": "--to",
    "youtube_fetcher.py": "--url",
}


def unlisted_script(step: Step, rng: random.Random) -> PlannedCall:
    script = rng.choice(sorted(_INVENTED_SCRIPTS))
    value = " ".join(step.task.split()[:5]) or "status"
    runner = " ".join(step.allowlist.runner)
    cmd = f"{runner} {step.allowlist.script_dir}/{script} {_INVENTED_SCRIPTS[script]} {shlex.quote(value)}"
    return step.bash(cmd, "AE309")


def unknown_flag(step: Step, rng: random.Random) -> PlannedCall:
    parsed = _parse(step)
    assert parsed is not None, "unknown-flag applies to script steps only"
    words = list(parsed.words)
    if "--no-attach" in words and "--agent" in words:
        words.remove("--no-attach")
        words[words.index("--agent")] = "--no-agent"
    else:
        invented = [f for f in ("--verbose", "--json", "--dry-run", "--all") if f not in parsed.spec.flags]
        words.append(rng.choice(invented))
    return step.bash(_join(words), "AE310")


_BAD_CHOICES = ("complete", "search-videos", "finished", "urgent", "everything")


def _replaced(words: list[str], i: int, value: str) -> list[str]:
    """``words`` with the one at ``i`` replaced by ``value``."""
    return words[:i] + [value] + words[i + 1:]


def _without(words: list[str], i: int) -> list[str]:
    """``words`` without the flag at ``i`` and its value after it."""
    return words[:i] + words[i + 2:]


def invalid_argument(step: Step, rng: random.Random) -> PlannedCall:
    parsed = _parse(step)
    assert parsed is not None, "invalid-argument applies to script steps only"
    words = list(parsed.words)
    options: list[Callable[[], list[str]]] = []
    for i, w in _flag_values(parsed):
        spec = parsed.spec.flags.get(w)
        if spec is None or not spec.value or i + 1 >= len(words):
            continue
        if spec.choices:
            bad = next(c for c in _BAD_CHOICES if c not in spec.choices)
            options.append(partial(_replaced, words, i + 1, bad))
        elif spec.type in ("int", "float"):
            options.append(partial(_replaced, words, i + 1, "many"))
        if spec.required:
            options.append(partial(_without, words, i))
    if not options:
        options.append(lambda: words + ["extra"])
    return step.bash(_join(rng.choice(options)()), "AE311")


def blocked_read_path(step: Step, rng: random.Random) -> PlannedCall:
    stem = step.text.rsplit("/", 1)[-1].split(".")[0] if step.kind == "read" else "plan"
    path = rng.choice([
        "/data/rendered/chart.png", "../secrets/api.env", f"notes/private/{stem}.md",
    ])
    return step.read(path, "AE320")


def script_as_tool(step: Step, rng: random.Random) -> PlannedCall:
    parsed = _parse(step)
    assert parsed is not None, "unknown-tool applies to script steps only"
    args: dict[str, Any] = {}
    words = parsed.words[parsed.args_at:]
    i = 0
    while i < len(words):
        if words[i].startswith("--"):
            key = words[i][2:].replace("-", "_")
            spec = parsed.spec.flags.get(words[i])
            if spec is not None and spec.value and i + 1 < len(words):
                args[key] = words[i + 1]
                i += 2
                continue
            args[key] = True
        i += 1
    return PlannedCall(parsed.script.removesuffix(".py"), args, "AE101")


MUTATIONS: dict[str, Mutation] = {
    m.code: m
    for m in [
        Mutation("AE301", "pipe-to-filter", frozenset({"bash", "read"}), pipe_to_filter),
        Mutation("AE302", "stderr-redirect", frozenset({"bash", "read"}), stderr_redirect),
        Mutation("AE304", "shell-chain", frozenset({"bash", "read"}), shell_chain),
        Mutation("AE305", "heredoc", frozenset({"bash"}), heredoc),
        Mutation("AE306", "wrapper-prefix", frozenset({"bash", "read"}), wrapper_prefix),
        Mutation("AE307", "disallowed-program", frozenset({"bash", "read"}), disallowed_program),
        Mutation("AE308", "inline-code", frozenset({"bash", "read"}), inline_code),
        Mutation("AE309", "unlisted-script", frozenset({"bash", "read"}), unlisted_script),
        Mutation("AE310", "unknown-flag", frozenset({"bash"}), unknown_flag),
        Mutation("AE311", "invalid-argument", frozenset({"bash"}), invalid_argument),
        Mutation("AE320", "blocked-read-path", frozenset({"bash", "read"}), blocked_read_path),
        Mutation("AE101", "unknown-tool", frozenset({"bash"}), script_as_tool),
    ]
}
"""Every mutation by the AE code it produces."""


def text_tool_call(step: Step) -> str:
    """Reply text carrying a tool call the server did not parse (AE104 tool-call-as-text)."""
    call = step.right_call()
    body = json.dumps({"name": call.tool, "arguments": call.arguments}, ensure_ascii=False)
    return f"I'll run the next step.\n<tool_call>\n{body}\n</tool_call>"
