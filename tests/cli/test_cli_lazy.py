"""The command line imports only the module of the command it runs (ten workers starting
at once each paid for every other command's imports), and nothing is lost by it: the
table naming each command's module is complete, and a listing still shows them all."""

from __future__ import annotations

import json
import subprocess
import sys

from agent_eval.cli import COMMAND_MODULES

PROBE = """
import json, sys
from agent_eval.cli import main
try:
    main(["worker", "--help"], prog_name="agent-eval")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("agent_eval", "rich")))))
"""


def test_the_table_names_the_module_of_every_command():
    from agent_eval.cli import main

    main.commands.load_all()
    assert {name: cmd.callback.__module__ for name, cmd in dict.items(main.commands)} == {
        name: f"agent_eval.cli.{module}" for name, module in COMMAND_MODULES.items()}


def test_worker_imports_its_own_module_and_not_the_others():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert "agent_eval.cli.workers" in loaded
    assert not loaded & {"agent_eval.cli.report", "agent_eval.cli.run", "agent_eval.metrics",
                         "agent_eval.serverlogs", "rich"}
    assert "Play a run planned with `run --plan-only`" in out


def test_help_still_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "agent_eval", "--help"], capture_output=True,
                         text=True, check=True).stdout
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(COMMAND_MODULES)
