"""What the model is shown: the system prompt rendered from the allow-list, and the
OpenAI ``tools`` schemas of the tools a scenario offers."""

from __future__ import annotations

import shlex
from typing import Any

from agent_eval.policy import AllowList
from agent_eval.policy.allowlist import CommandSpec
from agent_eval.scenario.spec import Scenario


def render_system_prompt(spec: Scenario, allowlist: AllowList) -> str:
    """The rules as the model is told them: runner form, scripts with flags, read roots."""
    runner = " ".join(allowlist.runner)
    lines = [
        f"You are {spec.agent}, a subagent in an orchestrated agent system.",
        "",
        "## Tool rules (enforced by an allow-list; anything else is denied)",
        f"- The bash tool runs exactly one command of the form "
        f"`{runner} {allowlist.script_dir}/<script> [flags]` using only the scripts and "
        "flags listed below.",
        "- No pipes, redirects, `&&`/`||`/`;` chains, heredocs, command substitution, "
        "wrappers such as `timeout`, or other programs (`ls`, `cat`, `curl`, `python`).",
        "- Each script already prints exactly the information the task needs: do not "
        "truncate or post-process its output.",
    ]
    if allowlist.read.roots:
        lines.append(
            "- The read tool may open relative paths under: "
            + ", ".join(f"`{r}`" for r in allowlist.read.roots)
            + (
                "; never: " + ", ".join(f"`{b}`" for b in allowlist.read.blocked)
                if allowlist.read.blocked
                else ""
            )
            + ". Absolute paths are blocked."
        )
    lines += ["", "## Allowed scripts"]
    for name, cmd in allowlist.scripts.items():
        lines.append(f"- `{runner} {allowlist.script_dir}/{name}`: {cmd.summary}")
        lines += _render_args(cmd, indent="    ")
    if spec.handshake:
        lines += ["", "## Closing protocol (required, in this order)"]
        lines += [f"{i}. {step.label()}" for i, step in enumerate(spec.handshake, 1)]
    if spec.system_prompt:
        lines += ["", spec.system_prompt.strip()]
    return "\n".join(lines) + "\n"


def _render_args(cmd: CommandSpec, indent: str) -> list[str]:
    out = []
    for pos in cmd.positionals:
        choice = f" one of {', '.join(pos.choices)}" if pos.choices else ""
        out.append(f"{indent}positional `{pos.name}`{choice}")
    for flag, spec in cmd.flags.items():
        text = flag + (" VALUE" if spec.value else "")
        notes = []
        if spec.required:
            notes.append("required")
        if spec.choices:
            notes.append("one of " + ", ".join(spec.choices))
        elif spec.value and spec.type != "str":
            notes.append(spec.type)
        if spec.repeatable:
            notes.append("repeatable")
        if spec.help:
            notes.append(spec.help)
        out.append(f"{indent}`{text}`" + (f" ({'; '.join(notes)})" if notes else ""))
    for sub, subspec in cmd.subcommands.items():
        out.append(f"{indent}subcommand `{sub}`")
        out += _render_args(subspec, indent + "    ")
    return out


def tool_schemas(spec: Scenario, allowlist: AllowList) -> list[dict[str, Any]]:
    """OpenAI ``tools`` entries for the tools this scenario offers: each one's parameters
    are the argument keys its allow-list entry declares, and no others (a key the
    allow-list does not declare is denied, so the schema never offers one)."""
    out: list[dict[str, Any]] = []
    for name in spec.tools:
        tool = allowlist.tool(name)
        assert tool is not None  # checked at load time
        out.append(_function(tool.name, tool.description, tool.parameters_schema()))
    for extra in spec.extra_tools:
        tool = allowlist.tool(extra.name)
        assert tool is not None  # checked at load time
        out.append(_function(extra.name, extra.description or tool.description,
                             extra.parameters or tool.parameters_schema()))
    return out


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": parameters}}


def quote_command(words: list[str]) -> str:
    """Join words into a shell command the way a careful model would write it."""
    return " ".join(shlex.quote(w) for w in words)
