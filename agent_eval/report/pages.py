"""Typed page contexts: one frozen dataclass per report page, built from stored rows.

Templates use nothing but these records (datasette's habit), so what a page can show is
decided here, in Python, and tested without a browser.  Strings the model wrote stay
plain ``str`` all the way into the template, where autoescape escapes them; the only
structure added to model text is :class:`Segment`, a run of characters marked as inside
a finding's span or not, so the template can underline without ever marking model text
safe.  The session page is shared by the HTML report and ``agent-eval show``.

The index page's context lives in ``index.py``; this module holds the session and rule
pages and the small records both use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from agent_eval.metrics.summary import SessionOutcome
from agent_eval.policy import RULES, Rule, get_rule
from agent_eval.policy.schemas import tools_hash
from agent_eval.store import SessionTranscript, StoredSession, TranscriptHead
from agent_eval.transcript import (
    CallRecord,
    Decision,
    ExitState,
    FindingRecord,
    NextAction,
    StackFaultRecord,
    TurnRecord,
    completeness_text,
    telemetry_completeness,
)

RULES_DIR = "rules"
SESSIONS_DIR = "sessions"
LISTS_DIR = "lists"
SESSIONS_PER_FILE = 100


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of characters of model text; ``marked`` when it lies inside a finding's span."""

    text: str
    marked: bool = False


@dataclass(frozen=True, slots=True)
class SessionLink:
    """Enough about a session to link to it.  ``href`` is built from the integer id only."""

    id: int
    key: str
    target: str
    scenario: str
    status: ExitState | None  # None when only the id is known
    href: str


@dataclass(frozen=True, slots=True)
class FindingView:
    code: str
    name: str | None  # the rule's name, None for a code the registry does not know
    message: str
    href: str | None  # the rule page, relative to the page showing the finding
    excerpt: str  # the characters the span covers ("" for a finding on the whole call)


@dataclass(frozen=True, slots=True)
class CallView:
    """One tool call as the drill-down shows it: verdict, underlined span, what came back."""

    index: int
    tool: str
    decision: Decision
    primary: str | None
    primary_name: str | None
    primary_href: str | None
    segments: tuple[Segment, ...]  # the command (or the raw arguments), spans marked
    arguments: str
    shows_command: bool  # segments hold the extracted command, not the raw arguments
    findings: tuple[FindingView, ...]
    output: str  # the simulated output, the denial text the model saw, or (imports) the
    # output the source harness recorded
    output_label: str  # what ``output`` is, see :func:`output_label`
    next_action: NextAction | None
    child: SessionLink | None
    source_decision: Decision | None = None  # the source harness's own verdict (imports)
    source_reason: str | None = None
    leak: str | None = None  # allowed by an agent CLI's rules, refused by their strict reading
    leak_name: str | None = None

    @property
    def output_summary(self) -> str:
        """``output the model saw (42 characters)``."""
        return f"{self.output_label} ({len(self.output)} characters)"

    @property
    def disagrees(self) -> bool:
        """The source harness recorded a verdict and it is not ours."""
        return self.source_decision is not None and self.source_decision != self.decision


@dataclass(frozen=True, slots=True)
class TurnView:
    index: int
    reasoning: str
    content: str
    calls: tuple[CallView, ...]
    finish_reason: str | None
    latency_s: float | None
    ttft_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None

    @property
    def burned(self) -> bool:
        """Every call of this reply was denied: a whole prefill and generation wasted."""
        return bool(self.calls) and all(c.decision == "deny" for c in self.calls)

    @property
    def summary(self) -> str:
        """``reply 2 · 1.84 s · TTFT 0.30 s · 32800 prompt / 120 completion tokens · stop``:
        the parts known, one string (one escape instead of seven when rendered)."""
        parts = [f"reply {self.index}"]
        if self.latency_s is not None:
            parts.append(f"{self.latency_s:.2f} s")
        if self.ttft_s is not None:
            parts.append(f"TTFT {self.ttft_s:.2f} s")
        if self.prompt_tokens is not None:
            parts.append(f"{self.prompt_tokens} prompt / {self.completion_tokens} completion tokens")
        if self.finish_reason:
            parts.append(self.finish_reason)
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class StackFaultView:
    """One stack fault of a session: on which reply, its rule, and the raw wire text."""

    turn: int
    code: str
    name: str
    message: str
    raw: str


