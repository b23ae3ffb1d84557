"""Gemini CLI's policy engine: its settings and TOML policies read as written, a shell
command judged as the pinned release judges it unattended (``gemini -p``).

Read from the source of the pinned release (google-gemini/gemini-cli 0.61.0, the
published bundle: ``packages/core/src/policy/config.ts``, ``policy-engine.ts``,
``toml-loader.ts``, ``utils.ts``, ``utils/shell-utils.ts``, and the default policies
``packages/core/src/policy/policies/*.toml``; documented at
https://geminicli.com/docs/reference/policy-engine/ and /docs/reference/configuration/):

- ``settings.json`` ``tools.allowed``: each entry an ``allow`` rule at priority 4.3; an
  entry ``run_shell_command(PREFIX)`` allows the commands starting with PREFIX (a word
  boundary after it) and adds a ``deny`` of every other shell command at 4.29 (the
  "narrowing enforcement"); a bare ``run_shell_command`` allows every command.
  ``tools.exclude``: a ``deny`` of that tool name at 4.4 (a name only: an entry
  ``run_shell_command(curl)`` names no tool and matches nothing).
  ``tools.core``: its entries allowed at 4.25 and every other tool denied at 4.24.
  ``tools.confirmationRequired``: ``ask_user`` at 4.35.
- TOML policies (``[[rule]]`` with ``toolName``, ``commandPrefix``, ``commandRegex`` or
  ``argsPattern``, ``decision`` allow / ask_user / deny, ``priority`` 0-999, ``modes``,
  ``interactive``, ``allowRedirection``; ``priority`` is required, a whole number) from the
  ``policies/`` folder beside the
  settings (the user tier: priority 4 + p/1000), or a ``.toml`` file given alone.
- the defaults shipped with the CLI: unattended, a shell command no rule allows is
  denied (``write.toml``'s headless rule at 1.010 and the engine's default ``deny``);
  ``yolo`` allows every tool at 1.999 (redirections included); ``plan`` denies at 1.040.

How a call is judged (``PolicyEngine.check``): the rules in descending priority, the
first whose tool, mode and ``argsPattern`` (a regular expression tried on the call's
arguments as sorted JSON, ``"command":"git diff ...``) match decides.  For the shell
tool the command is then parsed (tree-sitter; here ``shellsplit.all_commands``): a
``deny`` stands; an ``allow`` of a command holding a redirection becomes ``ask_user``
unless the rule says ``allowRedirection`` or the mode is ``autoEdit``/``yolo``; and every
simple command that is not the whole command (the parts of a chain, a pipe, a
substitution) is checked again on its own, the first ``deny`` or ``ask_user`` among them
deciding.  Unattended nobody answers ``ask_user``: the call is refused ("requires user
confirmation, which is not supported in non-interactive mode").

Not emulated: the heuristics that only change an ``ask_user`` (known-safe commands) or a
rule without a pattern (dangerous commands ask, git in an untrusted folder asks); a
trusted folder is assumed (an untrusted folder's workspace settings are ignored by the
CLI).  docs/policies.md lists these.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.sources.files import read_json, read_text
from agent_eval.policy.sources.model import Action, AgentPolicy, HarnessVerdict, PolicySource, Rule
from agent_eval.policy.sources.shellsplit import all_commands

SHELL = "run_shell_command"
SHELL_NAMES = (SHELL, "ShellTool", "Shell")
MODES = ("default", "autoEdit", "yolo", "plan")
DECISIONS: dict[str, Action] = {"allow": "allow", "ask_user": "ask", "deny": "deny"}
USER_TIER = 4
EXCLUDE, CONFIRM, ALLOWED, CORE = 4.4, 4.35, 4.3, 4.25
_ENTRY = re.compile(r"^([a-zA-Z0-9_-]+)\((.*)\)$")
_WRAPPER = re.compile(r"^\s*(?:(?:\S+/)?(?:sh|bash|zsh))\s+-c\s+")
MAX_DEPTH = 4


@dataclass(frozen=True, slots=True)
class GeminiRule:
    """One rule as the engine holds it: its priority, the tool name (``*`` for all), the
    argument regular expression, the modes and whether it holds unattended."""

    rule: Rule
    priority: float
    tool: str
    args: re.Pattern[str] | None = None
    modes: tuple[str, ...] = ()
    interactive: bool | None = None
    redirection: bool = False


def _escape(text: str) -> str:
    """``escapeRegex`` of policy/utils.ts: the characters ``-[]{}()*+?.,\\^$|#``, blanks
    and ``"`` escaped."""
    return re.sub(r'([-\[\]{}()*+?.,\\^$|#\s"])', r"\\\1", text)


