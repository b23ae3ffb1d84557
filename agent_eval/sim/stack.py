"""Stack faults the simulator plays, each in one server family's style.

The model behaviour (``behaviour.py``, ``profiles.py``) decides what the model wrote; a
*stack* decides what the server then loses or mangles on the way to the wire, as the
public reports of each family describe it (rules AE5xx, ``policy/stack.py``).  So one
behaviour served through two stacks shows the same model errors and different stack
faults, which is what ``compare`` must tell apart.

A stack is chosen per request by the model name's ``+STACK`` suffix
(``sim-disciplined+llamacpp``, or ``+STACK:FAULT`` for one of its faults alone:
``+llamacpp:cut-at-cap``) or server-wide (``Faults.stack``); ``Faults.stack_rate``
is the share of requests on which one of the family's faults is played, drawn from the
conversation's own generator (the same seed, the same faults).  A fault that does not
fit the reply (a cut with no call to cut) is not played.

``vllm``      a call cut by ``max_tokens`` with finish reason ``length``; ``tool_calls``
              with the call lost (vllm-project/vllm#53255)
``llamacpp``  a call cut at ``max_tokens`` with finish reason ``tool_calls`` and the
              completion tokens at the cap (llama-cpp-python); the same call id on every
              reply; a 500 whose body says the parser failed (ggml-org/llama.cpp#20806)
``sglang``    a call cut with finish reason ``length``; a chat template token left in
              the tool name; a streamed call whose arguments differ from the whole
              reply's to the same request (speculative decoding, sgl-project/sglang#37634:
              seen by a stream-parity run only, AE510)
``ollama``    ``stop`` beside a call (ollama/ollama#16212); an empty message with 40
              completion tokens (ollama/ollama#17274); streamed calls all at index 0
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.sim.completions import Completion, WireCall

STACKS: dict[str, tuple[str, ...]] = {
    "vllm": ("cut-length", "lost-call"),
    "llamacpp": ("cut-at-cap", "repeated-id", "parser-500"),
    "sglang": ("cut-length", "template-name", "stream-differs"),
    "ollama": ("stop-with-calls", "empty-reply", "index-zero"),
}
PARSER_FAILED = "Failed to parse input at pos 0: <tool_call>"
"""The body of the simulated parser 500 (llama.cpp's words)."""


def check_stack(name: str) -> str:
    """``name`` when it is a stack (or empty: none), else a ConfigError naming them."""
    if name and name not in STACKS:
        raise ConfigError(f"unknown stack {name!r}; expected one of {', '.join(STACKS)}",
                          field="stack")
    return name


def split_model(model: object) -> tuple[object, str | None]:
    """``(model without its +STACK or +STACK:FAULT suffix, that suffix)``; None when the
    name carries no known stack."""
    if isinstance(model, str) and "+" in model:
        base, _, stack = model.rpartition("+")
        family, _, fault = stack.partition(":")
        if family in STACKS and (not fault or fault in STACKS[family]):
            return base, stack
    return model, None


def pick_fault(stack: str, rate: float, rng: random.Random, *, calls: int,
               streamed: bool) -> str | None:
    """The fault to play on this reply, or None: with probability ``rate``, one of the
    stack's faults (``STACK:FAULT``: that one) that fits a reply of ``calls`` calls
    (streamed or whole)."""
    family, _, only = stack.partition(":")
    if family not in STACKS or rate <= 0 or rng.random() >= rate:
        return None
    fits = [f for f in STACKS[family] if (not only or f == only) and _fits(f, calls, streamed)]
    return rng.choice(fits) if fits else None


def _fits(fault: str, calls: int, streamed: bool) -> bool:
    if fault == "index-zero":
        return streamed and calls >= 2
    if fault == "stream-differs":
        return streamed and calls >= 1
    if fault in ("empty-reply", "parser-500"):
        return True
    return calls >= 1


def play(done: Completion, fault: str, max_tokens: Any) -> Completion:
    """The completion as the stack mangles it (``index-zero`` is played on the chunks:
    :func:`play_on_chunks`; ``parser-500`` by the server, as an error answer)."""
    cap = max_tokens if type(max_tokens) is int and max_tokens > 0 else None
    calls = done.calls
    if fault in ("cut-length", "cut-at-cap"):
        first = calls[0]
        cut = WireCall(first.id, first.name, first.arguments[: max(1, len(first.arguments) // 2)])
        at_cap = fault == "cut-at-cap" and cap is not None
        usage = dict(done.usage, completion_tokens=cap or done.usage["completion_tokens"])
        return dataclasses.replace(done, calls=(cut,), usage=usage,
                                   finish="tool_calls" if at_cap else "length")
    if fault == "lost-call":
        return dataclasses.replace(done, calls=(), finish="tool_calls")
    if fault == "stop-with-calls":
        return dataclasses.replace(done, finish="stop")
    if fault == "empty-reply":
        reply = dataclasses.replace(done.reply, reasoning="", content="", calls=())
        return dataclasses.replace(done, reply=reply, calls=(), finish="stop",
                                   usage=dict(done.usage, completion_tokens=40))
    if fault == "repeated-id":
        return dataclasses.replace(done, calls=tuple(WireCall("call_0", c.name, c.arguments)
                                                     for c in calls))
    if fault == "stream-differs":
        first = calls[0]
        return dataclasses.replace(done, calls=(WireCall(first.id, first.name,
                                                         _other_value(first.arguments)),
                                                *calls[1:]))
    if fault == "template-name":
        first = calls[0]
        return dataclasses.replace(done, calls=(WireCall(first.id, first.name + "<|im_end|>",
                                                         first.arguments), *calls[1:]))
    return done


def play_on_chunks(chunks: list[dict[str, Any]], fault: str | None) -> list[dict[str, Any]]:
    """``index-zero``: every streamed tool-call delta at index 0 (the rest unchanged)."""
    if fault != "index-zero":
        return chunks
    for chunk in chunks:
        for choice in chunk.get("choices") or ():
            for tc in (choice.get("delta") or {}).get("tool_calls") or ():
                tc["index"] = 0
    return chunks


def _other_value(arguments: str) -> str:
    """The arguments with their first string value's last word dropped (still whole
    JSON): what a streamed path that decoded other tokens serves."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments + " "
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                head, _, _ = item.rpartition(" ")
                value[key] = head or item + "x"
                return json.dumps(value)
    return json.dumps([value])
