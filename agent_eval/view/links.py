"""URLs of the viewer's pages.  Built from integers the store assigned, registry codes and
``urlencode``d filter values only, so nothing a model wrote can become a ``javascript:``
link or break out of an attribute (autoescape does the rest)."""

from __future__ import annotations

from urllib.parse import urlencode

FILTER_KEYS = ("run_id", "target", "scenario", "tag", "code", "status", "decision", "failed",
               "handshake", "disagree", "search", "next_action", "session_id")


def query(**values) -> str:
    """``?a=1&b=x`` of the values that are set (``True`` as ``1``), or ``""``."""
    pairs = [(k, "1" if v is True else str(v)) for k, v in values.items()
             if v not in (None, "", False)]
    return "?" + urlencode(pairs) if pairs else ""


def calls_href(**filters) -> str:
    return "/calls" + query(**filters)


def sessions_href(**filters) -> str:
    return "/sessions" + query(**filters)


def session_href(session_id: int, filters: dict | None = None, call: int | None = None) -> str:
    tail = f"#call-{int(call)}" if call is not None else ""
    return f"/sessions/{int(session_id)}.html" + query(**(filters or {})) + tail


def run_href(run_id: int) -> str:
    return f"/runs/{int(run_id)}"


def compare_href(a: int, b: int) -> str:
    return f"/compare?a={int(a)}&b={int(b)}"


def filters_of(params) -> dict[str, str]:
    """The filter values of a request's query string (unknown keys dropped)."""
    return {k: params[k] for k in FILTER_KEYS if params.get(k)}
