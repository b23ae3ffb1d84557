"""Prose lines fitted to a terminal's width: a line longer than ``width`` breaks between
words, its continuation indented under its own start plus four spaces, so a gate check or
a comparison's method reads as one block at 80 or 100 columns.  ``width`` None (a pipe
without ``$COLUMNS``) leaves every line whole, for grep."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

INDENT = "    "


def fit_lines(lines: Iterable[str], width: int | None, *, indent: str = INDENT) -> list[str]:
    """Each line as is when it fits (or ``width`` is None), else wrapped between words."""
    out: list[str] = []
    for line in lines:
        if width is None or len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line.lstrip(" "), width, initial_indent=lead,
                             subsequent_indent=lead + indent, break_long_words=False,
                             break_on_hyphens=False)
    return out
