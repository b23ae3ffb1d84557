"""Match a script's (or program's) argument words against its :class:`CommandSpec`.

Pure.  Produces the exact :class:`Invocation` the orchestrator uses to pick canned
outputs and check the handshake, or the findings that explain why the arguments are not
what the spec declares (``unknown-flag``, ``invalid-argument``).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from agent_eval.policy.allowlist import CommandSpec, FlagSpec, PositionalSpec
from agent_eval.policy.syntax import Word
from agent_eval.policy.verdict import Invocation


@dataclass(slots=True)
class Problem:
    """An argument finding before it becomes a :class:`Finding`: rule name, text, span."""

    rule: str
    message: str
    start: int
    end: int


def _type_error(value: str, type_: str) -> str | None:
    """Why ``value`` does not parse as ``type_``, or None when it does."""
    if type_ == "int":
        try:
            int(value, 10)
        except ValueError:
            return "an integer"
    elif type_ == "float":
        try:
            if not math.isfinite(float(value)):
                return "a finite number"
        except ValueError:
            return "a number"
    elif type_ == "json":
        try:
            json.loads(value)
        except ValueError:
            return "valid JSON"
    elif type_ == "path" and not value:
        return "a non-empty path"
    return None


def _check_value(value: str, choices: list[str] | None, type_: str, what: str,
                 word: Word) -> Problem | None:
    if choices is not None and value not in choices:
        return Problem(
            "invalid-argument",
            f"invalid choice {value!r} for {what} (choose from {', '.join(choices)})",
            word.start, word.end,
        )
    want = _type_error(value, type_)
    if want:
        return Problem("invalid-argument", f"{what} must be {want}, got {value!r}",
                       word.start, word.end)
    return None


# argparse's test for "looks like a negative number", as Python 3.11 and 3.12 have it
# (``ArgumentParser.__init__``, ``_negative_number_matcher``); 3.13+ match ``-\.?\d`` at
# the start instead, which accepts more (``-1e3``).  The stricter one is used: a value
# is only a value when every version reads it as one.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# every parser argparse builds answers to these unless add_help=False
_HELP = ("-h", "--help")


def is_option(text: str, spec: CommandSpec) -> bool:
    """Whether argparse reads the word ``text`` as an option rather than a value.

    Follows CPython's ``ArgumentParser._parse_optional`` and ``_get_option_tuples``
    (https://github.com/python/cpython/blob/main/Lib/argparse.py and the 3.11 file of
    this interpreter; the versions differ in small ways, and each step takes the union of
    what they read as an option):

    1. a word not starting with ``-``, and ``-`` alone, are values;
    2. a declared option string, or one before an ``=``, is an option;
    3. a prefix of a declared long option (``allow_abbrev``), and for a single dash a
       word whose first two characters are a declared short option (``-kX``), are
       options;
    4. a word that looks like a negative number (``_NEGATIVE_NUMBER``) is a value,
       unless the parser has an option that looks like one (``ls -1``);
    5. a word with a space in it is a value (``'- item one'``, ``'-- see notes'``,
       ``'-spam invoice'``);
    6. anything else is an option (``-inf``, ``-nan`` and ``-1e3`` on Python 3.11 and
       3.12: the script exits with status 2, "expected one argument").
    """
    if not text.startswith("-") or text == "-":
        return False
    options = [*spec.flags, *(a for f in spec.flags.values() for a in f.aliases), *_HELP]
    before = text.partition("=")[0]
    if text in options or before in options:
        return True
    if text.startswith("--"):
        if any(o.startswith(before) for o in options):
            return True
    elif any(o == text[:2] or o.startswith(text) or o.startswith(before) for o in options):
        return True
    if _NEGATIVE_NUMBER.match(text):
        return any(_NEGATIVE_NUMBER.match(o) for o in options)
    return " " not in text


def _getopt_value_is_option(text: str) -> bool:
    """For a plain program (getopt, not argparse): a word after a flag that takes a value
    is its value unless it looks like another flag (a number such as ``-5`` does not)."""
    if not text.startswith("-") or text == "-":
        return False
    try:
        float(text)
    except ValueError:
        return True
    return False


def _flag_index(spec: CommandSpec) -> dict[str, str]:
    index = {}
    for name, flag in spec.flags.items():
        index[name] = name
        for alias in flag.aliases:
            index.setdefault(alias, name)
    return index


_HINTS = 8
"""Unknown flags that get a "did you mean" hint (difflib is slow; thousands of invented
flags in one command would make the judge slow)."""


def _unknown_flag(name: str, word: Word, spec: CommandSpec, owner: str, hint: bool) -> Problem:
    known = list(spec.flags)
    close = difflib.get_close_matches(name, known, n=1) if hint else []
    suggestion = f"; did you mean {close[0]}?" if close else ""
    listed = f" (known: {', '.join(known)})" if known else " (it takes no flags)"
    return Problem("unknown-flag", f"{owner} has no flag {name}{listed}{suggestion}",
                   word.start, word.end)


def _descend(spec: CommandSpec, words: list[Word], whole: tuple[int, int], owner: str
             ) -> tuple[CommandSpec, list[str], str] | Problem:
    """Follow the subcommand words; the leaf spec, the path taken and its display name."""
    subpath: list[str] = []
    for i in range(len(words) + 1):
        if not spec.subcommands:
            return spec, subpath, owner
        if i >= len(words) or words[i].value.startswith("-"):
            return Problem("invalid-argument",
                           f"{owner} needs a subcommand (one of {', '.join(spec.subcommands)})",
                           *whole)
        sub = words[i].value
        if sub not in spec.subcommands:
            return Problem("invalid-argument",
                           f"invalid subcommand {sub!r} for {owner} "
                           f"(choose from {', '.join(spec.subcommands)})",
                           words[i].start, words[i].end)
        subpath.append(sub)
        spec = spec.subcommands[sub]
        owner = f"{owner} {sub}"
    return spec, subpath, owner


def _take_flag(spec: CommandSpec, index: dict[str, str], owner: str, words: list[Word],
               i: int, flags: dict[str, list[str]], problems: list[Problem],
               option: Callable[[str], bool]) -> int:
    """``words[i - 1]`` is ``--name`` or ``--name=value``; record it and its value.

    Returns the index after the flag's value (when it takes one from the next word)."""
    word = words[i - 1]
    name, eq, inline = word.value.partition("=")
    canonical = index.get(name)
    if canonical is None:
        problems.append(_unknown_flag(name, word, spec, owner, len(problems) < _HINTS))
        if eq == "" and i < len(words) and not option(words[i].value):
            return i + 1  # an unknown flag most likely took the next word as its value
        return i
    flag: FlagSpec = spec.flags[canonical]
    if canonical in flags and not flag.repeatable:
        problems.append(Problem("invalid-argument", f"{canonical} given more than once",
                                word.start, word.end))
    values = flags.setdefault(canonical, [])
    if not flag.value:
        if eq:
            problems.append(Problem("invalid-argument", f"{canonical} takes no value",
                                    word.start, word.end))
        return i
    if eq and inline == "--":
        problems.append(Problem("invalid-argument", f"{canonical}=-- stores no value on Python "
                                "3.12 and older (argparse drops the '--')", word.start, word.end))
        return i
    if eq:
        value, value_word = inline, word
    elif i < len(words) and not option(words[i].value):
        value, value_word = words[i].value, words[i]
        i += 1
    else:
        problems.append(Problem("invalid-argument", f"{canonical} needs a value",
                                word.start, word.end))
        return i
    bad = _check_value(value, flag.choices, flag.type, canonical, value_word)
    if bad:
        problems.append(bad)
    values.append(value)
    return i


