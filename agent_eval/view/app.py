"""The viewer's HTTP side: aiohttp routes over a read-only store.

aiohttp because the simulator already serves with it: one web stack for the simulator,
the viewer and the coming proxy.  Each handler parses the query string, builds one page
context in a worker thread (the store is synchronous SQLAlchemy) and renders it.  The
store refuses writes (SQLite ``query_only``, PostgreSQL read-only transactions), every
response carries a Content-Security-Policy that allows no script at all, and a bad
filter value (a number out of the store's range too) is a 400 page naming it, never a
traceback.

Only requests naming this viewer in their ``Host`` header are answered (403 otherwise):
a page on another site whose name the attacker points at 127.0.0.1 (DNS rebinding) gets
the browser to send ``Host: that-name``, and would otherwise read every transcript.
Allowed: ``localhost``, the loopback addresses, the ``--host`` bound, any IP address
when bound to all interfaces (an address cannot be rebound), and ``--allow-host`` names.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator
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
from agent_eval.store import MAX_ID, Store
from agent_eval.view import lists, overview
from agent_eval.view.links import filters_of

TEMPLATES = Path(__file__).parent / "templates"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
MAX_NUMBER = MAX_ID
"""The largest id or offset a URL may carry: ids are SQL ``INTEGER`` (32 bits on
PostgreSQL), and no list has more rows than that."""
REFRESH_S = 5
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src data:; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STORE = web.AppKey("store", Store)
HOSTS = web.AppKey("hosts", frozenset)
ANY_ADDRESS = web.AppKey("any_address", bool)


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


def allowed_hosts(host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names the viewer bound to ``host`` answers (besides IP addresses when
    ``host`` is a wildcard): the loopback names, ``host`` itself and ``extra``."""
    return frozenset(_host_name(h) for h in (*LOOPBACK, host, *extra) if h not in WILDCARDS)


def make_app(store: Store, hosts: frozenset[str] | None = None,
             any_address: bool = False) -> web.Application:
    """The viewer over ``store`` (made read-only here), answering requests whose
    ``Host`` is in ``hosts`` (default: the loopback names), or any IP address when
    ``any_address`` (bound to all interfaces)."""
    app = web.Application(middlewares=[_host_check, _errors])
    app[HOSTS] = hosts if hosts is not None else allowed_hosts("127.0.0.1")
    app[ANY_ADDRESS] = any_address
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


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), bound before anything is
    printed: a port in use is a ConfigError naming it, not a traceback after the ready
    line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use (another viewer?): give "
                              "--port N, or --port 0 for a free one", field="--port") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          field="--host") from None
    return sock


def serve(store: Store, *, host: str = "127.0.0.1", sock: socket.socket,
          allow_hosts: Iterable[str] = ()) -> None:
    """Serve on ``sock`` (from :func:`bind`) until Ctrl-C."""
    app = make_app(store, allowed_hosts(host, allow_hosts), host in WILDCARDS)
    web.run_app(app, sock=sock, print=None, handle_signals=True)


def _host_name(value: str) -> str:
    """The name of a ``Host`` header or ``--host`` value: no port, no brackets, no
    trailing dot, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        value = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@web.middleware
async def _host_check(request: web.Request, handler):
    name = _host_name(request.headers.get("Host", ""))
    app = request.app
    if name in app[HOSTS] or (app[ANY_ADDRESS] and _is_address(name)):
        return await handler(request)
    response = _html("error.html", status=403, message=(
        "this viewer answers only for its own host names; to reach it by another name, "
        "start it with: agent-eval view --allow-host NAME"))
    response.headers.update(HEADERS)
    return response


def whole_number(raw: str, field: str) -> int:
    """``raw`` as an id or offset: ASCII digits, at most :data:`MAX_NUMBER`; else a
    ConfigError (a 400 page) naming the field."""
    if raw.isascii() and raw.isdigit() and len(raw) <= 10 and int(raw) <= MAX_NUMBER:
        return int(raw)
    shown = raw if len(raw) <= 24 else raw[:20] + "…"
    raise ConfigError(f"{field} must be a whole number from 0 to {MAX_NUMBER}, not {shown!r}",
                      field=field)


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
    for key in ("run_id", "session_id"):
        if key in params:
            whole_number(params[key], key)
    offset = whole_number(request.query.get("offset") or "0", "offset")
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
    run_id = whole_number(request.match_info["run_id"], "run_id")
    page = await _in_thread(request, overview.build_run_page, run_id,
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
                            whole_number(request.match_info["session_id"], "session_id"), params)
    return _html("session_view.html", view=view, page=view.page)


async def _rule(request: web.Request) -> web.Response:
    rule = RULES.get(request.match_info["code"])
    if rule is None:
        raise web.HTTPNotFound(reason="no such rule")
    page = build_rule_page(rule)
    return _html("rule.html", page=page)


async def _compare(request: web.Request) -> web.Response:
    if not request.query.get("a") or not request.query.get("b"):
        raise ConfigError("compare needs two run ids: /compare?a=RUN&b=RUN (whole numbers "
                          "must be given)", field="a")
    a, b = whole_number(request.query["a"], "a"), whole_number(request.query["b"], "b")
    page = await _in_thread(request, overview.build_compare_page, a, b,
                            request.query.get("analysis") == "1")
    return _html("compare.html", page=page)


@contextmanager
def run_view_in_thread(store: Store, host: str = "127.0.0.1", port: int = 0,
                       allow_hosts: Iterable[str] = ()) -> Iterator[str]:
    """The viewer on its own event loop in a daemon thread (tests, benchmarks); yields
    its base URL (``http://127.0.0.1:PORT``) and stops it on exit."""
    runner = web.AppRunner(make_app(store, allowed_hosts(host, allow_hosts), host in WILDCARDS))
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    bound: list = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, host, port)
            loop.run_until_complete(site.start())
            bound.append(runner.addresses[0][1])  # the one site's first socket: its port
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
