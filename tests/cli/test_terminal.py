"""Model text reaches the terminal with its control characters written out, never obeyed."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from support.factories import add_run

from agent_eval.cli.terminal import escape_terminal, model_text

REPO = Path(__file__).resolve().parents[2]


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


# every command that prints stored text, over a store whose names are hostile

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: puts `rm -rf ~` on the clipboard
LINK = "\x1b]8;;http://x.invalid/\x1b\\innocent\x1b]8;;\x1b\\"  # OSC 8: a hidden link
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
C1 = "\x9b31m\x9d0;title\x9c"  # the 8-bit forms
BIDI = "txt\u202eexe.sh"
HOSTILE_MODEL = "[/x]"  # the model name that made `runs` raise for the whole store
RAW = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\u202e")


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> str:
    """Two runs whose label, targets, scenarios, session keys, tags, tools, commands,
    reasoning and error text each carry a terminal escape or console markup."""
    import json as _json
    from datetime import UTC, datetime

    from agent_eval.policy import check_call, load_allowlist
    from agent_eval.store import open_store
    from agent_eval.transcript import (
        CallRecord,
        FindingRecord,
        SessionRecord,
        TurnRecord,
        assign_next_actions,
    )

    allowlist = load_allowlist(REPO / "allowlists" / "ralf.yaml")
    db = str(tmp_path_factory.mktemp("hostile") / "runs.db")

    def call(i: int, tool: str, command: str) -> CallRecord:
        args = _json.dumps({"command": command})
        v = check_call(tool, args, allowlist)
        return CallRecord(index=i, turn_index=0, tool=tool, arguments=args, decision=v.decision,
                          primary=v.primary, command=command, output=f"out {CLEAR}",
                          findings=[FindingRecord(f.code, f.message, f.start, f.end)
                                    for f in v.findings])

    def session(target: str, n: int) -> SessionRecord:
        calls = [call(0, "bash", f"=HYPERLINK(\"http://x\") {CLIPBOARD}"),
                 call(1, f"bash{CLEAR}", f"ls {LINK} {C1}"),
                 call(2, "bash", "uv run scripts/db_query.py --sql 'select 1'")]
        assign_next_actions(calls)
        return SessionRecord(
            key=f"{target}/{LINK}/{n}", target=target, scenario=f"[bold red]boom[/] {BIDI}",
            status="completed", error=None, tags=["[/]", CLIPBOARD],
            messages=[{"role": "user", "content": f"task {CLEAR}"}],
            turns=[TurnRecord(index=0, content=f"reply {CLIPBOARD}", reasoning=f"think {C1}")],
            calls=calls, source="import", started_at=datetime(2025, 6, 9, 7, 0, tzinfo=UTC),
            finished_at=datetime(2025, 6, 9, 7, 5, tzinfo=UTC))

    with open_store(db) as store:
        for label in (f"nightly {CLIPBOARD}[/x]", "[red]again"):
            targets = (HOSTILE_MODEL, f"qwen{CLEAR}", f"m{LINK}")
            add_run(store, [session(target, n) for target in targets for n in range(2)],
                    label=label, kind="import", base_url="import", status="finished")
    return db


def _assert_shown_not_obeyed(output: str) -> None:
    for raw in RAW:
        assert raw not in output, f"{raw!r} reached the terminal"


@pytest.mark.parametrize("args", [
    pytest.param(["runs"], id="runs"),
    pytest.param(["sessions", "1"], id="sessions"),
    pytest.param(["calls", "1"], id="calls"),
    pytest.param(["calls", "1", "--decision", "allow"], id="calls-allowed"),
    pytest.param(["show", "1"], id="show"),
    pytest.param(["report", "1", "2", "--out", "{tmp}"], id="report"),
    pytest.param(["gate", "--run", "2", "--max-error-rate", "1", "--baseline", "1"], id="gate"),
    pytest.param(["compare", "1", "2"], id="compare"),
    pytest.param(["power", "--baseline", "1"], id="power"),
    pytest.param(["export", "1", "--format", "csv"], id="export-csv"),
    pytest.param(["runs", "delete", "1"], id="runs-delete-prompt"),
    pytest.param(["perf", "--run", "1", "--out", "{tmp}"], id="perf"),
    pytest.param(["rescore", "1", "--allowlist", str(REPO / "allowlists" / "permissive.yaml")],
                 id="rescore"),
])
def test_every_command_shows_hostile_names_escaped(hostile_db, tmp_path, args):
    from click.testing import CliRunner

    from agent_eval.cli import main

    argv = [a.replace("{tmp}", str(tmp_path)) for a in args] + ["--db", hostile_db]
    result = CliRunner().invoke(main, argv, input="n\n")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    # 0 or 1; a gate of two sessions a side is undecided (4): its text is shown all the same
    assert result.exit_code in (0, 1, 4), result.output
    if args[0] != "export":  # export writes data; to a terminal it is escaped (below)
        _assert_shown_not_obeyed(result.output)


def test_runs_lists_a_store_holding_a_model_named_like_markup(hostile_db):
    from click.testing import CliRunner

    from agent_eval.cli import main

    result = CliRunner().invoke(main, ["runs", "--db", hostile_db], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert HOSTILE_MODEL in result.output and "[red]again" in result.output
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in result.output


def test_calls_show_every_escape_written_out(hostile_db):
    from click.testing import CliRunner

    from agent_eval.cli import main

    result = CliRunner().invoke(main, ["calls", "1", "--db", hostile_db, "--limit", "500"],
                                env={"COLUMNS": "400"})
    assert "\\x1b[2J" in result.output and "\\x9b31m" in result.output
    assert "\\u202e" in result.output and "[bold red]boom[/]" in result.output


def test_export_to_a_terminal_is_escaped_and_to_a_file_is_data(hostile_db, tmp_path):
    """A real pseudo-terminal as stdout: the rows arrive with escapes written out."""
    import os
    import subprocess
    import sys

    leader, follower = os.openpty()
    with subprocess.Popen([sys.executable, "-m", "agent_eval", "export", "1", "--db", hostile_db],
                          stdout=follower, stderr=subprocess.PIPE) as proc:
        os.close(follower)
        shown = b""
        while True:
            try:
                piece = os.read(leader, 65536)
            except OSError:  # the child closed its side
                break
            if not piece:
                break
            shown += piece
        proc.wait(60)
    os.close(leader)
    text = shown.decode("utf-8")
    assert proc.returncode == 0
    assert "\\u001b]52" in text  # JSON's own escape of ESC
    assert "\\x9b31m" in text  # a C1 control JSON leaves as is, written out for the terminal
    _assert_shown_not_obeyed(text)
