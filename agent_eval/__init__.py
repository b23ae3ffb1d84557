"""agent-eval: measure how reliably a served model uses tools under a tight allow-list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"


def lazy_attributes(package: str, home: dict[str, str], namespace: dict[str, Any]
                    ) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562): reading ``name`` the first time imports
    ``package.<home[name]>`` and keeps the value in ``namespace`` (the package's globals),
    so a package can name its public surface without importing every module of it."""

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
