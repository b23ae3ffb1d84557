"""The ``agent-eval`` command line: thin commands over the library.

Each command parses options, calls one library function and formats the result.  Its
docstring is its ``--help``.  Exit codes are listed once, in :data:`EXIT_CODES`: the
main ``--help``, docs/cli.md's header and README's line are rendered from it (README's
is held to it by tests/test_docs.py).

Every ``AgentEvalError`` becomes one ``Error: ...`` line on stderr and its exit code;
never a traceback.  Commands live in one module per area and register on ``main``.
"""

from __future__ import annotations

import re
import sys

import click

from agent_eval import __version__, heap
from agent_eval.errors import AgentEvalError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_FAULT, EXIT_INCONCLUSIVE = 0, 1, 2, 3, 4
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "ok (`check`: the call is allowed)"),
    (EXIT_FAIL, "gate failed (`gate`), or the checked call is denied (`check`)"),
    (EXIT_USAGE, "usage or config error"),
    (EXIT_FAULT, "model server unreachable or harness fault"),
    (EXIT_INCONCLUSIVE, "gate inconclusive (`gate`: a check its sample could not decide; "
                        "`--on-inconclusive pass|fail` reads it otherwise)"),
)
"""Every exit code and what it means: docs/cli.md's header is rendered from it."""


def exit_codes_text(*, short: bool = False) -> str:
    """``0 ok (...), 1 gate failed (...), ..., 4 gate inconclusive (...)``; ``short``:
    the meanings without their parentheses, ``;`` between codes (``0 ok; 1 gate failed,
    or the checked call is denied; ...``)."""
    if short:
        return "; ".join(f"{code} {re.sub(r' [(][^)]*[)]', '', meaning)}"
                         for code, meaning in EXIT_CODES)
    return ", ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES)


# Which module defines each command, so ``agent-eval worker`` imports the worker's module
# and not every other command's (ten workers starting at once each paid for rich, the
# metrics and the server-log parsers).  A command missing here still works: an unknown
# name loads every module.  tests/cli/test_cli_lazy.py keeps the table complete.
COMMAND_MODULES = {
    "calls": "lists", "check": "check", "collect": "collect", "compare": "compare", "db": "db", "demo": "run",
    "export": "export", "gate": "gate", "import": "imports", "init": "suite", "perf": "perf",
    "policy": "policies", "power": "power", "proxy": "proxy", "replay": "replay", "report": "report",
    "rescore": "rescore", "rule": "check", "rules": "check", "run": "run", "runs": "runs",
    "schema": "schema", "sessions": "lists", "show": "show", "sim-server": "sim",
    "validate": "suite", "view": "view", "worker": "workers",
}


class _Commands(dict):
    """``main.commands``, filled on demand: a lookup imports the command's module, a
    listing (``--help``, the docs test) imports them all."""

    loaded_all = False

    def _load(self, name: str) -> None:
        if not dict.__contains__(self, name) and not self.loaded_all:
            module = COMMAND_MODULES.get(name)
            if module is not None:
                _import(module)
            if not dict.__contains__(self, name):
                self.load_all()

    def load_all(self) -> None:
        if not self.loaded_all:
            self.loaded_all = True
            _register()

    def __missing__(self, name: str):
        self._load(name)
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def get(self, name, default=None):
        self._load(name)
        return dict.get(self, name, default)

    def __contains__(self, name) -> bool:
        self._load(name)
        return dict.__contains__(self, name)

    def __iter__(self):
        self.load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load_all()
        return dict.__len__(self)

    def keys(self):
        self.load_all()
        return dict.keys(self)

    def values(self):
        self.load_all()
        return dict.values(self)

    def items(self):
        self.load_all()
        return dict.items(self)


# Commands that turn the collector back on themselves once set up (``heap.py``): those
# that play model turns when the first item is played (``live/loop.py``), ``check`` when
# its batch starts (one TEXT ends right after its verdict).  The others settle as soon
# as they are resolved.
SETTLE_LATER = frozenset({"check", "demo", "replay", "run", "worker"})


class _Group(click.Group):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        if name not in SETTLE_LATER:
            heap.settle()
        return name, command, rest

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AgentEvalError as exc:
            from agent_eval.cli.terminal import escape_terminal  # server text may be hostile

            click.echo(f"Error: {escape_terminal(str(exc))}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-eval")
def main() -> None:
    """Measure how reliably a served model uses tools under a tight allow-list.

    Start with `agent-eval demo`.  Exit codes: {exit_codes}.
    """


main.help = (main.help or "").replace("{exit_codes}", exit_codes_text(short=True))


def _import(module: str) -> None:
    import importlib

    importlib.import_module(f"{__name__}.{module}")


def _register() -> None:
    """Import every command module (each registers its commands on ``main``)."""
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        _import(mod.name)
