"""Docs kept honest: every CLI command and every rule is documented, and CI runs exactly
the README's test command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from agent_eval.cli import main
from agent_eval.policy import RULES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _command_paths(group: click.Group, prefix: str = "") -> list[str]:
    paths = []
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            paths += _command_paths(cmd, path + " ")
        else:
            paths.append(path)
    return paths


COMMANDS = _command_paths(main)


def test_the_cli_has_every_command_design_md_names():
    expected = {"run", "demo", "check", "rules", "rule", "report", "show", "gate", "compare",
                "import", "rescore", "sim-server", "db upgrade", "schema", "perf"}
    assert expected <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_readme_section(command):
    assert f"### `agent-eval {command}`" in README, (
        f"README.md has no '### `agent-eval {command}`' section; document the command"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    cmd = main
    for part in command.split():
        cmd = cmd.commands[part]
    assert cmd.help and "agent-eval" in cmd.help, f"`{command}` --help needs an example line"


def test_cli_doc_is_the_commands_rendering():
    from agent_eval.cli.reference import cli_markdown

    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert doc == cli_markdown(), (
        "docs/cli.md is stale; regenerate: python -m agent_eval.cli.reference > docs/cli.md")


def _options_by_command() -> dict[str, set[str]]:
    from agent_eval.cli.reference import command_paths

    return {" ".join(path): {o for p in cmd.params if isinstance(p, click.Option)
                             for o in (*p.opts, *p.secondary_opts)} | {"--help"}
            for path, cmd in command_paths(main)}


def _invocations(text: str, known: dict[str, set[str]]):
    """(command, option) of every `agent-eval CMD ... --option` the text shows, up to the
    end of its code span, a shell operator or the line."""
    import re

    for m in re.finditer(r"agent-eval ([a-z][a-z-]*(?: [a-z][a-z-]*)?)([^`\n|&;]*)", text):
        words = m.group(1).split()
        name = " ".join(words) if " ".join(words) in known else words[0]
        if name not in known:
            continue
        rest = m.group(2) if name == " ".join(words) else " ".join(words[1:]) + m.group(2)
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
            yield name, option


DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
                             if p.name != "cli.md")]


@pytest.mark.parametrize("doc", DOCS)
def test_every_option_a_doc_shows_a_command_with_exists(doc):
    known = _options_by_command()
    text = (ROOT / doc).read_text(encoding="utf-8")
    wrong = sorted({f"agent-eval {name} {option}" for name, option in _invocations(text, known)
                    if option not in known[name]})
    assert not wrong, f"{doc} shows options the commands do not have: {wrong}"


def test_the_doc_check_sees_a_wrong_option():
    known = {"gate": {"--baseline", "--help"}}
    text = "run `agent-eval gate --baseline 3 --max-leak 2` and `agent-eval rules --json`"
    assert list(_invocations(text, known)) == [("gate", "--baseline"), ("gate", "--max-leak")]


def test_readme_opens_with_install_and_demo():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in quick.splitlines() if ln.strip().startswith("$ ")]
    assert lines[0] == "$ pip install . && agent-eval demo"  # not editable: as users install


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in quick.splitlines() if ln.strip().startswith("$ ")]
    assert lines[-1] == "$ bash scripts/test.sh" and len(lines) == 2
    assert "sed -n 's/^    \\$ \\(bash scripts\\/test\\.sh.*\\)$/\\1/p' README.md" in ci
    assert 'eval "$test_cmd"' in ci


def test_the_test_command_installs_the_extras_and_runs_the_whole_suite():
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "pip install -q -e '.[test]'" in script
    assert "scripts/ci/*.sh" in script
    assert 'python -m pytest -p no:cacheprovider -rs -n "$processes" --dist loadfile "$@"' \
        in script


def test_every_rule_is_in_the_rules_doc():
    doc = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for code, rule in RULES.items():
        assert f"{code} {rule.name}" in doc or f"{code} `{rule.name}`" in doc, (
            f"docs/rules.md lacks {code}; regenerate it with "
            "`agent-eval rules --markdown > docs/rules.md`"
        )


def test_rules_doc_is_the_registry_rendering():
    from agent_eval.cli.policy import rules_markdown

    doc = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert doc == rules_markdown(), (
        "docs/rules.md is stale; regenerate: agent-eval rules --markdown > docs/rules.md"
    )


def test_shell_completion_script_is_served_as_the_readme_says():
    import os
    import subprocess
    import sys

    assert "_AGENT_EVAL_COMPLETE=bash_source agent-eval" in README
    script = subprocess.run(
        [sys.executable, "-c", "from agent_eval.cli import main; main(prog_name='agent-eval')"],
        env={**os.environ, "_AGENT_EVAL_COMPLETE": "bash_source"}, capture_output=True,
        text=True, timeout=60,
    )
    assert script.returncode == 0, script.stderr
    assert "_agent_eval_completion()" in script.stdout
    assert "complete -o nosort -F _agent_eval_completion agent-eval" in script.stdout


def test_the_quick_start_makes_a_venv_first_and_says_what_to_open_after_the_demo():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    user, developer = quick.split("### Run the tests (developers)", 1)
    assert user.index("python3 -m venv") < user.index("$ pip install . && agent-eval demo")
    for next_step in ("agent-eval view", "agent-eval sessions latest --failed",
                      "agent-eval show ID"):
        assert next_step in user
    assert "$ bash scripts/test.sh" in developer and "llama.cpp" not in user


def test_no_tracker_numbers_in_code_tests_or_docs():
    """Code, tests and docs say what and why, not which ticket of a tracker that is not in
    the repository (the word "issue" and a number); upstream references (a URL,
    `repo#123`) are fine."""
    import re

    tracker = re.compile(r"\b[Ii]ssues? #?\d+")
    found = []
    for folder in ("agent_eval", "tests", "docs", "scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".md", ".sh", ".yaml", ".txt") or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8",
                                                         errors="replace").splitlines(), 1):
                if tracker.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    for name in ("README.md", "BENCHMARKS.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        found += [f"{name}: {m.group()}" for m in tracker.finditer(text)]
    assert not found, "\n".join(found)
