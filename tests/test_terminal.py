"""Model text reaches the terminal with its control characters written out, never obeyed."""

from __future__ import annotations

import pytest
from rich.console import Console

from agent_eval.cli.terminal import escape_terminal, model_text


@pytest.mark.parametrize("raw, shown", [
    pytest.param("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H", id="clear-screen"),
    pytest.param("\x1b]52;c;cm0gLXJm\x07", "\\x1b]52;c;cm0gLXJm\\x07", id="osc52-clipboard"),
    pytest.param("\x1b]8;;http://x\x1b\\a\x1b]8;;\x1b\\", "\\x1b]8;;http://x\\x1b\\a\\x1b]8;;\\x1b\\",
                 id="osc8-link"),
    pytest.param("\x9b31mred", "\\x9b31mred", id="c1-csi"),
    pytest.param("\x9d0;title\x9c", "\\x9d0;title\\x9c", id="c1-osc"),
    pytest.param("safe\roverwritten", "safe\\x0doverwritten", id="carriage-return"),
    pytest.param("\x00\x7f", "\\x00\\x7f", id="nul-del"),
    pytest.param("evil\u202etxt.exe", "evil\\u202etxt.exe", id="bidi-override"),
])
def test_control_characters_are_written_out(raw, shown):
    assert escape_terminal(raw) == shown


@pytest.mark.parametrize("text", ["plain", "tab\tand\nnewline", "naïve 🚀 ；", "[bold]x[/]", ""])
def test_ordinary_text_is_unchanged(text):
    assert escape_terminal(text) is text or escape_terminal(text) == text


def test_model_text_is_never_parsed_as_console_markup():
    console = Console(width=80, record=True, force_terminal=False)
    console.print(model_text("[/] [bold]\x1b[31m"))
    assert console.export_text() == "[/] [bold]\\x1b[31m\n"
