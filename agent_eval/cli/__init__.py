"""The ``agent-eval`` command line: thin commands over the library.

Each command parses options, calls one library function and formats the result.  Its
docstring is its ``--help``.  Exit codes (documented once, here and in README):

    0  ok (``check``: the call is allowed)
    1  gate failed (``gate``), or the checked call is denied (``check``)
    2  usage or config error: a bad option, file, field or value
    3  model server unreachable, or a harness fault

Every ``AgentEvalError`` becomes one ``Error: ...`` line on stderr and its exit code;
never a traceback.  Commands live in one module per area and register on ``main``.
"""

from __future__ import annotations

import sys

import click

from agent_eval import __version__
from agent_eval.errors import AgentEvalError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_FAULT = 0, 1, 2, 3


class _Group(click.Group):
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

    Start with `agent-eval demo`.  Exit codes: 0 ok, 1 gate failed (or a checked call
    denied), 2 usage or config error, 3 model server unreachable or harness fault.
    """


def _register() -> None:
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")


_register()
