"""A small quote-aware shell lexer: the engine's pre-scan.

It splits a command into simple commands (words and redirections) joined by operators,
and reports every construct the policy can never allow (substitutions, expansions,
heredocs, subshells, unterminated quotes) as an :class:`Event` named by its rule.  It never
raises and never recurses, whatever the input.

Why a lexer beside bashlex: bashlex is slow (~200 µs for a short command) and has traps
(quoted heredoc delimiters do not parse, substitutions are missed or invented around
quotes, ``((1))`` is misread, deep nesting recurses).  The lexer classifies denials on its
own; an allow is only ever granted when bashlex confirms the same words (see
``engine.confirm_with_bashlex``), or when the text is in the trivially plain subset that
:func:`split_plain` handles exactly.  Both directions fail closed.

The engine hands the lexer text whose line continuations are already joined; one that is
still there outside single quotes means the two disagree about quoting, and is
``unparseable-command``.  The main loop dispatches on the character (``_HANDLERS``), one
small method per special character, and consumes ordinary characters in runs.

Rule names, not codes, are emitted here; the registry maps names to codes.
"""

from __future__ import annotations

import re

from agent_eval.policy.quoting import find_close_char, find_close_paren, split_plain
from agent_eval.policy.syntax import (
    Event,
    Op,
    OpKind,
    Redirect,
    Scan,
    SimpleCommand,
    Word,
    over_the_cap,
)

__all__ = ["scan_command", "split_plain"]

_NAME_START = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_SPECIAL_PARAMS = set("0123456789@*#?$!-")
_GLOB = set("*?[")
# a run of characters that mean nothing to the shell here (`#`, `~`, `!` only matter at
# the start of a word or command, so they are never inside a run)
_ORDINARY = re.compile(r"[^ \t\n#'\"\\$`|&;<>()~!*?\[\]{}]+")
_BLANKS = re.compile(r"[ \t]+")


