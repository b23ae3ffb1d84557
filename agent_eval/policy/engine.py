"""The engine: judge a tool call, a bash command or a read path.  Pure; never raises.

How a bash command is judged (each step fails closed):

1. Bytes: NUL / control characters (a CR too) or more than ``strict.max_length``
   characters are ``invalid-bytes``; blank text is ``unparseable-command``.
2. Line continuations: every backslash-newline outside single quotes is removed first,
   exactly as bash does before it reads the text (``continuations.join_continuations``);
   the rest of the judgement sees the joined text and findings point back into the
   original.  ``$\\<newline>(id)`` is judged as ``$(id)``.
3. Words: text in the *plain* subset (see ``quoting.split_plain``) is split directly; any
   other text goes through the quote-aware lexer, which also reports every substitution,
   expansion, heredoc and subshell it meets.
4. Commands: ``commands.CommandJudge`` checks operators, redirections, wrappers, the
   program, the runner form and the script's arguments (strictness switches apply).
5. Confirmation: a command that would be allowed and is not plain is parsed by bashlex;
   an exception, words that differ from the lexer's, or any node bashlex reports inside
   a word (parameter, command or process substitution, arithmetic, tilde) is
   ``unparseable-command``.  Denied commands never reach bashlex: the lexer's findings
   are the verdict (that is the pre-scan that keeps the engine fast on real traffic).

Expansion detection is first the lexer's job: bashlex invents substitutions inside
single quotes that start inside a word and misses some after a quote (see
docs/design.md), so single-quoted text is masked before bashlex sees it and a lone
literal ``$`` that it reports as a parameter is accepted only where the lexer read a
literal dollar too.  No Unicode normalisation is done anywhere (``；`` is not ``;``).

Tool-call arguments with a key given twice (at any depth) are ``malformed-arguments``.

Verdicts of ``check_command`` and ``check_read`` are kept in a bounded cache keyed by the
allow-list fingerprint and the text; verdicts are immutable, so sharing them is safe.
"""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import Any

import bashlex

from agent_eval.policy.allowlist import AllowList
from agent_eval.policy.arguments import Problem
from agent_eval.policy.commands import CommandJudge
from agent_eval.policy.continuations import join_continuations, to_original
from agent_eval.policy.lexer import scan_command, split_plain
from agent_eval.policy.reads import judge_read
from agent_eval.policy.rules import PRECEDENCE, code_for, get_rule, primary_code
from agent_eval.policy.syntax import Scan, SimpleCommand
from agent_eval.policy.verdict import Finding, Invocation, Verdict

ENGINE_VERSION = "1.2.0"
"""Bumped whenever a verdict may change for the same input; part of run fingerprints."""

CACHE_SIZE = 32768
CACHE_MAX_TEXT = 4096
# C0/C1 controls, and the invisible format characters that make text read differently
# from what it is: zero-width spaces and joiners, bidi embeddings/overrides/isolates
# (the "trojan source" trick), the word joiner and the BOM.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\ufeff]"
)
_RANK = {code: i for i, code in enumerate(PRECEDENCE)}
_DOLLAR_OPENERS = set("_@*#?$!-({[")
_cache: dict[tuple[str, str, str], Verdict] = {}


