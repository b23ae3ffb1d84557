"""Errors, sorted by whose fault they are.

The model's mistakes are never exceptions: they are data (findings on a verdict,
session exit states). Exceptions are for the operator and for the world around the run::

    AgentEvalError                 base; the CLI prints ``Error: <message>`` and exits
    ├── ConfigError                the operator's mistake: a bad file, field or option.
    │                              Names the file, the field and the fix.  Exit code 2.
    └── HarnessFault               the world's fault, not the model's: a model server
        │                          that is unreachable, crashed, hung or answered garbage.
        │                          Recorded on the session as status="error" and excluded
        │                          from every model rate.  Exit code 3 at the CLI.
        ├── ServerUnreachable      no server answered at the base URL at all.
        └── RequestRejected        the server refuses this request the same way every
            │                      time (a 4xx, or a 5xx repeated word for word):
            │                      retrying cannot help; the request or the server's
            │                      launch flags must change.
            └── ContextExceeded    the request does not fit the server's context window.
                                   On a session's first turn a refusal like any other;
                                   on a later turn the orchestrator ends the session
                                   ``stalled`` (the conversation outgrew a limit), not
                                   ``error``.

This module imports nothing from the package, so every stage (``policy/`` included)
may raise these.
"""

from __future__ import annotations


class AgentEvalError(Exception):
    """Base of every error agent-eval raises on purpose."""

    exit_code = 1


class ConfigError(AgentEvalError):
    """A bad input file, field or option.  The message says which, and what to do."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None):
        self.path = path
        self.field = field
        where = ""
        if path and field:
            where = f"{path}: {field}: "
        elif path:
            where = f"{path}: "
        elif field:
            where = f"{field}: "
        super().__init__(where + message)


class HarnessFault(AgentEvalError):
    """A fault of the model server or the harness, never counted against the model.
    ``status``: the HTTP status of the server's last answer, when it answered one."""

    exit_code = 3
    status: int | None = None
    server_message: str = ""


class ServerUnreachable(HarnessFault):
    """Nothing answered at the model server's base URL."""


class RequestRejected(HarnessFault):
    """The server refused the request deterministically.  ``status`` is the HTTP status,
    ``server_message`` the server's own words (for the one line that stops a target)."""

    def __init__(self, message: str, *, status: int, server_message: str):
        self.status = status
        self.server_message = server_message
        super().__init__(message)


class ContextExceeded(RequestRejected):
    """The server's context window cannot hold the request.  ``context`` and ``prompt``
    are the window and the prompt in tokens, when the server's words give them."""

    def __init__(self, message: str, *, status: int, server_message: str,
                 context: int | None = None, prompt: int | None = None,
                 writing: bool = False):
        self.context = context
        self.prompt = prompt
        self.writing = writing  # the reply being written filled it, not the prompt
        super().__init__(message, status=status, server_message=server_message)
