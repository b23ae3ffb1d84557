"""Loading a suite folder: defaults from ``suite.yaml``, every scenario validated against
its allow-list, child templates checked, and ``instantiate`` for templated children."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_eval.errors import ConfigError
from agent_eval.policy import AllowList
from agent_eval.policy.allowlist import read_yaml_mapping
from agent_eval.policy.sources import ResolvedPolicy, choose_agent, resolve_policy
from agent_eval.scenario.prompt import render_system_prompt, tool_schemas
from agent_eval.scenario.spec import (
    PLACEHOLDER,
    TEMPLATED_FIELDS,
    ExtraTool,
    Scenario,
)


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario with its allow-list resolved and its file remembered.

    When the scenario's ``allowlist`` is an agent CLI's configuration (``opencode.json``,
    Claude Code ``settings.json``, Codex ``.rules``), ``policy`` holds the rules of the
    agent its ``agent:`` names (the configuration's default agent when it names none)
    and ``allowlist`` their conversion: the tools offered, the denial text."""

    spec: Scenario
    allowlist: AllowList
    path: Path
    policy: ResolvedPolicy | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def system_prompt(self) -> str:
        return self._system_prompt

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self._tool_schemas

    @cached_property
    def _system_prompt(self) -> str:  # rendered once per scenario, not once per session
        return render_system_prompt(self.spec, self.allowlist)

    @cached_property
    def _tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.spec, self.allowlist)

    @cached_property
    def placeholders(self) -> frozenset[str]:
        """Names of the ``${name}`` placeholders in the templated fields (empty: not a
        template)."""
        return frozenset(name for name, _ in _placeholder_uses(self.spec))

    @cached_property
    def task_pattern(self) -> re.Pattern[str]:
        """Full-matches the stripped task of any instance of this scenario, capturing each
        placeholder's value by name (how the simulator recognises a filled child task)."""
        task = self.spec.task.strip()
        parts, seen, pos = [], set(), 0
        for m in PLACEHOLDER.finditer(task):
            name = m.group(1)
            parts.append(re.escape(task[pos:m.start()]))
            parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.*?)")
            seen.add(name)
            pos = m.end()
        parts.append(re.escape(task[pos:]))
        return re.compile("".join(parts), re.DOTALL)

    @cached_property
    def _instances(self) -> dict[tuple[tuple[str, str], ...], LoadedScenario]:
        return {}


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    scenarios: dict[str, LoadedScenario]
    # limits a run set over every scenario's own (run --max-turns/--max-tool-calls):
    # {"turns": N, "tool_calls": M}, kept in the run's config so --resume keeps them
    limits: dict[str, int] | None = None

    @property
    def fingerprint(self) -> str:
        """Hash of every scenario and allow-list in the suite, for run fingerprints."""
        h = hashlib.sha256()
        for name in sorted(self.scenarios):
            sc = self.scenarios[name]
            h.update(json.dumps(sc.spec.model_dump(mode="json"), sort_keys=True).encode())
            h.update(sc.allowlist.fingerprint.encode())
        return h.hexdigest()[:16]

    def top_level(self) -> list[LoadedScenario]:
        return [s for s in self.scenarios.values() if not s.spec.child_only]