def prefix_pattern(prefix: str) -> str:
    """``buildArgsPatterns`` for a command prefix: ``"command":"PREFIX`` then a blank, a
    closing quote or an escaped quote."""
    encoded = json.dumps(prefix, ensure_ascii=False)[:-1]
    return _escape(f'"command":{encoded}') + r'(?:[\s"]|\\")'


def _compile(pattern: str, path: str, field: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{pattern!r} is not a regular expression this tool reads "
                          f"({exc}); write it as a plain prefix", path=path, field=field) from None


def _settings_rules(settings: dict[str, Any], path: str) -> list[GeminiRule]:
    tools = settings.get("tools") or {}
    if not isinstance(tools, dict):
        raise ConfigError("must be an object", path=path, field="tools")
    rules: list[GeminiRule] = []

    def names(key: str) -> list[str]:
        value = tools.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError("must be a list of tool names", path=path, field=f"tools.{key}")
        return value

    for index, name in enumerate(names("exclude")):
        where = f"tools.exclude[{index}]"
        rules.append(GeminiRule(Rule(name, "", "deny", where), EXCLUDE, name))
    for index, name in enumerate(names("confirmationRequired")):
        where = f"tools.confirmationRequired[{index}]"
        tool = SHELL if name in SHELL_NAMES else name
        rules.append(GeminiRule(Rule(tool, "", "ask", where), CONFIRM, tool))
    for key, priority in (("allowed", ALLOWED), ("core", CORE)):
        narrowed = False
        for index, entry in enumerate(names(key)):
            where = f"tools.{key}[{index}]"
            m = _ENTRY.match(entry)
            tool, inner = (m.group(1), m.group(2)) if m else (entry, None)
            tool = SHELL if tool in SHELL_NAMES else tool
            if tool == SHELL and inner is not None:
                narrowed = True
                rules.append(GeminiRule(Rule(SHELL, inner, "allow", where, (("prefix",),)),
                                        priority, SHELL, re.compile(prefix_pattern(inner))))
            else:
                rules.append(GeminiRule(Rule(tool, "", "allow", where), priority, tool))
        if key == "allowed" and narrowed:
            rules.append(GeminiRule(Rule(SHELL, "", "deny", "tools.allowed (narrowing: every "
                                         "other shell command)"), priority - 0.01, SHELL))
        if key == "core" and names("core"):
            rules.append(GeminiRule(Rule("*", "", "deny", "tools.core (every tool not "
                                         "listed)"), priority - 0.01, "*",
                                    modes=("default", "autoEdit", "yolo")))
    return rules


def _toml_rules(path: Path, tier: int, origin: str) -> list[GeminiRule]:
    where = str(path)
    try:
        data = tomllib.loads(read_text(path, "Gemini CLI policy file"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc}); fix the syntax", path=where) from None
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise ConfigError("must be an array of tables ([[rule]])", path=where, field="rule")
    rules: list[GeminiRule] = []
    for index, entry in enumerate(entries):
        field = f"rule[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError("must be a table", path=where, field=field)
        decision = entry.get("decision")
        if decision not in DECISIONS:
            raise ConfigError(f"{decision!r} is not a decision; use allow, ask_user or deny",
                              path=where, field=f"{field}.decision")
        priority = entry.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool) \
                or not 0 <= priority <= 999:
            raise ConfigError("is required: a whole number from 0 to 999", path=where,
                              field=f"{field}.priority")
        tools = entry.get("toolName")
        tools = [tools] if isinstance(tools, str) else tools
        if not tools or not all(isinstance(t, str) and t for t in tools):
            raise ConfigError("names no tool; use \"*\" for all tools", path=where,
                              field=f"{field}.toolName")
        modes = entry.get("modes") or []
        if not isinstance(modes, list) or not all(m in MODES for m in modes):
            raise ConfigError(f"modes must be a list of {', '.join(MODES)}", path=where,
                              field=f"{field}.modes")
        interactive = entry.get("interactive")
        patterns: list[tuple[str | None, str]] = []  # (regex, shown pattern)
        if "commandPrefix" in entry:
            prefixes = entry["commandPrefix"]
            prefixes = [prefixes] if isinstance(prefixes, str) else prefixes
            if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
                raise ConfigError("must be a string or a list of strings", path=where,
                                  field=f"{field}.commandPrefix")
            patterns = [(prefix_pattern(p), p) for p in prefixes]
        elif "commandRegex" in entry:
            patterns = [(f'"command":"{entry["commandRegex"]}', f"/{entry['commandRegex']}/")]
        elif "argsPattern" in entry:
            patterns = [(str(entry["argsPattern"]), f"args /{entry['argsPattern']}/")]
        else:
            patterns = [(None, "")]
        for tool in tools:
            tool = SHELL if tool in SHELL_NAMES else tool
            for regex, shown in patterns:
                kind = "prefix" if "commandPrefix" in entry else "regex" if regex else "any"
                rule = Rule(tool, shown, DECISIONS[decision], f"{origin} {field}", ((kind,),))
                rules.append(GeminiRule(
                    rule, tier + priority / 1000, tool,
                    _compile(regex, where, field) if regex is not None else None,
                    tuple(modes), interactive if isinstance(interactive, bool) else None,
                    bool(entry.get("allowRedirection", entry.get("allow_redirection")))))
    return rules


