"""Tool-call markup in reply text: the markers servers' chat templates write a call in.

A model served without a tool parser (or whose parser missed the call) leaves its call in
the reply's text as its chat template wrote it: ``<tool_call>{...}</tool_call>`` (Hermes,
Qwen), ``[TOOL_CALLS]`` (Mistral), ``<|python_tag|>`` (Llama 3.x), DeepSeek's and Kimi's
tokens, or a shell block.  :func:`find_tool_markup` finds those spans (the policy's AE104,
a call the harness cannot run); the format tables say which markers a template, a named
parser (vLLM's ``--tool-call-parser``) or the operator's stack notes write, so a stack
check can tell the template's own format left unparsed (AE511, ``policy/stack.py``) from
a model writing some other format.  Pure; never raises.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PARSER_FORMATS", "TEMPLATE_FORMATS", "find_tool_markup", "markup_opener",
           "notes_markers", "parser_markers", "template_markers"]

# Tool-call markup that servers emit when their parser did not take the call out of the
# text: an opening marker and, when the format has one, its closing marker.
_MARKUP: tuple[tuple[str, str | None], ...] = (
    ("<tool_call>", "</tool_call>"),  # Hermes / Qwen
    ("<function=", "</function>"),  # qwen3_coder
    ("<|tool_call|>", "<|/tool_call|>"),
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),  # Kimi
    ("<|tool_call_begin|>", "<|tool_call_end|>"),
    ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),  # DeepSeek
    ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"),
    ("<tool_calls>", "</tool_calls>"),
    ("<function_calls>", "</function_calls>"),
    ("<|python_tag|>", "<|eom_id|>"),  # Llama 3.x
    ("[TOOL_CALLS]", None),  # Mistral
    # A shell block in a reply that has no parsed tool call: the command the model meant to
    # run (models served without a tool parser, or chat templates without tools).
    ("```bash", "```"), ("```shell", "```"), ("```sh\n", "```"), ("```console", "```"),
)
_OPENERS = re.compile("|".join(re.escape(o) for o, _ in _MARKUP))
_CLOSER = dict(_MARKUP)


def find_tool_markup(text: str) -> list[tuple[int, int]]:
    """Spans ``(start, end)`` of tool-call markup left in reply text (rule AE104).

    A span runs from an opening marker to its closing marker, or to the end of the text
    when the call was never closed.  Spans are sorted and never overlap (a
    ``<function=...>`` inside a ``<tool_call>`` is one span).  Prose that merely talks
    about tool calls has no markers, so no spans.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _OPENERS.search(text, pos)) is not None:
        closer = _CLOSER[m.group()] or "\n"  # no closing marker: the call ends its line
        end = text.find(closer, m.end())
        end = len(text) if end < 0 else end + (len(closer) if closer != "\n" else 0)
        spans.append((m.start(), end))
        pos = max(end, m.end())
    return spans


TEMPLATE_FORMATS: dict[str, tuple[str, ...]] = {
    # a call format: the markers its chat template writes a call in (and its parser reads)
    "hermes": ("<tool_call>",),  # Hermes, Qwen2.5/3 (vLLM ``hermes``)
    "qwen3_coder": ("<tool_call>", "<function="),  # Qwen3-Coder XML (``qwen3_coder``)
    "mistral": ("[TOOL_CALLS]",),
    "llama3": ("<|python_tag|>",),
    "deepseek": ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"),
    "kimi": ("<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
    "granite": ("<|tool_call|>",),
}
PARSER_FORMATS: dict[str, str] = {
    # vLLM's ``--tool-call-parser`` names (SGLang's alike) -> the format the parser reads
    "hermes": "hermes", "qwen25": "hermes", "qwen": "hermes", "qwen3_coder": "qwen3_coder",
    "qwen3_xml": "qwen3_coder", "mistral": "mistral", "llama3_json": "llama3",
    "llama4_json": "llama3", "llama3": "llama3", "deepseek_v3": "deepseek",
    "deepseek_v31": "deepseek", "deepseekv3": "deepseek", "kimi_k2": "kimi", "granite": "granite",
}


def template_markers(template: str | None) -> frozenset[str] | None:
    """The call markers a chat template's text writes (llama.cpp's ``/props``
    ``chat_template``), or None when there is no template text to read.  A template that
    writes none of the known formats gives the empty set: then any markup in a reply is
    the model's own format, not the template's."""
    if not isinstance(template, str) or not template:
        return None
    return frozenset(m for markers in TEMPLATE_FORMATS.values() for m in markers
                     if m in template)


def parser_markers(name: str | None) -> frozenset[str] | None:
    """The markers of the format a named parser (or template note: ``hermes``,
    ``qwen3_coder``, ``mistral``...) reads; None for a name that names no known format."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("-", "_")
    fmt = PARSER_FORMATS.get(key) or (key if key in TEMPLATE_FORMATS else None)
    return frozenset(TEMPLATE_FORMATS[fmt]) if fmt is not None else None


def notes_markers(notes: Any) -> frozenset[str] | None:
    """The markers of the format the operator's stack notes name (``parser`` first, then
    ``template``: a mapping or anything with those attributes), or None when neither names
    a known format: then the server's own template decides, else nothing does."""
    if notes is None:
        return None

    def note(key: str) -> Any:
        return notes.get(key) if isinstance(notes, dict) else getattr(notes, key, None)

    return parser_markers(note("parser")) or parser_markers(note("template"))


def markup_opener(text: str, start: int) -> str:
    """The marker a markup span of :func:`find_tool_markup` starts with."""
    return next((o for o, _ in _MARKUP if text.startswith(o, start)), "")
