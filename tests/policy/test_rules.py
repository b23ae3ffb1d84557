"""The registry is the spec: every rule's bad examples yield its code, good ones are allowed."""

from __future__ import annotations

import json

import pytest
from support.policy_paths import allowlist_named

from agent_eval.policy import (
    PRECEDENCE,
    RULES,
    check_call,
    check_command,
    check_read,
    get_rule,
    primary_code,
)
from agent_eval.policy.rules import JUDGED_KINDS, Example
from agent_eval.policy.stack import check_reply
from agent_eval.stack_reading import exchange_from_example

RALF = allowlist_named("ralf")


def judge(example: Example):
    if example.kind == "command":
        return check_command(example.text, RALF)
    if example.kind == "read":
        return check_read(example.text, RALF)
    return check_call(example.tool, example.text, RALF, profiles=example.client,
                      schema=json.loads(example.schema) if example.schema else None)


def _examples(which: str):
    for rule in RULES.values():
        for i, example in enumerate(getattr(rule, which)):
            if example.kind in JUDGED_KINDS:
                yield pytest.param(rule.code, example, id=f"{rule.code}-{rule.name}-{which}{i}")


@pytest.mark.parametrize(("code", "example"), list(_examples("bad")))
def test_bad_example_yields_its_code(code, example):
    verdict = judge(example)
    assert verdict.decision == "deny"
    assert code in {f.code for f in verdict.findings}


@pytest.mark.parametrize(("code", "example"), list(_examples("good")))
def test_good_example_is_allowed(code, example):
    verdict = judge(example)
    assert verdict.decision == "allow", verdict.findings
    assert code not in {f.code for f in verdict.findings}


def test_every_design_code_is_registered_once_in_code_order():
    design = ["AE101", "AE102", "AE103", "AE104", "AE105", "AE106", "AE107", "AE108", "AE201", "AE202", "AE301", "AE302", "AE303",
              "AE304", "AE305", "AE306", "AE307", "AE308", "AE309", "AE310", "AE311", "AE312",
              "AE313", "AE320", "AE401", "AE402", "AE403", "AE404", "AE501", "AE502",
              "AE503", "AE504", "AE505", "AE506", "AE507", "AE508", "AE509", "AE510", "AE511",
              "AE512"]
    assert list(RULES) == design


def test_rule_names_are_unique_kebab_case():
    names = [r.name for r in RULES.values()]
    assert len(set(names)) == len(names)
    assert all(n == n.lower() and " " not in n and "_" not in n for n in names)


@pytest.mark.parametrize("rule", list(RULES.values()), ids=lambda r: r.code)
def test_every_rule_has_docs_and_both_kinds_of_example(rule):
    assert rule.summary and rule.why and rule.bad and rule.good


def test_session_rules_are_not_engine_rules_and_have_no_precedence():
    session = [r.code for r in RULES.values() if r.scope == "session"]
    assert session == ["AE401", "AE402", "AE403", "AE404"]
    assert not any(RULES[c].emitted_by_engine for c in session)
    assert not set(session) & set(PRECEDENCE)
    assert all(ex.kind == "session" for c in session for ex in RULES[c].bad + RULES[c].good)


def test_precedence_is_the_design_order_over_every_call_code():
    assert PRECEDENCE == ("AE101", "AE102", "AE103", "AE104", "AE106", "AE107", "AE105", "AE108", "AE202", "AE201", "AE305",
                          "AE308", "AE306", "AE301", "AE304", "AE302", "AE303", "AE312",
                          "AE313", "AE307", "AE309", "AE310", "AE311", "AE320")
    assert set(PRECEDENCE) == {c for c, r in RULES.items() if r.scope not in ("session", "stack")}


@pytest.mark.parametrize(
    ("codes", "primary"),
    [
        (["AE307", "AE301"], "AE301"),
        (["AE307", "AE304"], "AE304"),
        (["AE301", "AE305", "AE312"], "AE305"),
        (["AE311", "AE310"], "AE310"),
        (["AE201", "AE202"], "AE202"),
        (["AE403", "AE320"], "AE320"),
        ([], None),
    ],
    ids=["pipe-before-program", "chain-before-program", "heredoc-first", "flag-before-value",
         "bytes-before-parse", "session-last", "none"],
)
def test_primary_code_follows_precedence(codes, primary):
    assert primary_code(codes) == primary


