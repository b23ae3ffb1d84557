"""Match a script's (or program's) argument words against its :class:`CommandSpec`.

Pure.  Produces the exact :class:`Invocation` the orchestrator uses to pick canned
outputs and check the handshake, or the findings that explain why the arguments are not
what the spec declares (``unknown-flag``, ``invalid-argument``).
"""

from __future__ import annotations

import difflib
import json
import math
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


def _looks_like_option(text: str) -> bool:
    """What argparse would take for an option rather than a value: ``-x``, ``--x``, but
    not a negative number or a lone ``-``."""
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


def _unknown_flag(name: str, word: Word, spec: CommandSpec, owner: str) -> Problem:
    known = list(spec.flags)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    listed = f" (known: {', '.join(known)})" if known else " (it takes no flags)"
    return Problem("unknown-flag", f"{owner} has no flag {name}{listed}{hint}",
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


@dataclass(slots=True)
class _Fit:
    """Matching state of one argument list: what was read so far and what is wrong."""

    spec: CommandSpec
    owner: str
    words: list[Word]
    i: int
    problems: list[Problem]
    flags: dict[str, list[str]]
    positionals: list[str]
    pos_specs: list[PositionalSpec]
    index: dict[str, str]

    def flag(self, word: Word) -> None:
        """``word`` is ``--name`` or ``--name=value``; consume its value if it takes one."""
        name, eq, inline = word.value.partition("=")
        canonical = self.index.get(name)
        words = self.words
        if canonical is None:
            self.problems.append(_unknown_flag(name, word, self.spec, self.owner))
            if eq == "" and self.i < len(words) and not words[self.i].value.startswith("-"):
                self.i += 1  # an unknown flag most likely took the next word as its value
            return
        flag: FlagSpec = self.spec.flags[canonical]
        if canonical in self.flags and not flag.repeatable:
            self.problems.append(Problem("invalid-argument", f"{canonical} given more than once",
                                         word.start, word.end))
        values = self.flags.setdefault(canonical, [])
        if not flag.value:
            if eq:
                self.problems.append(Problem("invalid-argument", f"{canonical} takes no value",
                                             word.start, word.end))
            return
        if eq:
            value, value_word = inline, word
        elif self.i < len(words) and not _looks_like_option(words[self.i].value):
            value, value_word = words[self.i].value, words[self.i]
            self.i += 1
        else:
            self.problems.append(Problem("invalid-argument", f"{canonical} needs a value",
                                         word.start, word.end))
            return
        bad = _check_value(value, flag.choices, flag.type, canonical, value_word)
        if bad:
            self.problems.append(bad)
        values.append(value)

    def positional(self, word: Word) -> None:
        if not self.pos_specs:
            self.problems.append(Problem(
                "invalid-argument", f"unexpected positional argument {word.value!r} for "
                f"{self.owner}", word.start, word.end))
            return
        pos = self.pos_specs[0]
        if not pos.variadic:
            self.pos_specs.pop(0)
        bad = _check_value(word.value, pos.choices, pos.type, pos.name, word)
        if bad:
            self.problems.append(bad)
        self.positionals.append(word.value)

    def missing(self, whole: tuple[int, int]) -> None:
        """Required flags and positionals that never came."""
        for name, flag in self.spec.flags.items():
            if flag.required and name not in self.flags:
                self.problems.append(Problem(
                    "invalid-argument", f"missing required flag {name} for {self.owner}", *whole))
        needed = [p for p in self.spec.positionals if p.required]
        if len(self.positionals) < len(needed):
            missing = needed[len(self.positionals)].name
            self.problems.append(Problem(
                "invalid-argument", f"missing required positional <{missing}> for {self.owner}",
                *whole))


def match_arguments(script: str, spec: CommandSpec, words: list[Word],
                    whole: tuple[int, int]) -> tuple[Invocation | None, list[Problem]]:
    """Fit ``words`` (everything after the script path) to ``spec``.

    Returns the invocation when the words fit exactly, else None and the problems.
    ``whole`` is the span of the whole command, used for "missing required ..." findings.
    """
    found = _descend(spec, words, whole, script)
    if isinstance(found, Problem):
        return None, [found]
    leaf, subpath, owner = found
    fit = _Fit(leaf, owner, words, len(subpath), [], {}, [], list(leaf.positionals),
               _flag_index(leaf))
    options_done = False
    while fit.i < len(words):
        word = words[fit.i]
        fit.i += 1
        if not options_done and word.value == "--":
            options_done = True
        elif not options_done and word.value.startswith("-") and len(word.value) > 1:
            fit.flag(word)
        else:
            fit.positional(word)
    fit.missing(whole)
    if fit.problems:
        return None, fit.problems
    return Invocation(
        script=script,
        subcommand=tuple(subpath),
        flags=tuple((name, tuple(values)) for name, values in fit.flags.items()),
        positionals=tuple(fit.positionals),
    ), []
