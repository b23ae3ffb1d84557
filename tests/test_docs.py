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


def _section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a Markdown text, up to the next ``## ``."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _command_rows(readme: str) -> dict[str, str]:
    """README's Commands table: command -> the docs/cli.md anchor its first cell links to."""
    import re

    rows = {}
    for line in _section(readme, "Commands").splitlines():
        m = re.match(r"\| \[`agent-eval ([a-z -]+)`\]\(docs/cli\.md#([a-z-]+)\) \|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_in_the_readme_table_and_the_reference(command):
    rows = _command_rows(README)
    assert command in rows, (
        f"README.md's Commands table has no row for `agent-eval {command}`; add "
        f"| [`agent-eval {command}`](docs/cli.md#agent-eval-{command.replace(' ', '-')}) | ... |")
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"\n## `agent-eval {command}`\n" in cli, f"docs/cli.md has no section for {command}"
    assert rows[command] in _anchors(cli), f"README links {command} to a missing anchor"


def test_the_table_check_reads_only_linked_rows_of_the_commands_section():
    text = ("# x\n\n## Commands\n\n| command | what |\n|---|---|\n"
            "| [`agent-eval run`](docs/cli.md#agent-eval-run) | play |\n"
            "| `agent-eval gate` | no link |\n"
            "| [`agent-eval show`](README.md#agent-eval-show) | wrong file |\n\n"
            "## Next\n\n| [`agent-eval view`](docs/cli.md#agent-eval-view) | elsewhere |\n")
    assert _command_rows(text) == {"run": "agent-eval-run"}


def test_the_readme_is_a_guide_not_a_command_reference():
    """Per-command sections live in docs/cli.md (generated) and the docs/*.md guides; the
    README keeps the table, a few task-oriented sections and the guide."""
    assert "### `agent-eval" not in README
    assert len(README.splitlines()) <= 450, "README.md is growing back into a reference"


def _reference_commands() -> list[tuple[str, click.Command]]:
    from agent_eval.cli.reference import command_paths

    return [(" ".join(path), cmd) for path, cmd in command_paths(main)]


@pytest.mark.parametrize("path, cmd", _reference_commands(),
                         ids=[path for path, _ in _reference_commands()])
def test_every_option_is_in_the_command_reference(path, cmd):
    """docs/cli.md is click's --help, so this holds while click prints every option;
    it fails when the rendering leaves a command or an option out."""
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    body = cli.split(f"\n## `agent-eval {path}`\n", 1)[1].split("\n## ", 1)[0]
    options = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    missing = sorted(o for o in options if o not in body)
    assert not missing, f"docs/cli.md's `agent-eval {path}` lacks {missing}"


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text (lower case, punctuation
    dropped, blanks to hyphens, ``-1``, ``-2`` for repeats); fenced blocks skipped."""
    import re

    anchors: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n, base = 0, slug
        while slug in anchors:
            n += 1
            slug = f"{base}-{n}"
        anchors.add(slug)
    return anchors


def test_anchors_are_githubs():
    text = "# A `b` c\n## Patterns, `extends` and YAML\n## x\n## x\n```\n# not\n```\n"
    assert _anchors(text) == {"a-b-c", "patterns-extends-and-yaml", "x", "x-1"}


LINKED = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", LINKED)
def test_every_local_link_reaches_a_file_and_heading(doc):
    """The README's and the guides' links to each other, and to their headings, resolve:
    moving text between them must not leave a link behind."""
    import re

    path = ROOT / doc
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(
                linked.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{doc} links to what is not there: {broken}"


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
    from agent_eval.cli.check import rules_markdown

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


def test_readme_and_the_main_help_render_the_exit_codes_from_their_constants():
    """Exit codes are written once (``agent_eval.cli.EXIT_CODES``); README's line and the
    main ``--help`` say them in its words (README lacked "the checked call is denied"'s
    wording and could drift from the code as docs/cli.md's header once lacked code 4)."""
    from agent_eval.cli import EXIT_CODES, exit_codes_text

    line = f"Exit codes: {exit_codes_text(short=True)}."
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert line in readme
    assert line in " ".join((main.help or "").split())
    assert [code for code, _ in EXIT_CODES] == [0, 1, 2, 3, 4]


def test_every_command_names_only_exit_codes_the_cli_has():
    """A command's ``Exit codes: ...`` line lists its own subset; each code it names is
    one of ``EXIT_CODES`` (a command cannot document a code the CLI never returns)."""
    import re

    from agent_eval.cli import EXIT_CODES

    known = {code for code, _ in EXIT_CODES} | {130}  # 130: Ctrl-C, as docs/cli.md says
    checked = 0
    for path in _command_paths(main):
        cmd = main
        for part in path.split():
            cmd = cmd.commands[part]
        text = " ".join((cmd.help or "").split())
        for listed in re.findall(r"Exit codes: (.*?)(?:\.|$)", text):
            codes = {int(c) for c in re.findall(r"(?:^|, )(\d+) ", listed)}
            assert codes and codes <= known, (path, listed)
            checked += 1
    assert checked >= 15