@pytest.mark.parametrize(("code", "found"), [("AE301", "pipe-to-filter"), ("ae301", "pipe-to-filter"),
                                             ("AE999", None), ("", None)],
                         ids=["exact", "lowercase", "unknown", "empty"])
def test_get_rule_returns_the_rule_or_none(code, found):
    rule = get_rule(code)
    assert (rule.name if rule else None) == found


def test_rule_as_dict_is_json_with_structured_examples():
    data = json.loads(json.dumps(RULES["AE101"].as_dict()))
    assert data["code"] == "AE101" and data["name"] == "unknown-tool"
    assert data["bad"][0] == {"kind": "call", "text": "{}", "tool": "emit_guidance"}


def _wire_examples(which: str):
    for rule in RULES.values():
        for i, example in enumerate(getattr(rule, which)):
            if example.kind == "wire":
                yield pytest.param(rule.code, example, id=f"{rule.code}-{rule.name}-{which}{i}")


@pytest.mark.parametrize(("code", "example"), list(_wire_examples("bad")))
def test_bad_wire_example_yields_exactly_its_stack_fault(code, example):
    assert [f.code for f in check_reply(exchange_from_example(example.text))] == [code]


@pytest.mark.parametrize(("code", "example"), list(_wire_examples("good")))
def test_good_wire_example_yields_no_stack_fault(code, example):
    assert check_reply(exchange_from_example(example.text)) == []


def test_stack_rules_are_wire_examples_outside_the_engine_and_its_precedence():
    stack = [r for r in RULES.values() if r.scope == "stack"]
    assert [r.code for r in stack] == [f"AE5{i:02d}" for i in range(1, 13)]
    assert not any(r.emitted_by_engine for r in stack)
    assert not {r.code for r in stack} & set(PRECEDENCE)
    assert all(ex.kind == "wire" for r in stack for ex in r.bad + r.good)


def _reply_examples(which: str):
    for example in getattr(RULES["AE104"], which):
        yield pytest.param(example, id=f"AE104-{which}-{example.text[:20]}")


@pytest.mark.parametrize("example", list(_reply_examples("bad")))
def test_ae104_bad_reply_holds_call_markup_that_is_the_models_with_no_template_known(example):
    from agent_eval.wire.markup import find_tool_markup

    assert find_tool_markup(example.text)
    text = json.dumps({"reply": {"finish_reason": "stop",
                                 "message": {"role": "assistant", "content": example.text}}})
    assert check_reply(exchange_from_example(text)) == []  # the model's, not the stack's


@pytest.mark.parametrize("example", list(_reply_examples("good")))
def test_ae104_good_reply_holds_no_call_markup(example):
    from agent_eval.wire.markup import find_tool_markup

    assert find_tool_markup(example.text) == []
def test_rules_have_a_lifecycle_with_redirects_as_ruffs_registry_has(monkeypatch):
    """preview, stable, deprecated, removed; a retired code or name redirects to its
    successor for every filter (``find_rule``, the CLI's rule codes), and the registry's
    promises are checked (``registry_problems``)."""
    from dataclasses import replace

    from agent_eval.cli.options import rule_code
    from agent_eval.policy import RULE_STATUSES, find_rule, registry_problems, rules

    assert RULE_STATUSES == ("preview", "stable", "deprecated", "removed")
    assert {r.status for r in RULES.values()} <= set(RULE_STATUSES)
    assert registry_problems() == []
    monkeypatch.setattr(rules, "REDIRECTS", {"AE399": "AE301", "old-pipe": "AE301"})
    assert find_rule("ae399").code == find_rule("old-pipe").code == "AE301"
    assert rule_code("AE399", "--max-class") == "AE301"
    assert registry_problems() == []
    monkeypatch.setitem(rules.REDIRECTS, "AE398", "AE999")
    monkeypatch.setitem(rules.REDIRECTS, "AE302", "AE301")
    retired = replace(RULES["AE303"], status="removed", replaced_by="AE301")
    monkeypatch.setitem(rules.RULES, "AE303", retired)
    assert registry_problems() == [
        "redirect AE398 -> AE999: no live rule AE999",
        "redirect AE302 shadows the rule of that code or name",
        "AE303 is removed yet ranked in PRECEDENCE",
    ]
