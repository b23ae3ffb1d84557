"""The package's layering as contracts: README's architecture table and docs/design.md
say imports point down the layers only; this is the test that keeps it so.

A small walk over ``ast`` rather than import-linter: import-linter checks module-to-module
layers only, and two of the three contracts here are not about which module imports
which (no private name taken across folders, no way into the store around its facade);
one walk of the source checks all three, with no dependency and no build of an import
graph.  Every import counts, at module level, inside a function or under
``TYPE_CHECKING``: a lazy import is a dependency all the same.

The layers, lowest first (README's table lists the same rows, checked below).  A folder
imports its own modules and those of lower layers; folders of one layer are independent
of each other.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agent_eval"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "transcript", "testhook", "heap", "linewrap"),  # the error tree, the records every stage
    # passes on, the test suite's pause points, the collector's start-up setting,
    # prose wrapped to a width
    ("wire",),  # the wire protocols read into chat turns, and the tool-call markup a
    # server's template writes (pure)
    ("policy",),  # the engine (pure); its stack checks read the wire's markup formats
    ("scenario", "metrics", "call_recorder", "stack_reading"),  # suites; pure figures; the call
    # recorder; stack faults read off a session's replies
    ("sim", "serverlogs"),  # the simulated model server; server logs
    ("store",),  # SQL behind the Store facade, and the one aggregator
    ("runs",),  # a run's life in the store: the one writer every source writes through
    ("analysis",),  # analyses of stored runs (compare, gate, baselines, replay pairs): one
    # library call each, shared by the CLI, the viewer, replay and the report
    ("live", "importers", "report", "migrations"),
    ("proxy", "view"),
    ("cli",),  # the only place stages are wired together
    ("__main__",),  # ``python -m agent_eval``
)
ROOT_MODULE = "errors"  # ``agent_eval/__init__.py`` (the version) sits with the lowest layer

STORE_INSIDE = {"store", "migrations"}  # the Alembic revisions read store/schema.py


def _layer_of() -> dict[str, int]:
    return {unit: n for n, layer in enumerate(LAYERS) for unit in layer}


def _unit(module: str) -> str | None:
    """``agent_eval.store.queries`` -> ``store``; the package itself -> its root module."""
    parts = module.split(".")
    if parts[0] != "agent_eval":
        return None
    return parts[1] if len(parts) > 1 else ROOT_MODULE


def _own_unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return ROOT_MODULE if rel.stem == "__init__" else rel.stem
    return rel.parts[0]


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _imports() -> tuple[tuple[Path, int, str, tuple[str, ...]], ...]:
    """Every ``(file, line, imported module, names taken)`` of the package; relative
    imports resolved."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        here = _module_of(path).split(".")
        package = here if path.name == "__init__.py" else here[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [(path, node.lineno, a.name, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[: len(package) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                out.append((path, node.lineno, base, tuple(a.name for a in node.names)))
    return tuple(out)


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_every_folder_of_the_package_has_a_layer():
    units = {_own_unit(p) for p in PACKAGE.rglob("*.py")}
    missing = sorted(units - set(_layer_of()))
    assert not missing, f"place {missing} in LAYERS (tests/test_layers.py) and README's table"


def test_imports_point_down_the_layers():
    layer = _layer_of()
    breaches = []
    for path, line, module, _ in _imports():
        own, other = _own_unit(path), _unit(module)
        if other is None or other == own:
            continue
        if layer[other] >= layer[own]:
            breaches.append(f"{_where(path, line)}: {own} (layer {layer[own] + 1}) imports "
                            f"{module} (layer {layer[other] + 1})")
    assert not breaches, "imports must point down the layers:\n" + "\n".join(breaches)


def test_no_private_name_is_taken_from_another_folder():
    breaches = []
    for path, line, module, names in _imports():
        other = _unit(module)
        if other is None or other == _own_unit(path):
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        private += [part for part in module.split(".") if part.startswith("_")
                    and not part.startswith("__")]
        if private:
            breaches.append(f"{_where(path, line)}: {', '.join(private)} from {module}")
    assert not breaches, ("a private name is its folder's own; make it public there "
                          "(documented) or keep the work in that folder:\n" + "\n".join(breaches))


STORE_SUBMODULES = {p.stem for p in (PACKAGE / "store").glob("*.py")} - {"__init__"}


def test_the_store_is_reached_through_its_facade_only():
    """Outside ``store/`` the store's API is the ``agent_eval.store`` namespace (``Store``,
    ``open_store`` and the records its methods return): no submodule imported, no engine
    taken from a ``Store``."""
    breaches = []
    for path, line, module, names in _imports():
        if _own_unit(path) in STORE_INSIDE:
            continue
        if module.startswith("agent_eval.store."):
            breaches.append(f"{_where(path, line)}: imports {module}")
        elif module == "agent_eval.store" and STORE_SUBMODULES & set(names):
            breaches.append(f"{_where(path, line)}: imports the module(s) "
                            f"{sorted(STORE_SUBMODULES & set(names))} of agent_eval.store")
    for path in sorted(PACKAGE.rglob("*.py")):
        if _own_unit(path) in STORE_INSIDE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        breaches += [f"{_where(path, node.lineno)}: .engine" for node in ast.walk(tree)
                     if isinstance(node, ast.Attribute) and node.attr == "engine"]
    assert not breaches, ("use a Store method (agent_eval/store/__init__.py); add one there "
                          "when none fits:\n" + "\n".join(breaches))


def _readme_layers() -> tuple[frozenset[str], ...]:
    """README's architecture table as layers: ``| layer | folders | ... |`` rows."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    rows: dict[int, set[str]] = {}
    for match in re.finditer(r"^\| (\d+) \| ([^|]+) \|", section, re.M):
        names = re.findall(r"`(\w+)(?:/|\.py)`", match.group(2))
        rows.setdefault(int(match.group(1)), set()).update(names)
    return tuple(frozenset(rows[n]) for n in sorted(rows))


def test_readme_architecture_table_lists_the_layers():
    expected = tuple(frozenset(layer) for layer in LAYERS if layer != ("__main__",))
    assert _readme_layers() == expected, (
        "README.md's architecture table must list LAYERS of tests/test_layers.py, in order")


def test_design_doc_data_flow_names_every_folder():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    flow = text.split("## Data flow", 1)[1].split("\n## ", 1)[0]
    folders = {u for layer in LAYERS for u in layer} - {"__main__", "errors", "transcript"}
    named = {u: f"{u}.py" if (PACKAGE / f"{u}.py").exists() else f"{u}/" for u in folders}
    missing = sorted(u for u, name in named.items() if name not in flow)
    assert not missing, f"docs/design.md's data flow does not name {missing}"


RUN_WRITES = frozenset({"create_run", "set_run_status", "record_sessions", "finish_run_if_done"})
"""The store's methods that create a run, set its status or write its sessions."""
RUN_WRITERS = {"store", "runs", "migrations"}
STORE_WRAPPERS = {("proxy/otel.py", "record_sessions")}
"""Wrappers of a ``Store`` that pass a write on (the proxy's ``TracedStore`` exports each
batch it has stored); the runs layer calls them as it calls the store."""


def _run_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls of a run write (``x.set_run_status(...)``), a write named without its call
    (``fn = store.set_run_status``) and an update of the runs table's status column."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in RUN_WRITES:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.keyword) and node.arg == "status" and isinstance(
                node.value, ast.Constant) and node.value.value in ("running", "finished",
                                                                   "interrupted", "failed"):
            found.append((node.value.lineno, f"status={node.value.value!r}"))
    return sorted(found)


def test_only_the_runs_layer_creates_runs_sets_their_status_and_writes_sessions():
    """Every source writes runs through ``agent_eval/runs`` (``RunWriter``), so a run's
    status means one thing whoever wrote it."""
    breaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _own_unit(path) in RUN_WRITERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(PACKAGE).as_posix()
        breaches += [f"{_where(path, line)}: {what}" for line, what in _run_writes(tree)
                     if (rel, what) not in STORE_WRAPPERS]
    assert not breaches, ("write runs through agent_eval.runs (RunWriter, SessionBatches, "
                          "RunRecorder):\n" + "\n".join(breaches))


def test_the_run_writes_scan_sees_each_way_of_writing():
    source = """
store.set_run_status(run_id, "finished")
fn = store.create_run
store.record_sessions(run_id, records)
conn.execute(update(runs).values(status="failed"))
store.finish_run_if_done(run_id)
reply.status = "truncated"
store.session_rows([run_id])
"""
    assert [what for _, what in _run_writes(ast.parse(source))] == [
        "set_run_status", "create_run", "record_sessions", "status='failed'",
        "finish_run_if_done"]
