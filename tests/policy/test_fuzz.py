"""Differential fuzzing: the engine never allows what an independent oracle sees as shell.

Inputs are generated from a seed: an allowed call of ``allowlists/ralf.yaml`` (runner,
script, subcommand, flags and values) into which 1-4 fragments are inserted at random
places -- quotes, backslashes, line continuations, ``$`` forms, tildes, globs, braces,
operators, redirections, comments, control and look-alike characters.  Every input is
judged by the engine; every input the engine *allows* is judged again by the oracle, and
any input the oracle finds dangerous is a failure (the exact command is printed).

The oracle shares no code with the engine's lexer:

1. ``bash -n`` reads the text from stdin with no startup files and only checks its
   syntax; a candidate is never executed.  A syntax error means the engine allowed a
   text bash would not run as the engine read it.
2. ``bashlex.parse`` builds bash's AST and *every* node is walked: anything but one
   ``command`` node holding ``word`` nodes -- a list or pipeline (a second command),
   a redirect, a compound, a function, a reserved word -- and any node inside a word
   (parameter, command or process substitution, arithmetic, tilde) is a finding.
   bashlex's two known misreports are corrected with the oracle's own quote scanner
   (:func:`_quote_states`, written for this test): it invents substitutions inside
   single quotes that start inside a word (and crashes on a backtick there), so
   single-quoted text is masked before parsing; it reports a lone literal ``$`` as an
   empty parameter; it cannot parse a final line continuation and misplaces positions
   after one, so the oracle joins continuations first (its own scanner again).  bashlex
   failing to parse is a finding too.
3. What bash expands but bashlex never reports, found with the same scanner on the
   text: an unquoted ``~`` at the start of a word or after ``=`` / ``:``, unquoted
   glob characters ``* ? [``, braces, ``$'...'`` and ``$"..."``.

Run the long version with ``AE_FUZZ_N=20000 python -m pytest tests/policy/test_fuzz.py``
(the suite runs ``AE_FUZZ_N`` = 1500 inputs); BENCHMARKS.md records the last long run.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess

import bashlex
import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import judge_command

RALF = allowlist_named("ralf")
N = int(os.environ.get("AE_FUZZ_N", "1500"))
SEED = int(os.environ.get("AE_FUZZ_SEED", "9"))

VALUES = ["42", "researcher", "SELECT 1", "a b", "x=y", "notes", "on", "5", "s1", "done",
          "it's", "a:b", "HOME", "id", "1+2", "-", "%", "@", ",", "."]
FRAGMENTS = [
    "$", "\\\n", "\\", "'", '"', "`", "$(", ")", "(", "${", "}", "{", "~", "=", ":", ";", "|",
    "&", "<", ">", "#", "!", "*", "?", "[", "]", ",", "\n", "\t", " ", "$'", '$"', "((", "$[",
    "$((", "<(", ">(", "HOME", "x", "1", "@", "-", "$$", "$@", "$1", "${x:=y}", "\\\n(",
    "$\\\n", "\\\n~", "=\\\n~", "'\\''", "\u00a0", "；", "＄", "\r", "\x00", "2>&1", "&&",
    "||", "<<", "<<<", "..", "/", "\\$", '\\"', "\\'", "\\`", "\\\\",
]


def _allowed_base(rng: random.Random) -> str:
    """One allowed call of ralf: the runner, a script, its subcommand and flags."""
    name = rng.choice(sorted(RALF.scripts))
    spec = RALF.scripts[name]
    words = ["uv", "run", f"scripts/{name}"]
    while spec.subcommands:
        sub = rng.choice(sorted(spec.subcommands))
        words.append(sub)
        spec = spec.subcommands[sub]
    for pos in spec.positionals:
        words.append(rng.choice(pos.choices) if pos.choices else "x")
    for flag_name, flag in spec.flags.items():
        if not (flag.required or rng.random() < 0.3):
            continue
        words.append(flag_name)
        if flag.value:
            value = (rng.choice(flag.choices) if flag.choices
                     else str(rng.randint(1, 99)) if flag.type == "int"
                     else rng.choice(VALUES))
            quote = rng.choice(["", "'", '"'])
            if not quote and not value.replace("=", "").replace(":", "").isalnum():
                quote = "'"
            words.append(f"{quote}{value}{quote}" if "'" not in value or quote == '"'
                         else f'"{value}"')
    return " ".join(words)


def _insert(rng: random.Random, text: str, low: int) -> str:
    at = rng.randint(low, len(text))
    return text[:at] + rng.choice(FRAGMENTS) + text[at:]


def generate(n: int, seed: int) -> list[str]:
    """``n`` commands: allowed calls with 1-4 fragments inserted, half of them inside
    the last value (quoted or not), the rest anywhere in the second half or anywhere."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = _allowed_base(rng)
        last = max(text.rfind(" ") + 1, 0)
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            low = last + 1 if roll < 0.5 else len(text) // 2 if roll < 0.85 else 0
            text = _insert(rng, text, min(low, len(text)))
        out.append(text)
    return out


