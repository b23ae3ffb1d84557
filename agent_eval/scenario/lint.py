"""``agent-eval validate``: every problem of a suite folder at once, each at its file:line.

What is checked, per file and then across the suite:

- YAML syntax; every ``*.yaml`` in the folder (but ``suite.yaml``) must be a scenario: a
  mapping with a ``task``.  Other YAML belongs in a subfolder (only the folder's own
  ``*.yaml`` files are read); a ``*.yml`` file is reported, as it would be silently skipped.
- The scenario schema: unknown keys, missing fields, wrong types (all of them, not the first).
- What loading checks: the allow-list exists, tools are offered, scripts are listed, child
  scenarios exist, templates are bound.
- The ``reference`` plan: each step is allowed by the scenario's own allow-list; replayed,
  it meets every ``goal`` and every ``handshake`` step in order, the last step closing.
- A simulated answer for each reference call: a canned ``environment.outputs`` entry for
  each command, a virtual file for each read (else the model sees only the default output).

Pure: reads files, returns :class:`Problem` records; the CLI prints them.

Example::

    problems = lint_suite(Path("my-suite"))
    for p in problems: print(p.render())
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agent_eval.errors import ConfigError
from agent_eval.policy.allowlist import YamlRefused, parse_yaml
from agent_eval.scenario.spec import Scenario
from agent_eval.scenario.suite import (
    SUITE_DEFAULT_FIELDS,
    LoadedScenario,
    Suite,
    instantiate,
    load_suite,
)


@dataclass(frozen=True)
class Problem:
    """One finding: where (file, 1-based line or 0 when unknown, field) and what to do."""

    path: str
    line: int
    field: str
    message: str

    def render(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "field": self.field,
                "message": self.message}


def lint_suite(folder: Path) -> list[Problem]:
    """Every problem of the suite at ``folder`` (a folder of scenario YAML files)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(str(folder), 0, "", "not a folder; give a suite folder of scenario "
                                            "YAML files")]
    problems: list[Problem] = []
    trees: dict[Path, yaml.Node | None] = {}
    for yml in sorted(folder.glob("*.yml")):
        problems.append(Problem(str(yml), 0, "", "ignored: only *.yaml files are scenarios; "
                                                 "rename it to .yaml or move it out"))
    defaults = _lint_defaults(folder / "suite.yaml", trees, problems)
    files = sorted(p for p in folder.glob("*.yaml") if p.name != "suite.yaml")
    if not files:
        problems.append(Problem(str(folder), 0, "", "no scenario files (*.yaml) in this folder"))
    for file in files:
        problems += _lint_file(file, defaults, trees)
    if problems:
        return problems  # cross-file checks need every file to load
    try:
        suite = load_suite(folder)
    except ConfigError as exc:
        path = Path(exc.path) if exc.path else folder
        return [Problem(str(path), _line(trees.get(path), exc.field), exc.field or "",
                        _bare(exc))]
    for sc in suite.scenarios.values():
        problems += lint_scenario(suite, sc, trees.get(sc.path))
    return problems


def _bare(exc: ConfigError) -> str:
    text = str(exc)
    prefix = f"{exc.path}: {exc.field}: " if exc.path and exc.field else f"{exc.path}: "
    return text[len(prefix):] if exc.path and text.startswith(prefix) else text


