"""Which characters a judged string may hold, decided by Unicode property, not by a list.

Every text the engine judges (a bash command, a read path, every key and every string
value of a tool call's arguments) is refused (``invalid-bytes``) when it holds a
character that a human reading the transcript cannot see, or that another program
reads differently from Python:

- general category **Cc** (controls), except the whitespace the context allows: TAB and
  LF in a bash command or a plain string value, none in a path or a key (a CR is refused
  everywhere: a terminal shows the text after it over the text before it);
- **Cf** (format): zero-width spaces and joiners, bidi embeddings, overrides and
  isolates, the soft hyphen U+00AD, U+061C, U+180E, U+2065, U+206A-206F, U+FEFF,
  U+FFF9-FFFB, U+1BCA0-1BCA3, U+1D173-1D17A and the tag characters U+E0000-E007F (text a
  parent model reads and a human never sees);
- **Cs** (a lone surrogate: it cannot be encoded as UTF-8, so no program receives it as
  judged), **Co** (private use: its glyph is whatever a font makes of it) and **Cn**
  (unassigned in this Python's Unicode database: its properties are unknown, so it
  fails closed);
- **Zl**, **Zp** (line and paragraph separators: a line break to a reader, a letter to
  a shell);
- **Default_Ignorable_Code_Point**: rendered as nothing by definition.  It is Cf plus
  the variation selectors (U+180B-180D, U+180F, U+FE00-FE0F, U+E0100-E01EF) plus
  Other_Default_Ignorable_Code_Point (U+034F, U+115F-1160, U+17B4-17B5, U+2065,
  U+3164, U+FFA0, U+FFF0-FFF8, U+E0000-E0FFF outside the ranges above), some of which
  are letters by category (the Hangul fillers).  Python's ``unicodedata`` does not
  expose the property, so the two sets that Cf does not cover are copied from the
  Unicode Character Database's PropList.txt (they have been stable since Unicode 6.3);
- a combining mark (**Mn**, **Me**) with no base: at the start of the text, or after a
  character that is not a letter, a number or another mark (a mark stacked on a quote,
  a space or an operator changes how the text looks without changing what runs).

Everything else stays allowed, so ordinary non-ASCII text in values (names and messages
such as ``Zoë``, ``Grüße``, ``東京``, ``naïve`` written with a combining diaeresis, an
emoji written without a variation selector or a joiner) is judged like ASCII text.
No normalisation is done: ``；`` is not ``;`` and ``ｅｎｖ`` is not ``env`` to bash.

The check is linear in the text: ASCII text is one regular-expression search; other
text classifies each distinct character once and scans the text once more only when a
refused character or a combining mark is present.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache

COMMAND_WHITESPACE = "\t\n"
"""Controls a bash command and a plain string value may hold (a path or a key: none)."""

_ASCII_CONTROLS = {
    "": re.compile("[\x00-\x1f\x7f]"),
    COMMAND_WHITESPACE: re.compile("[\x00-\x08\x0b-\x1f\x7f]"),
}
_REFUSED_CATEGORIES = {
    "Cc": "control character",
    "Cf": "invisible format character",
    "Cs": "lone surrogate (not encodable as UTF-8)",
    "Co": "private-use character",
    "Cn": "unassigned code point",
    "Zl": "line separator",
    "Zp": "paragraph separator",
}
# PropList.txt: Variation_Selector and Other_Default_Ignorable_Code_Point (Unicode 15.1;
# https://www.unicode.org/Public/UCD/latest/ucd/PropList.txt); with Cf they make up
# Default_Ignorable_Code_Point (DerivedCoreProperties.txt).
_IGNORABLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180D),
    (0x180F, 0x180F), (0x2065, 0x2065), (0x3164, 0x3164), (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF),
)
_IGNORABLE_STARTS = tuple(low for low, _ in _IGNORABLE_RANGES)
_MARK = "mark"


@lru_cache(maxsize=4096)
def classify(ch: str) -> str | None:
    """Why ``ch`` is refused wherever it stands, ``_MARK`` for a combining mark (refused
    only without a base), or None."""
    code = ord(ch)
    at = bisect_right(_IGNORABLE_STARTS, code) - 1
    if at >= 0 and code <= _IGNORABLE_RANGES[at][1]:
        return "default-ignorable (invisible) character"
    category = unicodedata.category(ch)
    why = _REFUSED_CATEGORIES.get(category)
    if why is not None:
        return why
    return _MARK if category in ("Mn", "Me") else None


def _is_base(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LNM"


def find_hidden(text: str, allowed: str = "") -> tuple[int, str] | None:
    """The index of the first refused character of ``text`` and why, or None.

    ``allowed`` names the controls this context accepts (``""`` or
    :data:`COMMAND_WHITESPACE`)."""
    if text.isascii():
        found = _ASCII_CONTROLS[allowed].search(text)
        return None if found is None else (found.start(), "control character")
    refused: dict[str, str] = {}
    marks: set[str] = set()
    for ch in set(text):
        why = classify(ch)
        if why == _MARK:
            marks.add(ch)
        elif why is not None and ch not in allowed:
            refused[ch] = why
    if not refused and not marks:
        return None
    for i, ch in enumerate(text):
        if ch in refused:
            return i, refused[ch]
        if ch in marks and (i == 0 or not _is_base(text[i - 1])):
            return i, "combining mark with no base character"
    return None


def escape_hidden(text: str) -> str:
    """``text`` with every character :func:`find_hidden` could refuse (controls, TAB and
    LF included; combining marks too) written as a Python escape, for docs and terminals
    that must show what is there."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code > 0x7F and classify(ch) is not None:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def describe(text: str, index: int) -> str:
    """``U+XXXX`` of the character at ``index``, for messages."""
    return f"U+{ord(text[index]):04X}"
