"""Policy sources: the rules an agent CLI already enforces, per agent, read as written.

Public surface::

    resolve_policy(path, agent=None, setting=None) -> ResolvedPolicy
        one resolver for every place an allow-list is taken: an agent-eval allow-list
        YAML, OpenCode's opencode.json(c), Claude Code's settings.json, a Codex .rules
        file (or a folder of them), Gemini CLI's .gemini/settings.json or policy .toml
        files, Qwen Code's .qwen/settings.json; ``ResolvedPolicy.allowlist`` is what the
        engine needs, ``judge_call`` gives both verdicts for a policy source.
    load_policy_source(path) -> PolicySource      the agents of a CLI configuration
    judge_call / judge_command / judge_read      -> DualVerdict (harness + strict)
    recorded_verdict(dual) -> Verdict            the harness's decision, as stored
    choose_agent(source, named=, system_prompt=) -> Choice (the agent and how chosen)
    convert_agent(agent, config_name=...)        -> Conversion (allow-list + notes)

Module map: ``model`` (records), ``files`` (the only I/O: JSON with comments, front
matter), ``wildcard`` (OpenCode's matcher), ``shellsplit`` (how each CLI cuts a command,
over the engine's lexer), ``opencode`` / ``claude_code`` / ``codex`` / ``gemini_cli`` /
``qwen_code`` (reading and emulation, one per CLI), ``judge`` (the two verdicts),
``convert`` (allow-list output), ``choose`` (which agent judges a session).
docs/policies.md describes each format, the emulation, its quirks and what a leak is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval.errors import ConfigError
from agent_eval.policy.allowlist import AllowList, load_allowlist
from agent_eval.policy.calls import check_call
from agent_eval.policy.sources import claude_code, codex, gemini_cli, opencode, qwen_code
from agent_eval.policy.sources.choose import AGENT_HEADER, Choice, Via, choose_agent
from agent_eval.policy.sources.convert import Conversion, convert_agent
from agent_eval.policy.sources.files import read_json
from agent_eval.policy.sources.judge import (
    Setting,
    judge_call,
    judge_command,
    judge_read,
    recorded_verdict,
)
from agent_eval.policy.sources.model import (
    AgentPolicy,
    DualVerdict,
    HarnessVerdict,
    PolicySource,
    Rule,
)
from agent_eval.policy.verdict import Verdict

__all__ = [
    "AGENT_HEADER",
    "AgentPolicy",
    "Choice",
    "Conversion",
    "DualVerdict",
    "HarnessVerdict",
    "PolicySource",
    "ResolvedPolicy",
    "Rule",
    "Setting",
    "Via",
    "choose_agent",
    "convert_agent",
    "judge_call",
    "judge_command",
    "judge_read",
    "load_policy_source",
    "recorded_verdict",
    "resolve_allowlist",
    "resolve_policy",
    "source_kind",
]

YAML_SUFFIXES = (".yaml", ".yml")
CLAUDE_KEYS = {"allow", "ask", "deny", "additionalDirectories", "defaultMode",
               "disableBypassPermissionsMode"}


def source_kind(path: Path) -> str:
    """``allowlist``, ``opencode``, ``claude-code``, ``codex``, ``gemini-cli`` or
    ``qwen-code`` for a file (or folder), by its name (and its folder's: ``.claude``,
    ``.gemini``, ``.qwen``) first and then by its fields; ConfigError when it is none."""
    name = path.name
    if path.is_dir():
        if any(path.glob("*.rules")):
            return "codex"
        if any(path.glob("*.toml")):
            return "gemini-cli"
        raise ConfigError("is a folder without *.rules or *.toml files; pass an allow-list "
                          "YAML, opencode.json, settings.json, a Codex .rules file or a "
                          "Gemini CLI policy .toml", path=str(path))
    if name.endswith(YAML_SUFFIXES):
        return "allowlist"
    if name.endswith(".rules"):
        return "codex"
    if name.endswith(".toml"):
        return "gemini-cli"
    if name.endswith(".json") and path.parent.name == ".gemini":
        return "gemini-cli"
    if name.endswith(".json") and path.parent.name == ".qwen":
        return "qwen-code"
    if name.startswith("opencode.") and name.endswith((".json", ".jsonc")):
        return "opencode"
    if name.startswith("settings") and name.endswith(".json") and path.parent.name == ".claude":
        return "claude-code"
    if name.endswith((".json", ".jsonc")):
        data = read_json(path, "policy configuration")
        permissions = data.get("permissions")
        if isinstance(permissions, dict) and set(permissions) & CLAUDE_KEYS:
            return "claude-code"
        if "permission" in data or "agent" in data or isinstance(permissions, list) \
                or "opencode" in str(data.get("$schema", "")):
            return "opencode"
        raise ConfigError("is JSON but neither an OpenCode configuration (permission, "
                          "permissions array, agent) nor Claude Code settings "
                          "(permissions.allow/ask/deny)", path=str(path))
    if not path.exists():
        raise ConfigError("file not found; pass an allow-list YAML, opencode.json, "
                          "settings.json or a Codex .rules file", path=str(path))
    raise ConfigError("not a policy this tool reads: pass an allow-list YAML (.yaml), "
                      "opencode.json(c), Claude Code settings.json or a Codex .rules file",
                      path=str(path))


def load_policy_source(path: str | Path, *, home: str = opencode.DEFAULT_HOME) -> PolicySource:
    """The agents of an agent CLI's configuration."""
    path = Path(path)
    kind = source_kind(path)
    if kind == "opencode":
        return opencode.load(path, home=home)
    if kind == "claude-code":
        return claude_code.load(path)
    if kind == "codex":
        return codex.load(path)
    if kind == "gemini-cli":
        return gemini_cli.load(path)
    if kind == "qwen-code":
        return qwen_code.load(path)
    raise ConfigError("is an agent-eval allow-list, not an agent CLI's configuration; "
                      "`agent-eval check --allowlist` reads it as it is", path=str(path))


