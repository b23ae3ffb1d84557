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
from typing import TYPE_CHECKING

from agent_eval.errors import ConfigError

if TYPE_CHECKING:
    from agent_eval.policy.sources import ResolvedPolicy

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


def find_allowlist(path: str | Path) -> Path:
    """``path`` itself when it exists; otherwise the bundled allow-list it names, so the
    README's ``--allowlist allowlists/ralf.yaml`` (or just ``ralf``) works from any folder
    after a wheel install.  An unknown name comes back unchanged, for the loader's error.

    >>> find_allowlist("allowlists/ralf.yaml").name
    'ralf.yaml'
    """
    return _existing_or_bundled(Path(path), "allowlists", ".yaml", is_dir=False)


def load_policy(path: str | Path, agent: str | None = None) -> ResolvedPolicy:
    """The one loader of every ``--allowlist`` (``run`` and suites, ``proxy``, ``import``,
    ``rescore``, ``check``, ``replay``): an agent-eval allow-list (found as
    :func:`find_allowlist` finds it) or an agent CLI's configuration (``opencode.json``,
    Claude Code ``settings.json``, Codex ``.rules``), with ``agent`` picking one agent of
    it; a ``policy.sources.ResolvedPolicy``.  Anything unreadable is one ConfigError."""
    from agent_eval.policy.sources import resolve_policy

    return resolve_policy(find_allowlist(path), agent)


def find_suite(path: str | Path) -> Path:
    """``path`` itself when it exists; otherwise the bundled suite it names
    (``scenarios/ralf`` or ``ralf``)."""
    return _existing_or_bundled(Path(path), "scenarios", "", is_dir=True)


def _existing_or_bundled(path: Path, folder: str, suffix: str, *, is_dir: bool) -> Path:
    if path.exists():
        return path
    parts = path.parts
    if len(parts) == 2 and parts[0] == folder:
        parts = parts[1:]
    if len(parts) != 1:
        return path
    name = parts[0].removesuffix(suffix) if suffix else parts[0]
    bundled = data_dir() / folder / f"{name}{suffix}"
    found = bundled.is_dir() if is_dir else bundled.is_file()
    return bundled if found else path
