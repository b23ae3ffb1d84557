"""Worst-case time of the policy engine on long hostile inputs, shape by shape.

Run:  python benchmarks/bench_policy_worst.py [--n 200] [--shape NAME ...]

For each shape (a way of making a long input: line continuations, 16,000 ``;``, a
megabyte of argument JSON, thousands of invisible characters...) it generates ``--n``
inputs of lengths spread over the last quarter up to the allow-list's ``max_length``
(the argument-JSON shapes: up to ``calls.arguments_cap``, one shape far past it), with
seeded variation, and times one uncached check of each: ``judge_command`` for commands,
``check_read`` with an empty cache for paths, ``check_call`` for whole calls.

Columns: the longest input, p99 and max CPU microseconds per check (``thread_time``,
best of 3 per input), and the *growth*: the
median time at full length over the median at a quarter of it (``--growth`` inputs
each).  A linear check grows about 4x; a quadratic one about 16x.  Everything is judged
under allowlists/ralf.yaml, pinned to one core.  Not a test: timings go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.policy import check_call, check_read, clear_cache, judge_command, load_allowlist  # noqa: E402
from agent_eval.policy.calls import arguments_cap  # noqa: E402

RALF = load_allowlist(REPO / "allowlists" / "ralf.yaml")
MAX = RALF.strict.max_length
CAP = arguments_cap(RALF)
CALENDAR = "uv run scripts/calendar.py create --title t --start s"
SEARCH = "uv run scripts/embedding_search.py --query "


def _fill(unit: str, length: int, head: str = "", tail: str = "") -> str:
    """``head`` + ``unit`` as many whole times as fit + ``tail``: at most ``length``
    characters."""
    body = max(length - len(head) - len(tail), 0)
    return head + unit * (body // max(len(unit), 1)) + tail


def _bash_call(command: str) -> str:
    return json.dumps({"command": command}, ensure_ascii=False)


# name -> (kind, make(length, rng) -> input, longest length)
Shape = tuple[str, Callable[[int, random.Random], str], int]
SHAPES: dict[str, Shape] = {
    # bash commands, judged uncached
    "continuations between words": ("command", lambda n, r: _fill("x \\\n", n), MAX),
    "continuations, allowed form": (
        "command", lambda n, r: _fill(f" --attendee a{r.randint(0, 9)}\\\n", n, CALENDAR), MAX),
    "16,000 ;": ("command", lambda n, r: _fill(";", n), MAX),
    "chain a;a;a": ("command", lambda n, r: _fill("a;", n), MAX),
    "pipes ls|ls|": ("command", lambda n, r: _fill("ls|", n), MAX),
    "many words": ("command", lambda n, r: _fill("a ", n), MAX),
    "unknown flags": ("command", lambda n, r: _fill(f" --v{r.randint(0, 9)}", n,
                                                    "uv run scripts/db_query.py --sql x"), MAX),
    "repeated flag, plain": ("command", lambda n, r: _fill(" --attendee 'a b'", n, CALENDAR), MAX),
    "repeated flag, bashlex": ("command", lambda n, r: _fill(' --attendee "a\\$b"', n, CALENDAR),
                               MAX),
    "one long quoted value": ("command", lambda n, r: _fill("a$", n, SEARCH + '"', '"'), MAX),
    "$( nested": ("command", lambda n, r: _fill("$(", n), MAX),
    "$(( nested": ("command", lambda n, r: _fill("$((", n), MAX),
    "${ nested": ("command", lambda n, r: _fill("${", n), MAX),
    "backticks": ("command", lambda n, r: _fill("`", n), MAX),
    "single quotes": ("command", lambda n, r: _fill("'", n), MAX),
    "double quotes": ("command", lambda n, r: _fill('"', n), MAX),
    "( nested": ("command", lambda n, r: _fill("(", n), MAX),
    ") unbalanced": ("command", lambda n, r: _fill(")", n), MAX),
    "heredocs": ("command", lambda n, r: _fill("cat <<E\n", n), MAX),
    "backslashes": ("command", lambda n, r: _fill("\\a", n), MAX),
    "comments": ("command", lambda n, r: _fill("a #x\n", n), MAX),
    "dollars": ("command", lambda n, r: _fill("$", n), MAX),
    "non-ASCII value": ("command", lambda n, r: _fill("é", n, SEARCH + "'", "'"), MAX),
    "combining marks": ("command", lambda n, r: _fill("e\u0301", n, SEARCH + "'", "'"), MAX),
    "distinct CJK, one tag at the end": (
        "command", lambda n, r: SEARCH + "'" + "".join(chr(0x4E00 + (i * 7 + r.randint(0, 6))
                                                          % 20000) for i in range(n - 60))
        + "\U000E0041'", MAX),
    # read paths, cache cleared before each
    "path components": ("read", lambda n, r: _fill(f"a{r.randint(0, 9)}/", n, "notes/"), MAX),
    "path ../": ("read", lambda n, r: _fill("../notes/", n, "notes/"), MAX),
    "path backslashes": ("read", lambda n, r: _fill("\\a", n, "notes/"), MAX),
    "path dotless i": ("read", lambda n, r: _fill("ı", n, "notes/"), MAX),
    "path dotted names": ("read", lambda n, r: _fill(".env.x/", n, "notes/"), MAX),
    "path copies of copies": ("read", lambda n, r: _fill("private copy (2) - Copy,v/", n,
                                                         "notes/"), MAX),
    "path blanks": ("read", lambda n, r: _fill(f"a{r.randint(0, 9)} ", n, "notes/"), MAX),
    "path blanks and dots": ("read", lambda n, r: _fill("x .. /", n, "notes/"), MAX),
    # whole calls
    "JSON many keys": ("call", lambda n, r: "{" + ", ".join(
        [f'"command": "{CALENDAR}"'] + [f'"k{i}{r.randint(0, 9)}": 0' for i in range(n // 9)]
    )[:n - 1].rsplit(",", 1)[0] + "}", CAP),
    "JSON case look-alike keys": ("call", lambda n, r: "{" + ", ".join(
        f'"k{i}": 0, "K{i}": 0' for i in range(n // 16))[:n].rsplit(",", 1)[0] + "}", CAP),
    "JSON escaped command": ("call", lambda n, r: _bash_call(
        _fill("é", n // 6, SEARCH + "'", "'")).replace("é", "\\u00e9"), CAP),
    "JSON nested 16 deep, wide": ("call", lambda n, r: '{"command": "x", "a": ' + _fill(
        "[" * 15 + "0" + "]" * 15 + ",", n - 30, "[", "0]") + "}", CAP),
    "JSON nested past the depth": ("call", lambda n, r: "[" * (n // 2) + "]" * (n // 2), CAP),
    "JSON 1.3 MB object": ("call", lambda n, r: json.dumps(
        {"command": CALENDAR, "x": ["a" * 100] * (n // 104)}), 1_300_000),
}


def _checker(kind: str) -> Callable[[str], object]:
    judge = {"command": lambda text: judge_command(text, RALF),
             "read": lambda text: check_read(text, RALF),
             "call": lambda text: check_call("bash", text, RALF)}[kind]

    def cold(text: str) -> object:
        clear_cache()  # verdicts and the characters' classes: every check starts cold
        return judge(text)
    return cold


def _time(check: Callable[[str], object], text: str, repeats: int = 3) -> float:
    """CPU microseconds of one check (the best of ``repeats``): on a shared machine the
    wall clock also counts the time other processes hold the core."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        check(text)
        best = min(best, time.thread_time_ns() - start)
    return best / 1000


