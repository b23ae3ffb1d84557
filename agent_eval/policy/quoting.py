"""Text helpers of the lexer: the plain subset, and where a quoted or bracketed
construct ends.  Pure; nothing here raises or recurses.
"""

from __future__ import annotations

import re

from agent_eval.policy.syntax import Word

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


def find_close_paren(text: str, i: int) -> int:
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
            i = find_close_double(text, i + 1)
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


def find_close_double(text: str, i: int) -> int:
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


def find_close_char(text: str, i: int, close: str) -> int:
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
