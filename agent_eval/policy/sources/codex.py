"""Codex's execpolicy: ``.rules`` files of ``prefix_rule(...)``, read without running them.

Codex evaluates its rules files as Starlark (``codex-rs/execpolicy/src/parser.rs``).  Here
a file is *parsed* with Python's ``ast`` (the call syntax is the same) and never executed:
the only statements read are calls of ``prefix_rule``, ``host_executable`` and
``network_rule`` whose arguments are literals (strings, lists of strings); anything else
(assignments, loops, names, f-strings, ``load``) is refused with the line it is on.

What a rule means (``codex-rs/execpolicy/README.md``, ``src/parser.rs``, ``src/rule.rs``,
``src/policy.rs``): ``prefix_rule(pattern=[...], decision=..., justification=...,
match=[...], not_match=[...])``; ``pattern`` is a non-empty list of tokens, each a string
or a list of alternatives; ``decision`` is ``allow`` (the default), ``prompt`` or
``forbidden``; a rule matches an argv whose first tokens equal the pattern's, in order
(exact strings; the first token compared as written: host-executable basename fallback is
off by default and not emulated).  ``match``/``not_match`` examples are checked when the
file loads, as Codex checks them.  Over all rules matching, the strictest decision wins
(forbidden > prompt > allow).

What argv a command is (``codex-rs/core/src/exec_policy.rs`` ``commands_for_exec_policy``
and ``shell-command/src/bash.rs``): a command string is run as ``bash -lc SCRIPT``; when
the script is only literal words joined by ``&&``, ``||``, ``;`` and ``|`` each command is
checked on its own (``parse_shell_lc_plain_commands``); else a script that is one literal
command with a heredoc is checked by that command's words
(``parse_shell_lc_single_command_prefix``); else the argv ``["bash", "-lc", SCRIPT]``
itself is checked.  A command no rule matches gets Codex's fallback decision, which in an
unattended run with approvals off is not an approval: ``prompt`` here.  Codex's built-in
"known safe command" list is not emulated.
"""

from __future__ import annotations

import ast
import itertools
import shlex
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.sources.emulation import CODEX_DEFAULT_MODE, check_mode
from agent_eval.policy.sources.files import read_text
from agent_eval.policy.sources.model import AgentPolicy, HarnessVerdict, PolicySource, Rule
from agent_eval.policy.sources.shellsplit import heredoc_prefix, literal_sequence

DECISIONS = {"allow": "allow", "prompt": "ask", "forbidden": "deny"}
SEVERITY = {"allow": 0, "ask": 1, "deny": 2}
FUNCTIONS = {"prefix_rule": ("pattern", "decision", "match", "not_match", "justification"),
             "host_executable": ("name", "paths"),
             "network_rule": ("host", "protocol", "decision", "justification")}
DEFAULT_AGENT = "default"
UNGATED_TOOL_PREFIXES = ("multi_agent_v1.", "view_image")
"""Codex tools its rules and approval policy do not gate: the multi-agent namespace's
functions (spawn, wait, send input, resume, close) and viewing an image; the rules
(``prefix_rule``) decide commands only (codex-rs/execpolicy/README.md)."""
MAX_FILES = 256


def _literal(node: ast.expr, where: str) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise ConfigError("only literal strings and lists can be read here (this file is "
                          "parsed, never run)", path=where) from None
    return value


