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


def rule_code(value: str, field: str) -> str:
    """The code of the rule ``value`` names (a code in any case, or a rule name such as
    ``pipe-to-filter``); a ConfigError saying "no such code" with a did-you-mean when it
    names none."""
    from agent_eval.errors import ConfigError
    from agent_eval.policy import find_rule, near_rules

    found = find_rule(value)
    if found is not None:
        return found.code
    near = near_rules(value)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ConfigError(f"no such code or rule name {value!r}: {hint}`agent-eval rules` lists "
                      "them", field=field)


def known_name(value: str, known: list[str], what: str, field: str) -> str:
    """``value`` when it is one of ``known`` (a run's targets, scenarios); otherwise a
    ConfigError "no such target" naming the nearest and the ones there are."""
    import difflib

    from agent_eval.errors import ConfigError

    if value in known:
        return value
    near = difflib.get_close_matches(value, known, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    listed = ", ".join(sorted(known)[:12]) + (", …" if len(known) > 12 else "")
    raise ConfigError(f"no such {what} {value!r}: {hint}this run has: {listed or 'none'}",
                      field=field)
