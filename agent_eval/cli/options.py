"""Option types shared by several commands, declared once.

``ALLOWLIST`` is the one way a command reads ``--allowlist``: a file that exists is taken
as it is; otherwise a bundled allow-list's name (``ralf``) or its path in a clone
(``allowlists/ralf.yaml``) reaches the bundled file wherever agent-eval is installed
(``scenario.bundled.find_allowlist``).  An unknown name comes back unchanged, for the
loader's one-line error naming the file.
"""

from __future__ import annotations

from pathlib import Path

import click


class AllowlistPath(click.ParamType):
    name = "allowlist"

    def convert(self, value, param, ctx) -> Path:
        from agent_eval.scenario.bundled import find_allowlist

        return find_allowlist(value)


ALLOWLIST = AllowlistPath()
