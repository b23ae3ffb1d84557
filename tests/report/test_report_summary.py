"""summary.json keys and values, junit.xml verdicts, summary.md tables."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from agent_eval.report.ci_files import SUMMARY_KEYS


def _summary(report) -> dict:
    return json.loads((report / "summary.json").read_text(encoding="utf-8"))


def test_summary_json_has_the_documented_keys_and_schema_version(hostile_report):
    data = _summary(hostile_report)
    assert tuple(data) == SUMMARY_KEYS
    assert data["schema_version"] == 1
    assert data["columns"] == ["careful", "sloppy"]


def test_summary_json_counts_match_the_stored_sessions(hostile_report):
    careful = _summary(hostile_report)["targets"]["careful"]
    assert (careful["sessions"], careful["tool_calls"], careful["errors"]) == (3, 4, 1)
    assert careful["errors_per_100"] == 25.0
    assert careful["errors_per_100_ci95"] == [4.56, 69.94]
    assert careful["classes"]["AE301"] == {"errors": 1, "per_100": 25.0, "ci95": [4.56, 69.94]}
    assert careful["recovery"]["pivot"] == 100.0


def test_summary_json_keeps_faulted_sessions_out_of_rates(hostile_report):
    sloppy = _summary(hostile_report)["targets"]["sloppy"]
    assert sloppy["error_sessions"] == 1 and sloppy["sessions"] == 1
    assert sloppy["tool_calls"] == 1
    assert sloppy["handshake"]["completed"] == 0
    assert sloppy["handshake"]["most_missed_step"] == "update_attempt_outcome.py"


def test_summary_json_names_the_statistics(hostile_report):
    stats = _summary(hostile_report)["statistics"]
    assert stats["interval"] == "Wilson score interval, 95%"
    assert stats["comparison"].startswith("two-proportion z-test")
    assert stats["check"].startswith("Fisher's exact test")


def _junit_cases(report) -> dict[str, ET.Element]:
    root = ET.parse(report / "junit.xml").getroot()
    return {case.get("classname"): case for case in root.iter("testcase")}


def test_junit_fails_exactly_denied_and_missed_handshake_sessions(hostile_report):
    cases = _junit_cases(hostile_report)
    failed = sorted(name for name, c in cases.items() if c.find("failure") is not None)
    assert failed == ["careful.xss", "sloppy.handshake"]
    failure = cases["careful.xss"].find("failure")
    command = "uv run scripts/db_query.py --sql \"SELECT '<script>alert(1)</script>'\" | head -5"
    assert failure.get("message") == f"AE301 pipe-to-filter: call 0: {command}"
    [session_id] = [c.get("name").split("(session ")[1].rstrip(")")
                    for n, c in cases.items() if n == "careful.xss"]
    assert failure.text.splitlines() == ["1 tool call denied",
                                         f"AE301 pipe-to-filter: call 0: {command}",
                                         f"open it: agent-eval show 1 {session_id}"]
    assert "missed update_attempt_outcome.py" in cases["sloppy.handshake"].find("failure").text


def test_junit_reports_a_server_fault_as_error_not_failure(hostile_report):
    case = _junit_cases(hostile_report)["sloppy.fault"]
    assert case.find("failure") is None
    assert case.find("error").get("message").startswith("server answered 500")


def test_junit_suite_counts(hostile_report):
    root = ET.parse(hostile_report / "junit.xml").getroot()
    suites = {s.get("name"): (s.get("tests"), s.get("failures"), s.get("errors"))
              for s in root.iter("testsuite")}
    assert suites == {"careful": ("3", "1", "0"), "sloppy": ("2", "1", "1")}


def test_summary_markdown_has_the_target_and_class_tables(hostile_report):
    md = (hostile_report / "summary.md").read_text(encoding="utf-8")
    assert "| target | sessions | messages | tool calls | errors |" in md
    assert "| errors/100 [95% CI] | Wilson CI (calls) |" in md
    assert re.search(r"\| careful \| 3 \| 4 \| 4 \| 1 \| 25\.00 \[0\.\d–\d+\.\d\] \| "
                     r"\[4\.6–69\.9\] \|", md), md
    assert "| failure class | careful | sloppy |" in md
    row = next(line for line in md.splitlines() if line.startswith("| AE301 pipe-to-filter |"))
    lo, hi = _summary(hostile_report)["targets"]["careful"]["clustered"]["classes"]["AE301"][
        "ci95"]  # the clustered interval (as the gate reads a class), not Wilson's [4.6–69.9]
    assert row.startswith(f"| AE301 pipe-to-filter | 25.00 [{lo:.1f}–{hi:.1f}] |"), row
    assert "Wilson 95%" in md and "two-proportion z-test" in md
