"""agent-eval: measure how reliably a served model uses tools under a tight allow-list."""

__version__ = "0.1.0"