def load_suite(path: str | Path, policy: ResolvedPolicy | None = None) -> Suite:
    """Load every ``*.yaml`` scenario under a suite folder (or one scenario file).

    ``policy`` (``run --allowlist``: an allow-list or an agent CLI's rules) replaces the
    allow-list every scenario names: its prompt, tools and judge come from it, and every
    scenario is checked against it as against its own."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("suite not found; pass a folder of scenario YAML files", path=str(path))
    files = [path] if path.is_file() else sorted(
        p for p in path.glob("*.yaml") if p.name != "suite.yaml"
    )
    if not files:
        raise ConfigError("no scenario files (*.yaml) in this folder", path=str(path))
    folder = path if path.is_dir() else path.parent
    defaults = _read_suite_defaults(folder / "suite.yaml")
    allowlists: dict[Path, ResolvedPolicy] = {}
    scenarios: dict[str, LoadedScenario] = {}
    for file in files:
        sc = _load_scenario(file, defaults, allowlists, policy)
        if sc.name in scenarios:
            raise ConfigError(
                f"scenario name {sc.name!r} is also used by {scenarios[sc.name].path}; "
                "give each scenario a unique name",
                path=str(file), field="name",
            )
        scenarios[sc.name] = sc
    for sc in scenarios.values():
        for child in sc.spec.children:
            if child.scenario not in scenarios:
                raise ConfigError(
                    f"child scenario {child.scenario!r} is not in the suite; add it or fix the name",
                    path=str(sc.path), field="children",
                )
    _check_templates(scenarios)
    return Suite(name=folder.name, path=folder, scenarios=scenarios)


def instantiate(loaded: LoadedScenario, values: Mapping[str, str]) -> LoadedScenario:
    """``loaded`` with every ``${name}`` of its templated fields replaced by
    ``values[name]``, re-validated.  A name without a value stays as written (the child
    still runs and its transcript shows what the spawning call left out).  Values are
    inserted verbatim, in one pass, never re-read as placeholders.  A scenario without
    placeholders comes back as is; instances are cached per values, so a run renders each
    filled prompt once."""
    if not loaded.placeholders:
        return loaded
    key = tuple(sorted((k, str(v)) for k, v in values.items() if k in loaded.placeholders))
    cached = loaded._instances.get(key)
    if cached is not None:
        return cached
    filling = dict(key)
    data = loaded.spec.model_dump()
    for field_name in TEMPLATED_FIELDS:
        data[field_name] = _fill(data[field_name], filling)
    try:
        spec = Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(
            f"filled with {filling}, the scenario is invalid: {err['msg']}",
            path=str(loaded.path), field=".".join(str(p) for p in err["loc"]),
        ) from None
    instance = LoadedScenario(spec=spec, allowlist=loaded.allowlist, path=loaded.path,
                              policy=loaded.policy)
    if len(loaded._instances) >= MAX_CACHED_INSTANCES:
        loaded._instances.pop(next(iter(loaded._instances)))
    loaded._instances[key] = instance
    return instance


MAX_CACHED_INSTANCES = 256  # distinct spawn values a model can invent are unbounded


def _fill(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {_fill(k, values): _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _placeholder_uses(spec: Scenario) -> Iterator[tuple[str, str]]:
    """(placeholder name, field where it is used) for every use, in field order."""
    def strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, str):
            yield value, where
        elif isinstance(value, dict):
            for k, v in value.items():
                yield str(k), where
                yield from strings(v, f"{where}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from strings(v, f"{where}.{i}")

    data = spec.model_dump(include=set(TEMPLATED_FIELDS))
    for field_name in TEMPLATED_FIELDS:
        for text, where in strings(data[field_name], field_name):
            for m in PLACEHOLDER.finditer(text):
                yield m.group(1), where


def _check_templates(scenarios: dict[str, LoadedScenario]) -> None:
    """A template only runs as a child, and every spawn of it binds each placeholder to
    a flag the spawning script declares (or a positional it takes)."""
    for sc in scenarios.values():
        if sc.placeholders and not sc.spec.child_only:
            name, where = next(_placeholder_uses(sc.spec))
            raise ConfigError(
                f"${{{name}}} (in {where}) is a placeholder, filled only when a parent "
                "spawns this scenario; set child_only: true or write the value out",
                path=str(sc.path), field="child_only",
            )
    for sc in scenarios.values():
        for i, spawn in enumerate(sc.spec.children):
            child = scenarios[spawn.scenario]
            missing = sorted(child.placeholders - spawn.bind.keys())
            if missing:
                names = ", ".join(f"${{{n}}}" for n in missing)
                raise ConfigError(
                    f"child scenario {spawn.scenario!r} ({child.path.name}) uses {names}; "
                    f"bind each to a flag of the spawning call, e.g. bind: {{{missing[0]}: --{missing[0]}}}",
                    path=str(sc.path), field=f"children.{i}.bind",
                )
            command = sc.allowlist.scripts[spawn.on.script]
            for sub in spawn.on.subcommand:
                command = command.subcommands.get(sub, command)
            for name, source in spawn.bind.items():
                where = f"children.{i}.bind.{name}"
                if name not in child.placeholders:
                    raise ConfigError(
                        f"child scenario {spawn.scenario!r} has no ${{{name}}}; remove it "
                        "or fix the name", path=str(sc.path), field=where,
                    )
                if isinstance(source, str) and source not in command.flags:
                    raise ConfigError(
                        f"{spawn.on.script} declares no flag {source!r} "
                        f"(flags: {', '.join(command.flags) or 'none'})",
                        path=str(sc.path), field=where,
                    )
                if isinstance(source, int) and source >= len(command.positionals) and not any(
                    p.variadic for p in command.positionals
                ):
                    raise ConfigError(
                        f"{spawn.on.script} takes {len(command.positionals)} positional(s); "
                        f"index {source} is past the end", path=str(sc.path), field=where,
                    )


def _read_yaml(file: Path) -> dict:
    return read_yaml_mapping(file, what="scenario YAML")


# Keys ``suite.yaml`` may set for every scenario; ``description`` describes the suite itself.
SUITE_DEFAULT_FIELDS = ("allowlist", "agent", "tools", "tags", "limits", "system_prompt")


def _read_suite_defaults(file: Path) -> dict:
    """The defaults of ``suite.yaml`` (empty without one).  A misspelt key is an error
    rather than a default silently dropped, and ``name`` is refused because it would give
    every scenario the same name."""
    if not file.exists():
        return {}
    raw = _read_yaml(file)
    for key in raw:
        if key not in (*SUITE_DEFAULT_FIELDS, "description"):
            raise ConfigError(
                f"unknown suite default; use one of {', '.join(SUITE_DEFAULT_FIELDS)}, description",
                path=str(file), field=str(key),
            )
    return {k: v for k, v in raw.items() if k != "description"}


def _check_extra_tool(extra: ExtraTool, allowlist: AllowList, file: Path, where: str) -> None:
    """An extra tool must be listed by the allow-list (a tool it does not list is never
    allowed), and the schema offered for it may only name keys the allow-list declares."""
    listed = allowlist.tool(extra.name)
    if listed is None:
        raise ConfigError(
            f"extra tool {extra.name!r} is not listed by allow-list {allowlist.name!r}, so "
            "every call of it would be denied; list it under `tools` with kind other and "
            "its arguments", path=str(file), field=f"{where}.name")
    properties = (extra.parameters or {}).get("properties") or {}
    undeclared = sorted(set(properties) - set(listed.arguments))
    if undeclared:
        raise ConfigError(
            f"the schema offers {', '.join(undeclared)}, which allow-list "
            f"{allowlist.name!r} does not declare for {extra.name!r}; declare them under "
            "its `arguments` or drop them", path=str(file), field=f"{where}.parameters")


def _scenario_policy(policy: ResolvedPolicy, spec: Scenario, named: bool, file: Path
                     ) -> ResolvedPolicy | None:
    """The rules that judge the scenario: an allow-list's own, or the agent of an agent
    CLI's configuration its ``agent:`` names (``named``: the field was given)."""
    if policy.source is None:
        return None
    if not named:
        return policy
    if spec.agent not in policy.source.agents:
        raise ConfigError(f"agent {spec.agent!r} is not an agent of {policy.path}; its "
                          f"agents: {', '.join(policy.source.agents)}", path=str(file),
                          field="agent")
    chosen = policy.for_agent(choose_agent(policy.source, named=spec.agent))
    return ResolvedPolicy(chosen.path, chosen.allowlist, chosen.agent, chosen.source,
                          chosen.setting, chosen.notes, "scenario")


