"""Modules imported on first use.

scipy.stats (with numpy) takes about a second to import on these machines, and every
CLI command imports the metrics package for its tables: ``agent-eval worker``, ``check``
or ``--help`` would pay it without ever computing an interval.  ``sps.t.ppf(...)``
through a :class:`LazyModule` imports scipy.stats the first time it is called, then
costs one attribute lookup.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; imports it at the first attribute access."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


sps: Any = LazyModule("scipy.stats")
special: Any = LazyModule("scipy.special")
"""The t and normal quantiles and tails scipy.stats itself calls (``stdtrit``, ``stdtr``,
``ndtri``): half scipy.stats's import time, for the reports and pages that only need
an interval's quantile."""
np: Any = LazyModule("numpy")
