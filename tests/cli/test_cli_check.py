"""`agent-eval check`, `rules` and `rule`: output, exit codes, batch mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.policy import RULES

RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin)


def test_denied_command_prints_caret_under_each_finding_and_exits_1():
    result = run("check", "--allowlist", RALF, 'ls scripts/ | grep -E "search|web"')
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "deny AE301 pipe-to-filter"
    assert lines[1] == '  ls scripts/ | grep -E "search|web"'
    assert '              ^^^^^^^^^^^^^^^^^^^^^^ AE301 pipe-to-filter: output piped into grep' in lines


def test_allowed_command_prints_allow_and_exits_0():
    result = run("check", "--allowlist", RALF, "uv run scripts/lights.py status")
    assert (result.exit_code, result.output) == (0, "allow\n")


def test_read_tool_path_is_judged_as_a_path():
    result = run("check", "--allowlist", RALF, "--tool", "read", "/data/rendered/x.png")
    assert result.exit_code == 1 and result.output.startswith("deny AE320 blocked-read-path")


@pytest.mark.parametrize(
    ("args", "message"),
    [(["check", "--allowlist", "missing.yaml", "ls"], "missing.yaml: file not found"),
     (["check", "--allowlist", RALF], "give TEXT to judge"),
     (["check", "--allowlist", RALF, "--batch", "-", "ls"], "not both"),
     (["check", "--allowlist", RALF, "--batch", "no-such-file.txt"], "cannot read batch file")],
    ids=["missing-allowlist", "no-text", "text-and-batch", "missing-batch-file"],
)
def test_usage_and_config_errors_exit_2_with_one_error_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert "Error:" in result.output and message in result.output
    assert "Traceback" not in result.output


def test_batch_lines_from_stdin_writes_one_json_object_per_line_and_a_summary():
    result = run("check", "--allowlist", RALF, "--batch", "-",
                 stdin="ls | head\nuv run scripts/lights.py status\ntimeout 5 ls\n")
    assert result.exit_code == 0
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["decision"], o["primary"]) for o in out] == [
        ("deny", "AE301"), ("allow", None), ("deny", "AE306")]
    assert out[0]["findings"][0] == {"code": "AE307", "message": "program ls is not allowed",
                                     "start": 0, "end": 2}
    assert result.stderr.strip() == "judged 3: allow 1, deny 2 (AE301 1, AE306 1)"


def test_batch_jsonl_is_the_default_for_a_jsonl_file_and_holds_multi_line_commands(tmp_path):
    batch = tmp_path / "calls.jsonl"
    batch.write_text(json.dumps("cat <<EOF\nx\nEOF") + "\n"
                     + json.dumps({"command": "uv run scripts/lights.py status"}) + "\n")
    result = run("check", "--allowlist", RALF, "--batch", str(batch))
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["command"] for o in out] == ["cat <<EOF\nx\nEOF", "uv run scripts/lights.py status"]
    assert [o["primary"] for o in out] == ["AE305", None]


def test_batch_bad_jsonl_line_names_the_line_and_judges_the_rest(tmp_path):
    batch = tmp_path / "calls.jsonl"
    batch.write_text('"ls"\n{"command": \n"uv run scripts/lights.py status"\n')
    result = run("check", "--allowlist", RALF, "--batch", str(batch))
    assert result.exit_code == 0  # a batch always finishes; bad lines are reported
    assert f"{batch}: line 2: not a JSON string" in result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o.get("decision") for o in out] == ["deny", None, "allow"]  # one per input line
    assert out[1] == {"line": 2, "error": 'not a JSON string or an object with a string "command"'}


def test_batch_answers_each_line_as_it_comes_through_a_pipe_and_needs_no_bashlex_for_it():
    """A harness may feed ``check --batch -`` one command at a time and wait for each
    verdict: the answer to a read is written and flushed before the next read.  Plain and
    denied commands never reach bashlex, so it is not even imported (its import rebuilds
    its parser tables: 70 ms)."""
    import subprocess
    import sys
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-c", "import runpy, sys; sys.argv[0] = 'agent-eval'; "
         "import atexit; atexit.register(lambda: print('bashlex' in sys.modules, "
         "file=sys.stderr)); runpy.run_module('agent_eval', run_name='__main__')",
         "check", "--allowlist", RALF, "--batch", "-", "--format", "jsonl"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, proc.kill)  # a buffered answer would wait for ever
    watchdog.start()
    try:
        answers = []
        for command in ("ls | head", "uv run scripts/lights.py status"):
            proc.stdin.write(json.dumps({"command": command}) + "\n")
            proc.stdin.flush()
            answers.append(json.loads(proc.stdout.readline()))  # before the next is sent
        rest, err = proc.communicate()  # closes stdin: the batch ends
    finally:
        watchdog.cancel()
    assert [(a["decision"], a["primary"]) for a in answers] == [("deny", "AE301"),
                                                                ("allow", None)]
    assert rest == "" and proc.returncode == 0
    assert err.splitlines() == ["judged 2: allow 1, deny 1 (AE301 1)", "False"]


def test_batch_lines_split_across_reads_are_joined_whole():
    """A read may end anywhere: inside a line, inside a UTF-8 character, right after a
    newline; a line longer than a read (a 200,000-character command) comes out whole, and
    joining it costs one copy, not one per read."""
    import io

    from agent_eval.cli.check import _batch_items

    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes, size: int):
            self.data, self.size = data, size

        def read1(self, n: int = -1) -> bytes:
            piece, self.data = self.data[:self.size], self.data[self.size:]
            return piece

    long = "echo " + "é" * 100_000
    text = f"ls\r\n{long}\n\nuv run scripts/lights.py status".encode()
    for size in (1, 3, 7, 65_536):
        got = [item for items in _batch_items(Trickle(text, size), "lines", "-")
               for item in items]
        assert got == [(1, "ls\r", None), (2, long, None),
                       (4, "uv run scripts/lights.py status", None)], size


def test_batch_input_that_is_not_utf8_is_one_error_naming_the_line(tmp_path):
    batch = tmp_path / "calls.txt"
    batch.write_bytes(b"ls\nuv run scripts/lights.py status \xff\n")
    result = run("check", "--allowlist", RALF, "--batch", str(batch))
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        f"{batch}: not UTF-8 text (invalid start byte) at line 2")
    assert json.loads(result.stdout.splitlines()[0])["primary"] == "AE307"  # line 1 judged


def test_rules_lists_every_registered_code():
    result = run("rules")
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.output.splitlines()] == list(RULES)


def test_rules_json_is_the_registry():
    data = json.loads(run("rules", "--json").output)
    assert [r["code"] for r in data] == list(RULES)
    assert data[0]["bad"][0]["tool"] == "emit_guidance"


def test_rule_prints_one_rule_in_full():
    result = run("rule", "AE301")
    assert result.exit_code == 0
    assert result.output.startswith("AE301 pipe-to-filter\n")
    assert "Why: Each script already prints" in result.output
    assert '  $ ls scripts/ | grep -E "search|web"' in result.output


def test_rule_json():
    assert json.loads(run("rule", "ae310", "--json").output)["name"] == "unknown-flag"


def test_unknown_rule_is_a_usage_error():
    result = run("rule", "AE999")
    assert result.exit_code == 2 and "no such code or rule name 'AE999'" in result.output


def test_rule_takes_a_rule_name_as_the_filters_do():
    assert run("rule", "pipe-to-filter").output.startswith("AE301 pipe-to-filter\n")
    near = run("rule", "pipe-filter")
    assert near.exit_code == 2 and "did you mean AE301 (pipe-to-filter)?" in near.output


@pytest.mark.parametrize("command", ["check", "rules", "rule"])
def test_command_is_documented_in_the_readme_and_the_reference(command):
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    cli = (root / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"| [`agent-eval {command}`](docs/cli.md#agent-eval-{command}) |" in readme
    assert f"\n## `agent-eval {command}`\n" in cli


def test_the_readme_shows_the_check_it_documents():
    """The README's "Check a command" example prints what `check` prints."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Check a command\n", 1)[1].split("\n## ", 1)[0]
    shown = section.split("    $ agent-eval check --allowlist allowlists/ralf.yaml ", 1)[1]
    command, *printed = shown.split("\n\n", 1)[0].splitlines()
    result = run("check", "--allowlist", RALF, command.strip("'"))
    assert result.exit_code == 1
    assert result.output.splitlines() == [line[4:] for line in printed]


def test_batch_of_read_paths(tmp_path):
    batch = tmp_path / "paths.txt"
    batch.write_text("notes/plan.md\n/data/rendered/x.png\n")
    result = run("check", "--allowlist", RALF, "--tool", "read", "--batch", str(batch))
    assert [json.loads(line)["primary"] for line in result.stdout.splitlines()] == [None, "AE320"]
