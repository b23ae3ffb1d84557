"""The README names the bundled suite and allow-lists as they sit in a clone
(``allowlists/ralf.yaml``, ``scenarios/ralf``); from any other folder, after a wheel
install, those names still reach the bundled files, while a file that exists wins."""

from __future__ import annotations

from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.scenario.bundled import data_dir, find_allowlist, find_suite


def test_clone_paths_and_bare_names_reach_the_bundled_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ralf = data_dir() / "allowlists" / "ralf.yaml"
    assert find_allowlist("allowlists/ralf.yaml") == ralf
    assert find_allowlist("ralf") == ralf
    assert find_suite("scenarios/ralf") == data_dir() / "scenarios" / "ralf"
    assert find_suite("ralf") == data_dir() / "scenarios" / "ralf"


def test_every_bundled_name_the_readme_shows_reaches_a_bundled_file(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    allowlists = set(re.findall(r"(?<![\w/.])(allowlists/[\w-]+\.yaml)", readme))
    suites = set(re.findall(r"(?<![\w/.])(scenarios/[\w-]+)(?![\w/.-])", readme))
    assert {"allowlists/ralf.yaml", "allowlists/permissive.yaml"} <= allowlists
    assert "scenarios/ralf" in suites
    monkeypatch.chdir(tmp_path)
    for name in allowlists:
        assert find_allowlist(name) == data_dir() / name, name
    for name in suites:
        assert find_suite(name) == data_dir() / name, name


def test_a_file_that_exists_wins_and_unknown_names_come_back_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "allowlists").mkdir()
    mine = tmp_path / "allowlists" / "ralf.yaml"
    mine.write_text("name: mine\n", encoding="utf-8")
    assert find_allowlist("allowlists/ralf.yaml").resolve() == mine.resolve()
    assert str(find_allowlist("allowlists/nope.yaml")) == "allowlists/nope.yaml"
    assert str(find_suite("elsewhere/ralf")) == "elsewhere/ralf"


def test_check_and_validate_from_an_unrelated_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    denied = runner.invoke(main, ["check", "--allowlist", "allowlists/ralf.yaml",
                                  'ls scripts/ | grep -E "search|web"'])
    assert denied.exit_code == 1 and "deny AE301" in denied.output
    linted = runner.invoke(main, ["validate", "scenarios/ralf"])
    assert linted.exit_code == 0, linted.output
    missing = runner.invoke(main, ["check", "--allowlist", "allowlists/nope.yaml", "ls"])
    assert missing.exit_code == 2 and "nope.yaml" in missing.output


def _allowlist_options():
    import click

    def walk(command, path):
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, [*path, name])
        for param in command.params:
            if "--allowlist" in getattr(param, "opts", ()):
                yield " ".join(path), param

    return list(walk(main, []))


def test_every_allowlist_option_reads_the_bundled_names_through_one_resolver():
    from agent_eval.cli.options import ALLOWLIST

    found = {name: param.type for name, param in _allowlist_options()}
    assert {"proxy", "check", "rescore", "replay", "import"} <= set(found)
    assert all(kind is ALLOWLIST for kind in found.values()), found


def test_proxy_takes_a_bundled_name_or_its_clone_path_outside_a_clone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ralf = data_dir() / "allowlists" / "ralf.yaml"
    (param,) = [p for name, p in _allowlist_options() if name == "proxy"]
    assert param.type.convert("ralf", param, None) == ralf
    assert param.type.convert("allowlists/ralf.yaml", param, None) == ralf