def _missing(spec: CommandSpec, owner: str, flags: dict[str, list[str]],
             positionals: list[str], whole: tuple[int, int]) -> list[Problem]:
    """Required flags and positionals that never came."""
    problems = [Problem("invalid-argument", f"missing required flag {name} for {owner}", *whole)
                for name, flag in spec.flags.items() if flag.required and name not in flags]
    needed = [p for p in spec.positionals if p.required]
    if len(positionals) < len(needed):
        problems.append(Problem(
            "invalid-argument",
            f"missing required positional <{needed[len(positionals)].name}> for {owner}", *whole))
    return problems


def match_arguments(script: str, spec: CommandSpec, words: list[Word],
                    whole: tuple[int, int], *, argparse_rules: bool = True,
                    ) -> tuple[Invocation | None, list[Problem]]:
    """Fit ``words`` (everything after the script path) to ``spec``.

    Returns the invocation when the words fit exactly, else None and the problems.
    ``whole`` is the span of the whole command, used for "missing required ..." findings.
    A script is read as argparse reads it (:func:`is_option`); a plain program
    (``argparse_rules=False``) as getopt does: every word starting with ``-`` is a flag.
    """
    subpath: list[str] = []
    owner = script
    if spec.subcommands:
        found = _descend(spec, words, whole, script)
        if isinstance(found, Problem):
            return None, [found]
        spec, subpath, owner = found
    index = _flag_index(spec)
    problems: list[Problem] = []
    flags: dict[str, list[str]] = {}
    positionals: list[str] = []
    pos_specs: list[PositionalSpec] = list(spec.positionals)
    options_done = False
    value_is_option = ((lambda text: is_option(text, spec)) if argparse_rules
                       else _getopt_value_is_option)
    i, n = len(subpath), len(words)
    while i < n:
        word = words[i]
        text = word.value
        i += 1
        if text == "--" and options_done:
            problems.append(Problem("invalid-argument", "a second '--' is dropped by argparse "
                                    "on Python 3.12 and older", word.start, word.end))
        elif not options_done and text == "--":
            options_done = True
        elif not options_done and (is_option(text, spec) if argparse_rules
                                   else text.startswith("-") and len(text) > 1):
            i = _take_flag(spec, index, owner, words, i, flags, problems, value_is_option)
        elif not pos_specs:
            problems.append(Problem("invalid-argument",
                                    f"unexpected positional argument {text!r} for {owner}",
                                    word.start, word.end))
        else:
            pos = pos_specs[0] if pos_specs[0].variadic else pos_specs.pop(0)
            bad = _check_value(text, pos.choices, pos.type, pos.name, word)
            if bad:
                problems.append(bad)
            positionals.append(text)
    problems += _missing(spec, owner, flags, positionals, whole)
    if problems:
        return None, problems
    return Invocation(
        script=script,
        subcommand=tuple(subpath),
        flags=tuple((name, tuple(values)) for name, values in flags.items()),
        positionals=tuple(positionals),
    ), []
