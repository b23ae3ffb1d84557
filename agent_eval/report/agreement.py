"""Agreement with the source harness: our verdict beside the one an imported transcript
recorded itself (an OpenCode permission error, a Claude Code denial, a harness format
error), per column, and the calls where the two differ.

Definitions, stated once (the index, ``summary.json`` and ``summary.md`` use them):

* Only calls whose source recorded a verdict (``CallRow.source_decision`` set) count;
  live runs have none, so their columns have no agreement row at all.
* Calls of sessions that ended in a server or harness fault count too: agreement is
  about two policies judging the same call, not a model rate.
* ``agree`` is the share of those calls where both said the same (Wilson 95% interval);
  the disagreements split by direction: we deny what the source allowed (``deny_allow``:
  ours is stricter) or we allow what the source denied (``allow_deny``).
* The counts are the store aggregator's (``Store.source_agreement``, one GROUP BY); the
  list keeps the first :data:`MAX_DISAGREEMENTS` disagreements in stream order (session
  id, then call index).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from agent_eval.metrics import Rate
from agent_eval.report.pages import SessionLink
from agent_eval.report.summary_format import AgreementEntry
from agent_eval.transcript import CallRow, Decision

MAX_DISAGREEMENTS = 50
EXCERPT_CHARS = 120

AGREEMENT_HEAD = ("target", "calls with a source verdict", "agree [95% CI]",
                  "ours deny, source allow", "ours allow, source deny")  # fmt: skip


@dataclass(frozen=True, slots=True)
class SourceAgreement:
    """One column's agreement counts (see the module docstring)."""

    column: str
    calls: int
    agree: Rate
    deny_allow: int  # we denied, the source allowed (ran it)
    allow_deny: int  # we allowed, the source denied

    @property
    def disagreements(self) -> int:
        return self.deny_allow + self.allow_deny


@dataclass(frozen=True, slots=True)
class DisagreementItem:
    """One call judged differently: where it is, what it was, both verdicts."""

    link: SessionLink
    column: str
    index: int
    tool: str
    excerpt: str
    ours: Decision
    primary: str | None
    source: Decision


@dataclass(slots=True)
class AgreementTally:
    """The first disagreements, taken while call rows stream past (one pass, shared with
    the index); the counts come from the store's aggregator (``Store.source_agreement``)."""

    column_of: dict[int, str]  # session id -> column name
    first: list[CallRow] = field(default_factory=list)

    def watch(self, rows: Iterable[CallRow]) -> Iterator[CallRow]:
        for row in rows:
            if (row.source_decision is not None and row.source_decision != row.decision
                    and len(self.first) < MAX_DISAGREEMENTS):
                self.first.append(row)
            yield row


def agreement_rows(counts: Mapping[str, tuple[int, int, int]],
                   columns: Iterable[str]) -> tuple[SourceAgreement, ...]:
    """One record per column that has source verdicts, in column order, from the
    aggregator's ``(calls, deny_allow, allow_deny)`` per column."""
    out = []
    for column in columns:
        found = counts.get(column)
        if found is None:
            continue
        calls, deny_allow, allow_deny = found
        agreed = calls - deny_allow - allow_deny
        out.append(SourceAgreement(column, calls, Rate.of(agreed, calls), deny_allow,
                                   allow_deny))
    return tuple(out)


def disagreement_items(tally: AgreementTally,
                       links: dict[int, SessionLink]) -> tuple[DisagreementItem, ...]:
    return tuple(
        DisagreementItem(
            link=links[row.session_id],
            column=tally.column_of.get(row.session_id, row.target),
            index=row.index,
            tool=row.tool,
            excerpt=excerpt(row.command if row.command is not None else row.tool),
            ours=row.decision,
            primary=row.primary,
            source=row.source_decision,
        )
        for row in tally.first  # every one has a source verdict (``watch``)
        if row.session_id in links and row.source_decision is not None
    )


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The command on one line, cut at ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def agreement_cells(a: SourceAgreement) -> tuple[str, ...]:
    """The table row: ``4/6 (66.7%) [30.0–90.3]`` for agree."""
    share = a.agree
    agree = (f"{share.k}/{share.n} ({share.per100:.1f}%) [{share.lo100:.1f}–{share.hi100:.1f}]"
             if share.per100 is not None else "–")
    return (a.column, str(a.calls), agree, str(a.deny_allow), str(a.allow_deny))


def agreement_dict(a: SourceAgreement) -> AgreementEntry:
    """``summary.json``'s ``source_agreement`` entry of one column."""
    rate = a.agree
    return {
        "calls_with_source_verdict": a.calls,
        "agree": rate.k,
        "agree_per_100": None if rate.per100 is None else round(rate.per100, 2),
        "agree_ci95": None if rate.lo100 is None or rate.hi100 is None
        else [round(rate.lo100, 2), round(rate.hi100, 2)],
        "ours_deny_source_allow": a.deny_allow,
        "ours_allow_source_deny": a.allow_deny,
    }


def agreement_line(rows: Iterable[SourceAgreement]) -> str:
    """``careful 4/6 agree (66.7%), 2 disagree (ours deny 2, ours allow 0)`` per column."""
    return "; ".join(
        f"{a.column} {a.agree.k}/{a.calls} agree ({a.agree.per100:.1f}%), "
        f"{a.disagreements} disagree (ours deny, source allow {a.deny_allow}; "
        f"ours allow, source deny {a.allow_deny})"
        for a in rows
    )
