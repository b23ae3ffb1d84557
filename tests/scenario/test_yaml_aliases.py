"""YAML aliases in every file agent-eval reads (allow-lists, scenarios, suite defaults,
protocols, targets): a few are fine, a "billion laughs" is one ``Error:`` line naming the
file before anything is built, and an alias inside itself is refused too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent_eval.errors import ConfigError
from agent_eval.live.targets import load_run_config
from agent_eval.policy import load_allowlist
from agent_eval.policy.allowlist import MAX_ALIAS_NODES
from agent_eval.scenario import load_suite
from agent_eval.scenario.protocols import load_protocols

REPO = Path(__file__).resolve().parents[2]


def laughs_allowlist() -> str:
    """The 762-byte allow-list: six levels of nine subcommands, each level an alias of the
    one below, so 5 million nodes to validate (17 s and 313 MB before the bound)."""
    lines = ["name: laughs", "description: " + "x" * 59, "runner: [uv, run]", "scripts:",
             "  l0.py: &l0 {flags: {--a: {value: true}}}"]
    for level in range(1, 7):
        subs = ", ".join(f"{k}: *l{level - 1}" for k in "abcdefghi")
        lines.append(f"  l{level}.py: &l{level} {{subcommands: {{{subs}}}}}")
    return "\n".join(lines) + "\n"


def laughs_list(key: str, indent: str = "") -> str:
    """Nine-fold nested aliases under ``key``: 54 million nodes in under 400 bytes."""
    lines = [f"{indent}{key}:", f"{indent}  - &l0 [a, a, a, a, a, a, a, a, a]"]
    lines += [f"{indent}  - &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 8)]
    return "\n".join(lines) + "\n"


def test_the_762_byte_allowlist_is_one_error_line_naming_the_file(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs_allowlist())
    assert path.stat().st_size == 762
    done = subprocess.run([sys.executable, "-m", "agent_eval", "check", "--allowlist", str(path),
                           "ls"], capture_output=True, text=True, timeout=60)  # a hang: fails
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: {path}: its aliases (*name) would expand it by 5,081,814 "
                           "nodes, over the 10,000 allowed")


@pytest.mark.parametrize("name, text, load", [
    pytest.param("allowlist.yaml", laughs_allowlist(), load_allowlist, id="allow-list"),
    pytest.param("protocols.yaml", laughs_list("protocols"), load_protocols, id="protocols"),
    pytest.param("targets.yaml", laughs_list("targets"), load_run_config, id="targets"),
])
def test_every_yaml_file_refuses_a_billion_laughs(tmp_path, name, text, load):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="would expand it by") as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: its aliases (*name) would expand it by")


def test_a_scenario_and_suite_defaults_refuse_it_and_validate_says_so(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "bomb.yaml").write_text("name: bomb\ntask: do it\n" + laughs_list("tags"))
    with pytest.raises(ConfigError, match="would expand it by"):
        load_suite(suite)
    (suite / "bomb.yaml").write_text("name: bomb\ntask: do it\n")
    (suite / "suite.yaml").write_text(laughs_list("tags"))
    with pytest.raises(ConfigError, match="suite.yaml: its aliases"):
        load_suite(suite)
    done = subprocess.run([sys.executable, "-m", "agent_eval", "validate", str(suite)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "suite.yaml: its aliases (*name) would expand" in done.stdout


def test_aliases_that_repeat_a_block_a_few_times_still_load(tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text("name: shared\nrunner: [uv, run]\nscripts:\n"
                    "  a.py: &spec {flags: {--agent: {value: true, required: true}, "
                    "--no-attach: {}}}\n"
                    "  b.py: *spec\n"
                    "  c.py: {<<: *spec, summary: merged}\n")
    allowlist = load_allowlist(path)
    assert allowlist.scripts["b.py"] == allowlist.scripts["a.py"]
    assert allowlist.scripts["c.py"].summary == "merged"
    assert set(allowlist.scripts["c.py"].flags) == {"--agent", "--no-attach"}


def test_the_bound_is_on_the_nodes_aliases_add(tmp_path):
    """Just under the bound loads; one more alias is refused."""
    block = "[" + ", ".join(["x"] * 99) + "]"  # 100 nodes
    per_alias = 100
    n = MAX_ALIAS_NODES // per_alias
    under = "name: edge\nrunner: &b " + block + "\ndescription: d\nread: {roots: [a/]}\n" \
        + "strict: {pipe_to: *b, allow_wrappers: *b}\n"
    path = tmp_path / "edge.yaml"
    path.write_text(under)
    load_allowlist(path)  # 200 nodes added: fine
    many = "x: &b " + block + "\ny: [" + ", ".join(["*b"] * (n + 1)) + "]\n"
    path.write_text("name: edge\n" + many)
    with pytest.raises(ConfigError, match=f"by {(n + 1) * per_alias:,} nodes"):
        load_allowlist(path)


def test_an_alias_inside_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\nrunner: &r [uv, *r]\n")
    with pytest.raises(ConfigError, match="line 2: an alias refers to the node that holds it"):
        load_allowlist(path)


def test_yaml_nested_too_deep_is_an_error_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nrunner: " + "[" * 20_000 + "]" * 20_000 + "\n")
    with pytest.raises(ConfigError, match="deep.yaml: nested too deep to read"):
        load_allowlist(path)


@pytest.mark.parametrize("depth", [1_200, 4_900])
def test_libyamls_depth_is_refused_as_the_python_loader_refuses_it(tmp_path, depth):
    """Under the fast loader's bound, libyaml reads the file and stops at its own 1,000
    levels: the same one-line refusal as the pure-Python loader's RecursionError."""
    from agent_eval.policy.allowlist import C_LOADER_MAX_DEPTH, _loader_for

    text = "name: deep\nrunner: " + "[" * depth + "]" * depth + "\n"
    assert _loader_for(text) is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert depth < C_LOADER_MAX_DEPTH
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="deep.yaml: nested too deep to read"):
        load_allowlist(path)


def test_the_fast_loader_reads_every_bundled_file_as_the_python_loader_does():
    """Every bundled scenario and allow-list (and the suite's defaults) gives the same data
    through libyaml as through PyYAML's pure-Python loader; the fast one is the one used."""
    from agent_eval.policy.allowlist import _loader_for, parse_yaml

    root = Path(__file__).resolve().parents[2]
    files = sorted([*(root / "scenarios").rglob("*.yaml"), *(root / "allowlists").glob("*.yaml")])
    assert len(files) > 30
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert _loader_for(text) is yaml.CSafeLoader, file
        assert parse_yaml(text)[1] == yaml.load(text, Loader=yaml.SafeLoader), file


def test_the_alias_count_runs_only_where_a_star_could_write_an_alias(monkeypatch):
    """An alias is written ``*name``: a document without a ``*`` has none, so its nodes are
    not walked again (a suite's thirty files are read at every run's start); one with a
    ``*`` anywhere, even in a quoted glob, is walked."""
    import agent_eval.policy.allowlist as allowlist

    walked = []
    monkeypatch.setattr(allowlist, "_check_aliases", lambda node: walked.append(node))
    assert allowlist.parse_yaml("name: plain\nrunner: [uv, run]\n")[1] == {
        "name": "plain", "runner": ["uv", "run"]}
    assert walked == []
    assert allowlist.parse_yaml("name: globs\nsee: 'docs/*.md'\n")[1]["see"] == "docs/*.md"
    assert len(walked) == 1
