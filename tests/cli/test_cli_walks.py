"""How often a newcomer's walk through the code comes back to the CLI, measured.

A profile hook (``sys.setprofile``, and ``threading.setprofile`` for the threads a
command starts) sees every Python call.  A **return to the CLI** is a call made from a
frame of ``agent_eval/cli/`` into a function of the library (any other module of
``agent_eval``) that hands data back: its return value is not ``None`` and not text (a
``str``: rendered output, which the CLI only prints), and it is not the store being
opened or closed (``open_store``, ``Store.__enter__``/``__exit__``: the CLI owns the
store's lifetime).  Each such call is a place where the CLI holds an intermediate
result and passes it on, which is what a reader following the data has to step through.

The walks:

- ``compare`` and ``gate`` of two stored runs, and the viewer's compare page: one library
  call each (``compare_stored``, ``gate_stored_run``), no other figure read outside it;
- (a) an allow-list from ``run`` to a stored verdict: the returns that hand the
  allow-list (or what holds it) back to the CLI;
- (b) a proxied request to a stored judged call: the returns to the CLI while the proxy
  relays, judges and stores one request (it runs in the proxy's own loop);
- (c) a stored request to ``replay``: one library call (``replay_stored``);
- ``run`` against the simulator: the suite loaded, the run recorded and played, the
  tally's progress and what is left read, and its closing tables (text or ``--json``) in
  one library call (``run_tables``), as ``report``'s are.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main

PACKAGE = Path(__import__("agent_eval").__file__).resolve().parent
CLI = PACKAGE / "cli"
STORE_LIFETIME = {"open_store", "Store.__enter__", "Store.__exit__", "Store.close"}


@dataclass
class Walk:
    """Every call from the CLI into the library, in order: ``(callee, value returned)``."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    cli_frames: int = 0  # every frame of agent_eval/cli/ entered

    @property
    def returns(self) -> list[str]:
        """The returns to the CLI (module docstring), by callee name."""
        return [name for name, value in self.calls
                if value is not None and not isinstance(value, str | bytes)
                and name.split(":", 1)[1] not in STORE_LIFETIME]

    def returns_holding(self, kind: type | tuple[type, ...]) -> list[str]:
        """The returns whose value is, or holds (three levels down), a ``kind``."""
        return [name for name, value in self.calls
                if name in self.returns and _holds(value, kind, 3)]


def _holds(value: Any, kind: type | tuple[type, ...], depth: int) -> bool:
    if isinstance(value, kind):
        return True
    if depth == 0 or isinstance(value, str | bytes | int | float | bool | type(None)):
        return False
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    elif is_dataclass(value):
        items = [getattr(value, f.name, None) for f in fields(value)]
    elif hasattr(value, "__dict__"):
        items = vars(value).values()
    else:
        return False
    return any(_holds(v, kind, depth - 1) for v in list(items)[:50])


def _where(path: str) -> str | None:
    """``cli`` for a frame of agent_eval/cli/, ``lib`` for the rest of agent_eval."""
    try:
        rel = Path(path).resolve().relative_to(PACKAGE)
    except (ValueError, OSError):
        return None
    return "cli" if rel.parts[0] == "cli" else "lib"


@contextmanager
def walking() -> Iterator[Walk]:
    """Record, while inside, every call from a CLI frame into the library and what it
    returned."""
    walk = Walk()
    kinds: dict[str, str | None] = {}
    pending: dict[int, int] = {}  # id(frame) -> index in walk.calls

    def kind(code: Any) -> str | None:
        if code.co_filename not in kinds:
            kinds[code.co_filename] = _where(code.co_filename)
        return kinds[code.co_filename]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            walk.cli_frames += kind(frame.f_code) == "cli"
            back = frame.f_back
            if back is not None and kind(frame.f_code) == "lib" and kind(back.f_code) == "cli":
                module = Path(frame.f_code.co_filename).resolve().relative_to(PACKAGE)
                pending[id(frame)] = len(walk.calls)
                walk.calls.append((f"{module.with_suffix('').as_posix()}:"
                                   f"{frame.f_code.co_qualname}", None))
        elif event == "return" and id(frame) in pending:
            i = pending.pop(id(frame))
            walk.calls[i] = (walk.calls[i][0], arg)

    old = sys.getprofile()
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        yield walk
    finally:
        sys.setprofile(old)
        threading.setprofile(None)  # type: ignore[arg-type]


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code in (0, 1, 4), result.output
    return result.output


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> str:
    """A store with two simulated runs of two scenarios, three repeats each."""
    from agent_eval.sim import run_sim_in_thread

    db = str(tmp_path_factory.mktemp("walks") / "s.db")
    with run_sim_in_thread(profile="piper") as base_url:
        for label in ("old", "new"):
            _cli("run", "--base-url", base_url, "--model", "piper", "--db", db,
                 "--scenario", "lights-*", "--repeats", "2", "--label", label)
    return db


