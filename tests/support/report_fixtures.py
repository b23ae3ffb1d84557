"""Builds a small store whose sessions are judged by the real policy engine, for the report tests.

One run, two targets.  ``careful`` has a hostile session: the XSS strings sit in the reply
content, the reasoning, the call arguments, the simulated output and the error reason,
and its denied call pipes into ``head`` (AE301).  That session spawned a child.  Other
sessions: a clean pass, a missed handshake with no denial, and a server fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from agent_eval.policy import allowlist_from_dict, load_allowlist
from agent_eval.store import open_store
from agent_eval.transcript import (
    CallRecord,
    HandshakeResult,
    SessionRecord,
    TurnRecord,
    assign_next_actions,
)
from support.factories import add_run, judged_bash

REPO = Path(__file__).resolve().parents[2]
_RALF = load_allowlist(REPO / "allowlists" / "ralf.yaml")
# ralf, with a plain `note` beside the bash tool's command, where the XSS strings ride
ALLOWLIST = allowlist_from_dict({**_RALF.model_dump(), "tools": [
    {"name": "bash", "kind": "bash", "arguments": {
        "command": {"holds": "command", "required": True}, "note": {"type": "string"}}},
    *(t.model_dump() for t in _RALF.tools if t.name != "bash")]})
SCRIPT_TAG = "<script>alert(1)</script>"
IMG_BREAKOUT = '"><img src=x onerror=alert(1)>'
XSS = f"{SCRIPT_TAG} {IMG_BREAKOUT}"
PIPED = f"uv run scripts/db_query.py --sql \"SELECT '{SCRIPT_TAG}'\" | head -5"
ALLOWED = "uv run scripts/fetch_context.py --no-attach --agent researcher"
T0 = datetime(2025, 6, 9, 7, 0, tzinfo=UTC)


def judged_call(index: int, turn: int, command: str, output: str, **kw) -> CallRecord:
    """A bash call with the verdict the engine gives it (the XSS strings in its note)."""
    return judged_bash(index, turn, command, ALLOWLIST, output=output, extra={"note": XSS},
                       **kw)


def session(key: str, target: str, scenario: str, calls: list[CallRecord], *, n_turns: int,
            status="completed", **kw) -> SessionRecord:
    assign_next_actions(calls)
    turns = [TurnRecord(index=i, content=f"reply {i}", reasoning="thinking", latency_s=0.5,
                        prompt_tokens=100, completion_tokens=20) for i in range(n_turns)]
    start = T0 + timedelta(minutes=len(key))
    return SessionRecord(
        key=key, target=target, scenario=scenario, status=status, turns=turns, calls=calls,
        messages=[{"role": "system", "content": f"system prompt {XSS}"},
                  {"role": "user", "content": f"task {XSS}"},
                  *({"role": "assistant", "content": t.content} for t in turns)],
        started_at=start, finished_at=start + timedelta(seconds=30), **kw,
    )


@dataclass(frozen=True)
class Fixture:
    db: str
    run_id: int
    ids: dict[str, int]  # session key -> id


def fill_store(db: str) -> Fixture:
    hostile_calls = [
        judged_call(0, 0, PIPED, f"Permission denied {XSS}"),
        judged_call(1, 1, ALLOWED, f"context pack {XSS}", child_key="careful/xss/0/child"),
    ]
    hostile = session("careful/xss/0", "careful", "xss", hostile_calls, n_turns=2)
    hostile.turns[0].content = f"content {XSS}"
    hostile.turns[0].reasoning = f"reasoning {XSS}"
    child = session("careful/xss/0/child", "careful", "evaluator-step",
                    [judged_call(0, 0, ALLOWED, "ok")], n_turns=1, parent_key=hostile.key)
    clean = session("careful/clean/0", "careful", "clean",
                    [judged_call(0, 0, ALLOWED, "ok")], n_turns=1)
    missed = session("sloppy/handshake/0", "sloppy", "handshake",
                     [judged_call(0, 0, ALLOWED, "ok")], n_turns=1, status="abandoned",
                     handshake=HandshakeResult(3, 1, False, "update_attempt_outcome.py"))
    faulted = session("sloppy/fault/0", "sloppy", "fault", [], n_turns=0, status="error",
                      error=f"server answered 500 {XSS}")
    with open_store(db) as store:
        run_id = add_run(store, [hostile, child], label="fixture", suite="suite",
                         fingerprint={"engine_version": "test"}, targets=("careful", "sloppy"))
        for record in (clean, missed, faulted):
            store.record_session(run_id, record)
        ids = {key: store.find_session(run_id, key) for key in
               (hostile.key, child.key, clean.key, missed.key, faulted.key)}
        store.set_run_status(run_id, "finished")
    return Fixture(db, run_id, ids)


class Tables(HTMLParser):
    """Every ``<table id=...>`` of a page as rows of cell texts, and every link."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.hrefs: list[str] = []
        self._rows: list[list[str]] | None = None
        self._cell = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag == "table":
            self._rows = self.tables.setdefault(attrs.get("id") or "", [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = True
            self._rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self._rows = None
        elif tag in ("td", "th"):
            self._cell = False

    def handle_data(self, data):
        if self._cell and self._rows:
            self._rows[-1][-1] += data


def session_section(report: Path, session_id: int) -> str:
    """The HTML of one session's section inside its batch file (``sessions/a-b.html``)."""
    from agent_eval.report.pages import session_file

    html = (report / "sessions" / session_file(session_id)).read_text(encoding="utf-8")
    start = html.index(f'<section class="session" id="s{int(session_id)}">')
    return html[start: html.index("</section>", start)]


def section_at(report: Path, href: str) -> str:
    """The session section an index link (``sessions/0-99.html#s12``) points at."""
    _, anchor = href.split("#", 1)
    return session_section(report, int(anchor[1:].split("-")[0]))
