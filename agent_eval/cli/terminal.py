"""Model text on the terminal: control characters shown, never obeyed; markup never parsed.

A model (or a server, a client through the proxy, an imported transcript) can write
``ESC [ 2 J`` to clear the screen, an OSC 8 hyperlink that hides where it points, an
OSC 52 write to the clipboard, ``\\r`` to overwrite a line, the 8-bit C1 forms of the same
(``\\x9b`` is CSI), or bidirectional overrides that reorder what the eye reads ("Trojan
Source").  And rich parses ``[...]`` in a plain string as console markup: a model named
``[/x]`` made ``rich`` raise for the whole table.

So every string that came from outside and reaches the terminal goes through this module,
in every command (``runs``, ``sessions``, ``calls``, ``show``, ``report``, ``perf``,
``power``, ``import``, ``gate``, ``compare``, ``replay``, the ``Error:`` lines):

- :func:`escape_terminal` for text printed with ``click.echo``: every character that is
  not printable (``str.isprintable``: C0 and C1 controls, DEL, format characters such as
  the bidi controls and zero-width ones, separators other than the space, unassigned and
  private-use code points) is written out as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``;
  tab and newline are kept unless ``one_line``;
- :func:`model_text` for rich tables and panels: the same text as a ``rich.text.Text``,
  which rich never parses as markup.

Rich itself only strips bell, backspace, vertical tab, form feed and carriage return.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a table is drawn, not by every command
    from rich.text import Text


def _visible(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_terminal(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character that is not printable written out (``\\xNN``,
    ``\\uNNNN``, ``\\UNNNNNNNN``); tab and newline are kept, unless ``one_line`` (a table
    cell, a name).

    >>> escape_terminal("ok\\x1b]52;c;aGk=\\x07 \\x9b2J")
    'ok\\\\x1b]52;c;aGk=\\\\x07 \\\\x9b2J'
    """
    if text.isprintable():
        return text
    kept = "" if one_line else "\t\n"
    return "".join(ch if ch.isprintable() or ch in kept else _visible(ch) for ch in text)


def model_text(text: str | None, style: str = "", *, one_line: bool = True,
               limit: int | None = None) -> Text:
    """``text`` escaped (one line by default: a cell) as a rich ``Text``, never parsed
    as console markup; cut to ``limit`` characters of escaped text with ``…``."""
    from rich.text import Text

    shown = escape_terminal(text or "", one_line=one_line)
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return Text(shown, style=style)
