"""Model text on the terminal: control characters shown, never obeyed.

A model (or a server, or an imported transcript) can write ``ESC [ 2 J`` to clear the
screen, an OSC 8 hyperlink that hides where it points, an OSC 52 write to the clipboard,
``\\r`` to overwrite a line, or the 8-bit C1 forms of the same (``\\x9b`` is CSI).  Every
string that came from outside and reaches the terminal goes through :func:`escape_terminal`
first: ``show``, the run and report tables, import summaries and ``Error:`` lines.  Rich
itself only strips bell, backspace, vertical tab, form feed and carriage return.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and
# isolates that reorder what the eye reads ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_terminal(text: str) -> str:
    """``text`` with every control character written out as ``\\xNN`` (``\\uNNNN`` for the
    bidi controls); tab and newline are kept.

    >>> escape_terminal("ok\\x1b]52;c;aGk=\\x07 \\x9b2J")
    'ok\\\\x1b]52;c;aGk=\\\\x07 \\\\x9b2J'
    """
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def model_text(text: str | None, style: str = "") -> Text:
    """``text`` escaped as a rich ``Text``: never parsed as console markup either."""
    return Text(escape_terminal(text or ""), style=style)
