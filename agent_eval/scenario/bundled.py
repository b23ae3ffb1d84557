"""The suite and allow-lists that ship with agent-eval, found wherever it is installed.

The repository keeps them at the top level (``scenarios/``, ``allowlists/``: the files
users read and edit); ``agent_eval/data/`` links to both, so an editable install reads
the checkout and a wheel carries copies as package data.  Either way they are reached
through ``importlib.resources``, never through a path relative to the source tree.

Example::

    from agent_eval.scenario.bundled import bundled_suite, bundled_allowlist
    load_suite(bundled_suite())            # .../agent_eval/data/scenarios/ralf
    bundled_allowlist("permissive")        # .../agent_eval/data/allowlists/permissive.yaml
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from agent_eval.errors import ConfigError

BUNDLED_SUITE_NAME = "ralf"


def data_dir() -> Path:
    """The installed ``agent_eval/data`` folder (a real folder: wheels install unzipped)."""
    return Path(str(resources.files("agent_eval") / "data"))


def bundled_suite(name: str = BUNDLED_SUITE_NAME) -> Path:
    """The folder of a bundled suite (default ``ralf``)."""
    path = data_dir() / "scenarios" / name
    if not path.is_dir():
        raise ConfigError(
            f"bundled suite {name!r} is missing from this installation; reinstall agent-eval",
            path=str(path),
        )
    return path


def bundled_allowlist(name: str) -> Path:
    """A bundled allow-list file by name (``ralf``, ``permissive``)."""
    path = data_dir() / "allowlists" / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in (data_dir() / "allowlists").glob("*.yaml"))
        raise ConfigError(
            f"no bundled allow-list {name!r}; bundled: {', '.join(names) or 'none'}",
            path=str(path),
        )
    return path