def stack_fault_views(stored: Any) -> tuple[StackFaultView, ...]:
    """The views of a stored ``stack_faults`` list (records or their JSON dicts)."""
    out = []
    for f in stored or ():
        record = f if isinstance(f, StackFaultRecord) else (
            StackFaultRecord.from_dict(f) if isinstance(f, dict) else None)
        if record is None:
            continue
        rule = get_rule(record.code)
        out.append(StackFaultView(record.turn_index, record.code, rule.name if rule else "",
                                  record.message, record.raw))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SessionPage(SessionOutcome):
    """One session's drill-down (a section of ``sessions/<first>-<last>.html``)."""

    id: int
    run_id: int
    key: str
    target: str
    scenario: str
    repeat: int
    status: ExitState
    error: str | None
    tags: tuple[str, ...]
    source: str
    handshake_required: int
    handshake_done: int
    handshake_completed: bool
    handshake_missed_step: str | None
    system_prompt: str
    task: str
    turns: tuple[TurnView, ...]
    parent: SessionLink | None
    children: tuple[SessionLink, ...]
    calls: int
    denials: int
    index_href: str = "../index.html"
    policy_agent: str | None = None  # whose agent CLI rules judged it (None: an allow-list)
    policy_agent_via: str | None = None  # how that agent was chosen
    policy_emulation: str | None = None  # the CLI release and mode emulated, when stored
    # what the serving stack lost or mangled on its replies (AE5xx), never model errors
    stack_faults: tuple[StackFaultView, ...] = ()
    stack: str = ""  # the target's serving stack, one line (``transcript.stack_line``)
    # the tools its client offered (names) and the SHA-256 of that list (its schemas
    # included; a second hash in a run is schema drift), when the source showed them
    offered_tools: tuple[str, ...] = ()
    offered_hash: str = ""

    @property
    def handshake_text(self) -> str:
        return handshake_text(
            self.handshake_required, self.handshake_done, self.handshake_completed,
            self.handshake_missed_step,
        )

    @property
    def completeness(self) -> str:
        """What its telemetry could prove (``agent-eval collect``): events seen, calls
        judged, calls not judgeable; "" for a session of any other source."""
        return completeness_text(telemetry_completeness(self.tags, self.calls))


@dataclass(frozen=True, slots=True)
class ExampleView:
    text: str
    kind: str
    tool: str


@dataclass(frozen=True, slots=True)
class RulePage:
    """One failure class (``rules/<code>.html``), rendered from the registry."""

    code: str
    name: str
    summary: str
    why: str
    scope: str
    status: str
    bad: tuple[ExampleView, ...]
    good: tuple[ExampleView, ...]
    index_href: str = "../index.html"


def handshake_text(required: int, done: int, completed: bool, missed: str | None) -> str:
    """``—`` without a handshake; ``3/3 done``; ``1/3, missed update_attempt_outcome.py``."""
    if required == 0:
        return "—"
    if completed:
        return f"{done}/{required} done"
    return f"{done}/{required}, missed {missed}" if missed else f"{done}/{required}"


def output_label(decision: Decision, source: str) -> str:
    """What a call's stored output is, said plainly.

    In a live session we answered the call ourselves: a denied call's output is the
    denial the model saw, an allowed one's the simulated output.  An imported session
    (``source`` other than ``"live"``) keeps what the source harness returned, which the
    model saw whatever *our* verdict is (the source may have run a call we deny).
    """
    if source != "live":
        return "output the source recorded"
    return "denial the model saw" if decision == "deny" else "output the model saw"


def session_file(session_id: int) -> str:
    """The file holding a session's page: sessions are batched ``SESSIONS_PER_FILE`` to a
    file by id (``sessions/1200-1299.html``), so a report stays a few hundred files
    whatever the run's size."""
    low = int(session_id) // SESSIONS_PER_FILE * SESSIONS_PER_FILE
    return f"{low}-{low + SESSIONS_PER_FILE - 1}.html"


