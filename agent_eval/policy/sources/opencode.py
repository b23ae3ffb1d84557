"""OpenCode's permissions: read as ``opencode.json`` writes them, judged as OpenCode judges.

Sources read (OpenCode docs, https://opencode.ai/docs/permissions and /docs/agents, and
the source at anomalyco/opencode, formerly sst/opencode):

- v1 ``permission``: a string for every permission (``"allow"``), or an object of
  permission name to an action or to an object of pattern to action
  (``"bash": {"*": "ask", "git *": "allow"}``); keys in file order.
- v2 ``permissions``: an ordered array of ``{action, resource, effect}``
  (https://opencode.ai/v2/docs/permissions); the action ``shell`` is the bash tool.
- legacy ``tools`` booleans (``"bash": false``): before 1.1.1 the way to switch a tool
  off; read as a ``"*"`` rule of ``deny`` (false) or ``allow`` (true) for that
  permission (``write``/``patch``/``multiedit`` are the ``edit`` permission).
- agents: ``agent.<name>`` objects and Markdown files in ``.opencode/agent/`` or
  ``.opencode/agents/`` (front matter: ``description``, ``mode``, ``permission``,
  ``tools``, ``disable``; the body is the agent's prompt).  A file's fields replace the
  same fields of a JSON entry of that name.

How a rule set is built (``packages/opencode/src/agent/agent.ts``): the built-in defaults
(``"*": allow``, ``external_directory`` ask, ``question``/``plan_enter``/``plan_exit``
deny, ``read`` allow except ``*.env``/``*.env.*`` ask and ``*.env.example`` allow), then
the agent's built-in extras (``build``: ``question`` and ``plan_enter`` allow; ``plan``:
``edit`` deny), then the global ``permission``, then the agent's own ``permission``; the
lists are concatenated (``PermissionNext.merge`` is ``flat()``).

How a call is judged (``permission/next.ts`` ``evaluate``): the *last* rule whose
permission and pattern both match wins (``Wildcard.match``, see ``wildcard.py``); no rule
at all is ``ask``.  ``~/``, ``~`` and ``$HOME`` at the start of a pattern are the home
directory.  The bash tool (``tool/bash.ts`` of 1.1): every ``command`` node of the
tree-sitter parse, those inside ``$(...)`` included, is one pattern, its text with its
redirections; ``cd`` is never a pattern; any pattern denied denies the call, any asked
blocks it.  Before that, the arguments of ``cd rm cp mv mkdir touch chmod chown cat``
that resolve outside the work directory ask ``external_directory`` with ``<dir>/*``.
The read tool asks ``external_directory`` the same way for a file outside the work
directory, then ``read`` with the file's absolute path.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.sources.files import read_front_matter, read_json
from agent_eval.policy.sources.model import (
    Action,
    AgentPolicy,
    HarnessVerdict,
    PolicySource,
    Rule,
)
from agent_eval.policy.sources.shellsplit import all_commands
from agent_eval.policy.sources.wildcard import wildcard_match

ACTIONS = ("allow", "ask", "deny")
DEFAULTS: dict[str, Any] = {
    "*": "allow",
    "doom_loop": "ask",
    "external_directory": {"*": "ask"},
    "question": "deny",
    "plan_enter": "deny",
    "plan_exit": "deny",
    "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
}
BUILT_IN_EXTRAS: dict[str, dict[str, Any]] = {
    "build": {"question": "allow", "plan_enter": "allow"},
    "plan": {"question": "allow", "plan_exit": "allow", "edit": {"*": "deny"}},
}
EXTERNAL_PATH_COMMANDS = ("cd", "rm", "cp", "mv", "mkdir", "touch", "chmod", "chown", "cat")
EDIT_TOOLS = ("edit", "write", "patch", "multiedit", "apply_patch")
V2_ACTIONS: dict[str, str] = {"shell": "bash"}
DEFAULT_WORKDIR = "/project"
DEFAULT_HOME = "/home/user"


def _expand(pattern: str, home: str) -> str:
    if pattern.startswith("~/"):
        return home + pattern[1:]
    if pattern == "~":
        return home
    if pattern.startswith("$HOME"):
        return home + pattern[5:]
    return pattern


def _rules_from_permission(value: Any, origin: str, path: str, home: str) -> list[Rule]:
    """``fromConfig``: a v1 ``permission`` value as rules, in file order."""
    if isinstance(value, str):
        value = {"*": value}
    if not isinstance(value, dict):
        raise ConfigError("must be an action (allow, ask, deny) or an object of permission "
                          "name to action", path=path, field=origin)
    rules = []
    for key, item in value.items():
        where = f"{origin}.{key}"
        if isinstance(item, str):
            rules.append(Rule(key, "*", _action(item, path, where), where))
            continue
        if not isinstance(item, dict):
            raise ConfigError("must be an action (allow, ask, deny) or an object of pattern "
                              "to action", path=path, field=where)
        for pattern, action in item.items():
            rules.append(Rule(key, _expand(pattern, home),
                              _action(action, path, f"{where}.{pattern!r}"), where))
    return rules


def _rules_from_v2(value: Any, origin: str, path: str, home: str) -> list[Rule]:
    """OpenCode v2's ``permissions`` array of ``{action, resource, effect}``."""
    if not isinstance(value, list):
        raise ConfigError("must be an array of {action, resource, effect} rules", path=path,
                          field=origin)
    rules = []
    for index, item in enumerate(value):
        where = f"{origin}[{index}]"
        if not isinstance(item, dict) or set(item) != {"action", "resource", "effect"} \
                or not all(isinstance(item[k], str) for k in item):
            raise ConfigError("each rule needs exactly the string fields action, resource and "
                              "effect", path=path, field=where)
        name: str = item["action"]
        permission = V2_ACTIONS.get(name, name)
        rules.append(Rule(permission, _expand(item["resource"], home),
                          _action(item["effect"], path, f"{where}.effect"), where))
    return rules


