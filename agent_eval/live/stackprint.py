"""The stack fingerprint of a target: which serving stack produced a run's replies.

A model's errors mean little without the stack that carried them: the same weights
through another tool parser, chat template, quantization or output cap lose or mangle
other calls (stack faults, rules AE5xx).  :func:`stack_fingerprint` keeps, per target,
what the server says of itself (the ``Server`` header, ``/v1/models``' ``owned_by``,
llama.cpp's ``/props`` build and chat template, hashed, vLLM's ``/version``), the tool
settings of every request (``tool_choice``, ``parallel_tool_calls``, ``stream``,
``max_tokens``) and the operator's own notes (``Target.stack``: parser, template,
quantization).  It is stored in the run's fingerprint under ``stacks`` (an existing JSON
field: no migration) and every session of the target shares it.  ``transcript.stack_changes``
says how two runs' stacks differ, for ``compare``; ``transcript.stack_line`` prints one.
Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agent_eval.live.targets import Target, tool_choice_field
from agent_eval.transcript import STACK_KEY
from agent_eval.wire.markup import template_markers

__all__ = ["STACK_KEY", "served_stack", "stack_fingerprint"]


def stack_fingerprint(target: Target, identity: Mapping[str, Any] | None = None,
                      models: Any = None) -> dict[str, Any]:
    """One target's stack (see the module docstring); ``identity`` is
    ``ModelClient.server_identity()``'s answer, ``models`` the ``/v1/models`` answer."""
    out = served_stack(identity, models)
    extra = target.extra_body or {}
    request = {
        "tool_choice": (tool_choice_field(target.tool_choice)
                        if target.tool_choice is not None else None),
        "parallel_tool_calls": extra.get("parallel_tool_calls"),
        "stream": "parity" if target.stream_parity else target.stream,
        "max_tokens": target.max_tokens,
    }
    out["request"] = {k: v for k, v in request.items() if v is not None}
    notes = target.settings().get("stack")
    if notes:
        out["notes"] = notes
    return out


def served_stack(identity: Mapping[str, Any] | None, models: Any = None) -> dict[str, Any]:
    """What a server says of its stack (``ModelClient.server_identity()``'s answer, the
    ``/v1/models`` answer): the part of a fingerprint the proxy reads of its upstream."""
    identity = identity or {}
    out: dict[str, Any] = {}
    if isinstance(identity.get("server_header"), str):
        out["server"] = identity["server_header"][:200]
    owners = _owners(models)
    if owners:
        out["owned_by"] = owners
    props = identity.get("props")
    if isinstance(props, dict):
        build = props.get("build_info")
        if isinstance(build, str):
            out["build"] = build[:200]
        template = props.get("chat_template")
        if isinstance(template, str) and template:
            out["chat_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()[:16]
            # the call markers it writes: whose format markup in a reply is (AE511/AE104)
            out["template_markup"] = sorted(template_markers(template) or ())
    version = identity.get("version")
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        out["version"] = version["version"][:100]
    return out


def _owners(models: Any) -> list[str]:
    data = models.get("data") if isinstance(models, dict) else None
    owners = {m.get("owned_by") for m in data or () if isinstance(m, dict)}
    return sorted(o[:100] for o in owners if isinstance(o, str) and o)
