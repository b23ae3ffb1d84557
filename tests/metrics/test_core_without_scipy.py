"""The core install carries no scipy (nor statsmodels or pandas): a run, gate, compare,
power, report and every viewer page work with them made unimportable.  The statistics come
from agent_eval.metrics.distributions, held to scipy by tests/metrics/test_distributions.py.  Nor
does the core need numpy: power's range is a bootstrap-t in plain Python
(metrics/power.py), so numpy is blocked here too."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCKED = ("scipy", "statsmodels", "pandas", "patsy", "numpy")

SCRIPT = textwrap.dedent("""
    import importlib.abc, sys, urllib.request

    BLOCKED = {blocked!r}
    tried = []

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                tried.append(name)
                raise ImportError(f"not installed: {{name}}")
            return None

    sys.meta_path.insert(0, Block())
    from click.testing import CliRunner
    from agent_eval.cli import main

    db, out = sys.argv[1], sys.argv[2]

    def cli(*args, codes=(0,)):
        result = CliRunner().invoke(main, [*args])
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or result.exit_code not in codes:
            print(args, result.exit_code, result.output, repr(result.exception))
            raise SystemExit(9)
        return result.output

    for _ in range(2):
        cli("demo", "--profiles", "piper,disciplined", "--repeats", "2", "--tag", "lights",
            "--no-report", "--db", db)
    cli("runs", "--db", db)
    cli("gate", "--run", "latest", "--max-error-rate", "8", "--max-class", "AE301=3",
        "--baseline", "1", "--max-regression", "2", "--db", db, codes=(0, 1, 4))
    cli("compare", "1", "2", "--db", db)
    cli("compare", "1", "2", "--explain", "--db", db)
    cli("power", "--baseline", "1", "--detect", "2", "--db", db)
    cli("report", "1", "2", "--out", out, "--db", db)
    cli("sessions", "latest", "--db", db)
    cli("calls", "latest", "--db", db)

    from agent_eval.store import open_store
    from agent_eval.view.app import run_view_in_thread

    with open_store(db) as store, run_view_in_thread(store) as base:
        for path in ("/", "/runs/1", "/runs/2", "/calls?run=2", "/sessions?run=2",
                     "/compare?a=1&b=2", "/compare?a=1&b=2&analysis=1",
                     "/compare?a=2&b=2"):
            with urllib.request.urlopen(base + path) as response:
                assert response.status == 200, path
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print("LOADED", loaded)
    print("TRIED", sorted(set(t.split(".")[0] for t in tried)))
""")


@pytest.mark.e2e
def test_run_gate_compare_report_and_view_work_without_scipy(tmp_path):
    script = SCRIPT.format(blocked=BLOCKED)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s.db"),
                          str(tmp_path / "reports")], capture_output=True, text=True,
                         cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "LOADED []" in out.stdout, out.stdout[-2000:]
