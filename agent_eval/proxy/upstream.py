"""What the proxy's upstream says of its serving stack, read once when the proxy starts.

The relay never changes, blocks or delays a byte of the user's traffic, so the proxy
cannot ask its upstream anything on a user's request.  Before it relays anything, the
recorder asks the upstream itself, once: llama.cpp's ``/props`` (its build and chat
template), vLLM's ``/version``, ``/v1/models`` (the ``Server`` header, ``owned_by``, the
served model ids), one short attempt each, with no credentials (the URL is the public one:
``relay.public_url``; the user's ``Authorization`` is never reused), each tagged
``X-Agent-Eval-Side-Request: stack-fingerprint`` so the upstream's logs (and a test's
capture) tell them from the user's requests.  A server that
answers none of them, or wants a key for them, is no fault: nothing is known then.

:func:`upstream_stack` gives what a live run stores of a target's server
(``live.stackprint.served_stack``) and the call markers of the format the upstream's chat
template writes, or that the operator's notes name (``--stack-parser``,
``--stack-template``: they win, as a target's ``stack`` notes do in a run): markup in that
format left in a reply's text is the parser's failure (AE511), other markup the model's
(AE104).
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_eval.live.stackprint import served_stack
from agent_eval.proxy.parity import SIDE_HEADER
from agent_eval.wire.markup import notes_markers, template_markers

__all__ = ["UpstreamStack", "read_identity", "upstream_stack"]

FINGERPRINT_TAG = "stack-fingerprint"
"""The start-up questions' ``SIDE_HEADER`` value (``proxy.parity`` tags its twins so)."""

ASK_TIMEOUT_S = 3.0
"""How long the proxy waits for each of its three questions at start, at most."""


@dataclass(frozen=True)
class UpstreamStack:
    """The upstream's stack as the proxy read it at start."""

    stack: dict[str, Any] = field(default_factory=dict)  # as a run's fingerprint keeps one
    markers: frozenset[str] | None = None  # the template's call format (AE511); None: unknown


def read_identity(upstream: str, *, timeout_s: float = ASK_TIMEOUT_S
                  ) -> tuple[dict[str, Any], Any]:
    """``(identity, models)`` as ``live.client.ModelClient.server_identity`` and
    ``list_models`` give them, asked of ``upstream`` (a base URL such as
    ``http://h:8080/v1``); whatever fails is left out.  Never raises."""
    base = upstream.partition("?")[0].rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    identity: dict[str, Any] = {}
    models: Any = None
    for key, url in (("models", base + "/models"), ("props", root + "/props"),
                     ("version", root + "/version")):
        try:
            asked = urllib.request.Request(url, headers={"Accept": "application/json",
                                                         SIDE_HEADER: FINGERPRINT_TAG})
            with _OPENER.open(asked, timeout=timeout_s) as answer:
                if key == "models":
                    identity["server_header"] = answer.headers.get("server")
                raw = answer.read(MAX_ANSWER_BYTES + 1)
        except Exception:  # unreachable, refused, timed out, not 200: left out
            continue
        if len(raw) > MAX_ANSWER_BYTES:
            continue
        with contextlib.suppress(ValueError, RecursionError):
            body = json.loads(raw)
            if isinstance(body, dict):
                if key == "models":
                    models = body
                else:
                    identity[key] = body
    return identity, models


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # a chat template is a few kB; /props with it tens


def upstream_stack(upstream: str, notes: Mapping[str, str] | None = None, *,
                   ask: bool = True) -> UpstreamStack:
    """The upstream's stack (module docstring); ``ask``: False reads nothing from the
    upstream (the notes alone)."""
    identity, models = read_identity(upstream) if ask else ({}, None)
    stack = served_stack(identity, models)
    if notes:
        stack["notes"] = dict(notes)
    markers = notes_markers(dict(notes or {}))
    if markers is None:
        props = identity.get("props")
        markers = template_markers(props.get("chat_template") if isinstance(props, dict)
                                   else None)
    return UpstreamStack(stack, markers)