def _load_scenario(file: Path, defaults: dict, allowlists: dict[Path, ResolvedPolicy],
                   override: ResolvedPolicy | None = None) -> LoadedScenario:
    raw = _read_yaml(file)
    merged = dict(defaults)
    merged.update(raw)
    if isinstance(defaults.get("limits"), dict) and isinstance(raw.get("limits"), dict):
        merged["limits"] = {**defaults["limits"], **raw["limits"]}
    merged.setdefault("name", file.stem)
    if "tags" in defaults and "tags" in raw:
        merged["tags"] = list(dict.fromkeys([*defaults["tags"], *raw["tags"]]))
    try:
        spec = Scenario.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against `agent-eval schema scenario`"
        elif err["type"] == "missing":
            msg = "required field is missing; add it"
        raise ConfigError(msg, path=str(file), field=loc) from None
    # a relative allow-list path is relative to the file that named it
    base = file.parent if "allowlist" in raw else (file.parent / "suite.yaml").parent
    al_path = (base / spec.allowlist).resolve()
    if override is not None:
        allowlists[al_path] = override
    elif al_path not in allowlists:
        if not al_path.exists():
            raise ConfigError(
                f"allow-list {spec.allowlist!r} not found (looked at {al_path})",
                path=str(file), field="allowlist",
            )
        allowlists[al_path] = resolve_policy(al_path)
    policy = _scenario_policy(allowlists[al_path], spec, "agent" in merged, file)
    allowlist = policy.allowlist if policy is not None else allowlists[al_path].allowlist
    offered = {t.name for t in allowlist.tools}
    for tool in spec.tools:
        if tool not in offered:
            raise ConfigError(
                f"tool {tool!r} is not offered by allow-list {allowlist.name!r} "
                f"(offered: {', '.join(sorted(offered))})",
                path=str(file), field="tools",
            )
    for i, extra in enumerate(spec.extra_tools):
        _check_extra_tool(extra, allowlist, file, f"extra_tools.{i}")
    matches = [(f"goal.{i}", m) for i, m in enumerate(spec.goal)]
    matches += [(f"handshake.{i}", m) for i, m in enumerate(spec.handshake)]
    matches += [(f"environment.outputs.{i}.match", c.match)
                for i, c in enumerate(spec.environment.outputs)]
    matches += [(f"children.{i}.on", c.on) for i, c in enumerate(spec.children)]
    for where, match in matches:
        if match.script not in allowlist.scripts:
            raise ConfigError(
                f"script {match.script!r} is not on allow-list {allowlist.name!r}; "
                "use a listed script or add it to the allow-list",
                path=str(file), field=f"{where}.script",
            )
    return LoadedScenario(spec=spec, allowlist=allowlist, path=file, policy=policy)
