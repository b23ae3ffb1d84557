"""Invisible and format characters are refused by Unicode property, wherever the engine
judges text: in a bash command, in a read path, in every key and string of a call.

The code points are the ones a crafted set got allowed before the rule was a property
(it was a list of control characters); ordinary non-ASCII text stays allowed.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import check_call, check_command, check_read
from agent_eval.policy.characters import find_hidden

RALF = allowlist_named("ralf")
PERMISSIVE = allowlist_named("permissive")
SEARCH = "uv run scripts/embedding_search.py --query "


def _span(low: int, high: int) -> list[int]:
    return list(range(low, high + 1))


ALLOWED_BEFORE = [
    0x061C, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5, *_span(0x180B, 0x180E),
    *_span(0x206A, 0x206F), 0x2065, *_span(0xFE00, 0xFE0F), *_span(0xE0100, 0xE01EF),
    *_span(0xE0000, 0xE007F), *_span(0xFFF9, 0xFFFB), 0x00AD, 0x034F,
    *_span(0x1BCA0, 0x1BCA3), *_span(0x1D173, 0x1D17A),
]


def test_every_invisible_character_found_allowed_is_refused_in_a_command():
    allowed = [f"U+{c:04X}" for c in ALLOWED_BEFORE
               if check_command(f"{SEARCH}invoice{chr(c)}", RALF).primary != "AE202"]
    assert not allowed


def test_every_invisible_character_found_allowed_is_refused_in_a_read_path():
    allowed = [f"U+{c:04X}" for c in ALLOWED_BEFORE
               if check_read(f"docs/.e{chr(c)}nv", RALF).primary != "AE202"]
    assert not allowed


def test_every_invisible_character_found_allowed_is_refused_in_a_call_value():
    allowed = [f"U+{c:04X}" for c in ALLOWED_BEFORE
               if check_call("web_search", json.dumps({"query": f"x{chr(c)}y"}),
                             PERMISSIVE).primary != "AE202"]
    assert not allowed


def test_a_hidden_character_in_a_key_is_refused():
    arguments = '{"command": "uv run scripts/lights.py status", "n\\u00adote": "x"}'
    verdict = check_call("bash", arguments, RALF)
    assert verdict.primary == "AE105" and "AE202" in {f.code for f in verdict.findings}


def test_the_span_points_at_the_tag_characters():
    command = f"{SEARCH}invoice\U000E0069\U000E0067\U000E006E"
    [finding] = check_command(command, RALF).findings
    assert (finding.code, finding.start) == ("AE202", len(SEARCH) + len("invoice"))
    assert "U+E0069" in finding.message


@pytest.mark.parametrize("code", [0x110BD, 0x13430, 0x0600, 0x2028, 0x2029, 0xE000, 0xF8FF,
                                  0x0378, 0xD800, 0xDFFF],
                         ids=lambda c: f"U+{c:04X} {unicodedata.category(chr(c))}")
def test_the_rule_is_a_property_not_a_list(code):
    """Format characters no list named, separators, private use, unassigned, surrogates."""
    assert check_command(f"{SEARCH}'a{chr(code)}b'", RALF).primary == "AE202"


@pytest.mark.parametrize("text", ["\u0301x", "'\u0301x'", "a \u0301", "a'\u0308'"], ids=repr)
def test_a_combining_mark_with_no_base_is_refused(text):
    assert check_command(SEARCH + text, RALF).primary == "AE202"


@pytest.mark.parametrize("command", [
    SEARCH + "'Zoë Müller'",
    SEARCH + "'Grüße aus Köln'",
    SEARCH + "東京",
    SEARCH + "'nai\u0308ve cafe\u0301'",
    SEARCH + "'10 € — “quoted” ‘text’'",
    SEARCH + "'\U0001F600 done'",
    SEARCH + "'a\u00a0b'",
    "uv run scripts/drafts.py create --to 'Zoë' --subject 'Grüße' --body 'line one\nline two'",
], ids=repr)
def test_ordinary_non_ascii_text_stays_allowed(command):
    assert check_command(command, RALF).allowed


def test_ordinary_non_ascii_text_in_a_call_value_stays_allowed():
    arguments = json.dumps({"query": "Zoë's Grüße,\tnaïve\n東京"}, ensure_ascii=False)
    assert check_call("web_search", arguments, PERMISSIVE).allowed


def test_a_lone_surrogate_cannot_be_encoded_and_is_refused():
    assert check_command(f"{SEARCH}a\ud800b", RALF).primary == "AE202"
    arguments = '{"command": "uv run scripts/embedding_search.py --query a\\ud800b"}'
    assert check_call("bash", arguments, RALF).primary == "AE202"


@pytest.mark.parametrize(("text", "allowed", "found"), [
    ("a\tb\nc", "\t\n", None),
    ("a\tb", "", 1),
    ("a\rb", "\t\n", 1),
    ("a\x85b", "\t\n", 1),
    ("ab\u200b", "", 2),
    ("é\u0301", "", None),
], ids=repr)
def test_find_hidden_reports_the_first_refused_index(text, allowed, found):
    hit = find_hidden(text, allowed)
    assert (hit[0] if hit else None) == found
