"""Case files ``tests/policy/cases/*.txt`` (format in cases/README.md), one test per line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import check_call, check_command, check_read

CASES = Path(__file__).resolve().parent / "cases"
_MARKER = re.compile(r"^(?P<text>.*?)\s+# (?:expect: (?P<codes>AE\d{3}(?:\s*,\s*AE\d{3})*)|ok)\s*$")
_DIRECTIVE = re.compile(r"^# (?P<key>allowlist|tool): (?P<value>\S+)\s*$")


def read_cases(path: Path):
    """Yield (line number, allow-list name, tool, text, expected codes or [])."""
    allowlist, tool = "ralf", "bash"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        directive = _DIRECTIVE.match(line)
        if directive:
            if directive["key"] == "allowlist":
                allowlist = directive["value"]
            else:
                tool = directive["value"]
            continue
        if not line.strip() or line.startswith("#"):
            continue
        marker = _MARKER.match(line)
        assert marker, f"{path.name}:{number}: no '# expect: AE...' or '# ok' marker"
        text = marker["text"]
        if text.startswith("json: "):
            text = json.loads(text[len("json: "):])
        codes = [c.strip() for c in marker["codes"].split(",")] if marker["codes"] else []
        yield number, allowlist, tool, text, codes


def _params():
    for path in sorted(CASES.glob("*.txt")):
        for number, allowlist, tool, text, codes in read_cases(path):
            yield pytest.param(allowlist, tool, text, codes, id=f"{path.stem}:{number}")


@pytest.mark.parametrize(("allowlist", "tool", "text", "codes"), list(_params()))
def test_case(allowlist, tool, text, codes):
    policy = allowlist_named(allowlist)
    if tool in ("call", "client"):  # "<tool name> <raw arguments>": a whole tool call, of
        name, _, arguments = text.partition(" ")  # the harness or (client) an agent CLI's
        verdict = check_call(name, arguments, policy, profiles=tool == "client")
    elif tool == "read":
        verdict = check_read(text, policy)
    else:
        verdict = check_command(text, policy)
    if not codes:
        assert verdict.decision == "allow", verdict.findings
    else:
        assert verdict.decision == "deny"
        assert verdict.primary == codes[0], verdict.findings
        assert set(codes) <= {f.code for f in verdict.findings}


def test_every_engine_rule_of_the_allow_list_stage_has_a_case_file():
    from agent_eval.policy import RULES

    wanted = {c for c, r in RULES.items()
              if r.scope in ("allow-list", "parse", "call") and r.emitted_by_engine}
    assert wanted <= {p.stem for p in CASES.glob("AE*.txt")}