READ_ONLY_TOOLS = ("glob", "grep_search", "list_directory", "read_file", "google_web_search")
DEFAULTS = (
    *(GeminiRule(Rule(tool, "", "allow", "(Gemini CLI default: read-only.toml)"), 1.050, tool)
      for tool in READ_ONLY_TOOLS),
    GeminiRule(Rule(SHELL, "", "deny", "(Gemini CLI default: write.toml, unattended)"),
               1.010, SHELL, interactive=False),
    GeminiRule(Rule("*", "", "deny", "(Gemini CLI default: plan.toml)"), 1.040, "*",
               modes=("plan",)),
    GeminiRule(Rule("*", "", "allow", "(Gemini CLI default: yolo.toml)"), 1.998, "*",
               modes=("yolo",), redirection=True),
)


def _encode(rule: GeminiRule) -> Rule:
    """The rule as an agent keeps it: ``tokens`` carry what the engine needs besides the
    pattern (kind, modes, unattended or not, allowRedirection, the regular expression,
    the priority), so ``engine`` rebuilds it from the agent alone."""
    given = rule.rule.tokens[0][0] if rule.rule.tokens else None
    kind = given or ("regex" if rule.args is not None else "any")
    interactive = "" if rule.interactive is None else str(rule.interactive).lower()
    return dataclasses.replace(rule.rule, tokens=(
        (kind,), rule.modes, (interactive,), ("redirection" if rule.redirection else "",),
        (rule.args.pattern if rule.args is not None else "",), (repr(rule.priority),)))


def load(path: Path) -> PolicySource:
    """Gemini CLI's ``settings.json`` (with the ``policies/*.toml`` beside it), a policy
    ``.toml`` file, or a ``policies`` folder of them."""
    rules: list[GeminiRule] = []
    mode = "default"
    if path.is_dir():
        files = sorted(path.glob("*.toml"))
        settings_path = None
    elif path.suffix == ".toml":
        files = [path]
        settings_path = None
    else:
        settings_path = path
        files = sorted((path.parent / "policies").glob("*.toml"))
    if settings_path is not None:
        settings = read_json(settings_path, "Gemini CLI settings.json")
        rules += _settings_rules(settings, str(settings_path))
        general = settings.get("general") or {}
        if isinstance(general, dict) and general.get("defaultApprovalMode") in MODES:
            mode = general["defaultApprovalMode"]
    for file in files:
        shown = f"policies/{file.name}" if settings_path is not None else file.name
        rules += _toml_rules(file, USER_TIER, shown)
    ordered = sorted([*rules, *DEFAULTS], key=lambda r: -r.priority)
    agent = AgentPolicy("gemini-cli", "default", tuple(_encode(r) for r in ordered),
                        source=str(path), mode=mode)
    return PolicySource("gemini-cli", str(path), {"default": agent}, "default")


def engine(agent: AgentPolicy) -> tuple[GeminiRule, ...]:
    """The engine's rules behind ``agent``, in priority order (``_encode`` reversed); a
    rule without the engine's tokens is a plain rule of its tool."""
    out = []
    for order, rule in enumerate(agent.rules):
        if len(rule.tokens) != 6:
            out.append(GeminiRule(rule, -order, rule.permission))
            continue
        _, modes, (interactive,), (redirection,), (regex,), (priority,) = rule.tokens
        out.append(GeminiRule(rule, float(priority), rule.permission,
                              re.compile(regex) if regex else None, tuple(modes),
                              {"true": True, "false": False}.get(interactive),
                              redirection == "redirection"))
    return tuple(out)


