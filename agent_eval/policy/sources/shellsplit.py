"""How each agent CLI cuts a bash command into the pieces its rules are matched against,
emulated over the engine's own lexer (``policy/lexer.py``): no second shell parser.

The CLIs parse with tree-sitter-bash; the lexer gives the same simple commands for the
commands agents emit (words, redirections, the operators between them, and the spans of
every substitution, whose insides are lexed again here).  Where the two can differ (shell
keywords of compound statements, which tree-sitter nests and the lexer leaves as words)
the difference is noted on the function.  Pure; never raises on any ``str``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_eval.policy.commands import SHELL_KEYWORDS
from agent_eval.policy.lexer import scan_command
from agent_eval.policy.syntax import Scan, SimpleCommand

MAX_DEPTH = 8
MAX_PIECES = 512
_ASSIGNMENT_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(slots=True)
class Piece:
    """One simple command as an agent CLI sees it.

    ``text`` is its source text from its first word (or assignment) to the end of its last
    word or redirection (heredoc bodies excluded); ``words`` the word values after leading
    assignments and shell keywords; ``raw_words`` the same words as written (quotes kept);
    ``redirects`` the redirection operators with their targets as written; ``nested``
    whether it was found inside a substitution."""

    text: str
    words: list[str]
    raw_words: list[str]
    redirects: list[tuple[str, str]] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    nested: bool = False
    join: str | None = None


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and not name[0].isdigit() and set(name) <= _ASSIGNMENT_CHARS


def _piece(text: str, cmd: SimpleCommand, nested: bool) -> Piece | None:
    spans = [(w.start, w.end) for w in cmd.words] + [(r.start, r.end) for r in cmd.redirects]
    if not spans:
        return None
    start = min(s for s, _ in spans)
    end = max(e for _, e in spans)
    words = list(cmd.words)
    assignments = []
    while words and words[0].bare and _is_assignment(words[0].value):
        assignments.append(words.pop(0).value)
    while words and words[0].bare and words[0].value in SHELL_KEYWORDS:
        words.pop(0)
    redirects = [(f"{r.fd or ''}{r.op}", text[r.target.start:r.target.end] if r.target else "")
                 for r in cmd.redirects]
    return Piece(
        text=text[start:end],
        words=[w.value for w in words],
        raw_words=[text[w.start:w.end] for w in words],
        redirects=redirects,
        assignments=assignments,
        nested=nested,
        join=cmd.join.kind if cmd.join else None,
    )


def _substitution_bodies(text: str, scan: Scan) -> list[str]:
    """The texts inside every ``$(...)``, backtick and process substitution."""
    bodies = []
    for event in scan.events:
        if event.rule != "command-substitution":
            continue
        chunk = text[event.start:event.end]
        if chunk.startswith(("$(", "<(", ">(")):
            inner = chunk[2:-1] if chunk.endswith(")") else chunk[2:]
        elif chunk.startswith("`"):
            inner = chunk[1:-1] if chunk.endswith("`") and len(chunk) > 1 else chunk[1:]
        else:
            continue
        bodies.append(inner)
    return bodies


def all_commands(text: str) -> list[Piece]:
    """Every simple command of ``text``, those inside substitutions too (OpenCode's
    ``descendantsOfType("command")``), outer ones first.  A compound statement's keywords
    (``if``, ``then``, ``do``...) are dropped from the head of the command they lead,
    which is where tree-sitter nests the real command."""
    pieces: list[Piece] = []
    pending = [(text, False, 0)]
    while pending and len(pieces) < MAX_PIECES:
        chunk, nested, depth = pending.pop(0)
        scan = scan_command(chunk)
        for cmd in scan.commands:
            piece = _piece(chunk, cmd, nested)
            if piece is not None:
                pieces.append(piece)
        if depth < MAX_DEPTH:
            pending.extend((body, True, depth + 1) for body in _substitution_bodies(chunk, scan))
    return pieces


def top_commands(text: str) -> tuple[list[Piece], Scan]:
    """The simple commands at the top level of ``text`` (split at ``&&``, ``||``, ``;``,
    ``|``, ``&`` and newlines), with the scan for its events."""
    scan = scan_command(text)
    pieces = [p for p in (_piece(text, c, False) for c in scan.commands) if p is not None]
    return pieces, scan


def literal_sequence(text: str) -> list[list[str]] | None:
    """Codex's ``parse_shell_lc_plain_commands``: the argv of each command when the script
    is only literal words joined by ``&&``, ``||``, ``;`` and ``|``, else None.

    Literal means what Codex's ``is_literal_word_or_number`` and its string readers accept:
    no expansion, substitution, glob, brace, tilde, backslash or comment (any lexer
    event refuses), no redirection, no subshell, no ``&``; quotes are removed."""
    scan = scan_command(text)
    if scan.events:
        return None
    commands = []
    for cmd in scan.commands:
        if cmd.redirects:
            return None
        if cmd.join is not None and cmd.join.kind not in ("&&", "||", ";", "|", "\n"):
            return None
        if not cmd.words:
            if cmd.join is not None and cmd.join.kind in ("&&", "||", "|"):
                return None
            continue
        for word in cmd.words:
            raw = text[word.start:word.end]
            if "\\" in raw:
                return None
        commands.append([w.value for w in cmd.words])
    return commands or None


def heredoc_prefix(text: str) -> list[str] | None:
    """Codex's ``parse_shell_lc_single_command_prefix``: the argv of the one command of a
    script whose only construct beyond literal words is a heredoc (``python3 <<'PY'``),
    else None.  The heredoc body is not part of what Codex's rules see."""
    scan = scan_command(text)
    if not scan.events or any(e.rule != "heredoc" for e in scan.events):
        return None
    commands = [c for c in scan.commands if c.words or c.redirects]
    if len(commands) != 1:
        return None
    cmd = commands[0]
    if not cmd.words or any(r.op not in ("<<", "<<-") for r in cmd.redirects):
        return None
    if any("\\" in text[w.start:w.end] for w in cmd.words):
        return None
    return [w.value for w in cmd.words]
