"""`agent-eval check --batch` gives exactly the library's verdict, one JSON line each."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.policy_paths import ALLOWLISTS, allowlist_named

from agent_eval.cli import main
from agent_eval.policy import check_command

RALF = str(ALLOWLISTS / "ralf.yaml")
ID42 = "uv run scripts/email_read.py --id 42"


def batch(data: bytes, *options: str) -> tuple[list[str], str]:
    result = CliRunner().invoke(main, ["check", "--allowlist", RALF, "--batch", "-", *options],
                                input=data)
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[:-1], result.stderr


@pytest.mark.parametrize("data", [
    (ID42 + "\r\n").encode(),
    (ID42 + "\r").encode(),
    (ID42 + "\r\n" + ID42 + "\n").encode(),
], ids=["crlf", "cr-at-eof", "crlf-then-lf"])
def test_lines_format_keeps_a_carriage_return_and_denies_like_the_library(data):
    lines, _ = batch(data, "--format", "lines")
    first = json.loads(lines[0])
    assert first["command"] == ID42 + "\r"
    assert first["decision"] == "deny" and first["primary"] == "AE202"
    assert check_command(first["command"], allowlist_named("ralf")).primary == "AE202"


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c"],
                         ids=repr)
@pytest.mark.parametrize("fmt", ["lines", "jsonl"])
def test_every_verdict_is_exactly_one_line_whatever_the_command_holds(fmt, separator):
    command = ID42 + separator + "2"
    encode = (lambda text: text) if fmt == "lines" else json.dumps
    lines, _ = batch(f"{encode(command)}\n{encode(ID42)}\n".encode(), "--format", fmt)
    out = "\n".join(lines)
    assert len(out.splitlines()) == 2  # no consumer's line splitting breaks a verdict
    assert out.isascii()
    first, second = (json.loads(line) for line in lines)
    assert first["command"] == command
    assert first["decision"] == check_command(command, allowlist_named("ralf")).decision
    assert second["decision"] == "allow"


def test_a_jsonl_object_with_a_duplicate_command_key_is_a_bad_line():
    data = b'{"command": "rm -rf /", "command": "' + ID42.encode() + b'"}\n'
    lines, stderr = batch(data, "--format", "jsonl")
    assert json.loads(lines[0]) == {
        "line": 1, "error": "duplicate key 'command'; which value was meant is ambiguous"}
    assert "line 1: duplicate key 'command'" in stderr


def test_batch_verdicts_equal_the_librarys_on_tricky_lines():
    commands = [ID42, ID42 + "$", "uv run scripts/db_query.py --sql \"SELECT '$' AS x\"",
                "uv run scripts/email_read.py --id 4\u00a02", ID42 + "\t", " " + ID42]
    lines, _ = batch("".join(c + "\n" for c in commands).encode(), "--format", "lines")
    ralf = allowlist_named("ralf")
    for command, line in zip(commands, lines, strict=True):
        got = json.loads(line)
        want = check_command(command, ralf)
        assert (got["command"], got["decision"], got["primary"]) == (
            command, want.decision, want.primary)


def test_check_writes_control_characters_out_with_carets_under_them():
    """A denied command holding ESC is shown with ``\\x1b`` written out, never obeyed,
    and the caret line still points at the finding in the escaped text."""
    from click.testing import CliRunner

    from agent_eval.cli import main

    command = "uv run scripts/db_query.py --sql \x1b[2J"
    result = CliRunner().invoke(main, ["check", command, "--allowlist", "allowlists/ralf.yaml"])
    assert "\x1b" not in result.output
    shown = [ln for ln in result.output.splitlines() if "\\x1b[2J" in ln]
    assert shown, result.output
    caret_line = result.output.splitlines()[result.output.splitlines().index(shown[0]) + 1]
    assert caret_line.index("^") == shown[0].index("\\x1b")


@pytest.mark.parametrize("bad", [b"[" * 100_000, b"[" * 20_000, b'"' + b"x" * 200_000 + b'"'],
                         ids=["100k-brackets", "20k-brackets", "over-the-cap"])
def test_a_jsonl_line_nested_too_deep_or_too_long_is_one_error_and_the_batch_goes_on(bad):
    data = b'"ls"\n' + bad + b'\n"' + ID42.encode() + b'"\n'
    lines, stderr = batch(data, "--format", "jsonl")
    assert [json.loads(line).get("primary", "-") for line in lines] == ["AE307", "-", None]
    error = json.loads(lines[1])
    assert error["line"] == 2
    assert error["error"] in ("nested too deep to parse",) or "longer than the cap" in error["error"]
    assert "Traceback" not in stderr and "line 2:" in stderr
