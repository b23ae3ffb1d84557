"""A replay against its original: every replayed context paired with the original turn.

``agent-eval replay`` (live/replay.py) sent each stored context to a candidate model; the
replay session's key names the original turn (``KEY@turnN``, ``/repeatR``).  Both sides
of a pair answered the *same* context, so the comparison is paired, not two samples:

- a **reply** is ``allowed`` when it carries tool calls and every one is allowed,
  ``denied`` when any is denied (its class: the primary class of its first denied call),
  and ``no call`` when the candidate answered in text only: an outcome of its own,
  counted and shown, never an error;
- the 2×2 table counts pairs where both sides called a tool: both allowed, **fixed by the
  candidate** (original denied, candidate allowed), **broken by the candidate** (the
  reverse), both denied; the exact McNemar test (metrics/paired.py ``mcnemar_exact``,
  the exact binomial test on the discordant pairs) decides whether fixed and broken
  differ by more than chance;
- per class, the same test on "denied with this class or not";
- a candidate that called another tool than the original (say ``read`` for ``bash``) is
  counted beside the table;
- with ``--repeats K`` the test uses repeat 0 only (one pair per context, so pairs stay
  independent); the other repeats measure the candidate's own noise: the share of
  contexts whose repeats disagree (allowed in one, denied in another).

Replies that ended in a server fault are left out and counted, as from every rate.  Pure:
``agent-eval compare`` reads the rows, :func:`pair_replay` pairs them, the renderers
format the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from agent_eval.metrics.paired import McNemar, mcnemar_exact
from agent_eval.transcript import CallRow, SessionRow, parse_replay_key

ReplyDecision = Literal["allowed", "denied", "no call"]
MCNEMAR_METHOD = ("exact McNemar test on replayed-context pairs (exact binomial test on the "
                  "discordant pairs, repeat 0)")
MOVED_SHOWN = 20
"""Moved calls listed in text and Markdown; ``--json`` lists every one."""


@dataclass(frozen=True, slots=True)
class ReplyOutcome:
    """What one reply did: its decision, class, first tool, the command that decided it
    (the first denied call's, else the first call's) and where it is stored."""

    decision: ReplyDecision
    primary: str | None
    tool: str | None
    command: str | None
    session_id: int
    call_index: int | None

    @property
    def label(self) -> str:
        return "allowed" if self.decision == "allowed" else self.primary or self.decision


@dataclass(frozen=True, slots=True)
class ReplayPair:
    """One replayed context: the original turn (session key, turn index) and the reply of
    repeat ``repeat``."""

    key: str
    turn: int
    repeat: int
    original: ReplyOutcome
    candidate: ReplyOutcome

    @property
    def moved(self) -> bool:
        """Both called a tool and the class changed (allowed counts as a class)."""
        return self.candidate.decision != "no call" and self.original.label != self.candidate.label


@dataclass(frozen=True, slots=True)
class ClassPairs:
    """One failure class over the tested pairs: replies denied with it on each side,
    pairs that left it (``fixed``: original had it, candidate not) and entered it."""

    code: str
    original: int
    candidate: int
    fixed: int
    broken: int
    mcnemar: McNemar


@dataclass(frozen=True, slots=True)
class PairedReplay:
    """The paired comparison of a replay with its original run (see the module doc).

    ``pairs`` holds every pair (all repeats); the table, the tests and ``classes`` count
    repeat-0 pairs where both sides called a tool (``tested``).  ``no_call`` counts
    repeat-0 candidate replies without a tool call, by the original's decision.
    ``unmatched`` counts replay sessions whose original turn was not found, ``errors``
    replies that ended in a server fault."""

    original_run: int
    replay_run: int
    pairs: list[ReplayPair]
    both_allowed: int
    fixed: int
    broken: int
    both_denied: int
    mcnemar: McNemar
    classes: list[ClassPairs]
    no_call: dict[str, int] = field(default_factory=dict)
    other_tool: int = 0
    unmatched: int = 0
    errors: int = 0
    repeats: int = 1
    noisy_contexts: int = 0
    repeated_contexts: int = 0

    @property
    def tested(self) -> int:
        return self.both_allowed + self.fixed + self.broken + self.both_denied

    @property
    def moved(self) -> list[ReplayPair]:
        """Repeat-0 pairs whose class changed, fixed and broken first."""
        first = [p for p in self.pairs if p.repeat == 0 and p.moved]
        order = {("denied", "allowed"): 0, ("allowed", "denied"): 1}
        return sorted(first, key=lambda p: (order.get((p.original.decision,
                                                       p.candidate.decision), 2), p.key, p.turn))


def reply_outcomes(sessions: Iterable[SessionRow], calls: Iterable[CallRow]
                   ) -> dict[tuple[str, int], ReplyOutcome]:
    """Each (session key, turn index) that carried calls, outside error sessions."""
    keys = {s.id: s.key for s in sessions if s.status != "error"}
    by_turn: dict[tuple[int, int], list[CallRow]] = defaultdict(list)
    for c in calls:
        if c.session_id in keys:
            by_turn[(c.session_id, c.turn_index)].append(c)
    out = {}
    for (sid, turn), rows in by_turn.items():
        out[(keys[sid], turn)] = _outcome(sid, sorted(rows, key=lambda c: c.index))
    return out


def _outcome(session_id: int, calls: list[CallRow]) -> ReplyOutcome:
    if not calls:
        return ReplyOutcome("no call", None, None, None, session_id, None)
    denied = next((c for c in calls if c.decision == "deny"), None)
    shown = denied or calls[0]
    return ReplyOutcome("denied" if denied else "allowed",
                        (denied.primary or "denied") if denied else None, calls[0].tool,
                        shown.command, session_id, shown.index)


def pair_replay(original_run: int, replay_run: int,
                original_sessions: Iterable[SessionRow], original_calls: Iterable[CallRow],
                replay_sessions: Iterable[SessionRow], replay_calls: Iterable[CallRow]
                ) -> PairedReplay:
    """Pair every replay session with the original turn its key names (pure)."""
    originals = reply_outcomes(original_sessions, original_calls)
    replay_rows = list(replay_sessions)
    replies = reply_outcomes(replay_rows, replay_calls)
    pairs, unmatched, errors = [], 0, 0
    for s in replay_rows:
        parsed = parse_replay_key(s.key)
        if s.status == "error":
            errors += 1
            continue
        if parsed is None or (parsed[0], parsed[1]) not in originals:
            unmatched += 1
            continue
        key, turn, repeat = parsed
        candidate = replies.get((s.key, 0)) or ReplyOutcome("no call", None, None, None, s.id, None)
        pairs.append(ReplayPair(key, turn, repeat, originals[(key, turn)], candidate))
    return _tabulate(original_run, replay_run, pairs, unmatched, errors)


def load_replay_pairs(store, info_a, info_b) -> PairedReplay | None:
    """When one of two stored runs is ``agent-eval replay`` of the other: each reply
    paired with the original turn it answers; else None.  ``store`` is a ``Store``,
    ``info_*`` are ``RunInfo``."""
    original, replay = (info_a, info_b) if info_b.kind == "replay" else (info_b, info_a)
    if replay.kind != "replay" or replay.parent_run_id != original.id:
        return None
    a, b = [original.id], [replay.id]
    return pair_replay(original.id, replay.id, store.session_rows(a), store.call_rows(a),
                       store.session_rows(b), store.call_rows(b))


def _tabulate(original_run: int, replay_run: int, pairs: list[ReplayPair], unmatched: int,
              errors: int) -> PairedReplay:
    first = [p for p in pairs if p.repeat == 0]
    tested = [p for p in first if p.candidate.decision != "no call"]
    cells = {(a, b): 0 for a in ("allowed", "denied") for b in ("allowed", "denied")}
    for p in tested:
        cells[(p.original.decision, p.candidate.decision)] += 1
    no_call: dict[str, int] = {"allowed": 0, "denied": 0}
    for p in first:
        if p.candidate.decision == "no call":
            no_call[p.original.decision] += 1
    codes = sorted({o.primary for p in tested for o in (p.original, p.candidate) if o.primary})
    classes = []
    for code in codes:
        had = [(p.original.primary == code, p.candidate.primary == code) for p in tested]
        classes.append(ClassPairs(
            code, sum(a for a, _ in had), sum(b for _, b in had),
            sum(a and not b for a, b in had), sum(b and not a for a, b in had),
            _mcnemar((not a, not b) for a, b in had)))
    noisy, repeated = _noise(pairs)
    return PairedReplay(
        original_run=original_run, replay_run=replay_run, pairs=pairs,
        both_allowed=cells[("allowed", "allowed")], fixed=cells[("denied", "allowed")],
        broken=cells[("allowed", "denied")], both_denied=cells[("denied", "denied")],
        mcnemar=_mcnemar((p.original.decision == "allowed",
                               p.candidate.decision == "allowed") for p in tested),
        classes=classes, no_call=no_call,
        other_tool=sum(p.candidate.tool != p.original.tool for p in tested),
        unmatched=unmatched, errors=errors,
        repeats=max((p.repeat for p in pairs), default=0) + 1,
        noisy_contexts=noisy, repeated_contexts=repeated,
    )


def _mcnemar(pairs: Iterable[tuple[bool, bool]]) -> McNemar:
    return replace(mcnemar_exact(pairs), method=MCNEMAR_METHOD)


def _noise(pairs: list[ReplayPair]) -> tuple[int, int]:
    """(contexts whose repeats disagree on allowed vs denied, contexts with ≥ 2 replies
    that called a tool)."""
    seen: dict[tuple[str, int], set[str]] = defaultdict(set)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for p in pairs:
        if p.candidate.decision != "no call":
            seen[(p.key, p.turn)].add(p.candidate.decision)
            counts[(p.key, p.turn)] += 1
    repeated = [k for k, n in counts.items() if n >= 2]
    return sum(len(seen[k]) > 1 for k in repeated), len(repeated)


# --- rendering ---------------------------------------------------------------------------


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _per100(k: int, n: int) -> str:
    return f"{100 * k / n:.2f}" if n else "–"


def paired_lines(pr: PairedReplay) -> list[str]:
    """The summary lines: the 2×2 table, the test, no-call and other-tool counts, noise."""
    n, m = pr.tested, pr.mcnemar
    called = "significant" if m.p_value < 0.05 else "not significant"
    lines = [
        f"run {pr.replay_run} replays run {pr.original_run}: {len(pr.pairs)} replies paired "
        f"with the original turn (single step; {pr.repeats} repeat"
        f"{'s' if pr.repeats != 1 else ''} per context).",
        f"{n} contexts where both called a tool: errors/100 original "
        f"{_per100(pr.fixed + pr.both_denied, n)}, candidate {_per100(pr.broken + pr.both_denied, n)}",
        f"  both allowed           {pr.both_allowed}",
        f"  fixed by the candidate {pr.fixed}",
        f"  broken by the candidate {pr.broken}",
        f"  both denied            {pr.both_denied}",
        f"exact McNemar on the {pr.fixed + pr.broken} discordant pairs: p {_p(m.p_value)}, "
        f"{called} at alpha 0.05 (exact binomial test, repeat 0 only)",
        f"candidate called no tool: {pr.no_call.get('allowed', 0) + pr.no_call.get('denied', 0)}"
        f" (original allowed {pr.no_call.get('allowed', 0)}, denied "
        f"{pr.no_call.get('denied', 0)}); left out of the table",
        f"candidate called another tool than the original: {pr.other_tool}",
    ]
    if pr.repeated_contexts:
        lines.append(f"candidate's own noise: repeats disagree (allowed vs denied) on "
                     f"{pr.noisy_contexts} of {pr.repeated_contexts} contexts")
    if pr.errors or pr.unmatched:
        lines.append(f"left out: {pr.errors} replies ended in a server fault, "
                     f"{pr.unmatched} replay sessions match no original turn")
    return lines


CLASS_HEADER = ("class", "original", "candidate", "fixed", "broken", "McNemar p")


def class_rows(pr: PairedReplay) -> list[tuple[str, ...]]:
    from agent_eval.policy import get_rule

    rows: list[tuple[str, ...]] = []
    for c in pr.classes:
        rule = get_rule(c.code)
        name = f"{c.code} {rule.name}" if rule else c.code
        rows.append((name, str(c.original), str(c.candidate), str(c.fixed), str(c.broken),
                     _p(c.mcnemar.p_value)))
    return rows


def moved_line(p: ReplayPair) -> str:
    """One moved call: where the original is, both classes and both commands (a long
    prefix the two share is elided, so the difference shows)."""
    o, c = p.original, p.candidate
    where = f"session {o.session_id} call {o.call_index}" if o.call_index is not None else (
        f"session {o.session_id}")
    before, after = _differing(_text(o), _text(c))
    return (f"{p.key} turn {p.turn} ({where} -> replay session {c.session_id}): "
            f"{o.label} -> {c.label}: {before!r} -> {after!r}")


def _text(o: ReplyOutcome) -> str:
    return " ".join((o.command if o.command is not None else o.tool or "").split())


def _differing(a: str, b: str, width: int = 100) -> tuple[str, str]:
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    cut = max(0, shared - 30)
    if cut > 10:
        a, b = "..." + a[cut:], "..." + b[cut:]

    def clip(text: str) -> str:
        return text if len(text) <= width else text[:width - 3] + "..."

    return clip(a), clip(b)


def render_paired_text(pr: PairedReplay) -> str:
    lines = ["", "== replay: paired with the original turns ==", *paired_lines(pr)]
    rows = class_rows(pr)
    if rows:
        table = [CLASS_HEADER, *rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(CLASS_HEADER))]
        lines += ["", "per class (replies denied with the class, over the same pairs):"]
        for r in table:
            lines.append("  ".join([r[0].ljust(widths[0]),
                                    *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))]))
    moved = pr.moved
    lines += ["", f"calls that moved: {len(moved)}"]
    lines += [f"  {moved_line(p)}" for p in moved[:MOVED_SHOWN]]
    if len(moved) > MOVED_SHOWN:
        lines.append(f"  ... {len(moved) - MOVED_SHOWN} more (--json lists every one)")
    return "\n".join(lines) + "\n"


def render_paired_markdown(pr: PairedReplay) -> str:
    lines = ["", "### Replay: paired with the original turns", ""]
    lines += [f"{_md(line.strip())}  " for line in paired_lines(pr)]
    rows = class_rows(pr)
    if rows:
        lines += ["", "| " + " | ".join(CLASS_HEADER) + " |",
                  "|---|" + "---:|" * (len(CLASS_HEADER) - 1)]
        lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]
    moved = pr.moved
    lines += ["", f"Calls that moved: {len(moved)}", ""]
    lines += [f"- {_md(moved_line(p))}" for p in moved[:MOVED_SHOWN]]
    if len(moved) > MOVED_SHOWN:
        lines.append(f"- ... {len(moved) - MOVED_SHOWN} more (--json lists every one)")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")
            .replace("`", "\\`").replace("\n", " "))