def _tokens(pattern: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(pattern, list) or not pattern:
        raise ConfigError("pattern must be a non-empty list of tokens", path=where)
    tokens = []
    for item in pattern:
        if isinstance(item, str):
            tokens.append((item,))
        elif isinstance(item, list) and item and all(isinstance(a, str) for a in item):
            tokens.append(tuple(item))
        else:
            raise ConfigError("each pattern token must be a string or a non-empty list of "
                              "strings", path=where)
    return tuple(tokens)


def _example(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError:
            raise ConfigError(f"example {value!r} has invalid shell syntax", path=where) from None
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        words = list(value)
    else:
        raise ConfigError("an example must be a string or a list of strings", path=where)
    if not words:
        raise ConfigError("an example cannot be empty", path=where)
    return words


def prefix_matches(tokens: tuple[tuple[str, ...], ...], argv: list[str]) -> bool:
    """Codex's ``PrefixPattern`` match: each pattern token equals (one of) the argv's."""
    return len(argv) >= len(tokens) and all(argv[i] in alts for i, alts in enumerate(tokens))


def _render(tokens: tuple[tuple[str, ...], ...]) -> str:
    return " ".join(t[0] if len(t) == 1 else "[" + "|".join(t) + "]" for t in tokens)


def _read_call(node: ast.stmt, where: str) -> tuple[str, dict[str, Any]]:
    line = f"{where}:{node.lineno}"
    call = node.value if isinstance(node, ast.Expr) else None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) \
            or call.func.id not in FUNCTIONS:
        raise ConfigError("only prefix_rule(...), host_executable(...) and network_rule(...) "
                          "calls can be read; remove or rewrite this statement", path=line)
    name = call.func.id
    params = FUNCTIONS[name]
    if len(call.args) > len(params) or any(isinstance(a, ast.Starred) for a in call.args):
        raise ConfigError(f"{name} takes at most {len(params)} arguments", path=line)
    args: dict[str, Any] = {}
    for param, value in zip(params, call.args, strict=False):
        args[param] = _literal(value, line)
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg not in params:
            raise ConfigError(f"{name} has no argument {keyword.arg or '**'}; it takes "
                              f"{', '.join(params)}", path=line)
        if keyword.arg in args:
            raise ConfigError(f"argument {keyword.arg} given twice", path=line)
        args[keyword.arg] = _literal(keyword.value, line)
    return name, args


def _rule(args: dict[str, Any], line: str) -> Rule:
    if "pattern" not in args:
        raise ConfigError("prefix_rule needs a pattern", path=line)
    tokens = _tokens(args["pattern"], line)
    decision = args.get("decision", "allow")
    if decision not in DECISIONS:
        raise ConfigError(f"decision {decision!r} is not one of allow, prompt, forbidden",
                          path=line)
    justification = args.get("justification")
    if justification is not None and (not isinstance(justification, str)
                                      or not justification.strip()):
        raise ConfigError("justification cannot be empty", path=line)
    for key, wanted in (("match", True), ("not_match", False)):
        examples = args.get(key, [])
        if not isinstance(examples, list):
            raise ConfigError(f"{key} must be a list of examples", path=line)
        for example in examples:
            if prefix_matches(tokens, _example(example, line)) != wanted:
                raise ConfigError(f"{key} example {example!r} "
                                  f"{'does not match' if wanted else 'matches'} the rule's "
                                  "pattern (Codex refuses this file too)", path=line)
    return Rule("exec", _render(tokens), DECISIONS[decision], line, tokens)  # type: ignore[arg-type]


def _parse(path: Path) -> list[Rule]:
    where = str(path)
    text = read_text(path, "Codex .rules file")
    try:
        tree = ast.parse(text, filename=where, mode="exec")
    except SyntaxError as exc:
        raise ConfigError(f"line {exc.lineno}: not readable as a rules file ({exc.msg}); fix "
                          "the syntax", path=where) from None
    except (RecursionError, MemoryError, ValueError):
        raise ConfigError("not readable as a rules file (nested too deeply or not text)",
                          path=where) from None
    rules = []
    for node in tree.body:
        name, args = _read_call(node, where)
        if name == "prefix_rule":
            rules.append(_rule(args, f"{where}:{node.lineno}"))
    return rules


def load(path: Path) -> PolicySource:
    """Read a ``.rules`` file, or every ``*.rules`` file of a folder in name order (as
    Codex loads ``~/.codex/rules/``)."""
    files = sorted(path.glob("*.rules"))[:MAX_FILES] if path.is_dir() else [path]
    if not files:
        raise ConfigError("holds no *.rules file; pass a rules file or its folder",
                          path=str(path))
    rules: list[Rule] = []
    for file in files:
        rules += _parse(file)
    mode, notes = _mode(path if path.is_dir() else path.parent)
    agent = AgentPolicy(harness="codex", name=DEFAULT_AGENT, rules=tuple(rules), source=str(path),
                        mode=mode)
    return PolicySource("codex", str(path), {DEFAULT_AGENT: agent}, DEFAULT_AGENT, notes)


def _mode(folder: Path) -> tuple[str, tuple[str, ...]]:
    """``APPROVAL/SANDBOX`` from the ``config.toml`` beside the rules folder
    (``~/.codex/config.toml`` for ``~/.codex/rules/``: ``approval_policy``,
    ``sandbox_mode``), each missing one ``codex exec``'s default."""
    import tomllib

    approval, _, sandbox = CODEX_DEFAULT_MODE.partition("/")
    config = folder.parent / "config.toml"
    if not config.is_file():
        return CODEX_DEFAULT_MODE, ()
    try:
        data = tomllib.loads(read_text(config, "Codex config.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})", path=str(config)) from None
    approval = data.get("approval_policy", approval)
    sandbox = data.get("sandbox_mode", sandbox)
    mode = check_mode("codex", f"{approval}/{sandbox}")
    return mode, (f"mode {mode} from {config}",)


# -- judging ----------------------------------------------------------------------------


def argv_lists(command: str) -> tuple[list[list[str]], str]:
    """The argvs Codex checks for a command string, and how they were found."""
    plain = literal_sequence(command)
    if plain:
        return plain, "plain"
    heredoc = heredoc_prefix(command)
    if heredoc:
        return [heredoc], "heredoc"
    return [["bash", "-lc", command]], "whole"


SAFE = frozenset({"ls", "cat", "cd", "echo", "grep", "head", "tail", "pwd", "wc", "which",
                  "true", "false", "nl", "rg", "stat", "tree", "uname", "whoami", "id", "date"})
"""Codex's known-safe commands, in the part this emulation reads (``is_safe_command.rs``
of codex-rs/shell-command: these, ``find`` without its executing or writing options and
``git status|log|diff|show``); they run unasked only under approval ``untrusted``."""
SAFE_GIT = frozenset({"status", "log", "diff", "show"})
DECISION_ORDER = {"allow": 0, "sandboxed": 1, "ask": 2, "deny": 3}


def known_safe(argv: list[str]) -> bool:
    if not argv:
        return False
    name = argv[0]
    if name == "git":
        return len(argv) > 1 and argv[1] in SAFE_GIT
    if name == "find":
        return not any(a in ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls",
                             "-fprint", "-fprint0", "-fprintf") for a in argv)
    return name in SAFE


def dangerous(argv: list[str]) -> bool:
    """Codex's ``command_might_be_dangerous`` (``is_dangerous_command.rs``): ``git reset``,
    ``git rm``, a deleting ``git branch``, a forced or deleting ``git push``, ``git clean
    -f``, ``rm -f``/``rm -rf``, and the same behind ``sudo``."""
    if argv[:1] == ["sudo"]:
        return dangerous(argv[1:])
    if not argv:
        return False
    if argv[0] == "rm":
        return argv[1:2] in (["-f"], ["-rf"])
    if not argv[0].endswith("git") or len(argv) < 2:
        return False
    sub, rest = argv[1], argv[2:]
    short = [a for a in rest if a.startswith("-") and not a.startswith("--")]
    if sub in ("reset", "rm"):
        return True
    if sub == "branch":
        return any(a in ("--delete",) or ("d" in a[1:] or "D" in a[1:]) for a in short) \
            or "--delete" in rest
    if sub == "push":
        return any(a.startswith(("--force", "--delete")) or a.startswith(("+", ":"))
                   and len(a) > 1 for a in rest) or any("f" in a[1:] or "d" in a[1:]
                                                        for a in short)
    if sub == "clean":
        return "--force" in rest or any("f" in a[1:] for a in short)
    return False


def unmatched(argv: list[str], mode: str | None, complex_parse: bool) -> tuple[str, str]:
    """Codex's decision for an argv no rule matches (``exec_policy.rs``
    ``render_decision_for_unmatched_command``) in ``mode`` (``APPROVAL/SANDBOX``); None:
    the rules alone, where nothing unmatched runs (the strict reading)."""
    if mode is None:
        return "ask", "no rule matches"
    approval, _, sandbox = mode.partition("/")
    if approval == "untrusted":
        if known_safe(argv) and not complex_parse:
            return "allow", "a known-safe command (approval untrusted)"
        return "ask", "approval untrusted asks for what is not known safe"
    if dangerous(argv):
        if approval == "never":
            if sandbox == "danger-full-access":
                return "allow", "dangerous, but the sandbox is off and approval never"
            return "deny", "dangerous, and approval never cannot ask"
        return "ask", "a dangerous command asks"
    if sandbox == "danger-full-access":
        return "allow", f"no sandbox, approval {approval}"
    return "sandboxed", f"runs inside the {sandbox} sandbox (approval {approval})"


def judge_argv(agent: AgentPolicy, argvs: list[list[str]], how: str = "plain",
               mode: str | None = None) -> HarnessVerdict:
    """``Policy.check_multiple`` over ``argvs``: strictest decision of all matches, an
    unmatched argv getting :func:`unmatched` in ``mode``.  A ``prompt`` rule under approval
    ``never`` is rejected (nobody to ask)."""
    worst, used, reason = "allow", [], ""
    never = mode is not None and mode.startswith("never/")
    for argv in argvs:
        matched = [r for r in agent.rules if prefix_matches(r.tokens, argv)]
        if not matched:
            decision, why = unmatched(argv, mode, how == "heredoc")
            if DECISION_ORDER[decision] > DECISION_ORDER[worst]:
                worst, reason = decision, f"{why}: {shlex.join(argv)[:200]!r}"
            continue
        strictest = max(matched, key=lambda r: SEVERITY[r.action])
        action = "deny" if strictest.action == "ask" and never else strictest.action
        if DECISION_ORDER[action] > DECISION_ORDER[worst]:
            worst = action
            reason = f"{shlex.join(argv)[:200]!r} matches {strictest.label()}" + \
                (" (approval never rejects a prompt)" if action != strictest.action else "")
        for rule in matched:
            if rule not in used:
                used.append(rule)
    if worst == "allow" and not reason:
        reason = {"plain": "every command matches an allow rule",
                  "heredoc": "the heredoc command's words match an allow rule",
                  "whole": "the whole bash -lc argv matches an allow rule",
                  "argv": "the argv matches an allow rule"}.get(how, "allowed")
        return HarnessVerdict("allow", tuple(used), reason=reason)
    if worst in ("allow", "sandboxed"):
        return HarnessVerdict(worst, tuple(used), reason=reason)  # type: ignore[arg-type]
    blockers = tuple(r for r in used if r.action in (worst, "ask"))
    return HarnessVerdict(worst, blockers, reason=reason)  # type: ignore[arg-type]


def judge_command(agent: AgentPolicy, command: str, mode: str | None = None) -> HarnessVerdict:
    """Codex's exec policy for a shell command string in ``mode`` (None: rules alone)."""
    argvs, how = argv_lists(command)
    return judge_argv(agent, argvs, how, mode)


def shell_argv(argv: list[str]) -> tuple[list[list[str]], str]:
    """The argvs for an argv given as a list (Codex's ``shell`` tool)."""
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") \
            and argv[1] in ("-c", "-lc"):
        return argv_lists(argv[2])
    return [argv], "argv"


def expand(tokens: tuple[tuple[str, ...], ...], limit: int = 256) -> list[list[str]]:
    """Every token sequence a rule with alternatives stands for (at most ``limit``)."""
    return [list(combo) for combo in itertools.islice(itertools.product(*tokens), limit)]
