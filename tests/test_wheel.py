"""The wheel a user installs (pip, pipx, ``uv tool install``) carries everything the demo
needs: built from this checkout, installed into a fresh venv (not editable), and run from
an unrelated folder.

Slow (a build, a fresh venv, the dependencies from the package index: about two minutes),
so it is opt-in: ``AGENT_EVAL_TEST_WHEEL=1 python -m pytest -m wheel tests/test_wheel.py``.
CI runs it that way.  The cheap half (what the wheel holds) always runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPT_IN = "AGENT_EVAL_TEST_WHEEL"


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(out)],
        check=True, timeout=600, capture_output=True,
    )
    (wheel,) = out.glob("agent_eval-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(f"builds and installs the wheel (~2 min, needs the package index); "
                    f"set {OPT_IN}=1 to run it")
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_bundled_folders_are_links_to_the_top_level_sources():
    """Users edit scenarios/ and allowlists/; the package only links to them."""
    data = ROOT / "agent_eval" / "data"
    for name in ("scenarios", "allowlists"):
        link = data / name
        assert link.is_symlink(), f"{link} must be a symlink to ../../{name}"
        assert link.resolve() == (ROOT / name).resolve()


def test_an_editable_install_finds_the_bundled_suite_and_allowlists():
    from agent_eval.scenario import load_suite
    from agent_eval.scenario.bundled import bundled_allowlist, bundled_suite

    suite = load_suite(bundled_suite())
    assert suite.name == "ralf" and "evaluator-step" in suite.scenarios
    assert bundled_allowlist("permissive").read_text(encoding="utf-8").strip()


@pytest.mark.wheel
def test_the_wheel_holds_the_suite_allowlists_templates_licence_and_types(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    suite = sorted(p.name for p in (ROOT / "scenarios" / "ralf").glob("*.yaml"))
    for name in suite:
        assert f"agent_eval/data/scenarios/ralf/{name}" in names
    for name in ("ralf.yaml", "permissive.yaml"):
        assert f"agent_eval/data/allowlists/{name}" in names
    assert "agent_eval/report/templates/index.html" in names
    assert "agent_eval/migrations/versions/0001_initial.py" in names
    assert "agent_eval/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
               for n in names)
    assert not any(n.startswith(("tests/", "scenarios/", "allowlists/")) for n in names)


@pytest.mark.wheel
def test_a_wheel_install_runs_the_demo_from_an_unrelated_folder(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                   check=True, timeout=900, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_EVAL_")}
    env["PYTHONPATH"] = ""  # nothing of the checkout may leak in
    done = subprocess.run(
        [str(bin_dir / "agent-eval"), "demo", "--repeats", "1", "--profiles", "disciplined",
         "--db", "demo.db"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "suite not found" not in done.stderr
    assert "Run 1 finished" in done.stdout
    assert "disciplined" in done.stdout
    assert (elsewhere / "demo.db").is_file()
    assert (elsewhere / "reports" / "1" / "index.html").is_file()
    where = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "from agent_eval.scenario.bundled import bundled_suite; print(bundled_suite())"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    assert str(env_dir) in where.stdout and str(ROOT) not in where.stdout
    ralf = str(Path(where.stdout.strip()).parents[1] / "allowlists" / "ralf.yaml")

    def agent_eval(*args: str, code: int = 0) -> str:
        done = subprocess.run([str(bin_dir / "agent-eval"), *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == code, (args, done.stdout[-1500:], done.stderr[-1500:])
        return done.stdout

    # the commands README.md and docs/*.md show that need no model server, on the demo's store
    db = ("--db", "demo.db")
    assert "AE301" in agent_eval("rules")
    assert "pipe-to-filter" in agent_eval("rule", "AE301")
    assert '"properties"' in agent_eval("schema", "scenario")
    assert "allow" in agent_eval("check", "--allowlist", ralf, "uv run scripts/lights.py status")
    agent_eval("check", "--allowlist", ralf, "ls | head", code=1)
    # the README writes the bundled files as they sit in a clone; they work from anywhere
    assert "deny AE301" in agent_eval("check", "--allowlist", "allowlists/ralf.yaml",
                                      'ls scripts/ | grep -E "search|web"', code=1)
    assert "no problem" in agent_eval("validate", "scenarios/ralf")
    assert "disciplined" in agent_eval("show", "latest", *db)
    assert agent_eval("export", "latest", *db).count("\n") > 10
    assert "PASS" in agent_eval("gate", "--run", "latest", "--max-error-rate", "100", *db)
    assert "run 1" in agent_eval("compare", "1", "latest", *db)
    assert agent_eval("report", "latest", "--quiet", *db).strip().endswith("index.html")
    agent_eval("db", "upgrade", *db)
    # a new suite, linted and played against the simulator the wheel ships
    agent_eval("init", "my-suite")
    assert "no problem" in agent_eval("validate", "my-suite")
