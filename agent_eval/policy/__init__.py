"""The policy engine: judge one tool call against an allow-list.  Pure; never raises.

Public surface::

    check_call(tool_name, arguments, allowlist, offered=None) -> Verdict
    check_command(command, allowlist) -> Verdict
    check_read(path, allowlist) -> Verdict
    RULES, PRECEDENCE, get_rule(code), primary_code(codes)
    AllowList, load_allowlist(path), ENGINE_VERSION

``policy/`` imports nothing from the package except ``agent_eval.errors`` (a leaf).
"""

from agent_eval.policy.allowlist import AllowList, allowlist_from_dict, load_allowlist
from agent_eval.policy.verdict import Decision, Finding, Invocation, Verdict

__all__ = [
    "AllowList",
    "Decision",
    "Finding",
    "Invocation",
    "Verdict",
    "allowlist_from_dict",
    "load_allowlist",
]