def _rules_from_tools(value: Any, origin: str, path: str) -> list[Rule]:
    """Legacy ``tools`` booleans: false denies the tool, true allows it."""
    if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
        raise ConfigError("must be an object of tool name to true or false", path=path,
                          field=origin)
    return [Rule("edit" if name in EDIT_TOOLS else name, "*", "allow" if on else "deny",
                 f"{origin}.{name}") for name, on in value.items()]


def _action(value: Any, path: str, field: str) -> Action:
    if value not in ACTIONS:
        raise ConfigError(f"{value!r} is not an action; use allow, ask or deny", path=path,
                          field=field)
    return value


def _rules_of(entry: dict[str, Any], origin: str, path: str, home: str) -> list[Rule]:
    rules = []
    if "tools" in entry:
        rules += _rules_from_tools(entry["tools"], f"{origin}tools", path)
    if "permission" in entry:
        rules += _rules_from_permission(entry["permission"], f"{origin}permission", path, home)
    if "permissions" in entry:
        rules += _rules_from_v2(entry["permissions"], f"{origin}permissions", path, home)
    return rules


def _agent_files(config: Path) -> list[Path]:
    folders = [config.parent / ".opencode" / "agent", config.parent / ".opencode" / "agents"]
    if config.parent.name == ".opencode":
        folders += [config.parent / "agent", config.parent / "agents"]
    files: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            files += sorted(folder.glob("*.md"))
    return files


def load(path: Path, *, home: str = DEFAULT_HOME) -> PolicySource:
    """Read an ``opencode.json`` (or ``.jsonc``) and its agent files."""
    config = read_json(path, "opencode.json")
    where = str(path)
    agents_cfg: dict[str, dict[str, Any]] = {}
    raw_agents = config.get("agent", {})
    if not isinstance(raw_agents, dict):
        raise ConfigError("must be an object of agent name to agent", path=where, field="agent")
    for name, entry in raw_agents.items():
        if not isinstance(entry, dict):
            raise ConfigError("must be an object", path=where, field=f"agent.{name}")
        agents_cfg[name] = dict(entry, _origin=f"agent.{name}.", _source=where)
    for file in _agent_files(path):
        front, body = read_front_matter(file, "OpenCode agent file")
        merged = dict(agents_cfg.get(file.stem, {}))
        merged.update(front)
        if body:
            merged["prompt"] = body
        merged["_origin"], merged["_source"] = "", str(file)
        agents_cfg[file.stem] = merged
    global_rules = _rules_of(config, "", where, home)
    defaults = _rules_from_permission(DEFAULTS, "(OpenCode default)", where, home)
    agents: dict[str, AgentPolicy] = {}
    for name in ("build", "plan", *agents_cfg):
        entry = agents_cfg.get(name, {})
        if entry.get("disable") is True:
            continue
        source = entry.get("_source", where)
        extras = _rules_from_permission(BUILT_IN_EXTRAS[name], f"(OpenCode {name} agent)",
                                        where, home) if name in BUILT_IN_EXTRAS else []
        own = _rules_of(entry, entry.get("_origin", ""), source, home)
        prompt = entry.get("prompt")
        description = entry.get("description", "")
        if prompt is not None and not isinstance(prompt, str):
            raise ConfigError("must be text", path=source, field=f"{entry.get('_origin', '')}prompt")
        agents[name] = AgentPolicy(
            harness="opencode", name=name, rules=tuple(defaults + extras + global_rules + own),
            description=description if isinstance(description, str) else "",
            prompt=prompt, source=source)
    default = config.get("default_agent", "build")
    if default not in agents:
        raise ConfigError(f"names no agent of this configuration ({', '.join(agents)})",
                          path=where, field="default_agent")
    return PolicySource("opencode", where, agents, default)


