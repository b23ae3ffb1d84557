"""The options several commands share are declared once, in agent_eval/cli/options.py:
every command's ``--db`` and ``--json`` and the sampling knobs of ``run`` and ``replay`` come
from there, so their names, environment variables and help cannot drift apart."""

from __future__ import annotations

import ast
from pathlib import Path

import click

from agent_eval.cli import main
from agent_eval.cli.options import SAMPLING

CLI = Path(__file__).resolve().parents[2] / "agent_eval" / "cli"
SHARED = {"--db", "--json", *(flag for flag, *_ in SAMPLING), "--enable-thinking/--disable-thinking",
          "--stream/--no-stream", "--api-key-env", "--max-error-rate", "--max-class",
          "--max-regression"}


def _commands(group: click.Group, prefix: str = ""):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_no_command_module_declares_a_shared_option_itself():
    declared = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "option" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in SHARED):
                declared.append(f"{path.name}:{node.lineno} {node.args[0].value}")
    assert declared == [], "declare these in agent_eval/cli/options.py and import them"


def test_every_db_option_reads_the_same_variable_and_says_the_same():
    db = {name: p for name, c in _commands(main) for p in c.params if p.name == "db"}
    assert len(db) >= 20  # run, import, proxy, the read commands, ...
    assert {p.envvar for p in db.values()} == {"AGENT_EVAL_DB"}
    assert len({p.help for p in db.values()}) == 1
    as_json = [p for _, c in _commands(main) for p in c.params if p.name == "as_json"]
    assert as_json and all(p.opts == ["--json"] and p.help.startswith("Print ") for p in as_json)


def test_run_and_replay_take_the_same_sampling_knobs():
    commands = dict(_commands(main))
    knobs = {flag for flag, *_ in SAMPLING} | {"--stream", "--timeout", "--api-key-env",
                                                "--enable-thinking"}

    def flags(name):
        return {o for p in commands[name].params for o in p.opts}

    assert knobs <= flags("run") and knobs <= flags("replay")
    replay = {p.opts[0]: p.help for p in commands["replay"].params}
    assert replay["--top-p"] == "Override the stored top_p."


def test_gate_and_run_until_decided_take_the_same_checks():
    """``run --until-decided`` plays until the gate's checks are decided: the same options,
    the same help, declared once (cli/options.check_options)."""
    commands = dict(_commands(main))
    checks = ("--max-error-rate", "--max-class", "--baseline", "--max-regression")

    def helps(name):
        return {o: p.help for p in commands[name].params for o in p.opts if o in checks}

    assert set(helps("gate")) == set(checks)
    assert helps("gate") == helps("run")
def test_every_allowlist_option_is_the_one_allowlist_option():
    """``--allowlist`` is declared once (``options.allowlist_option``): every command
    that takes it reads it with the same type and names an agent CLI's rules alike."""
    import ast
    from pathlib import Path

    import click

    from agent_eval.cli import main
    from agent_eval.cli.options import AGENT_RULES, AllowlistPath

    def commands(group):
        for cmd in group.commands.values():
            yield from commands(cmd) if isinstance(cmd, click.Group) else [cmd]

    taking = [(cmd.name, p) for cmd in commands(main) for p in cmd.params
              if "--allowlist" in p.opts]
    assert len(taking) >= 8
    for name, param in taking:
        assert isinstance(param.type, AllowlistPath), name
        assert param.name == "allowlist_path", name
        assert AGENT_RULES in (param.help or "") or name == "profiles", name
    cli = Path(__file__).resolve().parents[2] / "agent_eval" / "cli"
    declared = [f"{path.name}:{node.lineno}" for path in sorted(cli.glob("*.py"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "option"
                and any(isinstance(a, ast.Constant) and a.value == "--allowlist"
                        for a in node.args)]
    assert [d.split(":")[0] for d in declared] == ["options.py"], declared
