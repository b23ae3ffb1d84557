"""Remove line continuations the way bash does, before any decision is made.

bash deletes every backslash-newline pair outside single quotes (and outside ANSI-C
``$'...'`` strings, comments and quoted-delimiter heredoc bodies) *before* it looks at
what the text means: ``$\\<newline>(id)`` is ``$(id)``, ``a=\\<newline>~`` is ``a=~``,
``&\\<newline>&`` is ``&&``.  Judging the raw text would let a continuation hide an
expansion or an operator, so the engine judges :func:`join_continuations`' text and maps
finding spans back to the original with :func:`to_original`.

The quoting model here is exact for the only text that can ever be allowed: words made
of plain characters, ``'...'``, ``"..."`` and backslash escapes.  Text with the
constructs it does not follow (comments, ``$'...'``, heredocs, substitutions) is denied
whatever happens here; the lexer also denies any backslash-newline it still meets
outside single quotes, so a disagreement between this module and the lexer fails
closed.
"""

from __future__ import annotations


def join_continuations(text: str) -> tuple[str, list[int]] | None:
    """``(joined text, origin)`` or None when ``text`` has no backslash-newline.

    ``origin[i]`` is the index in ``text`` of ``joined[i]``; ``origin[len(joined)]`` is
    ``len(text)``.
    """
    if "\\\n" not in text:
        return None
    out: list[str] = []
    origin: list[int] = []
    i, n = 0, len(text)
    quote, ansi = "", False  # quote: "", "'" (single or $'...'), '"'
    while i < n:
        ch = text[i]
        if quote == "'":
            if ch == "\\" and ansi and i + 1 < n:
                out += text[i:i + 2]
                origin += (i, i + 1)
                i += 2
                continue
            if ch == "'":
                quote = ""
        elif ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            out += text[i:i + 2]
            origin += (i, i + 1)
            i += 2
            continue
        elif ch == '"':
            quote = "" if quote == '"' else '"'
        elif ch == "'" and not quote:
            quote = "'"
            ansi = bool(out) and out[-1] == "$"
        out.append(ch)
        origin.append(i)
        i += 1
    origin.append(n)
    return "".join(out), origin


def to_original(origin: list[int], start: int, end: int) -> tuple[int, int]:
    """The span in the original text of the joined text's ``[start, end)``."""
    last = len(origin) - 1
    start, end = min(max(start, 0), last), min(max(end, 0), last)
    if end <= start:
        return origin[start], origin[start]
    return origin[start], origin[end - 1] + 1