def test_compare_returns_to_the_cli_once(two_runs):
    with walking() as walk:
        out = _cli("compare", "label:old", "label:new", "--json", "--db", two_runs)
    assert json.loads(out)["groups"]
    assert walk.returns == ["analysis/compare_stored:compare_stored"]


def test_compare_printed_as_text_and_markdown_returns_to_the_cli_once(two_runs, tmp_path):
    with walking() as walk:
        out = _cli("compare", "label:old", "label:new", "--markdown",
                   str(tmp_path / "c.md"), "--db", two_runs)
    assert "errors/100" in out and (tmp_path / "c.md").read_text()
    assert walk.returns == ["analysis/compare_stored:compare_stored"]


def test_gate_returns_to_the_cli_once(two_runs):
    with walking() as walk:
        out = _cli("gate", "--run", "label:new", "--baseline", "label:old", "--max-regression",
                   "5", "--max-error-rate", "50", "--json", "--db", two_runs)
    assert json.loads(out)["checks"]
    assert walk.returns == ["analysis/gate_stored:gate_stored_run"]


def test_the_viewer_compare_page_reads_its_figures_through_compare_stored(two_runs,
                                                                          monkeypatch):
    """The page calls the library's compare once and reads no figure of its own: every
    aggregate it shows comes from inside ``compare_stored``."""
    from agent_eval.analysis import compare_stored as module
    from agent_eval.store import Store, open_store
    from agent_eval.view import overview

    inside: list[bool] = []
    outside: list[str] = []
    real = module.compare_stored

    def spy(*args: Any, **kwargs: Any) -> Any:
        inside.append(True)
        try:
            return real(*args, **kwargs)
        finally:
            inside.pop()

    calls: list[str] = []
    monkeypatch.setattr(module, "compare_stored", spy)
    for name in ("summarize", "cluster_stats", "session_outcomes", "call_rows"):
        original = getattr(Store, name)

        def watched(self: Any, *args: Any, _name: str = name, _original: Callable = original,
                    **kwargs: Any) -> Any:
            (calls if inside else outside).append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Store, name, watched)
    with open_store(two_runs) as store:
        old, new = store.resolve_run("label:old").id, store.resolve_run("label:new").id
        calls.clear()
        page = overview.build_compare_page(store, old, new, analysis=True)
    assert page.rows and page.analysis
    assert "summarize" in calls and "cluster_stats" in calls
    assert outside == []


@pytest.mark.e2e
def test_replay_returns_to_the_cli_once(two_runs):
    from agent_eval.sim import run_sim_in_thread

    with run_sim_in_thread(profile="piper") as base_url:
        with walking() as walk:
            out = _cli("replay", "label:new", "--base-url", base_url, "--model", "piper",
                       "--sample", "3", "--db", two_runs)
    assert "Full comparison: agent-eval compare" in out
    assert walk.returns == ["live/replay_stored:replay_stored"]


@pytest.mark.e2e
def test_an_allowlist_returns_to_the_cli_from_run_once_on_its_way_to_a_verdict(tmp_path):
    """``run --allowlist``: the allow-list is loaded and handed to the play once; the
    returns that carry it back to the CLI are counted (``Walk.returns_holding``)."""
    from agent_eval.policy import AllowList
    from agent_eval.policy.sources import ResolvedPolicy
    from agent_eval.sim import run_sim_in_thread

    db = str(tmp_path / "s.db")
    with run_sim_in_thread(profile="piper") as base_url:
        with walking() as walk:
            _cli("run", "--base-url", base_url, "--model", "piper", "--db", db,
                 "--allowlist", "permissive", "--scenario", "lights-evening-off",
                 "--repeats", "1")
    holding = walk.returns_holding((AllowList, ResolvedPolicy))
    assert len(holding) <= 1, holding


