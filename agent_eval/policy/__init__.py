"""The policy engine: judge one tool call against an allow-list.  Pure; never raises.

Public surface::

    check_call(tool_name, arguments, allowlist, offered=None, *, profiles=False) -> Verdict
    check_command(command, allowlist) -> Verdict
    check_read(path, allowlist) -> Verdict
    render_denial(verdict, allowlist) -> str
    RULES, PRECEDENCE, precedence_rank(code), get_rule(code), primary_code(codes)
    AllowList, load_allowlist(path), ENGINE_VERSION

``policy/`` imports nothing from the package except ``agent_eval.errors`` (a leaf).
Module map: ``rules`` (the registry), ``characters`` (which characters any judged text
may hold), ``lexer`` (quote-aware pre-scan) and ``syntax`` (its output), ``commands``
(operators, wrappers, programs, runner form), ``arguments`` (script argument specs),
``wordpatterns`` (allow-list ``patterns``: a fixed prefix and plain words),
``reads`` (read paths), ``engine`` (commands and reads: entry points, bashlex
confirmation, cache), ``calls`` (a whole tool call: tool name, argument JSON, keys), and
``sources/`` (agent CLIs' own permission rules, per agent, judged twice; see its docstring).
"""

from agent_eval.policy.allowlist import AllowList, allowlist_from_dict, load_allowlist
from agent_eval.policy.calls import check_call, command_text
from agent_eval.policy.engine import (
    ENGINE_VERSION,
    check_command,
    check_read,
    clear_cache,
    judge_command,
    render_denial,
)
from agent_eval.policy.rules import (
    PRECEDENCE,
    REDIRECTS,
    RULE_STATUSES,
    RULES,
    Example,
    Rule,
    find_rule,
    get_rule,
    near_rules,
    precedence_rank,
    primary_code,
    redirected,
    registry_problems,
)
from agent_eval.policy.verdict import Decision, Finding, Invocation, Verdict

__all__ = [
    "ENGINE_VERSION",
    "PRECEDENCE",
    "REDIRECTS",
    "RULES",
    "RULE_STATUSES",
    "AllowList",
    "Decision",
    "Example",
    "Finding",
    "Invocation",
    "Rule",
    "Verdict",
    "allowlist_from_dict",
    "check_call",
    "command_text",
    "check_command",
    "check_read",
    "clear_cache",
    "find_rule",
    "get_rule",
    "near_rules",
    "judge_command",
    "load_allowlist",
    "precedence_rank",
    "primary_code",
    "redirected",
    "registry_problems",
    "render_denial",
]
