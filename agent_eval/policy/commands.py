"""Judge the simple commands of a scanned bash command against an allow-list.

Input is the lexer's :class:`Scan` (words, redirections, joining operators, events);
output is a list of :class:`Problem` and, for an allowed runner call, the
:class:`Invocation`.  Pure; the strictness switches of the allow-list are applied here:

- ``strict.pipe_to``: a pipe into one of these programs is not ``pipe-to-filter``; the
  filter's words must be literal; its arguments are checked only when the program is
  also listed under ``programs`` (list it there to pin its flags).
- ``strict.allow_chain``: ``&&``, ``||``, ``;`` and newlines between commands that are
  each allowed on their own.  Background ``&`` is never allowed.
- ``strict.allow_stderr_redirect``: ``2>&1``, ``2>/dev/null``, ``2>>/dev/null``.
- ``strict.allow_wrappers``: listed wrappers (e.g. ``timeout 60``) may prefix a command;
  ``VAR=v`` assignments never may.
"""

from __future__ import annotations

import re

from agent_eval.policy.allowlist import AllowList
from agent_eval.policy.arguments import Problem, match_arguments
from agent_eval.policy.syntax import Redirect, Scan, SimpleCommand, Word, over_the_cap
from agent_eval.policy.verdict import Invocation
from agent_eval.policy.wordpatterns import match_words

WRAPPERS = frozenset({
    "timeout", "env", "nohup", "nice", "time", "sudo", "doas", "xargs", "command", "exec",
    "builtin", "stdbuf", "ionice", "setsid", "chrt", "taskset", "strace", "unbuffer",
    "caffeinate", "watch", "parallel",
})
SHELL_KEYWORDS = frozenset({
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
    "esac", "function", "select", "coproc", "[[", "]]", "{", "}", "!",
})
# programs whose flag runs its next argument as code
INLINE_CODE = {
    "bash": ("-c",), "sh": ("-c",), "zsh": ("-c",), "dash": ("-c",), "ksh": ("-c",),
    "fish": ("-c",), "busybox": ("sh",), "eval": (), "python": ("-c",), "python3": ("-c",),
    "python2": ("-c",), "pypy": ("-c",), "pypy3": ("-c",), "node": ("-e", "--eval", "-p"),
    "deno": ("eval",), "bun": ("-e", "--eval"), "perl": ("-e", "-E"), "ruby": ("-e",),
    "php": ("-r",), "lua": ("-e",), "Rscript": ("-e",), "osascript": ("-e",),
    "pwsh": ("-c", "-Command"),
}
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_CHAIN_OPS = {"&&", "||", ";", "\n"}
_STDERR_TARGETS = {"1", "/dev/null"}


def _span(words: list[Word]) -> tuple[int, int]:
    return (words[0].start, words[-1].end) if words else (0, 0)


def _inline_flag(program: str, args: list[Word]) -> Word | None:
    """The word that makes ``program args`` run inline code, if any."""
    if _PYTHON.fullmatch(program):
        program = "python"
    flags = INLINE_CODE.get(program)
    if flags is None:
        return None
    short = {f[1] for f in flags if len(f) == 2 and f[0] == "-"}
    for arg in args:
        v = arg.value
        if not v.startswith("-") and program not in ("busybox", "deno"):
            return None
        if v in flags or (v[:1] == "-" and v[1:2] != "-" and short & set(v[1:])):
            return arg
    return None


def _skip_wrapper(name: str, words: list[Word]) -> list[Word]:
    """The words of the wrapped command after wrapper ``name`` and its own arguments."""
    i = 0
    if name == "env":
        while i < len(words) and (words[i].value.startswith("-")
                                  or _ASSIGNMENT.match(words[i].value)):
            i += 1
    elif name == "timeout":
        while i < len(words) and words[i].value.startswith("-"):
            i += 2 if words[i].value in ("-s", "-k", "--signal", "--kill-after") else 1
        i += 1  # the duration
    elif name in ("nice", "ionice", "stdbuf", "chrt", "taskset"):
        while i < len(words) and words[i].value.startswith("-"):
            i += 2 if words[i].value in ("-n", "-c", "-p") else 1
    else:
        while i < len(words) and words[i].value.startswith("-"):
            i += 1
    return words[i:]


