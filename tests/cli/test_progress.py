"""A run's progress where people read it: plain lines through a pipe (CI logs), at a
steady interval, and the servers being checked said before the probe waits on them."""

from __future__ import annotations

import io
import threading

import pytest
from click.testing import CliRunner
from rich.console import Console

from agent_eval.cli import main
from agent_eval.cli.progress import PlainProgress, progress_line, run_progress
from agent_eval.live.run import RunTally, TargetTally

UNREACHABLE = "http://127.0.0.1:1/v1"


def busy_tally() -> RunTally:
    tally = RunTally(planned=12, done=2, targets={"qwen": TargetTally(calls=14, errors=1)})
    tally.sessions_in_flight, tally.requests_in_flight = 3, 2
    tally.completion_tokens = 4100
    return tally


def test_progress_line_says_sessions_calls_rate_in_flight_tokens_and_elapsed():
    line = progress_line(3, busy_tally(), 12, 100.0)
    assert line == ("run 3: 2/12 sessions · 14 calls · 7.1 errors/100 · "
                    "3 sessions, 2 turns in flight · 41 tok/s · 1m40s")


def test_progress_line_leaves_out_tokens_when_no_server_reports_usage():
    tally = RunTally(planned=4)
    assert progress_line(1, tally, 4, 5.0) == (
        "run 1: 0/4 sessions · 0 calls · – errors/100 · 0 sessions, 0 turns in flight · 5s")


def test_without_a_terminal_the_progress_is_plain_lines():
    console = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(run_progress(console, 1, RunTally()), PlainProgress)


def test_on_a_terminal_the_progress_is_rich_bar_loaded_only_then():
    """The bar draws its sessions done; a process without a terminal never imports
    rich's progress (progress_bar.py)."""
    import subprocess
    import sys

    from agent_eval.cli.progress_bar import Bar

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    bar = run_progress(console, 7, RunTally())
    assert isinstance(bar, Bar)
    bar.start(4)
    tally = RunTally(planned=4)
    tally.done = 3
    bar.update(tally, [])
    bar.stop()
    assert "run 7" in out.getvalue() and "3/4" in out.getvalue()
    code = ("import io, sys; from rich.console import Console; "
            "from agent_eval.cli.progress import run_progress; "
            "from agent_eval.live.run import RunTally; "
            "run_progress(Console(file=io.StringIO(), force_terminal=False), 1, RunTally()); "
            "print('rich.progress' in sys.modules)")
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "False"


def test_plain_progress_prints_a_line_at_start_on_its_interval_and_at_the_end():
    out = io.StringIO()
    lines: list[str] = []
    ticked = threading.Event()

    def on_line(line: str) -> None:
        lines.append(line)
        if len(lines) >= 3:  # the start line and two from the clock
            ticked.set()

    tally = RunTally(planned=4)
    progress = PlainProgress(Console(file=out, force_terminal=False), 9, tally,
                             every=0.001, on_line=on_line)
    progress.start(4)
    assert ticked.wait(60), "the interval thread printed no line"  # a deadlock guard only
    tally.done = 4
    progress.stop()
    printed = out.getvalue().splitlines()
    assert printed[0].startswith("run 9: 0/4 sessions")
    assert len(printed) >= 4
    assert printed[-1].startswith("run 9: 4/4 sessions")
    assert all("\x1b" not in line for line in printed)


def test_run_says_which_servers_it_checks_before_the_probe_answers(tmp_path):
    result = CliRunner().invoke(main, ["run", "--base-url", UNREACHABLE, "--model", "m",
                                       "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 3
    first = result.stdout.splitlines()[0]
    assert first == f"Checking 1 server… ({UNREACHABLE})"


@pytest.mark.e2e
def test_piped_demo_prints_plain_progress_from_start_to_end(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--profiles", "piper", "--repeats", "1",
                                       "--tag", "lights", "--no-report",
                                       "--db", str(tmp_path / "d.db")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Checking 1 server… (http://127.0.0.1:")
    progress = [line for line in lines if line.startswith("run 1: ")]
    total = progress[0].split("/")[1].split()[0]
    assert progress[0].startswith("run 1: 0/")
    assert progress[-1].startswith(f"run 1: {total}/{total} sessions")
    assert "0 sessions, 0 turns in flight" in progress[-1]
