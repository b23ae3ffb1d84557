"""The gate's result as text: terminal lines, Markdown and JUnit XML.

Renders a :class:`agent_eval.analysis.gate.GateResult`; pure, no I/O (the CLI writes the
files).  Target names come from config files and are escaped for Markdown and XML.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent_eval.analysis.gate import CheckStatus, GateResult, number_text
from agent_eval.linewrap import fit_lines

_MARK: dict[CheckStatus, str] = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE",
                                 "skip": "SKIP"}


def render_gate_text(result: GateResult, *, title: str | None = None,
                     width: int | None = None) -> str:
    """Plain terminal lines: one per check with its numbers, each method once, then the
    verdict; a line longer than ``width`` wraps between words under its own start."""
    lines = title.splitlines() if title else []  # a sequential run's line stays its own
    lines += list(result.leading)  # the stack's rise, before anything about the model
    for check in result.checks:
        lines.append(f"{_MARK[check.status]}  {check.target}: {check.name}: {check.detail}")
        lines += [f"    {lead}" for lead in check.leads]
    lines += [f"method ({name}): {method}" for name, method in methods_used(result)]
    lines.append(_verdict(result))
    return "\n".join(fit_lines(lines, width)) + "\n"


def methods_used(result: GateResult) -> list[tuple[str, str]]:
    """Each distinct method once, in check order, with the names of the checks resting on
    it (``"errors/100 <= 8, AE301/100 <= 3"``): said once under the checks rather than
    on every line, or once per check that shares it."""
    names: dict[str, list[str]] = {}
    for check in result.checks:
        if check.method and check.name not in names.setdefault(check.method, []):
            names[check.method].append(check.name)
    return [(", ".join(checks), method) for method, checks in names.items()]


def render_gate_markdown(result: GateResult, *, title: str | None = None) -> str:
    """The same as Markdown, for ``$GITHUB_STEP_SUMMARY`` or a PR comment."""
    icon, word = {"pass": ("✅", "passed"), "fail": ("❌", "failed"),
                  "inconclusive": ("❔", "inconclusive")}[result.outcome]
    lines = [f"## {icon} agent-eval gate: {word}", ""]
    if title:
        lines += [_escape(title).replace("\n", "  \n"), ""]
    lines += [f"**{_md(line)}**  " for line in result.leading] + ([""] if result.leading else [])
    lines += [_md(_verdict(result, _escape)), ""]
    for heading, listed in (("Failed thresholds:", result.failures),
                            ("Not decided by the sample:", result.inconclusive)):
        if listed:
            lines.append(heading)
            for f in listed:
                lines.append(f"- **{_md_name(f.target)}**: {_md(f.name)}: {_md(f.detail)}")
                lines += [f"  - {_md_name(lead)}" for lead in f.leads]
            lines.append("")
    lines += ["| result | target | check | threshold | observed | detail |",
              "|---|---|---|---:|---:|---|"]
    for c in result.checks:
        observed = "–" if c.observed is None else f"{c.observed:.2f}"
        lines.append(f"| {_MARK[c.status]} | {_md_name(c.target)} | {_md(c.name)} | "
                     f"{number_text(c.threshold)} | {observed} | {_md(c.detail)} |")
    used = methods_used(result)
    if used:
        lines += ["", *(f"- method ({_md(name)}): {_md(method)}" for name, method in used)]
    return "\n".join(lines) + "\n"


def render_gate_junit(result: GateResult, *, title: str | None = None) -> bytes:
    """JUnit XML for CI test panels: one test case per check (class ``gate.TARGET``, name
    the check), so the test tab agrees with the exit code.  A failed check is a
    ``failure`` whose message is its detail; an inconclusive one a ``failure`` of type
    ``inconclusive`` whose message starts ``INCONCLUSIVE:`` (exit 4 is no pass), unless
    ``--on-inconclusive pass`` reads it as a pass: then it passes with its detail in
    ``system-out``; a skipped check is ``skipped``."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="agent-eval gate")
    suite = ET.SubElement(root, "testsuite", name=_xml(title.splitlines()[0] if title
                                                        else "agent-eval gate"))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for check in result.checks:
        case = ET.SubElement(suite, "testcase", classname=_xml(f"gate.{check.target}"),
                             name=_xml(check.name))
        counts["tests"] += 1
        unsure = check.status == "inconclusive"
        if check.status == "fail" or (unsure and result.on_inconclusive != "pass"):
            counts["failures"] += 1
            message = f"INCONCLUSIVE: {check.detail}" if unsure else check.detail
            ET.SubElement(case, "failure", message=_xml(message),
                          type="inconclusive" if unsure else check.kind).text = _xml(
                "\n".join([f"{check.target}: {check.name}: {message}", *check.leads]))
        elif unsure:
            ET.SubElement(case, "system-out").text = _xml(
                f"INCONCLUSIVE, read as a pass (--on-inconclusive pass): {check.detail}")
        elif check.status == "skip":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_xml(f"{_MARK[check.status]}: "
                                                        f"{check.detail}"))
    if result.leading:  # the stack's rise, where a CI panel shows the suite's output
        ET.SubElement(suite, "system-out").text = _xml("\n".join(result.leading))
    for key, value in counts.items():
        suite.set(key, str(value))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _xml(text: str) -> str:
    """Text XML 1.0 can carry: control characters become U+FFFD."""
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "\ufffd", text)


def _verdict(result: GateResult, shown: Callable[[str], str] = str) -> str:
    """The closing line; skipped checks are counted as skipped, never among the passed.
    ``shown`` renders a target name (escaped for Markdown)."""
    n = len(result.checks)
    unsure = result.inconclusive
    unsure_names = ", ".join(f"{shown(c.target)}: {c.name}" for c in unsure)
    skipped = sum(c.status == "skip" for c in result.checks)
    also = f"; {skipped} skipped" if skipped else ""
    if result.failures:
        names = ", ".join(f"{shown(f.target)}: {f.name}" for f in result.failures)
        return f"gate FAILED: {len(result.failures)} of {n} checks failed ({names}){also}"
    if unsure:
        reading = {"pass": "passed", "fail": "FAILED"}.get(result.on_inconclusive or "")
        head = ("gate INCONCLUSIVE" if reading is None
                else f"gate {reading} (--on-inconclusive {result.on_inconclusive})")
        return (f"{head}: {len(unsure)} of {n} checks could not be decided by the sample "
                f"({unsure_names}); none failed{also}")
    if skipped:
        return f"gate passed: {n - skipped} of {n} checks passed, {skipped} skipped, none failed"
    return f"gate passed: {n} checks, none failed"


def _md(text: str) -> str:
    """A table cell: pipes and newlines would break the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _md_name(text: str) -> str:
    """Target names come from config files: shown as text, never as HTML."""
    return _md(_escape(text))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