def _remember(key: tuple[str, str, str], verdict: Verdict) -> None:
    if len(key[2]) > CACHE_MAX_TEXT:
        return
    if len(_cache) >= CACHE_SIZE:
        for old in list(islice(_cache, CACHE_SIZE // 2)):
            _cache.pop(old, None)
    _cache[key] = verdict


def clear_cache() -> None:
    """Forget every cached verdict (benchmarks measure the uncached engine with it)."""
    _cache.clear()


def _verdict(problems: list[Problem], invocation: Invocation | None = None,
             path: str | None = None) -> Verdict:
    if not problems:
        return Verdict("allow", invocation=invocation, path=path)
    seen: set[tuple[str, int, int]] = set()
    findings = []
    for p in problems:
        code = code_for(p.rule)
        if (code, p.start, p.end) in seen:
            continue
        seen.add((code, p.start, p.end))
        findings.append(Finding(code, p.message, p.start, p.end))
    findings.sort(key=lambda f: (f.start, _RANK.get(f.code, 99), f.end))
    return Verdict("deny", primary_code(f.code for f in findings), tuple(findings))


def _check_bytes(text: str, max_length: int) -> Problem | None:
    if len(text) > max_length:
        return Problem("invalid-bytes", f"longer than the cap of {max_length} characters "
                       f"({len(text)})", max_length, len(text))
    bad = _CONTROL.search(text)
    if bad:
        return Problem("invalid-bytes", f"control or invisible character U+{ord(bad.group()):04X}",
                       bad.start(), bad.end())
    return None


def _masked(command: str, scan: Scan) -> str:
    """``command`` with the text inside single quotes replaced by ``_``.

    Single-quoted text is literal to bash, but bashlex invents substitutions in it when
    the quote starts inside a word (``--sql='SELECT $1'``) and crashes on a backtick
    there (``--id='a`b'``); masking keeps every position and the structure unchanged."""
    if not scan.single_quoted:
        return command
    chars = list(command)
    for start, end in scan.single_quoted:
        chars[start:end] = "_" * (end - start)
    return "".join(chars)


def _word_expansion(word: Any, command: str, scan: Scan) -> str | None:
    """Why bashlex's ``word`` node is not a literal word, or None.

    Any node bashlex reports inside a word (parameter, command or process substitution,
    arithmetic, tilde) denies, except its known misreport: a lone ``$`` that the lexer
    also read as a literal dollar and that no name, digit, special parameter or bracket
    follows (``--id 42$``, ``"SELECT '$' AS x"``; a quote may follow only because the
    lexer saw the ``$`` inside double quotes, where ``$'`` is literal)."""
    for part in getattr(word, "parts", ()):
        start, end = part.pos
        if part.kind == "parameter" and end - start == 1 and start in scan.literal_dollars:
            after = command[end:end + 1]
            if not after or not (after.isalnum() or after in _DOLLAR_OPENERS):
                continue
        return f"the parser found a {part.kind} in a word"
    return None


def _bashlex_words(command: str, scan: Scan) -> list[list[tuple[int, int]]] | str:
    """Word spans of each simple command as bashlex sees them, or why it refused the text.

    Spans, not values: bashlex's quote removal is wrong for words that glue quoted pieces
    together (``'it''s'`` comes back as ``it''s``, ``"x"'y'`` as ``x'y'``).  The lexer
    owns the values; bashlex confirms the structure: the same commands, the same words
    at the same places, and nothing else (no substitution or expansion inside a word, no
    compound, function...)."""
    try:
        trees = bashlex.parse(_masked(command, scan))
    except RecursionError:
        return "nesting too deep for the parser"
    except Exception as exc:  # bashlex raises many types; every one fails closed
        return f"the parser refused it ({type(exc).__name__})"
    commands: list[list[tuple[int, int]]] = []
    stack = list(reversed(trees))
    while stack:
        node = stack.pop()
        kind = node.kind
        if kind in ("list", "pipeline"):
            stack.extend(reversed(node.parts))
        elif kind == "command":
            words = []
            for part in node.parts:
                if part.kind == "word":
                    why = _word_expansion(part, command, scan)
                    if why:
                        return why
                    words.append(tuple(part.pos))
                elif part.kind != "redirect":
                    return f"the parser found a {part.kind}"
            commands.append(words)
        elif kind not in ("operator", "pipe"):
            return f"the parser found a {kind}"
    return commands


def confirm_with_bashlex(command: str, scan: Scan) -> Problem | None:
    """None when bashlex sees exactly the lexer's commands and words, else a finding."""
    seen = _bashlex_words(command, scan)
    if isinstance(seen, str):
        return Problem("unparseable-command", seen, 0, len(command))
    expected = [[(w.start, w.end) for w in c.words] for c in scan.commands if c.words]
    if seen != expected:
        return Problem("unparseable-command", "the parser and the lexer disagree about the "
                       "words; cannot prove the command", 0, len(command))
    return None


def _judge_text(command: str, allowlist: AllowList, fast_path: bool, seams: list[int]
                ) -> tuple[list[Problem], Invocation | None]:
    """Problems and invocation of a command whose bytes were checked; spans in ``command``.

    ``seams`` are the places where line continuations were removed: a word with one
    inside (``l\\<newline>s``) is not a bare word, like ``\\ls``."""
    words = split_plain(command) if fast_path else None
    if words is not None:
        scan, confirmed = Scan([SimpleCommand(words)], []), True
    else:
        scan, confirmed = scan_command(command), False
        for word in (w for c in scan.commands for w in c.words) if seams else ():
            if any(word.start < seam < word.end for seam in seams):
                word.bare = False
    judge = CommandJudge(allowlist)
    judge.judge(scan)
    problems = [Problem(e.rule, e.message, e.start, e.end) for e in scan.events]
    problems += judge.problems
    if not problems and not confirmed:
        refused = confirm_with_bashlex(command, scan)
        if refused:
            problems.append(refused)
    return problems, judge.invocation


def judge_command(command: str, allowlist: AllowList, *, fast_path: bool = True) -> Verdict:
    """Uncached judgement of one bash command.  ``fast_path=False`` forces the lexer and
    bashlex even for plain text (tests prove both paths agree)."""
    try:
        if not isinstance(command, str):
            return _verdict([Problem("unparseable-command", "the command is not text", 0, 0)])
        bad = _check_bytes(command, allowlist.strict.max_length)
        if bad:
            return _verdict([bad])
        if not command.strip():
            return _verdict([Problem("unparseable-command", "empty command", 0, len(command))])
        joined = join_continuations(command) if "\\\n" in command else None
        if joined is None:
            problems, invocation = _judge_text(command, allowlist, fast_path, [])
        else:
            text, origin = joined
            seams = [j for j in range(1, len(text)) if origin[j] - origin[j - 1] > 1]
            problems, invocation = _judge_text(text, allowlist, False, seams)
            for p in problems:
                p.start, p.end = to_original(origin, p.start, p.end)
        return _verdict(problems, invocation)
    except Exception as exc:  # a bug must never allow, nor crash the run
        return _verdict([Problem("unparseable-command",
                                 f"internal error while judging ({type(exc).__name__})",
                                 0, len(command) if isinstance(command, str) else 0)])


def check_command(command: str, allowlist: AllowList) -> Verdict:
    """Judge one bash command under ``allowlist`` (cached)."""
    key = (allowlist.fingerprint, "bash", command) if isinstance(command, str) else None
    if key is not None:
        hit = _cache.get(key)
        if hit is not None:
            return hit
    verdict = judge_command(command, allowlist)
    if key is not None:
        _remember(key, verdict)
    return verdict


def check_read(path: str, allowlist: AllowList) -> Verdict:
    """Judge one read-tool path under ``allowlist`` (cached).  Allowed verdicts carry
    the normalised relative (or, where allowed, absolute) path."""
    if not isinstance(path, str):
        return _verdict([Problem("missing-argument", "the path is not a string", 0, 0)])
    key = (allowlist.fingerprint, "read", path)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        bad = _check_bytes(path, allowlist.strict.max_length)
        if bad:
            verdict = _verdict([bad])
        else:
            problem, normal = judge_read(path, allowlist.read)
            verdict = _verdict([problem] if problem else [], path=normal)
    except Exception as exc:
        verdict = _verdict([Problem("blocked-read-path",
                                    f"internal error while judging ({type(exc).__name__})",
                                    0, len(path))])
    _remember(key, verdict)
    return verdict


class _DuplicateKey(ValueError):
    pass


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _decode_arguments(arguments: Any) -> dict[str, Any] | Problem:
    """The decoded argument object, or the problem.  A key given twice at any depth is a
    denial: parsers disagree on which value wins (Python keeps the last, others the
    first), so the harness and the server might run different commands."""
    if not isinstance(arguments, (str, bytes)):
        return Problem("malformed-arguments", "the arguments are not a JSON object", 0, 0)
    try:
        args = json.loads(arguments, object_pairs_hook=_unique_object)
    except _DuplicateKey as dup:
        return Problem("malformed-arguments",
                       f"duplicate key {dup.args[0]!r} in the arguments; which one would run "
                       "is ambiguous", 0, 0)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return Problem("malformed-arguments", "the arguments are not a JSON object", 0, 0)
    return args


def check_call(tool_name: str, arguments: str | dict[str, Any], allowlist: AllowList,
               offered: Any = None) -> Verdict:
    """Judge one tool call: the tool name, then its arguments, then the command or path.

    ``arguments`` is the raw JSON text exactly as emitted (or an already-decoded dict).
    ``offered`` are the tool names offered in this session (default: every tool of the
    allow-list); an offered tool of kind ``other`` is allowed once its arguments are a
    JSON object.
    """
    try:
        names = {t.name for t in allowlist.tools} if offered is None else set(offered)
        if tool_name not in names:
            listed = ", ".join(sorted(names)) or "none"
            return _verdict([Problem("unknown-tool",
                                     f"no tool named {tool_name!r} is offered (offered: {listed})",
                                     0, 0)])
        if isinstance(arguments, dict):
            args = arguments
        else:
            args = _decode_arguments(arguments)
            if isinstance(args, Problem):
                return _verdict([args])
        spec = allowlist.tool(tool_name)
        if spec is None or spec.kind == "other":
            return Verdict("allow")
        argument = spec.argument or ("command" if spec.kind == "bash" else "path")
        for name in spec.required or [argument]:
            if not isinstance(args.get(name), str):
                what = "missing" if name not in args else "not a string"
                return _verdict([Problem("missing-argument",
                                         f"required argument {name!r} is {what}", 0, 0)])
        value = args.get(argument)
        if not isinstance(value, str):
            return _verdict([Problem("missing-argument",
                                     f"argument {argument!r} is missing or not a string", 0, 0)])
        if spec.kind == "bash":
            return check_command(value, allowlist)
        return check_read(value, allowlist)
    except Exception as exc:
        return _verdict([Problem("malformed-arguments",
                                 f"internal error while judging ({type(exc).__name__})", 0, 0)])


def render_denial(verdict: Verdict, allowlist: AllowList) -> str:
    """The text returned to the model for a denied call ("" for an allowed one): the
    allow-list's ``denial_message`` with {code} {name} {message} of the primary finding."""
    if verdict.allowed or not verdict.findings:
        return ""
    finding = next((f for f in verdict.findings if f.code == verdict.primary),
                   verdict.findings[0])
    rule = get_rule(finding.code)
    text = allowlist.denial_message
    for key, value in (("{code}", finding.code), ("{name}", rule.name if rule else ""),
                       ("{message}", finding.message)):
        text = text.replace(key, value)
    return text