def measure(name: str, n: int, growth_n: int, seed: int = 26) -> dict:
    kind, make, longest = SHAPES[name]
    rng = random.Random(f"{seed}:{name}")
    check = _checker(kind)
    inputs = [make(rng.randint(longest * 3 // 4, longest), rng) for _ in range(n)]
    samples = sorted(_time(check, text) for text in inputs)
    full = statistics.median(_time(check, make(longest, rng)) for _ in range(growth_n))
    quarter = statistics.median(_time(check, make(longest // 4, rng)) for _ in range(growth_n))
    verdict = check(inputs[-1])
    return {"shape": name, "kind": kind, "chars": max(len(t) for t in inputs),
            "p99": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "max": samples[-1], "growth": full / quarter if quarter else float("nan"),
            "verdict": f"{verdict.decision} {verdict.primary or ''}".strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="inputs per shape")
    parser.add_argument("--growth", type=int, default=7, help="inputs per growth timing")
    parser.add_argument("--shape", action="append", choices=list(SHAPES),
                        help="only these shapes (repeatable)")
    args = parser.parse_args()
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        pinned = "pinned to one core"
    except (AttributeError, OSError):
        pinned = "not pinned"
    print(f"# worst-case policy checks ({pinned}; {args.n} inputs per shape; max_length "
          f"{MAX}, argument cap {CAP}; load average {os.getloadavg()[0]:.1f})")
    print()
    print("| shape | judged as | longest input (chars) | p99 µs | max µs | growth ×4 length "
          "| verdict |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name in args.shape or SHAPES:
        r = measure(name, args.n, args.growth)
        print(f"| {r['shape']} | {r['kind']} | {r['chars']:,} | {r['p99']:,.0f} | "
              f"{r['max']:,.0f} | {r['growth']:.1f}× | {r['verdict']} |", flush=True)


if __name__ == "__main__":
    main()
