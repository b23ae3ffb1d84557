"""Tool-call markup left in reply text (``wire/markup.py``): the spans of AE104, and the
markers a chat template, a named parser or the operator's stack notes write."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.real_corpora import need

from agent_eval.wire.markup import (
    find_tool_markup,
    markup_opener,
    notes_markers,
    parser_markers,
    template_markers,
)

MARKUP_CASES = {
    "qwen-hermes": ('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>', 1),
    "qwen3-coder": ("<function=bash><parameter=command>ls</parameter></function>", 1),
    "qwen3-coder-in-tool-call": (
        "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>", 1),
    "unclosed-tool-call": ('I will list.\n<tool_call>\n{"name": "bash"', 1),
    "pipe-token": ('<|tool_call|>{"name": "bash"}<|/tool_call|>', 1),
    "mistral": ('[TOOL_CALLS][{"name": "bash", "arguments": {"command": "ls"}}]', 1),
    "two-calls": ("<tool_call>{}</tool_call> and <tool_call>{}</tool_call>", 2),
    "prose-about-tool-calls": ("I will make a tool call to run the script, then report the tool_call result.", 0),
    "prose-about-functions": ("The function update_stage_status moves the stage to awaiting_eval.", 0),
    "html-in-prose": ("Use <b>bold</b> and <code>uv run</code>.", 0),
}


@pytest.mark.parametrize("text, count", MARKUP_CASES.values(), ids=MARKUP_CASES.keys())
def test_find_tool_markup(text, count):
    spans = find_tool_markup(text)
    assert len(spans) == count
    for start, end in spans:
        assert text[start] in "<[" and start < end <= len(text)


def test_markup_span_covers_the_whole_call_and_nothing_around_it():
    text = 'Before. <tool_call>{"name": "bash"}</tool_call> After.'
    [(start, end)] = find_tool_markup(text)
    assert text[start:end] == '<tool_call>{"name": "bash"}</tool_call>'


@given(st.text(alphabet=st.sampled_from(list("<>|/[]_=tool_callfunction{}\n x")), max_size=80))
def test_markup_spans_are_sorted_disjoint_and_inside_the_text(text):
    spans = find_tool_markup(text)
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_real_format_error_replies_carry_only_fenced_shell_markup():
    corpus = need("real-tool-calls.jsonl")
    replies = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if '"__format_error__"' in line:
                replies.append(json.loads(line)["command"] or "")
    assert len(replies) >= 100
    # mini-swe-agent speaks a text protocol: its replies hold fenced bash blocks, which a
    # live run (tools offered, no call parsed) counts as AE104 on purpose.  Its prose
    # never trips a server's tool-call marker.
    marked = [r[s:e][:40] for r in replies for s, e in find_tool_markup(r)]
    assert marked, "the fenced shell blocks of a text-protocol agent are found"
    assert [m for m in marked if not m.startswith("```")] == []


def test_markup_opener_names_the_marker_a_span_starts_with():
    text = "ok <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash<｜tool▁call▁end｜>"
    [(start, _)] = find_tool_markup(text)
    assert markup_opener(text, start) == "<｜tool▁calls▁begin｜>"
    assert markup_opener(text, 0) == ""


def test_a_template_writes_the_markers_of_its_format_and_none_for_no_template():
    qwen = "{%- if tools %}<tools>{{ tools }}</tools>{% endif %}<tool_call>\n{{ call }}</tool_call>"
    assert template_markers(qwen) == frozenset({"<tool_call>"})
    assert template_markers("{{ messages }}") == frozenset()  # no known format: the model's own
    assert template_markers("") is None and template_markers(None) is None


@pytest.mark.parametrize("name, marker", [
    ("hermes", "<tool_call>"), ("qwen3-coder", "<function="), ("Mistral", "[TOOL_CALLS]"),
    ("llama3_json", "<|python_tag|>"), ("kimi_k2", "<|tool_call_begin|>")])
def test_a_parser_name_reads_its_formats_markers(name, marker):
    assert marker in (parser_markers(name) or ())


def test_notes_name_the_parser_first_then_the_template_and_nothing_unknown():
    assert notes_markers({"parser": "mistral", "template": "hermes"}) == {"[TOOL_CALLS]"}
    assert notes_markers({"parser": "nonesuch", "template": "hermes"}) == {"<tool_call>"}
    assert notes_markers({"parser": "nonesuch"}) is None
    assert notes_markers(None) is None and parser_markers(3) is None  # type: ignore[arg-type]
