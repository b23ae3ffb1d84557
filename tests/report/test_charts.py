"""The inline SVG charts hold every label as text an XML parser accepts: markup escaped,
and control characters (an ESC from a terminal colour code in a target name, a NUL, a
C1 control) shown as their visible symbol, never written raw."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from agent_eval.metrics import summarize
from agent_eval.report.charts import change_chart, class_chart, error_chart, svg_text
from agent_eval.transcript import CallRow, SessionRow
from agent_eval.view.trend import trend_chart

HOSTILE = "qwen\x1b[31m<b>red</b>\x1b[0m\x00\x07\x7f\x85\ud800"
SHOWN = "qwen␛[31m&lt;b&gt;red&lt;/b&gt;␛[0m␀␇␡\ufffd\ufffd"


def _summaries(target: str) -> dict:
    sessions = [SessionRow(id=i, run_id=1, target=target, scenario="s", repeat=0,
                           status="completed", error=None, parent_id=None, tags=(),
                           handshake_required=0, handshake_done=0, handshake_completed=False,
                           handshake_missed_step=None, n_turns=1, n_messages=2, n_calls=0,
                           started_at=None, finished_at=None) for i in range(2)]
    calls = [CallRow(session_id=i % 2, run_id=1, target=target, scenario="s", index=i,
                     turn_index=0, tool="bash", decision="deny" if i < 3 else "allow",
                     primary="AE301" if i < 3 else None,
                     next_action="pivot" if i < 3 else None) for i in range(20)]
    return summarize(sessions, calls, by="target")


def _charts() -> dict[str, str]:
    s = _summaries(HOSTILE)
    return {"class": str(class_chart(s)), "error": str(error_chart(s)),
            "change": str(change_chart([(HOSTILE, 1.0, -0.5, 2.5)])),
            "trend": str(trend_chart(HOSTILE, [s, s], [(1, HOSTILE), (2, "2026-11-29")]))}


@pytest.mark.parametrize("chart", ["class", "error", "change", "trend"])
def test_a_chart_writes_no_control_character_and_parses_as_xml(chart):
    svg = _charts()[chart]
    assert not [c for c in svg if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f
                or 0xd800 <= ord(c) <= 0xdfff]
    ET.fromstring(svg)  # raw ESC or NUL is not XML: this raised on them
    assert "<b>" not in svg


@pytest.mark.parametrize("chart", ["class", "error", "change", "trend"])
def test_a_label_shows_each_control_character_as_its_symbol(chart):
    assert SHOWN in _charts()[chart]


def test_svg_text_maps_controls_to_symbols_and_escapes_markup():
    assert svg_text("a\tb\nc\x1bd\x9be") == "a␉b␊c␛d\ufffde"
    assert svg_text('"<&>\'') == "&quot;&lt;&amp;&gt;&#x27;"
    assert svg_text("Élan ✓") == "Élan ✓"