class CommandJudge:
    """Judges the commands of one scan; collects problems and the invocation."""

    def __init__(self, allowlist: AllowList):
        self.allowlist = allowlist
        self.strict = allowlist.strict
        self.problems: list[Problem] = []
        self.counts: dict[str, int] = {}
        self.invocation: Invocation | None = None

    def add(self, rule: str, message: str, start: int, end: int) -> None:
        capped = over_the_cap(self.counts, rule)
        if capped is None:
            self.problems.append(Problem(rule, message, start, end))
        elif capped:
            self.problems.append(Problem(rule, capped, start, end))

    def extend(self, problems: list[Problem]) -> None:
        for p in problems:
            self.add(p.rule, p.message, p.start, p.end)

    def judge(self, scan: Scan) -> None:
        commands = scan.commands
        if not any(c.words or c.redirects for c in commands):
            if not scan.events:
                self.add("unparseable-command", "empty command", 0, 0)
            return
        for index, cmd in enumerate(commands):
            piped_into = cmd.join is not None and cmd.join.kind in ("|", "|&")
            if cmd.join is not None and cmd is not commands[0]:
                self.judge_join(cmd, index, commands)
            for redirect in cmd.redirects:
                self.judge_redirect(redirect)
            if piped_into and self.is_allowed_filter(cmd):
                name = cmd.words[0].value
                if name in self.allowlist.programs:
                    _, problems = match_arguments(name, self.allowlist.programs[name],
                                                  cmd.words[1:], _span(cmd.words),
                                                  argparse_rules=False)
                    self.extend(problems)
                continue
            if cmd.words:
                self.judge_words(cmd.words)

    def judge_join(self, cmd: SimpleCommand, index: int, commands: list[SimpleCommand]) -> None:
        op = cmd.join
        assert op is not None
        if op.kind in ("|", "|&"):
            if op.kind == "|&" and not self.strict.allow_stderr_redirect:
                self.add("stderr-redirect", "|& pipes stderr too", op.start, op.end)
            if not self.is_allowed_filter(cmd):
                target = cmd.words[0].value if cmd.words else "nothing"
                self.add("pipe-to-filter", f"output piped into {target}",
                         op.start, max(op.end, cmd.end))
        elif op.kind in _CHAIN_OPS:
            prev_empty = not (commands[index - 1].words or commands[index - 1].redirects)
            this_empty = not (cmd.words or cmd.redirects)
            if op.kind == "\n" and (prev_empty or this_empty):
                return
            if not self.strict.allow_chain:
                what = "a newline" if op.kind == "\n" else op.kind
                self.add("shell-chain", f"commands chained with {what}", op.start, op.end)
        elif op.kind == "&":
            self.add("shell-chain", "& runs a command in the background", op.start, op.end)

    def is_allowed_filter(self, cmd: SimpleCommand) -> bool:
        words = cmd.words
        return (bool(words) and words[0].bare and words[0].value in self.strict.pipe_to
                and all(w.literal for w in words) and not cmd.redirects)

    def judge_redirect(self, r: Redirect) -> None:
        if r.op in ("<<", "<<-", "<<<"):
            return  # reported by the lexer as a heredoc
        target = r.target.value if r.target else ""
        text = f"{r.fd or ''}{r.op}{target}"
        to_stderr = r.fd == "&" or (r.fd == "2" and r.op in (">", ">>", ">&", ">|"))
        if to_stderr:
            allowed = (self.strict.allow_stderr_redirect and r.fd == "2"
                       and target in _STDERR_TARGETS and r.target is not None
                       and r.target.literal and (target == "1") == (r.op == ">&"))
            if not allowed:
                self.add("stderr-redirect", f"stderr redirected ({text})", r.start, r.end)
        else:
            self.add("output-redirect", f"redirection {text}", r.start, r.end)

    def judge_words(self, words: list[Word]) -> None:
        while words and words[0].bare and _ASSIGNMENT.match(words[0].value):
            self.add("wrapper-prefix", f"variable assignment {words[0].value.split('=')[0]}= "
                     "before the command", words[0].start, words[0].end)
            words = words[1:]
        if not words:
            return
        head = words[0]
        if not head.literal:
            return  # the substitution or expansion is already reported
        name = head.value
        if not head.bare:
            self.add("disallowed-program", f"quoted or escaped program name {name!r}",
                     head.start, head.end)
            return
        if name in SHELL_KEYWORDS:
            self.add("complex-shell", f"shell keyword {name}", head.start, head.end)
            return
        if name in WRAPPERS:
            inner = _skip_wrapper(name, words[1:])
            if not inner:
                self.add("wrapper-prefix", f"wrapper {name} with no command to run",
                         head.start, words[-1].end)
                return
            if name not in self.strict.allow_wrappers:
                self.add("wrapper-prefix", f"wrapper {name} before the command",
                         head.start, max(head.end, inner[0].start - 1))
            self.judge_words(inner)
            return
        inline = _inline_flag(name, words[1:])
        if inline is not None or name == "eval":
            end = inline.end if inline is not None else head.end
            self.add("inline-code", f"{name} runs inline code", head.start, end)
            return
        runner = self.allowlist.runner
        if runner and len(words) >= len(runner) and [w.value for w in words[:len(runner)]] == runner:
            self.judge_runner(words[len(runner):], _span(words), words[len(runner) - 1].end)
            return
        if name in self.allowlist.programs:
            spec = self.allowlist.programs[name]
            _, problems = match_arguments(name, spec, words[1:], _span(words),
                                          argparse_rules=False)
            self.extend(problems)
            return
        if self.allowlist.patterns and self.judge_patterns(words):
            return
        if "/" in name:
            why = f"program {name} is not allowed (a path to a program is still a program)"
        else:
            why = f"program {name} is not allowed"
        self.add("disallowed-program", why, head.start, head.end)

    def judge_patterns(self, words: list[Word]) -> bool:
        """True when a ``patterns`` entry decided the command (allowed, or refused with a
        finding); False leaves it to the disallowed-program finding.  A word that is not
        a literal (an expansion) never makes a command allowed: the lexer reported it
        already, and the verdict is a denial whatever matches here.  An interpreter running inline code anywhere among them
        (``uv run python -c ...`` under ``uv run *``) is a second program, not a word."""
        values = [w.value for w in words]
        chosen, excepted = None, None
        for entry in self.allowlist.patterns:
            if match_words(entry.match, values):
                exception = next((u for u in entry.unless if match_words(u, values)), None)
                if exception is None:
                    chosen = entry
                    break
                excepted = excepted or (entry.match, exception)
        if not all(w.literal for w in words):
            return chosen is not None  # the lexer already reported each expansion
        if chosen is None:
            if excepted is None:
                return False
            self.add("disallowed-program", f"{values[0]} matches `{excepted[0]}` but the "
                     f"policy excepts `{excepted[1]}`", words[0].start, words[-1].end)
            return True
        for i in range(1, len(words)):
            inline = _inline_flag(values[i], words[i + 1:]) if words[i].bare else None
            if inline is not None or (values[i] == "eval" and words[i].bare):
                end = inline.end if inline is not None else words[i].end
                self.add("inline-code", f"{values[i]} runs inline code (a second program "
                         f"inside the words of `{chosen.match}`)", words[i].start, end)
                return True
        return True

    def judge_runner(self, rest: list[Word], whole: tuple[int, int], runner_end: int) -> None:
        al = self.allowlist
        runner = " ".join(al.runner)
        if not rest:
            self.add("unlisted-script", f"{runner} without a script", whole[0], whole[1])
            return
        target = rest[0]
        value = target.value
        if value.startswith("-"):
            self.add("invalid-argument", f"runner option {value} before the script",
                     target.start, target.end)
            return
        base = value.rsplit("/", 1)[-1]
        inline = _inline_flag(base, rest[1:]) if "/" not in value else None
        if inline is not None:
            self.add("inline-code", f"{runner} {value} runs inline code", whole[0], inline.end)
            return
        prefix = al.script_dir.rstrip("/") + "/"
        if value.startswith(prefix) and value[len(prefix):] in al.scripts and target.literal:
            script = value[len(prefix):]
            invocation, problems = match_arguments(script, al.scripts[script], rest[1:], whole)
            self.extend(problems)
            if invocation is not None and self.invocation is None:
                self.invocation = invocation
            return
        if base in al.scripts:
            why = f"script {value} is not on the allow-list; write {prefix}{base}"
        elif _PYTHON.fullmatch(base) or base in INLINE_CODE:
            why = f"{runner} {value} is not a listed script"
        else:
            why = f"script {value} is not on the allow-list"
        self.add("unlisted-script", why, target.start, target.end)
