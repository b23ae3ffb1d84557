"""A server's "context length exceeded" answer, read in each server's own words.

Every server refuses a request that does not fit its context window, each in its own
words (quoted below from their sources and issues).  agent-eval reads the numbers out so
the client can do what a user expects:

- the prompt fits but the reply budget does not (vLLM counts ``max_tokens`` against the
  window): send the request again once with ``max_tokens`` cut to the room left, as the
  server itself does when ``max_tokens`` is not given;
- the reply the model was writing filled the window (llama-cpp-python's 500 below): the
  model's own run-away, so the session ends ``stalled`` on any turn;
- the prompt alone does not fit: the conversation outgrew the window.  On a later turn
  that ends the session ``stalled`` (the context is a limit, like the turns) with the
  server's words stored; on the first turn nothing the model did can be the cause, so it
  stays a refused request (``RequestRejected``) whose stop line says to lengthen the
  context.

Pure: no I/O, so every wording is tested with the exact text the server sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# (pattern, source).  Named groups: ``ctx`` the window, ``prompt`` the tokens in the messages.
_WORDINGS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.I | re.S) for p in (
    # vLLM < 0.10 and llama-cpp-python (llama_cpp/server/errors.py, code
    # context_length_exceeded): "This model's maximum context length is 2560 tokens.
    # However, you requested 2601 tokens (2577 in the messages, 24 in the completion)."
    r"maximum context length is (?P<ctx>\d+) tokens.*?\((?P<prompt>\d+) in the messages",
    # vLLM >= 0.10: "'max_tokens' or 'max_completion_tokens' is too large: 8000. This
    # model's maximum context length is 4096 tokens and your request has 2778 input
    # tokens (8000 > 4096 - 2778)." and "... However, your request has 4176 input tokens."
    r"maximum context length is (?P<ctx>\d+) tokens.*?request has (?P<prompt>\d+) input tokens",
    # llama.cpp llama-server (type exceed_context_size_error): "request (4476 tokens)
    # exceeds the available context size (4096 tokens)"
    r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<ctx>\d+) tokens\)",
    # llama-cpp-python's own ValueError, when a proxy passes it through unformatted
    r"requested tokens \((?P<prompt>\d+)\) exceed context window of (?P<ctx>\d+)",
    r"maximum context length is (?P<ctx>\d+) tokens",
    # llama-cpp-python 0.3.36 when a reply it writes reaches the very end of the window:
    # ``Llama.eval`` stores one token's logits (a row of the vocabulary's size) where no
    # row is left, numpy says so, and the server answers 500 with numpy's words (the
    # ``internal_server_error`` of llama_cpp/server/errors.py).  "into shape (0,)" is
    # exactly "no room left in the context"; any other broadcast error is not this.
    r"(?P<writing>could not broadcast input array from shape \(\d+,\) into shape \(0,\))",
    r"context_length_exceeded|exceed_context_size_error|exceeds the available context size"
    r"|context length exceeded|exceeds? (?:the )?context window",
))


@dataclass(frozen=True)
class ContextOverflow:
    """What the server said about its window: ``context`` and ``prompt`` in tokens, each
    ``None`` when its wording does not give it.  ``writing``: the prompt fitted and the
    reply being written filled the window (the model's own run-away), rather than the
    request not fitting before a token was written."""

    context: int | None = None
    prompt: int | None = None
    writing: bool = False

    @property
    def room(self) -> int | None:
        """Tokens left for the reply once the prompt is in; ``None`` when unknown."""
        if self.context is None or self.prompt is None:
            return None
        return self.context - self.prompt


def _handler_ran_away(context: int | None, prompt: int | None) -> bool:
    """llama-cpp-python's ``chatml-function-calling`` under ``auto`` writes a call's
    arguments with ``max_tokens=None``, that is up to the very end of the window, then asks
    for the next step with the arguments and a newline appended: that prompt is one token
    over the window, and the server refuses it in the "N in the messages" wording with
    exactly ``context + 1`` (2561 of 2560, 2817 of 2816 in the interop runs).  A request
    agent-eval sent that was exactly one token too long reads the same and is taken as the
    model's run-away too: one window size in thousands."""
    return context is not None and prompt == context + 1


def context_overflow(message: str) -> ContextOverflow | None:
    """The overflow a server's refusal describes, or ``None`` for any other refusal."""
    for pattern in _WORDINGS:
        m = pattern.search(message)
        if m is None:
            continue
        found = m.groupdict()
        context = int(found["ctx"]) if found.get("ctx") else None
        prompt = int(found["prompt"]) if found.get("prompt") else None
        return ContextOverflow(
            context=context, prompt=prompt,
            writing=bool(found.get("writing")) or _handler_ran_away(context, prompt),
        )
    return None
