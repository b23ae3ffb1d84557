"""Page contexts of the calls and sessions lists and of one session.

Filters travel in the URL (field names of ``SessionFilter``/``CallFilter``), so any list
can be pasted into a bug report; the session page keeps them, so "next failed" walks the
same list the reader came from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agent_eval.errors import ConfigError
from agent_eval.report.pages import SessionLink, SessionPage, build_session_page
from agent_eval.store import (
    CALL_SORTS,
    SESSION_SORTS,
    CallFilter,
    Page,
    SessionFilter,
    Store,
    filter_from,
)
from agent_eval.view.links import query, run_href, session_href
from agent_eval.view.overview import Cell

NESTED_DEPTH = 3
COMMAND_CHARS = 160


@dataclass(frozen=True, slots=True)
class ListPage:
    """A calls or sessions list: the filter form's values, head, rows, pager, sort links."""

    kind: str  # "calls" or "sessions"
    filters: dict[str, str]
    sort: str
    sorts: tuple[tuple[str, str], ...]  # (name, href)
    head: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    failed: tuple[bool, ...]  # per row: draw it as failed
    page: Page
    prev_href: str | None
    next_href: str | None
    run_href: str | None
    live: bool
    text_columns: tuple[str, ...] = ()  # left-aligned (words); the others are numbers


CALLS_HEAD = ("call", "session", "target", "scenario", "#", "tool", "decision", "class",
              "next", "source verdict", "command")  # fmt: skip
SESSIONS_HEAD = ("session", "target", "scenario", "repeat", "status", "calls", "denials",
                 "handshake", "tags")  # fmt: skip
TEXT_COLUMNS = ("target", "scenario", "tool", "decision", "class", "next", "source verdict",
                "command", "status", "handshake", "tags")  # fmt: skip


def command_window(command: str, span: tuple[int, int] | None, limit: int = COMMAND_CHARS,
                   before: int = 40) -> tuple[str, str, str]:
    """``(before, span, after)`` of a command cut to about ``limit`` characters so that
    the span its finding points at shows, with ``before`` characters of context ahead of
    it; ``…`` where text was cut (pure).  A long `uv run ... --sql "..." | head -n 20`
    cut at the front hid exactly the part that was denied."""
    if span is None:
        start = end = len(command)
    else:
        start, end = max(0, min(span[0], len(command))), max(0, min(span[1], len(command)))
    head, marked, tail = command[:start], command[start:end], command[end:]
    if len(command) <= limit:
        return head, marked, tail
    keep = max(before, limit - len(marked) - len(tail))  # room the tail leaves unused
    if len(head) > keep and span is not None:
        head = "…" + head[len(head) - keep + 1:]
    if len(head) + len(marked) > limit:
        marked = marked[: max(1, limit - len(head) - 1)] + "…"
        tail = ""
    room = limit - len(head) - len(marked)
    if len(tail) > room:
        tail = tail[: max(0, room - 1)] + "…"
    if span is None and len(head) > limit:
        head = head[: limit - 1] + "…"
    return head, marked, tail


def build_calls_page(store: Store, params: dict[str, str], sort: str, offset: int,
                     limit: int = 50) -> ListPage:
    f = filter_from(CallFilter, params)
    page = store.list_calls(f, sort=sort, limit=limit, offset=offset)
    spans = store.primary_spans(page.rows)
    rows, failed = [], []
    for r in page.rows:
        # a call with no command (AE102: arguments that are not a JSON object) shows the
        # raw arguments it was sent with
        shown = r.command if r.command is not None else (r.arguments or "")
        mark = command_window(shown, spans.get(r.id) if r.command is not None else None)
        command = "".join(mark)
        to_call = session_href(r.session_id, _session_filters(params), call=r.index)
        rows.append((
            Cell(str(r.id), to_call), Cell(str(r.session_id), to_call), Cell(r.target),
            Cell(r.scenario), Cell(str(r.index)), Cell(r.tool), Cell(r.decision),
            Cell(r.primary_code or "", f"/rules/{r.primary_code}.html"
                 if r.primary_code and r.primary_code.startswith("AE") else None),
            Cell(r.next_action or ""),
            Cell((r.source_decision or "") + (" (disagrees)" if r.disagrees else "")),
            Cell(command, to_call, mark)))
        failed.append(r.decision == "deny")
    return _list_page(store, "calls", params, sort, CALL_SORTS, CALLS_HEAD, rows, failed, page)