def test_a_proxied_request_reaches_its_stored_judged_call_without_the_cli(tmp_path):
    """``agent-eval proxy`` starts the relay and the recorder and waits; a request then
    goes relay -> sessions -> recorder -> store and never enters a frame of the CLI (the
    proxy as the CLI starts it, in a thread, in front of an upstream that calls a tool)."""
    import httpx2 as httpx
    from aiohttp import web
    from support.loopback import serve_in_thread
    from support.proxyplay import proxy_in_thread

    from agent_eval.store import open_store

    call = {"id": "call-1", "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": "ls scripts/ | grep search"})}}
    body = json.dumps({"model": "qwen", "choices": [{"index": 0, "finish_reason": "tool_calls",
                       "message": {"role": "assistant", "content": "", "tool_calls": [call]}}]})

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    with serve_in_thread(app) as upstream, \
            open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        with walking() as walk, proxy_in_thread(upstream, store, tmp_path) as proxy:
            reply = httpx.post(proxy.base_url + "/chat/completions", json={
                "model": "qwen", "messages": [
                    {"role": "system", "content": "You are the research subagent."},
                    {"role": "user", "content": "Find what the web says."}],
                "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}]},
                timeout=60)
            assert reply.status_code == 200
        calls = list(store.call_rows([r.id for r in store.list_runs(5)]))
    assert [(c.decision, c.primary) for c in calls] == [("deny", "AE301")]
    assert walk.cli_frames == 0 and walk.calls == []



# ``run`` against the simulator, as text and as JSON: its returns to the CLI, in order.
# Before the closing tables were read in the library there were 17 (16 with --json):
# the CLI read ``Store.summarize``, ``Store.cluster_stats``, ``units_rate``,
# ``class_table``, a ``get_rule`` per failure class (text) or ``Store.get_run`` (JSON),
# the progress lines read the tally's calls twice each, and ``tally.left`` was read twice.
RUN_RETURNS = [
    "scenario/select:load_selected_suite",  # the suite, selected, limits applied
    "live/run:record_new_run",  # the run's id
    "live/run:play_run",  # the play (its tally is the CLI's own, filled in place)
    "live/run:RunTally.calls",  # the progress line as the play starts
    "live/run:RunTally.calls", "live/run:RunTally.errors",  # ... and as it ends
    "live/run:RunTally.left",  # sessions not played: the status and the exit code
    "analysis/run_tables:run_tables",  # every figure of the closing tables
]
TABLE_FIGURES = ("store/__init__:Store.summarize", "store/__init__:Store.cluster_stats",
                 "store/__init__:Store.get_run", "metrics/clustered:units_rate",
                 "metrics/classes:class_table", "policy/rules:get_rule")


@pytest.mark.e2e
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_run_reads_its_closing_tables_in_one_library_call(tmp_path, monkeypatch, as_json):
    """``run``'s closing tables (text or ``--json``) come back to the CLI once
    (``analysis.run_tables``); no figure of them is read from a CLI frame.  The plain
    progress lines come at the start and the end only (no clock tick in between)."""
    from agent_eval.sim import run_sim_in_thread

    monkeypatch.setenv("AGENT_EVAL_PROGRESS_EVERY", "3600")
    db = str(tmp_path / "s.db")
    with run_sim_in_thread(profile="piper") as base_url:
        with walking() as walk:
            out = _cli("run", "--base-url", base_url, "--model", "piper", "--db", db,
                       "--scenario", "lights-*", "--repeats", "2",
                       *(["--json"] if as_json else []))
    if as_json:
        data = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]  # progress after
        assert data["status"] == "finished" and data["targets"]["piper"]["tool_calls"]
    else:
        assert "failure class" in out and "Run 1 finished" in out
    assert walk.returns == RUN_RETURNS
    assert len(walk.returns) <= 8
    assert [name for name, _ in walk.calls if name in TABLE_FIGURES] == []


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_report_reads_its_tables_in_one_library_call(two_runs, tmp_path, as_json):
    """``report``: the runs resolved, the report written, and its printed tables (text or
    ``--json``) read in one library call, as ``run``'s are."""
    with walking() as walk:
        out = _cli("report", "label:old", "label:new", "--out", str(tmp_path), "--db",
                   two_runs, *(["--json"] if as_json else []))
    assert "HTML report" in out or json.loads(out)["targets"]
    assert walk.returns == ["store/__init__:Store.resolve_run"] * 2 + [
        "report/writing:write_report", "analysis/run_tables:run_tables"]
    assert [name for name, _ in walk.calls if name in TABLE_FIGURES] == []