def _quote_states(text: str) -> list[str]:
    """Quoting state of each character: ``n`` unquoted, ``s`` single-quoted, ``d``
    double-quoted, ``e`` escaped by a backslash or part of a line continuation, ``q`` a
    quote character.  Written for this test only, from bash's manual (QUOTING)."""
    states, i, n, mode = [], 0, len(text), "n"
    while i < n:
        ch = text[i]
        if mode == "s":
            states.append("q" if ch == "'" else "s")
            mode = "n" if ch == "'" else "s"
        elif ch == "\\" and i + 1 < n and (mode == "n" or text[i + 1] in '$`"\\\n'):
            states += ["e", "e"]
            i += 2
            continue
        elif ch == "'" and mode == "n":
            states.append("q")
            mode = "s"
        elif ch == '"':
            states.append("q")
            mode = "d" if mode == "n" else "n"
        else:
            states.append(mode)
        i += 1
    return states


def _join(text: str) -> str:
    """``text`` without its line continuations: bash removes them before anything else
    (and bashlex reports positions inside a word as if they were gone)."""
    states, out, i = _quote_states(text), [], 0
    while i < len(text):
        if text.startswith("\\\n", i) and states[i] == "e":
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _text_findings(text: str, states: list[str]) -> str | None:
    """Expansions bash performs that bashlex does not report (step 3 of the docstring)."""
    for k, ch in enumerate(text):
        if states[k] != "n":
            continue
        prev = (text[k - 1], states[k - 1]) if k else (" ", "n")
        if ch == "~" and prev[0] in " \t=:" and prev[1] == "n":
            return "tilde expansion"
        if ch in "*?[{}":
            return f"unquoted {ch}"
        if ch == "$" and text[k + 1:k + 2] in ("'", '"') and states[k + 1] == "q":
            return "ANSI-C or locale quoting"
    return None


def _word_findings(word, text: str, states: list[str]) -> str | None:
    for part in getattr(word, "parts", ()):
        start, end = part.pos
        if all(s == "s" for s in states[start:end]):
            continue  # invented inside single quotes
        after = text[end:end + 1]
        lone_dollar = part.kind == "parameter" and end - start == 1 and text[start] == "$"
        if lone_dollar and not (after and (after.isalnum() or after in "_@*#?$!-({['\"")):
            continue  # a lone literal $
        if lone_dollar and after in "'\"" and states[start] == "d":
            continue  # $' or $" inside double quotes is literal
        return f"{part.kind} in a word"
    return None


def oracle(text: str) -> str | None:
    """Why bash would do more than run one simple command of literal words, or None."""
    syntax = subprocess.run(["bash", "--norc", "--noprofile", "-n"], input=text.encode(),
                            capture_output=True, env={"PATH": "/usr/bin:/bin"}, timeout=120)
    if syntax.returncode != 0:
        return "bash -n: " + syntax.stderr.decode(errors="replace").strip()[:80]
    text = _join(text)
    states = _quote_states(text)
    # bashlex crashes on some characters inside single quotes: hide single-quoted text
    masked = "".join("_" if state == "s" else ch for ch, state in zip(text, states, strict=True))
    try:
        trees = bashlex.parse(masked)
    except Exception as exc:
        return f"bashlex cannot parse it ({type(exc).__name__})"
    if len(trees) != 1 or trees[0].kind != "command":
        return f"not one simple command ({', '.join(t.kind for t in trees)})"
    for part in trees[0].parts:
        if part.kind != "word":
            return f"a {part.kind} in the command"
        found = _word_findings(part, text, states)
        if found:
            return found
    return _text_findings(text, states)


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@needs_bash
@pytest.mark.parametrize(("command", "finding"), [
    ('x --sql "$\\\n(id)"', "commandsubstitution"),
    ("x --sql a=\\\n~", "tilde"),
    ("x --body $\\\nOPENAI_API_KEY", "parameter"),
    ("x --id $'\\x41'", "parameter"),
    ("x --id 4\\\n$\\\nHOME", "parameter"),
    ("x --id 4$'1'", "parameter"),
    ("x | y", "pipeline"),
    ("x; y", "list"),
    ("x > f", "redirect"),
    ("x *", "unquoted *"),
    ("x 'a", "bash -n"),
], ids=repr)
def test_the_oracle_sees_what_bash_would_do(command, finding):
    assert finding in (oracle(command) or "")


@needs_bash
@pytest.mark.parametrize("command", [
    "x --sql 'a=~'", "x --sql \"SELECT '$' AS x\"", "x --id 42$", "x --sql='SELECT $1'",
    "x \\\n --id 4", "x --id='a`b'", 'x "a\\$b"', 'x "H\\\nOME$"', "x a$\\\\b",
    "x 'done'\\\n",
], ids=repr)
def test_the_oracle_passes_literal_words(command):
    assert oracle(command) is None


def test_the_generator_is_seeded_and_exercises_allows():
    first = generate(300, SEED)
    assert first == generate(300, SEED)
    allowed = sum(judge_command(c, RALF).decision == "allow" for c in first)
    assert allowed >= 30  # the oracle only sees allowed commands; they must be common


@needs_bash
def test_engine_never_allows_what_the_oracle_sees_as_shell():
    """Also: the fast path and the full path give the same verdict on every input."""
    false_allows = []
    for command in generate(N, SEED):
        verdict = judge_command(command, RALF)
        if judge_command(command, RALF, fast_path=False) != verdict:
            false_allows.append((command, "the fast and the full path disagree"))
            continue
        if verdict.decision != "allow":
            continue
        found = oracle(command)
        if found:
            false_allows.append((command, found))
    assert not false_allows, "\n".join(f"{c!r}: {why}" for c, why in false_allows[:20])
