"""The engine: judge a tool call, a bash command or a read path.  Pure; never raises.

How a bash command is judged (each step fails closed):

1. Characters: more than ``strict.max_length`` characters, or a character that
   ``characters.find_hidden`` refuses (controls other than TAB and LF, so a CR too;
   invisible format and default-ignorable characters; lone surrogates; a combining
   mark with no base...) are ``invalid-bytes``; blank text is ``unparseable-command``.
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

A whole tool call (its name, its argument JSON, every key) is judged in ``calls.py``,
which hands the command to :func:`check_command` and each path to :func:`check_read`.

Verdicts of ``check_command`` and ``check_read`` are kept in a bounded cache keyed by the
allow-list fingerprint and the text; verdicts are immutable, so sharing them is safe.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import islice
from typing import Any

from agent_eval.policy.allowlist import AllowList
from agent_eval.policy.arguments import Problem
from agent_eval.policy.characters import COMMAND_WHITESPACE, classify, describe, find_hidden
from agent_eval.policy.commands import CommandJudge
from agent_eval.policy.continuations import join_continuations, to_original
from agent_eval.policy.lexer import scan_command, split_plain
from agent_eval.policy.reads import judge_read
from agent_eval.policy.rules import code_for, get_rule, precedence_rank, primary_code
from agent_eval.policy.syntax import Scan, SimpleCommand
from agent_eval.policy.verdict import Finding, Invocation, Verdict

ENGINE_VERSION = "1.5.0"  # 1.5.0: working directories, copies of blocked files, blanks
"""Bumped whenever a verdict may change for the same input; part of run fingerprints."""

MAX_FINDINGS = 64
"""Findings kept on one verdict (16,000 ``;`` would make 16,000); the last one says how
many more there were."""
CACHE_SIZE = 32768
CACHE_MAX_TEXT = 4096
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
    """Forget every cached verdict and character class (benchmarks measure the uncached
    engine with it)."""
    _cache.clear()
    classify.cache_clear()


def verdict_of(problems: list[Problem], inner: Verdict | None = None, *,
               more: Iterable[Finding] = (), invocation: Invocation | None = None,
               path: str | None = None) -> Verdict:
    """Allow when there is no problem nor finding in ``more`` (and ``inner``, the verdict
    of a part of the input, allows too); else deny with every finding, the primary code
    by precedence.  At most :data:`MAX_FINDINGS` findings are kept (the primary code is
    chosen from all)."""
    extra = list(more)
    if inner is not None and not inner.allowed:
        extra += inner.findings
    elif inner is not None:
        invocation, path = inner.invocation, inner.path
    if not problems and not extra:
        return Verdict("allow", invocation=invocation, path=path)
    seen: set[tuple[str, int, int]] = set()
    findings = list(extra)
    for p in problems:
        code = code_for(p.rule)
        if (code, p.start, p.end) in seen:
            continue
        seen.add((code, p.start, p.end))
        findings.append(Finding(code, p.message, p.start, p.end))
    primary = primary_code(f.code for f in findings)
    findings.sort(key=lambda f: (f.start, precedence_rank(f.code), f.end))
    if len(findings) > MAX_FINDINGS:
        kept = findings[:MAX_FINDINGS - 1]
        if primary not in {f.code for f in kept}:
            kept[-1] = next(f for f in findings if f.code == primary)
        rest = len(findings) - len(kept)
        kept.append(Finding(kept[-1].code, f"and {rest} more findings", kept[-1].start,
                            kept[-1].end))
        findings = kept
    return Verdict("deny", primary, tuple(findings))


def check_text(text: str, max_length: int, allowed: str) -> Problem | None:
    """The length cap, then the characters (``characters.find_hidden``)."""
    if len(text) > max_length:
        return Problem("invalid-bytes", f"longer than the cap of {max_length} characters "
                       f"({len(text)})", max_length, len(text))
    hidden = find_hidden(text, allowed)
    if hidden is not None:
        at, why = hidden
        return Problem("invalid-bytes", f"{why} {describe(text, at)}", at, at + 1)
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


def _bashlex() -> Any:
    """bashlex, imported by the first command that needs it: its import builds its LR
    tables afresh each time (about 70 ms of CPU; it never reads its shipped parsetab), and
    plain or denied commands never reach it, so ``check --batch`` over them never pays."""
    import bashlex

    return bashlex


def _bashlex_words(command: str, scan: Scan) -> list[list[tuple[int, int]]] | str:
    """Word spans of each simple command as bashlex sees them, or why it refused the text.

    Spans, not values: bashlex's quote removal is wrong for words that glue quoted pieces
    together (``'it''s'`` comes back as ``it''s``, ``"x"'y'`` as ``x'y'``).  The lexer
    owns the values; bashlex confirms the structure: the same commands, the same words
    at the same places, and nothing else (no substitution or expansion inside a word, no
    compound, function...)."""
    parse = _bashlex().parse
    try:
        trees = parse(_masked(command, scan))
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
            # the first seam after the word's start; seams are in increasing order
            at = bisect_right(seams, word.start)
            if at < len(seams) and seams[at] < word.end:
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
            return verdict_of([Problem("unparseable-command", "the command is not text", 0, 0)])
        bad = check_text(command, allowlist.strict.max_length, COMMAND_WHITESPACE)
        if bad:
            return verdict_of([bad])
        if not command.strip():
            return verdict_of([Problem("unparseable-command", "empty command", 0, len(command))])
        joined = join_continuations(command) if "\\\n" in command else None
        if joined is None:
            problems, invocation = _judge_text(command, allowlist, fast_path, [])
        else:
            text, origin = joined
            seams = [j for j in range(1, len(text)) if origin[j] - origin[j - 1] > 1]
            problems, invocation = _judge_text(text, allowlist, False, seams)
            for p in problems:
                p.start, p.end = to_original(origin, p.start, p.end)
        return verdict_of(problems, invocation=invocation)
    except Exception as exc:  # a bug must never allow, nor crash the run
        return verdict_of([Problem("unparseable-command",
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
        return verdict_of([Problem("missing-argument", "the path is not a string", 0, 0)])
    key = (allowlist.fingerprint, "read", path)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    try:
        bad = check_text(path, allowlist.strict.max_length, "")
        if bad:
            verdict = verdict_of([bad])
        else:
            problem, normal = judge_read(path, allowlist.read)
            verdict = verdict_of([problem] if problem else [], path=normal)
    except Exception as exc:
        verdict = verdict_of([Problem("blocked-read-path",
                                    f"internal error while judging ({type(exc).__name__})",
                                    0, len(path))])
    _remember(key, verdict)
    return verdict


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
