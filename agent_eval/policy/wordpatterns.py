"""Command patterns: a program with a fixed prefix followed by plain words.

An allow-list's ``patterns`` (``AllowList.patterns``) allow a command by its words, the
way an agent CLI's permission rule does (``uv run scripts/db_query.py *``, ``git status``),
but read strictly: a pattern only ever matches the words of *one* simple command whose
words are all plain literals, so the engine has already refused every chain, pipe,
redirection, substitution, expansion, glob, wrapper and inline-code interpreter before a
pattern is consulted.  Pure; never raises on any input.

Pattern syntax (whitespace separates the pattern's tokens; each token is one word):

- a token ``*`` on its own stands for any number of words (none included);
- ``*`` inside a token matches any characters within that one word, ``?`` one character;
- a token that ends in ``*`` and is the last token also admits any further words, so
  ``npm run test*`` allows ``npm run test:unit --watch`` (as ``Bash(npm run test*)`` and
  OpenCode's ``"npm run test*"`` do) and ``ls *`` allows ``ls`` alone;
- every other character is literal (``\\*`` is not an escape: write the pattern plainly).

``unless`` patterns carve exceptions: a command that matches one of them is not allowed
by this pattern (``git *`` unless ``git push *``).
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_TOKENS = 64


@lru_cache(maxsize=4096)
def _compile(pattern: str) -> tuple[tuple[re.Pattern[str] | None, ...], bool]:
    """The pattern's tokens (None for a lone ``*``) and whether it ends open."""
    tokens = pattern.split()
    open_end = bool(tokens) and tokens[-1].endswith("*")
    compiled: list[re.Pattern[str] | None] = []
    for token in tokens[:MAX_TOKENS]:
        if token == "*":
            compiled.append(None)
            continue
        body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in token)
        compiled.append(re.compile(body, re.DOTALL))
    if open_end and compiled and compiled[-1] is not None:
        compiled.append(None)
    return tuple(compiled), open_end


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable pattern, or None."""
    if not isinstance(pattern, str) or not pattern.split():
        return "a pattern needs at least one word"
    if len(pattern.split()) > MAX_TOKENS:
        return f"a pattern has at most {MAX_TOKENS} words"
    return None


def match_words(pattern: str, words: list[str]) -> bool:
    """True when the words of one command match ``pattern`` (see the module docstring)."""
    tokens, _ = _compile(pattern)
    if not tokens:
        return False
    n, m = len(tokens), len(words)
    # reach[j]: the first j words are matched by the tokens seen so far
    reach = [False] * (m + 1)
    reach[0] = True
    for token in tokens:
        nxt = [False] * (m + 1)
        if token is None:
            seen = False
            for j in range(m + 1):
                seen = seen or reach[j]
                nxt[j] = seen
        else:
            for j in range(m):
                if reach[j] and token.fullmatch(words[j]):
                    nxt[j + 1] = True
        reach = nxt
        if not any(reach):
            return False
    return reach[m] and n > 0


def literal_prefix(pattern: str) -> list[str]:
    """The pattern's leading words that contain no wildcard (``git status`` of ``git status *``)."""
    prefix = []
    for token in pattern.split():
        if "*" in token or "?" in token:
            break
        prefix.append(token)
    return prefix
