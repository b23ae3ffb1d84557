"""``agent-eval sim-server`` as an operator meets it."""

from __future__ import annotations

from click.testing import CliRunner

from agent_eval.cli import main


def test_help_shows_an_example_and_every_fault_knob():
    result = CliRunner().invoke(main, ["sim-server", "--help"])
    assert result.exit_code == 0
    assert "agent-eval sim-server --profile piper --port 8001" in result.output
    for option in ("--latency", "--ttft", "--error-rate", "--hang-rate", "--truncate-rate",
                   "--malformed-args-rate", "--drop-rate", "--suite", "--seed"):
        assert option in result.output


def test_unknown_profile_exits_2_with_one_line_naming_the_valid_ones():
    result = CliRunner().invoke(main, ["sim-server", "--profile", "sloppy", "--port", "0"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ") and "disciplined, piper, wrapper, inventor" in lines[0]


def test_non_loopback_host_is_refused_with_exit_2():
    result = CliRunner().invoke(main, ["sim-server", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 2
    assert "loopback" in result.output


def test_rate_above_one_is_refused_with_exit_2():
    result = CliRunner().invoke(main, ["sim-server", "--error-rate", "1.5", "--port", "0"])
    assert result.exit_code == 2
    assert "error_rate" in result.output
