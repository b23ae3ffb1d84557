"""OpenCode's wildcard matcher, as its source writes it.

``Wildcard.match`` of OpenCode (``packages/core/src/util/wildcard.ts``, the same function
in ``packages/opencode/src/util/wildcard.ts`` before 1.2; read at anomalyco/opencode, the
repository formerly sst/opencode): backslashes become ``/`` in both the text and the
pattern, ``*`` matches any run of characters *including* ``/``, blanks and newlines, ``?``
exactly one character, everything else is literal, and the whole text must match.  A
pattern that ends in a blank and ``*`` also matches without that tail (``"ls *"`` matches
``ls``).  Matching is case-sensitive except on Windows, which is not emulated.  Pure.
"""

from __future__ import annotations


def glob_match(text: str, pattern: str, *, question: bool = True) -> bool:
    """``*`` (and ``?`` when ``question``) glob over the whole text in
    O(len(text) * len(pattern)), without the backtracking a regular expression with many
    ``*`` can fall into on long commands."""
    one = "?" if question else "*"
    t = p = 0
    star = -1
    mark = 0
    while t < len(text):
        if p < len(pattern) and (pattern[p] == one or pattern[p] == text[t]) and pattern[p] != "*":
            t += 1
            p += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, t
            p += 1
        elif star >= 0:
            p = star + 1
            mark += 1
            t = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def wildcard_match(text: str, pattern: str) -> bool:
    """True when OpenCode's ``Wildcard.match(text, pattern)`` is true."""
    text = text.replace("\\", "/")
    pattern = pattern.replace("\\", "/")
    if pattern.endswith(" *"):
        return glob_match(text, pattern[:-2]) or glob_match(text, pattern)
    return glob_match(text, pattern)
