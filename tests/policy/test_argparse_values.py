"""A value is what argparse reads as a value: the engine asks the same questions as
CPython's ``ArgumentParser._parse_optional`` (Lib/argparse.py).

The oracle here is argparse itself, in this Python: a parser built from the script's
flags parses the words; a command is only allowed when that parser takes the word as the
flag's value.  The engine is stricter where Python versions differ (3.11 and 3.12 read
``-1e3`` as an option, 3.13+ as a negative number; 3.12 and older store ``[]`` for
``--flag=--``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import check_command
from agent_eval.policy.arguments import is_option

RALF = allowlist_named("ralf")
PERMISSIVE = allowlist_named("permissive")
SEARCH = "uv run scripts/embedding_search.py --query "


def argparse_reads(spec, argv: list[str]):
    """The namespace argparse gives for ``argv`` under ``spec``'s flags, or None when
    the script would exit (status 2)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for name, flag in spec.flags.items():
        kwargs = {"action": "store_true"} if not flag.value else {}
        parser.add_argument(name, *flag.aliases, dest=name.lstrip("-").replace("-", "_"),
                            **kwargs)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return parser.parse_args(argv)
    except (SystemExit, argparse.ArgumentError):
        return None


@pytest.mark.parametrize("value", ["-inf", "-nan", "-1e3", "-x", "-h x", "--top-k=5 x",
                                   "--to", "--top"], ids=repr)
def test_a_value_argparse_reads_as_an_option_is_denied(value):
    command = SEARCH + shlex.quote(value)
    assert not check_command(command, RALF).allowed
    spec = RALF.scripts["embedding_search.py"]
    read = argparse_reads(spec, ["--query", value])
    assert read is None or read.query != value  # argparse does not store it either


@pytest.mark.parametrize("value", ["- item one", "-- see notes", "-spam invoice", "-1",
                                   "-.5", "-2.5", "-", "--to x", "-kitchen lights"], ids=repr)
def test_a_value_argparse_reads_as_a_value_is_allowed(value):
    command = SEARCH + shlex.quote(value)
    verdict = check_command(command, RALF)
    assert verdict.allowed, verdict.findings
    assert verdict.invocation.flag("--query") == value
    read = argparse_reads(RALF.scripts["embedding_search.py"], ["--query", value])
    assert read is not None and read.query == value


def test_a_short_option_prefix_makes_a_value_with_a_space_an_option():
    """permissive declares -k for --top-k: argparse reads '-kitchen lights' as -k."""
    spec = PERMISSIVE.scripts["embedding_search.py"]
    assert is_option("-kitchen lights", spec)
    assert not check_command(SEARCH + "'-kitchen lights'", PERMISSIVE).allowed
    assert argparse_reads(spec, ["--query", "-kitchen lights"]) is None


def test_negative_numbers_are_options_when_a_flag_looks_like_one():
    """A script declaring -1 makes argparse read -5 as an (unknown) option."""
    spec = PERMISSIVE.programs["ls"]  # flags -l -a -la -1, read here as argparse would
    assert is_option("-5", spec)
    assert not is_option("-5", PERMISSIVE.programs["head"])  # no flag like a number


def test_plain_programs_read_every_dash_word_as_a_flag_as_getopt_does():
    """``ls`` and ``cat`` are not argparse scripts: ``-5`` is an option to them."""
    assert check_command("ls -1", PERMISSIVE).allowed
    assert check_command("ls -5", PERMISSIVE).primary == "AE310"
    assert check_command("cat -5", PERMISSIVE).primary == "AE310"
    assert check_command("ls | head -n -5", PERMISSIVE).allowed


def test_flag_equals_double_dash_stores_nothing_on_older_pythons_and_is_denied():
    verdict = check_command(SEARCH.rstrip() + "=--", RALF)
    assert verdict.primary == "AE311"
    assert "=--" in verdict.findings[0].message


def test_a_second_double_dash_is_denied():
    command = "uv run scripts/ralf_spawn.py --stage s -- step_evaluator --"
    assert check_command(command, RALF).primary == "AE311"


def test_a_negative_number_for_an_int_flag_is_still_a_value():
    command = "uv run scripts/lights.py set --room a --state on --brightness -1"
    assert check_command(command, RALF).invocation.flag("--brightness") == "-1"


def test_a_lone_surrogate_value_cannot_be_encoded_and_is_denied():
    assert check_command(SEARCH + "'\ud83d'", RALF).primary == "AE202"