def _compose(file: Path, trees: dict, problems: list[Problem]) -> Any:
    """The file's data (None on a YAML error, recorded with its line)."""
    try:
        trees[file], data = parse_yaml(file.read_text(encoding="utf-8"))
        return data
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(file), 0, "", f"cannot read: {exc}"))
    except YamlRefused as exc:  # a "billion laughs": refused before it is built
        problems.append(Problem(str(file), 0, "", str(exc)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        what = getattr(exc, "problem", None) or str(exc)
        problems.append(Problem(str(file), mark.line + 1 if mark else 0, "",
                                f"not valid YAML: {what}"))
    return None


def _lint_defaults(file: Path, trees: dict, problems: list[Problem]) -> dict:
    if not file.exists():
        return {}
    raw = _compose(file, trees, problems)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(str(file), 1, "", "suite.yaml must be a mapping of defaults"))
        return {}
    for key in raw:
        if key not in (*SUITE_DEFAULT_FIELDS, "description"):
            problems.append(Problem(
                str(file), _line(trees.get(file), str(key)), str(key),
                f"unknown suite default; use one of {', '.join(SUITE_DEFAULT_FIELDS)}, "
                "description"))
    return {k: v for k, v in raw.items() if k in SUITE_DEFAULT_FIELDS}


def _lint_file(file: Path, defaults: dict, trees: dict) -> list[Problem]:
    problems: list[Problem] = []
    raw = _compose(file, trees, problems)
    if problems:
        return problems
    if not isinstance(raw, dict) or "task" not in raw:
        return [Problem(str(file), 1, "", "not a scenario (no `task:`): every *.yaml in a suite "
                                          "folder is a scenario; move other YAML into a "
                                          "subfolder")]
    merged = {**defaults, **raw}
    if isinstance(defaults.get("limits"), dict) and isinstance(raw.get("limits"), dict):
        merged["limits"] = {**defaults["limits"], **raw["limits"]}
    merged.setdefault("name", file.stem)
    try:
        Scenario.model_validate(merged)
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field; check the spelling against `agent-eval schema scenario`"
            elif err["type"] == "missing":
                msg = "required field is missing; add it"
            # a field the scenario does not set came from the folder's suite.yaml
            where = file
            if err["loc"] and err["loc"][0] not in raw and err["loc"][0] in defaults:
                where = file.parent / "suite.yaml"
            problems.append(Problem(str(where), _line(trees.get(where), loc),
                                    loc or "(top level)", msg))
    return problems


def playable(suite: Suite, sc: LoadedScenario) -> LoadedScenario | None:
    """``sc`` as a session plays it: a template filled as the first parent whose reference
    spawns it fills it (None when no parent's reference spawns it)."""
    if not sc.placeholders:
        return sc
    for parent in suite.scenarios.values():
        for spawn in parent.spec.children:
            if spawn.scenario != sc.name:
                continue
            for verdict in reference_verdicts(parent):
                if spawn.on.matches(verdict.invocation):
                    return instantiate(sc, spawn.values(verdict.invocation))
    return None


def reference_verdicts(sc: LoadedScenario) -> list:
    """The engine's verdict on each step of the scenario's reference plan, in order."""
    from agent_eval.policy import check_command, check_read

    verdicts = []
    for step in sc.spec.reference:  # exactly one of bash and read (the step's validator)
        if step.bash is not None:
            verdicts.append(check_command(step.bash, sc.allowlist))
        elif step.read is not None:
            verdicts.append(check_read(step.read, sc.allowlist))
    return verdicts


def lint_scenario(suite: Suite, sc: LoadedScenario, tree: Any = None) -> list[Problem]:
    """The problems of one loaded scenario's reference plan (or of a child filled from its
    parent): each step allowed by its own allow-list, each answered by the simulated
    environment, every goal met and the handshake closed by the last step.  ``tree``: the
    file's composed YAML, for line numbers (0 without it)."""
    path = str(sc.path)
    if not sc.spec.reference:
        return [Problem(path, _line(tree, "name") or 1, "reference",
                        "no reference plan: add the calls a disciplined model makes, so the "
                        "simulator can play it and the handshake is shown reachable")]
    played = playable(suite, sc)
    if played is None:
        return [Problem(path, _line(tree, "child_only"), "children",
                        "template spawned by no parent's reference; add a spawning call")]
    problems = []
    verdicts = reference_verdicts(played)
    for i, (step, verdict) in enumerate(zip(played.spec.reference, verdicts, strict=True)):
        where = f"reference.{i}"
        if not verdict.allowed:
            problems.append(Problem(path, _line(tree, where), where,
                                    f"{step.bash or step.read!r} is denied by its own "
                                    f"allow-list ({verdict.primary}); fix the step or the list"))
        elif step.bash is not None and not _answered(played, verdict.invocation):
            problems.append(Problem(path, _line(tree, where), where,
                                    "no simulated answer: add an environment.outputs entry "
                                    "whose match fits this call"))
        elif step.read is not None and verdict.path not in played.spec.environment.files:
            problems.append(Problem(path, _line(tree, where), where,
                                    f"no simulated answer: add {verdict.path!r} to "
                                    "environment.files"))
    if not problems:
        problems += _lint_closing(played, [v.invocation for v in verdicts], tree)
    return problems


def _answered(sc: LoadedScenario, inv: Any) -> bool:
    """A canned output fits the call, or it spawns a child (the child's result answers)."""
    if inv is None:  # an allowed plain program: the allow-list's own default answers it
        return True
    return any(o.match.matches(inv) for o in sc.spec.environment.outputs) or any(
        c.on.matches(inv) for c in sc.spec.children)


def _lint_closing(sc: LoadedScenario, invocations: list, tree: Any) -> list[Problem]:
    path, spec = str(sc.path), sc.spec
    goal_left = list(enumerate(spec.goal))
    done = 0
    closed_at: int | None = None  # the step that completes the handshake
    for i, inv in enumerate(invocations):
        goal_left = [(n, g) for n, g in goal_left if not g.matches(inv)]
        if done < len(spec.handshake) and spec.handshake[done].matches(inv):
            done += 1
            if done == len(spec.handshake):
                closed_at = i
                break
    out = [Problem(path, _line(tree, f"goal.{n}"), f"goal.{n}",
                   f"{g.label()!r} is met by no reference step before the session closes")
           for n, g in goal_left]
    if done < len(spec.handshake):
        out.append(Problem(path, _line(tree, f"handshake.{done}"), f"handshake.{done}",
                           f"unreachable: no reference step (after the previous handshake "
                           f"step) makes {spec.handshake[done].label()!r}"))
    elif closed_at is not None and closed_at != len(invocations) - 1:
        out.append(Problem(path, _line(tree, f"reference.{closed_at + 1}"),
                           f"reference.{closed_at + 1}",
                           "after the last handshake step the session is over; "
                           "remove this step or move it before"))
    return out


def _line(tree: Any, dotted: str | None) -> int:
    """1-based line of ``dotted`` (``environment.outputs.0.match``) in a composed YAML tree:
    the deepest node found along the path (0 when there is no tree)."""
    if tree is None:
        return 0
    node, line = tree, tree.start_mark.line + 1
    for part in (dotted or "").split("."):
        if not part:
            break
        node = _child(node, part)
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _child(node: Any, part: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if str(key.value) == part:
                return value
        return None
    if isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
        return node.value[int(part)]
    return None
