"""The viewer's HTTP side: aiohttp routes over a read-only store.

aiohttp because the simulator already serves with it: one web stack for the simulator,
the viewer and the coming proxy.  Each handler parses the query string, builds one page
context in a worker thread (the store is synchronous SQLAlchemy) and renders it.  The
store refuses writes (SQLite ``query_only``, PostgreSQL read-only transactions), every
response carries a Content-Security-Policy that allows no script at all, and a bad
filter value is a 400 page naming it, never a traceback.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from aiohttp import web
from jinja2 import ChoiceLoader, FileSystemLoader
from markupsafe import Markup

from agent_eval.errors import ConfigError
from agent_eval.policy import RULES
from agent_eval.report.pages import build_rule_page
from agent_eval.report.render import TEMPLATES as REPORT_TEMPLATES
from agent_eval.report.render import environment as report_environment
from agent_eval.store import Store
from agent_eval.view import lists, overview
from agent_eval.view.links import filters_of

TEMPLATES = Path(__file__).parent / "templates"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
REFRESH_S = 5
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src data:; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STORE = web.AppKey("store", Store)


@cache
def environment():
    env = report_environment().overlay(
        loader=ChoiceLoader([FileSystemLoader(TEMPLATES), FileSystemLoader(REPORT_TEMPLATES)]),
        finalize=visible_controls)
    env.globals.update(refresh_s=REFRESH_S)
    return env


CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if chr(c) not in "\t\n\r"} | {127: 0x2421}


def visible_controls(value):
    """Control characters in shown text become their visible pictures (ESC as ␛), so a
    stored terminal escape reads as text; ``Markup`` (our own SVG) is left alone."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return value.translate(CONTROL_PICTURES)
    return value


def make_app(store: Store) -> web.Application:
    """The viewer over ``store`` (made read-only here)."""
    app = web.Application(middlewares=[_errors])
    app[STORE] = store.read_only()
    app.router.add_get("/", _runs)
    app.router.add_get("/index.html", _home)
    app.router.add_get(r"/runs/{run_id:\d+}", _run)
    app.router.add_get("/calls", _calls)
    app.router.add_get("/sessions", _sessions)
    app.router.add_get(r"/sessions/{session_id:\d+}.html", _session)
    app.router.add_get(r"/rules/{code:AE\d+}.html", _rule)
    app.router.add_get("/compare", _compare)
    return app


def serve(store: Store, *, host: str = "127.0.0.1", port: int = 8700) -> None:
    """Serve until Ctrl-C."""
    web.run_app(make_app(store), host=host, port=port, print=None, handle_signals=True)


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        response = await handler(request)
    except ConfigError as exc:
        status = 404 if exc.field in ("run", "session") else 400
        response = _html("error.html", status=status, message=str(exc))
    except web.HTTPException as exc:
        if exc.status >= 400:
            response = _html("error.html", status=exc.status, message=exc.reason)
        else:
            raise
    response.headers.update(HEADERS)
    return response


def _html(template: str, status: int = 200, **context) -> web.Response:
    text = environment().get_template(template).render(**context)
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _params(request: web.Request) -> tuple[dict[str, str], str | None, int]:
    params = filters_of(request.query)
    try:
        offset = max(0, int(request.query.get("offset", "0") or 0))
    except ValueError:
        raise ConfigError(f"offset must be a whole number, not {request.query['offset']!r}",
                          field="offset") from None
    return params, request.query.get("sort") or None, offset


async def _in_thread(request: web.Request, build, *args):
    return await asyncio.to_thread(build, request.app[STORE], *args)


async def _home(_request: web.Request) -> web.Response:
    raise web.HTTPFound("/")


async def _runs(request: web.Request) -> web.Response:
    filters = {k: request.query[k] for k in ("label", "kind", "status") if request.query.get(k)}
    _, _, offset = _params(request)
    page = await _in_thread(request, overview.build_runs_page, filters, offset)
    return _html("runs.html", page=page)


async def _run(request: web.Request) -> web.Response:
    page = await _in_thread(request, overview.build_run_page, int(request.match_info["run_id"]),
                            request.query.get("intervals") == "1")
    return _html("run.html", page=page)


async def _calls(request: web.Request) -> web.Response:
    params, sort, offset = _params(request)
    page = await _in_thread(request, lists.build_calls_page, params, sort or "failed", offset)
    return _html("list.html", page=page)


async def _sessions(request: web.Request) -> web.Response:
    params, sort, offset = _params(request)
    page = await _in_thread(request, lists.build_sessions_page, params, sort or "failed",
                            offset)
    return _html("list.html", page=page)


async def _session(request: web.Request) -> web.Response:
    params, _, _ = _params(request)
    view = await _in_thread(request, lists.build_session_view,
                            int(request.match_info["session_id"]), params)
    return _html("session_view.html", view=view, page=view.page)


async def _rule(request: web.Request) -> web.Response:
    rule = RULES.get(request.match_info["code"])
    if rule is None:
        raise web.HTTPNotFound(reason="no such rule")
    page = build_rule_page(rule)
    return _html("rule.html", page=page)


async def _compare(request: web.Request) -> web.Response:
    try:
        a, b = int(request.query.get("a", "")), int(request.query.get("b", ""))
    except ValueError:
        raise ConfigError("compare needs two run ids: /compare?a=RUN&b=RUN (whole numbers "
                          "must be given)", field="a") from None
    page = await _in_thread(request, overview.build_compare_page, a, b,
                            request.query.get("analysis") == "1")
    return _html("compare.html", page=page)


@contextmanager
def run_view_in_thread(store: Store, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The viewer on its own event loop in a daemon thread (tests, benchmarks); yields
    its base URL (``http://127.0.0.1:PORT``) and stops it on exit."""
    runner = web.AppRunner(make_app(store))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    bound: list = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, host, port)
            loop.run_until_complete(site.start())
            bound.append(site._server.sockets[0].getsockname()[1])
        except BaseException as exc:  # handed to the caller's thread below
            bound.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="agent-eval-view", daemon=True)
    thread.start()
    ready.wait()
    if isinstance(bound[0], BaseException):
        raise bound[0]
    try:
        yield f"http://{host}:{bound[0]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