def build_sessions_page(store: Store, params: dict[str, str], sort: str, offset: int,
                        limit: int = 50) -> ListPage:
    f = filter_from(SessionFilter, params)
    page = store.list_sessions(f, sort=sort, limit=limit, offset=offset)
    rows, failed = [], []
    for r in page.rows:
        href = session_href(r.id, _session_filters(params))
        hs = ("—" if not r.handshake_required else
              f"{r.handshake_done}/{r.handshake_required}"
              + (" done" if r.handshake_completed else " open"))
        rows.append((Cell(str(r.id), href), Cell(r.target), Cell(r.scenario),
                     Cell(str(r.repeat)), Cell(r.status_text, href), Cell(str(r.calls)),
                     Cell(str(r.denials)), Cell(hs), Cell(", ".join(r.tags))))
        failed.append(r.failed)
    return _list_page(store, "sessions", params, sort, SESSION_SORTS, SESSIONS_HEAD, rows,
                      failed, page)


def _list_page(store: Store, kind, params, sort, sorts, head, rows, failed, page) -> ListPage:
    base = f"/{kind}"
    run_id = params.get("run_id")
    live = False
    if run_id and str(run_id).isdigit():
        try:
            live = (store.get_run(int(run_id)).status == "running"
                    and store.run_is_played(int(run_id)))
        except ConfigError:
            live = False
    return ListPage(
        kind=kind, filters=dict(params), sort=sort,
        sorts=tuple((s, base + query(**params, sort=s)) for s in sorts),
        head=head, rows=tuple(rows), failed=tuple(failed), page=page,
        text_columns=tuple(h for h in head if h in TEXT_COLUMNS),
        prev_href=(base + query(**params, sort=sort, offset=max(0, page.offset - page.limit)
                                or None)) if page.offset else None,
        next_href=(base + query(**params, sort=sort, offset=page.offset + page.limit)
                   if page.has_next else None),
        run_href=run_href(int(run_id)) if run_id and str(run_id).isdigit() else None,
        live=live)


def _session_filters(params: dict[str, str]) -> dict[str, str]:
    """The filters a session page keeps for prev/next (session-level meaning)."""
    keep = {k: v for k, v in params.items() if k not in ("session_id", "next_action")}
    return keep


@dataclass(frozen=True, slots=True)
class SessionView:
    """The report's session page, plus where the reader came from and is going."""

    page: SessionPage
    nested: dict[int, SessionPage]
    prev_href: str | None
    next_href: str | None
    list_href: str
    run_href: str
    filters: dict[str, str]
    live: bool


def build_session_view(store: Store, session_id: int, params: dict[str, str]) -> SessionView:
    stored = store.load_session(session_id)
    page = build_session_page(stored, _view_links(stored))
    page = dataclasses.replace(page, index_href=run_href(page.run_id))
    nested: dict[int, SessionPage] = {}
    _nest(store, page, nested, NESTED_DEPTH)
    filters = _session_filters(params)
    f = filter_from(SessionFilter, {"run_id": page.run_id, **filters})
    prev_id, next_id = store.neighbour_sessions(f, session_id)
    live = (store.get_run(page.run_id).status == "running"
            and store.run_is_played(page.run_id))
    return SessionView(
        page=page, nested=nested,
        prev_href=session_href(prev_id, filters) if prev_id is not None else None,
        next_href=session_href(next_id, filters) if next_id is not None else None,
        list_href="/sessions" + query(**{"run_id": page.run_id, **filters}),
        run_href=run_href(page.run_id), filters=filters, live=live)


def _nest(store: Store, page: SessionPage, nested: dict[int, SessionPage], depth: int):
    if depth <= 0:
        return
    for child in page.children:
        if child.id in nested:
            continue
        try:
            stored = store.load_session(child.id)
            child_page = build_session_page(stored, _view_links(stored))
        except ConfigError:
            continue
        nested[child.id] = child_page
        _nest(store, child_page, nested, depth - 1)


def _view_links(stored) -> dict[int, SessionLink]:
    """Links to the parent and children as the viewer serves them (by id)."""
    ids = [i for i in (stored.parent_id, *stored.child_ids) if i is not None]
    return {i: SessionLink(i, f"session {i}", "", "", None, session_href(i)) for i in ids}
