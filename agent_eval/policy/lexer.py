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

Rule names, not codes, are emitted here; the registry maps names to codes.
"""

from __future__ import annotations

import re

from agent_eval.policy.syntax import Event, Op, OpKind, Redirect, Scan, SimpleCommand, Word

_SAFE = r"[A-Za-z0-9_./:=,@%+\-]"
_SEGMENT = rf"(?:{_SAFE}|'[^']*'|\"[^\"$`\\!]*\")"
_PLAIN = re.compile(rf"[ \t]*(?:{_SEGMENT}+(?:[ \t]+{_SEGMENT}+)*)?[ \t]*")
_PLAIN_WORD = re.compile(rf"{_SEGMENT}+")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def split_plain(text: str) -> list[Word] | None:
    """Words of a *plain* command, or None when the text is not plain.

    Plain means: one line of words made only of safe unquoted characters, single-quoted
    strings and double-quoted strings without ``$``, backtick, backslash or ``!``.  For
    such text shell word splitting is exactly "split on blanks, drop the quotes", so no
    parser is needed.  A property test proves the verdict equals the full path's.
    """
    if _PLAIN.fullmatch(text) is None:
        return None
    words = []
    for m in _PLAIN_WORD.finditer(text):
        raw = m.group()
        if "'" in raw or '"' in raw:
            value = _QUOTED.sub(lambda q: q.group(1) if q.group(1) is not None else q.group(2), raw)
            words.append(Word(value, m.start(), m.end(), True, False))
        else:
            words.append(Word(raw, m.start(), m.end()))
    return words


_NAME_START = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_SPECIAL_PARAMS = set("0123456789@*#?$!-")
_GLOB = set("*?[")


def _find_close_paren(text: str, i: int) -> int:
    """Index just past the ``)`` closing the ``(`` before ``i``; -1 when unterminated."""
    depth, n = 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'":
            j = text.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if ch == '"':
            i = _find_close_double(text, i + 1)
            if i < 0:
                return -1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _find_close_double(text: str, i: int) -> int:
    """Index just past the ``"`` closing a double-quoted string opened before ``i``."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        else:
            i += 1
    return -1


def _find_close_char(text: str, i: int, close: str) -> int:
    """Index just past the next unescaped ``close``; -1 when unterminated."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == close:
            return i + 1
        else:
            i += 1
    return -1


class _Lexer:
    """One pass over the text; state lives on the instance, nothing recurses."""

    def __init__(self, text: str):
        self.text = text
        self.events: list[Event] = []
        self.commands: list[SimpleCommand] = [SimpleCommand()]
        self.buf: list[str] = []
        self.in_word = False
        self.wstart = 0
        self.literal = True
        self.bare = True
        self.target_of: Redirect | None = None
        self.heredoc_pending: Redirect | None = None
        self.heredocs: list[tuple[str, bool]] = []
        self.depth = 0

    def event(self, rule: str, message: str, start: int, end: int) -> None:
        self.events.append(Event(rule, message, start, end))

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
        """Handle ``$`` at ``i`` (inside or outside double quotes); return the next index."""
        text, n = self.text, len(self.text)
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "(":
            if i + 2 < n and text[i + 2] == "(":
                rule, what = "complex-shell", "arithmetic expansion $((...))"
            else:
                rule, what = "command-substitution", "command substitution $(...)"
            close = _find_close_paren(text, i + 2)
            end = n if close < 0 else close
            if close < 0:
                self.event("unparseable-command", f"unterminated {what}", i, n)
            self.event(rule, what, i, end)
        elif nxt == "{":
            close = _find_close_char(text, i + 2, "}")
            end = n if close < 0 else close
            if close < 0:
                self.event("unparseable-command", "unterminated ${...}", i, n)
            self.event("complex-shell", f"parameter expansion {text[i:end][:40]}", i, end)
        elif nxt == "'":
            close = _find_close_char(text, i + 2, "'")
            end = n if close < 0 else close
            if close < 0:
                self.event("unparseable-command", "unterminated $'...' string", i, n)
            self.event("complex-shell", "ANSI-C quoting $'...'", i, end)
        elif nxt == "[":
            close = _find_close_char(text, i + 2, "]")
            end = n if close < 0 else close
            self.event("complex-shell", "arithmetic expansion $[...]", i, end)
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
            self.buf.append("$")
            return i + 1
        self.literal = False
        self.buf.append(text[i:end])
        return end

    def backtick(self, i: int) -> int:
        close = _find_close_char(self.text, i + 1, "`")
        end = len(self.text) if close < 0 else close
        if close < 0:
            self.event("unparseable-command", "unterminated backtick substitution", i, end)
        self.event("command-substitution", "backtick command substitution", i, end)
        self.literal = False
        self.buf.append(self.text[i:end])
        return end

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
                elif nxt != "\n":
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
            close = _find_close_paren(text, i + 2)
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

    def run(self) -> Scan:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            ch = text[i]
            if ch in " \t":
                self.finish_word(i)
                i += 1
            elif ch == "\n":
                self.end_command("\n", i, i + 1)
                i = self.skip_heredoc_bodies(i + 1) if self.heredocs else i + 1
            elif ch == "#" and not self.in_word:
                nl = text.find("\n", i)
                end = n if nl < 0 else nl
                self.event("complex-shell", "comment", i, end)
                i = end
            elif ch == "'":
                self.begin_word(i)
                self.bare = False
                close = text.find("'", i + 1)
                if close < 0:
                    self.event("unparseable-command", "unterminated single quote", i, n)
                    self.buf.append(text[i + 1:])
                    i = n
                else:
                    self.buf.append(text[i + 1:close])
                    i = close + 1
            elif ch == '"':
                self.begin_word(i)
                self.bare = False
                i = self.double_quoted(i)
            elif ch == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    if self.in_word:
                        self.bare = False  # `l\<newline>s` must not pass as a bare `ls`
                    i += 2
                    continue
                self.begin_word(i)
                self.bare = False
                self.buf.append(text[i + 1:i + 2] or "\\")
                i += 2
            elif ch == "$":
                self.begin_word(i)
                i = self.dollar(i)
            elif ch == "`":
                self.begin_word(i)
                i = self.backtick(i)
            elif ch == "|":
                op = "||" if text.startswith("||", i) else "|&" if text.startswith("|&", i) else "|"
                self.end_command(op, i, i + len(op))
                i += len(op)
            elif ch == "&":
                if text.startswith("&>", i):
                    self.finish_word(i)
                    self.check_dangling_redirect(i)
                    op = "&>>" if text.startswith("&>>", i) else "&>"
                    redirect = Redirect(op, "&", i, i + len(op))
                    self.commands[-1].redirects.append(redirect)
                    self.target_of = redirect
                    i += len(op)
                else:
                    op = "&&" if text.startswith("&&", i) else "&"
                    self.end_command(op, i, i + len(op))
                    i += len(op)
            elif ch == ";":
                if text.startswith(";;", i) or text.startswith(";&", i):
                    self.event("complex-shell", "case clause terminator", i, i + 2)
                self.end_command(";", i, i + 1)
                i += 1
            elif ch in "<>":
                i = self.redirect(i)
            elif ch == "(":
                if text.startswith("((", i) and not self.in_word:
                    close = text.find("))", i + 2)
                    end = n if close < 0 else close + 2
                    if close < 0:
                        self.event("unparseable-command", "unterminated ((...))", i, n)
                    self.event("complex-shell", "arithmetic command ((...))", i, end)
                    self.begin_word(i)
                    self.literal = False
                    self.buf.append(text[i:end])
                    i = end
                    continue
                else:
                    self.event("complex-shell", "subshell or group (...)", i, i + 1)
                self.depth += 1
                self.end_command("(", i, i + 1)
                i += 1
            elif ch == ")":
                if self.depth == 0:
                    self.event("unparseable-command", "unbalanced )", i, i + 1)
                else:
                    self.depth -= 1
                self.end_command(")", i, i + 1)
                i += 1
            else:
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
                i += 1
        self.finish_word(n)
        self.check_dangling_redirect(n)
        if self.heredocs:
            self.skip_heredoc_bodies(n)
        if self.depth > 0:
            self.event("unparseable-command", "unclosed (", n, n)
        return Scan(self.commands, self.events)


def scan_command(text: str) -> Scan:
    """Lex ``text`` into simple commands and events.  Never raises on any ``str``."""
    return _Lexer(text).run()