class _Lexer:
    """One pass over the text; state lives on the instance, nothing recurses."""

    def __init__(self, text: str):
        self.text = text
        self.events: list[Event] = []
        self.counts: dict[str, int] = {}
        self.commands: list[SimpleCommand] = [SimpleCommand()]
        self.buf: list[str] = []
        self.in_word = False
        self.wstart = 0
        self.literal = True
        self.bare = True
        self.target_of: Redirect | None = None
        self.heredocs: list[tuple[str, bool]] = []
        self.depth = 0
        self.single_quoted: list[tuple[int, int]] = []
        self.literal_dollars: set[int] = set()

    def event(self, rule: str, message: str, start: int, end: int) -> None:
        capped = over_the_cap(self.counts, rule)
        if capped is None:
            self.events.append(Event(rule, message, start, end))
        elif capped:
            self.events.append(Event(rule, capped, start, end))

    def begin_word(self, i: int) -> None:
        if not self.in_word:
            self.in_word, self.wstart, self.literal, self.bare = True, i, True, True
            self.buf = []

    def finish_word(self, end: int) -> None:
        if not self.in_word:
            return
        self.in_word = False
        word = Word("".join(self.buf), self.wstart, end, self.literal, self.bare)
        if self.target_of is not None:
            redirect, self.target_of = self.target_of, None
            redirect.target = word
            redirect.end = end
            if redirect.op in ("<<", "<<-"):
                self.heredocs.append((word.value, redirect.op == "<<-"))
        else:
            self.commands[-1].words.append(word)

    def end_command(self, kind: OpKind, start: int, end: int) -> None:
        self.finish_word(start)
        self.check_dangling_redirect(start)
        self.commands.append(SimpleCommand(join=Op(kind, start, end)))

    def check_dangling_redirect(self, at: int) -> None:
        if self.target_of is not None:
            r = self.target_of
            self.event("unparseable-command", f"redirection {r.op} has no target", r.start, at)
            self.target_of = None

    def at_command_start(self) -> bool:
        cmd = self.commands[-1]
        return not self.in_word and not cmd.words and not cmd.redirects

    def skip_heredoc_bodies(self, i: int) -> int:
        """``i`` is just past a newline; skip each pending heredoc body, return new index."""
        text, n = self.text, len(self.text)
        for delim, strip_tabs in self.heredocs:
            while i < n:
                nl = text.find("\n", i)
                line_end = n if nl < 0 else nl
                line = text[i:line_end]
                i = n if nl < 0 else nl + 1
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    break
        self.heredocs = []
        return i

    def dollar(self, i: int, quoted: bool = False) -> int:
        """Handle ``$`` at ``i`` (inside or outside double quotes); return the next index.

        Inside double quotes ``$'`` and ``$"`` are a literal dollar (ANSI-C and locale
        quoting exist only outside quotes)."""
        text, n = self.text, len(self.text)
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "(":
            end = self.dollar_paren(i)
        elif nxt == "{":
            end = self.closed_by(i, "}", "complex-shell", "parameter expansion ${...}")
        elif nxt == "'" and not quoted:
            end = self.closed_by(i, "'", "complex-shell", "ANSI-C quoting $'...'")
        elif nxt == "[":
            end = self.closed_by(i, "]", "complex-shell", "arithmetic expansion $[...]")
        elif nxt == '"' and not quoted:
            end = i + 1
            self.event("complex-shell", 'locale quoting $"..."', i, end)
        elif nxt in _NAME_START:
            end = i + 2
            while end < n and (text[end].isascii() and (text[end].isalnum() or text[end] == "_")):
                end += 1
            self.event("complex-shell", f"parameter expansion {text[i:end]}", i, end)
        elif nxt and nxt in _SPECIAL_PARAMS:
            end = i + 2
            self.event("complex-shell", f"parameter expansion {text[i:end]}", i, end)
        else:
            self.literal_dollars.add(i)
            self.buf.append("$")
            return i + 1
        self.literal = False
        self.buf.append(text[i:end])
        return end

    def dollar_paren(self, i: int) -> int:
        text, n = self.text, len(self.text)
        if i + 2 < n and text[i + 2] == "(":
            rule, what = "complex-shell", "arithmetic expansion $((...))"
        else:
            rule, what = "command-substitution", "command substitution $(...)"
        close = find_close_paren(text, i + 2)
        end = n if close < 0 else close
        if close < 0:
            self.event("unparseable-command", f"unterminated {what}", i, n)
        self.event(rule, what, i, end)
        return end

    def closed_by(self, i: int, close: str, rule: str, what: str) -> int:
        """A two-character opener at ``i`` (``${``, ``$'``, ``$[``) up to ``close``."""
        found = find_close_char(self.text, i + 2, close)
        end = len(self.text) if found < 0 else found
        if found < 0:
            self.event("unparseable-command", f"unterminated {what}", i, end)
        label = f"parameter expansion {self.text[i:end][:40]}" if close == "}" else what
        self.event(rule, label, i, end)
        return end

    def backtick(self, i: int) -> int:
        close = find_close_char(self.text, i + 1, "`")
        end = len(self.text) if close < 0 else close
        if close < 0:
            self.event("unparseable-command", "unterminated backtick substitution", i, end)
        self.event("command-substitution", "backtick command substitution", i, end)
        self.literal = False
        self.buf.append(self.text[i:end])
        return end

    def stray_continuation(self, i: int) -> None:
        """The engine joins line continuations before lexing; one left over means the
        joining and the lexer disagree about quoting, so nothing can be proven."""
        self.event("unparseable-command", "line continuation in a place the engine "
                   "cannot follow", i, i + 2)

    def double_quoted(self, i: int) -> int:
        """``i`` is at the opening ``"``; return the index after the closing one."""
        text, n = self.text, len(self.text)
        j = i + 1
        while j < n:
            ch = text[j]
            if ch == '"':
                return j + 1
            if ch == "\\" and j + 1 < n:
                nxt = text[j + 1]
                if nxt in '$`"\\':
                    self.buf.append(nxt)
                elif nxt == "\n":
                    self.stray_continuation(j)
                else:
                    self.buf.append("\\" + nxt)
                j += 2
            elif ch == "$":
                j = self.dollar(j, quoted=True)
            elif ch == "`":
                j = self.backtick(j)
            else:
                self.buf.append(ch)
                j += 1
        self.event("unparseable-command", "unterminated double quote", i, n)
        return n

    def redirect(self, i: int) -> int:
        text, n = self.text, len(self.text)
        fd: str | None = None
        start = i
        if self.in_word and self.bare and self.buf and "".join(self.buf).isdigit():
            fd, start, self.in_word = "".join(self.buf), self.wstart, False
        else:
            self.finish_word(i)
        self.check_dangling_redirect(i)
        for op in ("<<<", "<<-", "<<", "<>", "<&", "<(", ">>", ">&", ">|", ">(", "<", ">"):
            if text.startswith(op, i):
                break
        if op in ("<(", ">("):
            close = find_close_paren(text, i + 2)
            end = n if close < 0 else close
            if close < 0:
                self.event("unparseable-command", f"unterminated {op}...)", i, n)
            self.event("command-substitution", f"process substitution {op}...)", i, end)
            self.begin_word(i)
            self.literal = False
            self.buf.append(text[i:end])
            return end
        redirect = Redirect(op, fd, start, i + len(op))
        self.commands[-1].redirects.append(redirect)
        if op in ("<<", "<<-", "<<<"):
            kind = "here-string <<<" if op == "<<<" else f"here-document {op}"
            self.event("heredoc", kind, start, i + len(op))
        self.target_of = redirect
        return i + len(op)

    # -- one handler per special character; each takes and returns the index -------

    def on_blank(self, i: int) -> int:
        """A run of blanks ends the word once; the rest of the run changes nothing, so it
        is skipped in one step (indented code in an edit body is mostly blanks)."""
        self.finish_word(i)
        blanks = _BLANKS.match(self.text, i)
        return blanks.end() if blanks else i + 1

    def on_newline(self, i: int) -> int:
        self.end_command("\n", i, i + 1)
        return self.skip_heredoc_bodies(i + 1) if self.heredocs else i + 1

    def on_hash(self, i: int) -> int:
        if self.in_word:
            return self.on_other(i)
        nl = self.text.find("\n", i)
        end = len(self.text) if nl < 0 else nl
        self.event("complex-shell", "comment", i, end)
        return end

    def on_single_quote(self, i: int) -> int:
        text, n = self.text, len(self.text)
        self.begin_word(i)
        self.bare = False
        close = text.find("'", i + 1)
        if close < 0:
            self.event("unparseable-command", "unterminated single quote", i, n)
            self.buf.append(text[i + 1:])
            self.single_quoted.append((i + 1, n))
            return n
        self.buf.append(text[i + 1:close])
        self.single_quoted.append((i + 1, close))
        return close + 1

    def on_double_quote(self, i: int) -> int:
        self.begin_word(i)
        self.bare = False
        return self.double_quoted(i)

    def on_backslash(self, i: int) -> int:
        text = self.text
        if text.startswith("\\\n", i):
            self.stray_continuation(i)
            return i + 2
        self.begin_word(i)
        self.bare = False
        self.buf.append(text[i + 1:i + 2] or "\\")
        return i + 2

    def on_dollar(self, i: int) -> int:
        self.begin_word(i)
        return self.dollar(i)

    def on_backtick(self, i: int) -> int:
        self.begin_word(i)
        return self.backtick(i)

    def on_pipe(self, i: int) -> int:
        text = self.text
        op: OpKind = "||" if text.startswith("||", i) else "|&" if text.startswith("|&", i) else "|"
        self.end_command(op, i, i + len(op))
        return i + len(op)

    def on_ampersand(self, i: int) -> int:
        text = self.text
        if not text.startswith("&>", i):
            op: OpKind = "&&" if text.startswith("&&", i) else "&"
            self.end_command(op, i, i + len(op))
            return i + len(op)
        self.finish_word(i)
        self.check_dangling_redirect(i)
        redirect_op = "&>>" if text.startswith("&>>", i) else "&>"
        redirect = Redirect(redirect_op, "&", i, i + len(redirect_op))
        self.commands[-1].redirects.append(redirect)
        self.target_of = redirect
        return i + len(redirect_op)

    def on_semicolon(self, i: int) -> int:
        if self.text.startswith((";;", ";&"), i):
            self.event("complex-shell", "case clause terminator", i, i + 2)
        self.end_command(";", i, i + 1)
        return i + 1

    def on_open_paren(self, i: int) -> int:
        text, n = self.text, len(self.text)
        if text.startswith("((", i) and not self.in_word:
            close = text.find("))", i + 2)
            end = n if close < 0 else close + 2
            if close < 0:
                self.event("unparseable-command", "unterminated ((...))", i, n)
            self.event("complex-shell", "arithmetic command ((...))", i, end)
            self.begin_word(i)
            self.literal = False
            self.buf.append(text[i:end])
            return end
        self.event("complex-shell", "subshell or group (...)", i, i + 1)
        self.depth += 1
        self.end_command("(", i, i + 1)
        return i + 1

    def on_close_paren(self, i: int) -> int:
        if self.depth == 0:
            self.event("unparseable-command", "unbalanced )", i, i + 1)
        else:
            self.depth -= 1
        self.end_command(")", i, i + 1)
        return i + 1

    def on_other(self, i: int) -> int:
        """Ordinary characters, in runs; ``~ ! * ? [ ] { }`` one at a time."""
        text = self.text
        run = _ORDINARY.match(text, i)
        if run is not None:
            self.begin_word(i)
            self.buf.append(run.group())
            return run.end()
        ch = text[i]
        if ch == "~" and (not self.in_word or text[i - 1] in "=:"):
            self.event("complex-shell", "tilde expansion ~", i, i + 1)
        elif ch == "!" and self.at_command_start():
            self.event("complex-shell", "pipeline negation !", i, i + 1)
        if ch in _GLOB:
            self.event("complex-shell", f"glob pattern {ch}", i, i + 1)
        elif ch in "{}":
            self.event("complex-shell", f"brace group or expansion {ch}", i, i + 1)
        self.begin_word(i)
        self.buf.append(ch)
        return i + 1

    def run(self) -> Scan:
        text, n, i = self.text, len(self.text), 0
        handlers = _HANDLERS
        while i < n:
            i = handlers.get(text[i], _Lexer.on_other)(self, i)
        self.finish_word(n)
        self.check_dangling_redirect(n)
        if self.heredocs:
            self.skip_heredoc_bodies(n)
        if self.depth > 0:
            self.event("unparseable-command", "unclosed (", n, n)
        return Scan(self.commands, self.events, self.single_quoted, self.literal_dollars)


_HANDLERS = {
    " ": _Lexer.on_blank, "\t": _Lexer.on_blank, "\n": _Lexer.on_newline, "#": _Lexer.on_hash,
    "'": _Lexer.on_single_quote, '"': _Lexer.on_double_quote, "\\": _Lexer.on_backslash,
    "$": _Lexer.on_dollar, "`": _Lexer.on_backtick, "|": _Lexer.on_pipe,
    "&": _Lexer.on_ampersand, ";": _Lexer.on_semicolon, "<": _Lexer.redirect,
    ">": _Lexer.redirect, "(": _Lexer.on_open_paren, ")": _Lexer.on_close_paren,
}


def scan_command(text: str) -> Scan:
    """Lex ``text`` into simple commands and events.  Never raises on any ``str``."""
    return _Lexer(text).run()