@dataclass(slots=True)
class ResolvedPolicy:
    """What a command that judges calls needs from ``--allowlist PATH [--agent NAME]``.

    ``allowlist`` is the engine's input (for a policy source, the converted allow-list:
    tools offered, denial text, patterns); ``agent`` is set for a policy source, and then
    ``judge_call`` gives both verdicts and ``check_call`` the strict one."""

    path: str
    allowlist: AllowList
    agent: AgentPolicy | None = None
    source: PolicySource | None = None
    setting: Setting = field(default_factory=Setting)
    notes: list[str] = field(default_factory=list)
    via: Via | None = None

    @property
    def agent_name(self) -> str | None:
        return self.agent.name if self.agent is not None else None

    def for_agent(self, choice: Choice) -> ResolvedPolicy:
        """The same configuration, judging as ``choice.agent`` (chosen ``choice.via``)."""
        if self.source is None:
            return self
        conversion = convert_agent(choice.agent, config_name=Path(self.path).stem,
                                   workdir=self.setting.workdir)
        return ResolvedPolicy(self.path, conversion.allowlist(), choice.agent, self.source,
                              self.setting, list(self.source.notes) + conversion.notes,
                              choice.via)

    def judge_call(self, tool: str, arguments: str | dict[str, Any]) -> DualVerdict | None:
        if self.agent is None:
            return None
        return judge_call(self.agent, tool, arguments, self.setting)

    def check_call(self, tool: str, arguments: str | dict[str, Any]) -> Verdict:
        if self.agent is None:
            return check_call(tool, arguments, self.allowlist)
        return judge_call(self.agent, tool, arguments, self.setting).strict


def _pick_agent(source: PolicySource, agent: str | None) -> AgentPolicy:
    try:
        return source.agent(agent)
    except KeyError:
        raise ConfigError(f"{source.path} has no agent {agent!r}; its agents: "
                          f"{', '.join(source.agents)}", field="--agent") from None


def resolve_policy(path: str | Path, agent: str | None = None,
                   setting: Setting | None = None) -> ResolvedPolicy:
    """Read ``path`` as an allow-list or an agent CLI's configuration (``source_kind``)
    and pick ``agent`` (default: the configuration's default agent)."""
    path = Path(path)
    setting = setting or Setting()
    if source_kind(path) == "allowlist":
        if agent is not None:
            raise ConfigError("an agent-eval allow-list has no agents; drop --agent or pass "
                              "an agent CLI's configuration", field="--agent")
        return ResolvedPolicy(str(path), load_allowlist(path), setting=setting)
    source = load_policy_source(path, home=setting.home)
    chosen = _pick_agent(source, agent)
    conversion = convert_agent(chosen, config_name=path.stem, workdir=setting.workdir)
    return ResolvedPolicy(str(path), conversion.allowlist(), chosen, source, setting,
                          list(source.notes) + conversion.notes,
                          "default" if agent is None else "option")


def resolve_allowlist(path: str | Path, agent: str | None = None) -> AllowList:
    """Just the engine's allow-list for ``path`` and ``agent`` (see ``resolve_policy``)."""
    return resolve_policy(path, agent).allowlist