# -- judging ----------------------------------------------------------------------------


def evaluate(agent: AgentPolicy, permission: str, pattern: str) -> Rule | None:
    """The last rule matching ``permission`` and ``pattern``, or None (OpenCode: ask)."""
    for rule in reversed(agent.rules):
        if wildcard_match(permission, rule.permission) and wildcard_match(pattern, rule.pattern):
            return rule
    return None


def _decide(agent: AgentPolicy, permission: str, patterns: list[str]
            ) -> tuple[Action, list[Rule], Rule | None, str]:
    """``ask()`` over several patterns: the first denied or asked one stops the call."""
    used: list[Rule] = []
    for pattern in patterns:
        rule = evaluate(agent, permission, pattern)
        action: Action = rule.action if rule else "ask"
        if action != "allow":
            why = (f"{permission} {pattern!r} is {action}"
                   + (f" by {rule.label()}" if rule else " (no rule matches)"))
            return action, used, rule, why
        if rule is not None and rule not in used:
            used.append(rule)
    return "allow", used, None, ""


def _inside(path: str, workdir: str) -> bool:
    base = workdir.rstrip("/") or "/"
    return path == base or path.startswith(base + "/")


def _absolute(path: str, workdir: str) -> str:
    joined = path if path.startswith("/") else posixpath.join(workdir, path)
    normal = posixpath.normpath(joined)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def judge_command(agent: AgentPolicy, command: str, *, workdir: str = DEFAULT_WORKDIR
                  ) -> HarnessVerdict:
    """OpenCode's bash tool asking permission for ``command`` (see the module docstring)."""
    pieces = all_commands(command)
    directories: list[str] = []
    for piece in pieces:
        if not piece.words or piece.words[0] not in EXTERNAL_PATH_COMMANDS:
            continue
        name = piece.words[0]
        for arg in piece.words[1:]:
            if arg.startswith("-") or (name == "chmod" and arg.startswith("+")):
                continue
            target = _absolute(arg, workdir)
            if not _inside(target, workdir):
                folder = target if name == "cd" or arg.endswith("/") else posixpath.dirname(target)
                glob = folder.rstrip("/") + "/*"
                if glob not in directories:
                    directories.append(glob)
    if directories:
        action, used, rule, why = _decide(agent, "external_directory", directories)
        if action != "allow":
            return HarnessVerdict(action, (rule,) if rule else (), reason=why)
    patterns: list[str] = []
    for piece in pieces:
        if piece.words and piece.words[0] != "cd" and piece.text not in patterns:
            patterns.append(piece.text)
    action, used, rule, why = _decide(agent, "bash", patterns)
    if action != "allow":
        return HarnessVerdict(action, (rule,) if rule else (), reason=why)
    reason = f"every command allowed ({len(patterns)})" if patterns else "nothing but cd"
    return HarnessVerdict("allow", tuple(used), reason=reason)


def judge_read(agent: AgentPolicy, path: str, *, workdir: str = DEFAULT_WORKDIR
               ) -> HarnessVerdict:
    """OpenCode's read tool: ``external_directory`` for a file outside the work directory,
    then ``read`` with the file's absolute path."""
    target = _absolute(path, workdir) if path else workdir
    used: list[Rule] = []
    if not _inside(target, workdir):
        glob = posixpath.dirname(target).rstrip("/") + "/*"
        action, used, rule, why = _decide(agent, "external_directory", [glob])
        if action != "allow":
            return HarnessVerdict(action, (rule,) if rule else (), reason=why)
    action, more, rule, why = _decide(agent, "read", [target])
    if action != "allow":
        return HarnessVerdict(action, (rule,) if rule else (), reason=why)
    return HarnessVerdict("allow", tuple(used + more), reason=f"read {target}")


def judge_tool(agent: AgentPolicy, tool: str) -> HarnessVerdict:
    """Any other tool: its permission with the pattern ``*`` (edit tools are ``edit``)."""
    permission = "edit" if tool in EDIT_TOOLS else tool
    action, used, rule, why = _decide(agent, permission, ["*"])
    if action != "allow":
        return HarnessVerdict(action, (rule,) if rule else (), reason=why)
    return HarnessVerdict("allow", tuple(used), reason=f"tool {tool}")


def bash_rules(agent: AgentPolicy) -> list[Rule]:
    """The rules that can decide a bash command, in order."""
    return [r for r in agent.rules if wildcard_match("bash", r.permission)]