def session_href(session_id: int, *, from_dir: str | None) -> str:
    """Where a session's page is, relative to the page linking to it."""
    name = f"{session_file(session_id)}#s{int(session_id)}"
    return name if from_dir == SESSIONS_DIR else f"{SESSIONS_DIR}/{name}"


def call_href(session_id: int, index: int, *, from_dir: str | None) -> str:
    """Where one call of a session is shown (the anchor inside the session's file)."""
    name = f"{session_file(session_id)}#s{int(session_id)}-call-{int(index)}"
    return name if from_dir == SESSIONS_DIR else f"{SESSIONS_DIR}/{name}"


def rule_href(code: str | None, *, from_dir: str | None) -> str | None:
    """The rule page of ``code``, or None when the registry has no such rule (so no link
    ever points at a file name taken from stored text)."""
    if code is None or code not in RULES:
        return None
    name = f"{code}.html"
    return f"../{RULES_DIR}/{name}" if from_dir else f"{RULES_DIR}/{name}"


def mark_spans(text: str, spans: Iterable[tuple[int, int]]) -> tuple[Segment, ...]:
    """``text`` cut into segments, those inside any span marked.

    Spans are clamped to the text, overlapping ones merged, empty ones ignored; the
    segments' texts always join back to ``text`` exactly.
    """
    merged: list[list[int]] = []
    for start, end in sorted((max(0, s), min(len(text), e)) for s, e in spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[Segment] = []
    pos = 0
    for start, end in merged:
        if start > pos:
            out.append(Segment(text[pos:start]))
        out.append(Segment(text[start:end], True))
        pos = end
    if pos < len(text) or not out:
        out.append(Segment(text[pos:]))
    return tuple(out)


def build_session_page(stored: StoredSession, links: dict[int, SessionLink]) -> SessionPage:
    """The drill-down of one stored session.

    ``links`` maps session ids to links for the parent and children (the report passes
    every session of the run; ``show`` may pass fewer: an unknown id links by id alone).
    """
    record, hs = stored.record, stored.record.handshake
    head = TranscriptHead(
        stored.id, stored.run_id, stored.target, record.key, record.scenario, record.repeat,
        record.status, record.error, record.tags, record.source, hs.required, hs.done,
        hs.completed, hs.missed_step, stored.parent_id, "", record.policy_agent,
        record.policy_agent_via, record.stack_faults)
    page = _session_page(head, record.messages, record.turns, record.calls,
                         lambda call: call.findings, dict(stored.child_links),
                         stored.child_ids, links)
    offered = record.offered_tools or {}
    return replace(page, policy_emulation=record.policy_emulation,
                   offered_tools=tuple(offered),
                   offered_hash=tools_hash(offered) if offered else "")


def transcript_page(rows: SessionTranscript, links: dict[int, SessionLink]) -> SessionPage:
    """The same drill-down as :func:`build_session_page`, from a session's rows
    (``Store.iter_transcripts``, the report's session files) instead of its record."""
    child_of_call = {c.index: c.child_session_id for c in rows.calls
                     if c.child_session_id is not None}
    return _session_page(rows.session, rows.messages, rows.turns, rows.calls,
                         lambda call: rows.findings.get(call.id, ()), child_of_call,
                         rows.child_ids, links)


def _session_page(s: TranscriptHead, messages: list, turns: Iterable, calls: Iterable,
                  findings_of, child_of_call: dict[int, int], child_ids: Iterable[int],
                  links: dict[int, SessionLink]) -> SessionPage:
    """``turns`` and ``calls`` are records or rows with the same attribute names;
    ``findings_of(call)`` gives a call's findings."""
    turn_views, n_calls, denials = _transcript_views(turns, calls, findings_of, child_of_call,
                                                     links, s.source)
    return SessionPage(
        id=s.id,
        run_id=s.run_id,
        key=s.key,
        target=s.target_name,
        scenario=s.scenario,
        repeat=s.repeat,
        status=s.status,
        error=s.error,
        tags=tuple(s.tags),
        source=s.source,
        handshake_required=s.handshake_required,
        handshake_done=s.handshake_done,
        handshake_completed=bool(s.handshake_completed),
        handshake_missed_step=s.handshake_missed_step,
        system_prompt=_first_message(messages, "system"),
        task=_first_message(messages, "user"),
        turns=turn_views,
        parent=_link(s.parent_id, links) if s.parent_id is not None else None,
        children=tuple(_link(cid, links) for cid in child_ids),
        calls=n_calls,
        denials=denials,
        policy_agent=s.policy_agent,
        policy_agent_via=s.policy_agent_via,
        stack_faults=stack_fault_views(s.stack_faults),
    )


def _transcript_views(turns: Iterable, calls: Iterable, findings_of, child_of_call: dict,
                      links: dict[int, SessionLink], source: str
                      ) -> tuple[tuple[TurnView, ...], int, int]:
    """The turns as shown (each with its calls; calls of a turn not stored get a turn of
    their own), the number of calls and of denials."""
    calls_by_turn: dict[int, list[CallView]] = {}
    n_calls = denials = 0
    for call in calls:
        child_id = child_of_call.get(call.index)
        child = _link(child_id, links) if child_id is not None else None
        calls_by_turn.setdefault(call.turn_index, []).append(
            _call_view(call, findings_of(call), child, source))
        n_calls += 1
        denials += call.decision == "deny"
    views = [_turn_view(t, calls_by_turn.pop(t.index, [])) for t in turns]
    for index, shown in sorted(calls_by_turn.items()):  # calls of a turn not stored
        views.append(_turn_view(TurnRecord(index=index), shown))
    views.sort(key=lambda t: t.index)
    return tuple(views), n_calls, denials


def build_rule_page(rule: Rule) -> RulePage:
    def examples(items) -> tuple[ExampleView, ...]:
        return tuple(ExampleView(e.text, e.kind, e.tool) for e in items)

    return RulePage(
        code=rule.code,
        name=rule.name,
        summary=rule.summary,
        why=rule.why,
        scope=rule.scope,
        status=rule.status,
        bad=examples(rule.bad),
        good=examples(rule.good),
    )


def _call_view(call: CallRecord, findings: Iterable[FindingRecord], child: SessionLink | None,
               source: str = "live") -> CallView:
    shows_command = call.command is not None
    text = call.command if call.command is not None else call.arguments
    findings = tuple(findings)
    spans = [(f.start, f.end) for f in findings] if shows_command else []
    primary_name, primary_href = _rule_link(call.primary)
    return CallView(
        index=call.index,
        tool=call.tool,
        decision=call.decision,
        primary=call.primary,
        primary_name=primary_name,
        primary_href=primary_href,
        segments=mark_spans(text, spans) if spans else (Segment(text),),
        arguments=call.arguments,
        shows_command=shows_command,
        findings=tuple(
            FindingView(
                code=f.code,
                name=_rule_link(f.code)[0],
                message=f.message,
                href=_rule_link(f.code)[1],
                excerpt=text[max(0, f.start) : max(0, f.end)] if shows_command else "",
            )
            for f in findings
        ),
        output=call.output,
        output_label=output_label(call.decision, source),
        next_action=call.next_action,
        child=child,
        source_decision=call.source_decision,
        source_reason=call.source_reason,
        leak=call.leak,
        leak_name=_rule_link(call.leak)[0] if call.leak else None,
    )


@lru_cache(maxsize=1024)
def _rule_link(code: str | None) -> tuple[str | None, str | None]:
    """A code's rule name and rule page (from a session file), looked up once per code."""
    rule = get_rule(code) if code else None
    return (rule.name if rule else None), rule_href(code, from_dir=SESSIONS_DIR)


def _turn_view(turn: TurnRecord, calls: list[CallView]) -> TurnView:
    return TurnView(
        index=turn.index,
        reasoning=turn.reasoning or "",
        content=turn.content or "",
        calls=tuple(calls),
        finish_reason=turn.finish_reason,
        latency_s=turn.latency_s,
        ttft_s=turn.ttft_s,
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
    )


def _link(session_id: int, links: dict[int, SessionLink]) -> SessionLink:
    found = links.get(session_id)
    if found is not None:
        return found
    href = session_href(session_id, from_dir=SESSIONS_DIR)
    return SessionLink(session_id, f"session {session_id}", "", "", None, href)


def _first_message(messages: list[dict[str, Any]], role: str) -> str:
    """The text of the first message with ``role``; multi-part content joined."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == role:
            return message_text(message.get("content"))
    return ""


def message_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)