# -- judging ----------------------------------------------------------------------------


def _arguments(command: str) -> str:
    """The call's arguments as ``stableStringify`` writes them (top-level pairs between
    NUL characters)."""
    return "{\0" + '"command":' + json.dumps(command, ensure_ascii=False) + "\0}"


def _matches(rule: GeminiRule, tool: str, args: str, mode: str) -> bool:
    if rule.modes and mode not in rule.modes:
        return False
    if rule.interactive is True:  # unattended: interactive-only rules never hold
        return False
    if rule.tool != "*" and rule.tool != tool:
        return False
    return rule.args is None or rule.args.search(args) is not None


def _redirected(command: str) -> bool:
    return any(p.redirects for p in all_commands(command)) or "<<" in command


Decided = tuple[Action, GeminiRule | None, str]
"""A decision, the rule responsible (None: the engine's default) and why, in words."""


def _check(rules: tuple[GeminiRule, ...], command: str, mode: str, depth: int) -> Decided:
    args = _arguments(command)
    matched = next((r for r in rules if _matches(r, SHELL, args, mode)), None)
    if matched is None:
        decision: Action = "allow" if mode == "yolo" else "deny"
        return _shell(rules, command, decision, None, mode, depth)
    return _shell(rules, command, matched.rule.action, matched, mode, depth)


def _shell(rules: tuple[GeminiRule, ...], command: str, decision: Action,
           rule: GeminiRule | None, mode: str, depth: int) -> Decided:
    """``checkShellCommand``: the parts of the command checked on their own."""
    pieces = [p for p in all_commands(command) if p.words]
    said = "" if rule is not None else ("yolo allows what no rule decides" if mode == "yolo"
                                        else "no rule allows it: the unattended default")
    if not pieces:
        if decision == "deny":
            return "deny", rule, said
        if mode == "yolo":
            return ("deny" if rule is not None and rule.args is not None else "allow"), rule, said
        return "deny", rule, "the command does not parse"
    if decision == "deny":
        return "deny", rule, said
    aggregate, responsible = decision, rule
    allow_redirection = rule.redirection if rule is not None else False
    downgrade = not allow_redirection and mode not in ("autoEdit", "yolo")
    if downgrade and aggregate == "allow" and _redirected(command):
        aggregate, said = "ask", "a redirection asks (the rule does not set allowRedirection)"
    if depth >= MAX_DEPTH:
        return ("ask", responsible, "nested too deeply") if aggregate == "allow" \
            and len(pieces) > 1 else (aggregate, responsible, said)
    whole = command.strip()
    for piece in pieces:
        text = piece.text.strip()
        wrapped = _WRAPPER.match(text)
        subs = []
        if wrapped:
            inner = text[wrapped.end():].strip()
            if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
                inner = inner[1:-1]
            subs.append(inner)
        if text != whole:
            subs.append(text)
        for sub in subs:
            got, by, why = _check(rules, sub, mode, depth + 1)
            if got == "deny":
                return "deny", by, f"{sub!r}: {why}" if why else f"{sub!r}"
            if got == "ask" and aggregate == "allow":
                responsible, said = by, f"{sub!r}: {why}" if why else f"{sub!r}"
                aggregate = "ask"
    return aggregate, responsible, said


def judge_command(agent: AgentPolicy, command: str, mode: str) -> HarnessVerdict:
    """Gemini CLI's policy engine on a shell command, unattended, in ``mode``."""
    rules = engine(agent)
    decision, rule, why = _check(rules, command, mode, 0)
    used = (rule.rule,) if rule is not None else ()
    by = f" by {rule.rule.label()}" if rule is not None else ""
    what = {"allow": f"allowed in mode {mode}", "deny": "denied",
            "ask": "asks (nobody answers unattended)"}[decision]
    return HarnessVerdict(decision, used, reason=f"{what}{by}" + (f": {why}" if why else ""))


def judge_tool(agent: AgentPolicy, tool: str, mode: str) -> HarnessVerdict:
    """Any other tool by its name, with no arguments to match."""
    for rule in engine(agent):
        if _matches(rule, tool, "{}", mode) and rule.args is None:
            return HarnessVerdict(rule.rule.action, (rule.rule,),
                                  reason=f"{tool}: {rule.rule.label()}")
    if mode == "yolo":
        return HarnessVerdict("allow", (), reason=f"{tool}: yolo allows every tool")
    return HarnessVerdict("deny", (), reason=f"{tool}: no rule allows it unattended")
