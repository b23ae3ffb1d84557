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

from typing import TYPE_CHECKING, Literal, TypedDict

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


def table_console(default_width: int, *, stderr: bool = False):
    """A rich console for tables: the terminal's width on a terminal; through a pipe
    ``$COLUMNS`` when set (CI logs, ``| less``), else ``default_width``."""
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else (_piped_columns() or default_width)
    return Console(highlight=False, width=width, stderr=stderr)


def _piped_columns() -> int | None:
    """``$COLUMNS`` when it names a usable width (20 or more), else None."""
    import os

    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 20 else None


def text_width(*, stderr: bool = False) -> int | None:
    """The width prose wraps at: the terminal's on a terminal; through a pipe ``$COLUMNS``
    when set, else None (lines stay whole, for grep and CI logs that wrap themselves)."""
    import shutil
    import sys

    stream = sys.stderr if stderr else sys.stdout
    return shutil.get_terminal_size().columns if stream.isatty() else _piped_columns()


def span_window(text: str, start: int, end: int, limit: int, *, before: int = 12,
                style: str = "bold underline") -> Text:
    """``text`` (escaped, one line) cut to about ``limit`` characters so that the span
    ``[start, end)`` shows: ``before`` characters of context ahead of it, the span styled,
    then as much of what follows as fits; ``…`` where text was cut.  A call's command cut
    at a fixed width hid exactly the ``| head`` that was denied."""
    from rich.text import Text

    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    head = escape_terminal(text[:start], one_line=True)
    span = escape_terminal(text[start:end], one_line=True)
    tail = escape_terminal(text[end:], one_line=True)
    if len(head) + len(span) + len(tail) <= limit:
        return Text.assemble(head, (span, style), tail)
    if len(head) > before:
        head = "…" + head[len(head) - before + 1:]
    if len(head) + len(span) > limit:
        span = span[: max(1, limit - len(head) - 1)] + "…"
        tail = ""
    room = limit - len(head) - len(span)
    if len(tail) > room:
        tail = tail[: max(0, room - 1)] + "…"
    return Text.assemble(head, (span, style), tail)


class ColumnSpec(TypedDict, total=False):
    """How a :func:`fitted_table` column gives way on a narrow terminal."""

    justify: Literal["left", "right", "center"]
    flex: bool
    min: int
    drop: int
    keep: bool


def fitted_table(title: str, columns: list[tuple[str, ColumnSpec]], rows: list[list],
                 width: int):
    """A rich table whose every row keeps to one line at ``width`` columns (80, 100, 200).

    Each column is ``(header, spec)``: ``justify``; ``flex`` (a name or a command: cut
    with ``…`` to share what is left, down to ``min`` characters, default 8); ``drop`` (a
    column that goes when the table cannot fit; the highest first; 0 never); ``keep``
    (what a row is about: a status, a target; kept whole while anything else can give,
    cut to its ``min`` only when nothing else can).  The least useful give first: the
    ``drop`` columns go, then the ``flex`` ones are cut, and only then the ``keep`` ones.
    Other columns (ids, counts, verdicts) keep their full width.
    """
    from rich.table import Table
    from rich.text import Text

    def cell_len(value) -> int:
        return value.cell_len if isinstance(value, Text) else len(str(value))

    def fits(widths: dict[int, int]) -> bool:
        return sum(widths.values()) + 3 * len(widths) + 1 <= width

    natural = [max([len(head), *(cell_len(r[i]) for r in rows)]) for i, (head, _) in
               enumerate(columns)]
    least = [min(natural[i], spec.get("min", 8)) if spec.get("flex") and not spec.get("keep")
             else natural[i] for i, (_, spec) in enumerate(columns)]
    keep = list(range(len(columns)))
    for i in sorted(keep, key=lambda i: -columns[i][1].get("drop", 0)):
        if fits({j: least[j] for j in keep}):
            break
        if columns[i][1].get("drop", 0):
            keep.remove(i)
    widths = {i: least[i] for i in keep}
    for i in keep:  # the last resort: cut what the row is about, to its min
        if fits(widths):
            break
        if columns[i][1].get("keep"):
            widths[i] = min(natural[i], columns[i][1].get("min", 8))
    spare = width - (sum(widths.values()) + 3 * len(keep) + 1)
    kept = [i for i in keep if columns[i][1].get("keep")]
    flexible = [i for i in keep if columns[i][1].get("flex") and i not in kept]
    for group in (kept, flexible):  # what a row is about is made whole first
        while spare > 0 and any(widths[i] < natural[i] for i in group):
            for i in group:  # share what is left, a character at a time, up to each's need
                if spare > 0 and widths[i] < natural[i]:
                    widths[i] += 1
                    spare -= 1
    table = Table(title=title)
    for i in keep:
        head, spec = columns[i]
        table.add_column(head, justify=spec.get("justify", "left"), no_wrap=True,
                         overflow="ellipsis", width=widths[i])
    for r in rows:
        table.add_row(*(r[i] for i in keep))
    return table


def counted(n: int, word: str) -> str:
    """``1 session``, ``2 sessions``: a count with its noun in the right number."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
