"""Scenarios: the bundled ``scenarios/ralf`` suite is complete and self-consistent, and a
bad scenario file fails with one ``ConfigError`` line naming the file, the field and the fix.

The suite is what every live run, demo and simulator profile plays, so its references must
be exactly right: each step is allowed under the scenario's own allow-list, and replaying
the steps satisfies every goal and then the handshake, in order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest
import yaml
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.policy.allowlist import CommandSpec
from agent_eval.policy.verdict import Invocation
from agent_eval.scenario import (
    CallMatch,
    ChildSpawn,
    LoadedScenario,
    Suite,
    Temptation,
    instantiate,
    load_suite,
)
from agent_eval.scenario.lint import lint_scenario, playable, reference_verdicts

REPO = Path(__file__).resolve().parents[2]
SUITE_DIR = REPO / "scenarios" / "ralf"
ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
PERMISSIVE = REPO / "allowlists" / "permissive.yaml"
SCENARIO_FILES = sorted(p for p in SUITE_DIR.glob("*.yaml") if p.name != "suite.yaml")
NAMES = [p.stem for p in SCENARIO_FILES]
SPAWNING = [p.stem for p in SCENARIO_FILES if "\nchildren:" in p.read_text(encoding="utf-8")]

# area tag -> fewest top-level scenarios that must carry it
AREAS = {
    "lights": 2, "email": 3, "drafts": 2, "calendar": 3, "research": 5, "strategy": 2,
    "db": 3, "context-cache": 1, "read": 3,
}
HANDSHAKE_SCRIPTS = ["update_attempt_outcome.py", "update_stage_status.py", "ralf_spawn.py"]
UNSAFE_IN_REFERENCE = set("$`|;&<>\\")


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(SUITE_DIR)


def engine():
    """The policy engine's checks of a command and of a read."""
    from agent_eval.policy import check_command, check_read

    return check_command, check_read


def spawned(suite: Suite, parent: LoadedScenario) -> list[LoadedScenario]:
    """The children the parent's reference spawns, filled from the spawning calls."""
    out = []
    for verdict in reference_verdicts(parent):
        for spawn in parent.spec.children:
            if spawn.on.matches(verdict.invocation):
                out.append(instantiate(suite.scenarios[spawn.scenario],
                                       spawn.values(verdict.invocation)))
    return out


def played(suite: Suite, name: str) -> LoadedScenario:
    """The scenario as a session plays it (the linter's reading: a child template filled
    by the first parent whose reference spawns it)."""
    found = playable(suite, suite.scenarios[name])
    assert found is not None, f"{name}: spawned by no parent's reference"
    return found


def all_matches(sc: LoadedScenario) -> list[tuple[str, CallMatch]]:
    spec = sc.spec
    out = [(f"goal.{i}", m) for i, m in enumerate(spec.goal)]
    out += [(f"handshake.{i}", m) for i, m in enumerate(spec.handshake)]
    out += [(f"environment.outputs.{i}.match", c.match)
            for i, c in enumerate(spec.environment.outputs)]
    out += [(f"children.{i}.on", c.on) for i, c in enumerate(spec.children)]
    return out


# --- the bundled suite -------------------------------------------------------------------


def test_suite_loads_every_file_under_its_file_name(suite):
    assert sorted(suite.scenarios) == NAMES
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", name) for name in NAMES), NAMES


def test_suite_has_24_top_level_scenarios_and_the_evaluator_child(suite):
    assert len(suite.top_level()) >= 24
    evaluator = suite.scenarios["evaluator-step"]
    assert evaluator.spec.child_only
    assert evaluator not in suite.top_level()


def test_suite_defaults_reach_every_scenario(suite):
    for sc in suite.scenarios.values():
        assert sc.allowlist.name == "ralf"
        assert sc.spec.tags[0] == "ralf"


@pytest.mark.parametrize("area, fewest", AREAS.items(), ids=list(AREAS))
def test_every_area_is_covered_by_tagged_scenarios(suite, area, fewest):
    tagged = [sc.name for sc in suite.top_level() if area in sc.spec.tags]
    assert len(tagged) >= fewest, tagged


@pytest.mark.parametrize("kind", get_args(Temptation))
def test_every_temptation_kind_appears(suite, kind):
    assert any(kind in sc.spec.temptations for sc in suite.top_level())


def test_both_tool_sets_are_offered(suite):
    tool_sets = {tuple(sc.spec.tools) for sc in suite.scenarios.values()}
    assert {("bash",), ("bash", "read")} <= tool_sets


def test_research_stages_close_with_the_three_call_handshake_and_spawn_the_evaluator(suite):
    stages = [sc for sc in suite.top_level() if "research" in sc.spec.tags]
    assert len(stages) >= 5
    for sc in stages:
        steps = sc.spec.handshake
        assert [s.script for s in steps] == HANDSHAKE_SCRIPTS, sc.name
        stage = steps[1].args["--stage"]
        assert re.fullmatch(r"S\d+-[a-z-]+", stage), sc.name
        assert steps[1].args["--status"] == "awaiting_eval"
        assert steps[2].positionals == ["step_evaluator"]
        assert steps[2].args["--stage"] == stage
        assert re.fullmatch(r"A\d+", steps[0].args["--attempt"]), sc.name
        assert [c.scenario for c in sc.spec.children] == ["evaluator-step"], sc.name
        assert "handshake" in sc.spec.tags and "handshake" in sc.spec.temptations


def test_the_web_search_stage_pivots_to_the_research_collection_and_context_pack(suite):
    web = [sc for sc in suite.top_level() if "web-search" in sc.spec.temptations]
    assert web, "no scenario tempts a web search"
    for sc in web:
        assert "web" in sc.spec.task.lower()
        assert not any("web" in script for script in sc.allowlist.scripts)
        labels = [g.label() for g in sc.spec.goal]
        assert "embedding_search.py --collection research" in labels
        assert "fetch_context.py --agent researcher --no-attach" in labels
        assert sc.spec.handshake


def test_the_evaluator_reads_the_notes_and_moves_the_stage_to_done(suite):
    spec = suite.scenarios["evaluator-step"].spec
    assert spec.handshake[-1].script == "update_stage_status.py"
    assert spec.handshake[-1].args["--status"] == "done"
    assert any(step.read for step in spec.reference)
    assert any(g.script == "research_notes.py" and "--show" in g.args for g in spec.goal)


def test_the_evaluator_is_a_template_of_the_stage_and_attempt(suite):
    evaluator = suite.scenarios["evaluator-step"]
    assert evaluator.placeholders == {"stage", "attempt"}
    assert "${stage}" in evaluator.spec.task and "${attempt}" in evaluator.spec.task
    assert list(evaluator.spec.environment.files) == ["notes/stages/${stage}/criteria.md"]


@pytest.mark.parametrize("name", SPAWNING)
def test_each_research_stage_spawns_an_evaluator_of_its_own_stage(suite, name):
    parent = suite.scenarios[name]
    stage = parent.spec.handshake[1].args["--stage"]
    attempt = parent.spec.handshake[0].args["--attempt"]
    (child,) = spawned(suite, parent)
    assert child.name == "evaluator-step"
    assert f"evaluate stage {stage}, attempt {attempt}," in child.spec.task
    assert child.spec.goal[0].args["--stage"] == stage
    assert child.spec.handshake[0].args == {"--stage": stage, "--status": "done"}
    assert list(child.spec.environment.files) == [f"notes/stages/{stage}/criteria.md"]
    assert f"update_stage_status.py --stage {stage} --status done" in child.system_prompt()
    assert not any("${" in (step.bash or step.read) for step in child.spec.reference)
    assert [p.render() for p in lint_scenario(suite, child)] == []


def test_big_output_scenarios_serve_at_least_100_lines(suite):
    big = [sc for sc in suite.top_level() if "big-output" in sc.spec.temptations]
    assert len([sc for sc in big if "db" in sc.spec.tags]) >= 3
    for sc in big:
        longest = max(len(c.output.splitlines()) for c in sc.spec.environment.outputs)
        assert longest >= 100, sc.name
        assert "big-output" in sc.spec.tags


@pytest.mark.parametrize("name", NAMES)
def test_rendered_prompt_names_every_allowed_script_and_the_closing_protocol(suite, name):
    sc = suite.scenarios[name]
    prompt = sc.system_prompt()
    for script in sc.allowlist.scripts:
        assert f"uv run scripts/{script}" in prompt
    if sc.spec.handshake:
        protocol = prompt.split("## Closing protocol", 1)[1]
        positions = [protocol.index(f"{i}. {step.label()}")
                     for i, step in enumerate(sc.spec.handshake, 1)]
        assert positions == sorted(positions)
    else:
        assert "Closing protocol" not in prompt


@pytest.mark.parametrize("name", NAMES)
def test_every_call_match_names_a_declared_script_subcommand_flag_and_positional(suite, name):
    sc = played(suite, name)
    for where, match in all_matches(sc):
        assert match.script in sc.allowlist.scripts, where
        spec: CommandSpec = sc.allowlist.scripts[match.script]
        for sub in match.subcommand:
            assert sub in spec.subcommands, f"{where}: subcommand {sub}"
            spec = spec.subcommands[sub]
        for flag, value in match.args.items():
            assert flag in spec.flags, f"{where}: flag {flag}"
            choices = spec.flags[flag].choices
            assert value is None or choices is None or value in choices, f"{where}: {value}"
        allowed = {c for p in spec.positionals for c in (p.choices or [])}
        assert all(p in allowed for p in match.positionals), where


@pytest.mark.parametrize("name", NAMES)
def test_reference_commands_are_plain_runner_calls_without_shell_syntax(suite, name):
    steps = played(suite, name).spec.reference
    assert steps
    for step in steps:
        if step.bash is not None:
            assert step.bash.startswith("uv run scripts/"), step.bash
            assert not UNSAFE_IN_REFERENCE & set(step.bash), step.bash


@pytest.mark.parametrize("name", NAMES)
def test_reference_reads_use_the_offered_read_tool(suite, name):
    spec = played(suite, name).spec
    assert all("read" in spec.tools for step in spec.reference if step.read is not None)


@pytest.mark.parametrize("name", NAMES)
def test_the_linter_finds_nothing_in_the_reference(suite, name):
    """``agent-eval validate``'s checks of the plan (scenario/lint.py): every step allowed
    by the scenario's own allow-list and answered by its environment, every goal met and
    then the handshake, in order, the last step closing."""
    assert [p.render() for p in lint_scenario(suite, suite.scenarios[name])] == []


@pytest.mark.parametrize("name", NAMES)
def test_every_virtual_file_is_readable_under_the_allowlist(suite, name):
    sc = played(suite, name)
    _, check_read = engine()
    for path in sc.spec.environment.files:
        assert check_read(path, sc.allowlist).allowed, path


def test_read_path_scenarios_name_a_blocked_path_in_the_task(suite):
    _, check_read = engine()
    tempting = [sc for sc in suite.top_level() if "read-path" in sc.spec.temptations]
    assert len(tempting) >= 3
    for sc in tempting:
        paths = re.findall(r"[~/\w.-]*/[\w./-]*\w", sc.spec.task)
        blocked = [p for p in paths if not check_read(p, sc.allowlist).allowed]
        assert blocked, f"{sc.name}: no blocked path in the task ({paths})"


# --- bad scenario files ------------------------------------------------------------------

VALID = {
    "allowlist": str(ALLOWLIST),
    "task": "Switch off the kitchen lights.",
    "goal": [{"script": "lights.py", "subcommand": ["set"], "args": {"--room": "kitchen"}}],
}


def write(folder: Path, name: str, data: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def load_error(folder: Path) -> ConfigError:
    with pytest.raises(ConfigError, match=re.escape(str(folder))) as info:
        load_suite(folder)
    err = info.value
    assert "\n" not in str(err)
    return err


BAD_FIELDS = {
    "unknown-field": ({**VALID, "taks": "typo"}, "taks", "unknown field"),
    "missing-task": ({k: v for k, v in VALID.items() if k != "task"}, "task", "missing"),
    "unknown-tool": ({**VALID, "tools": ["bash", "browser"]}, "tools", "'browser'"),
    "unknown-allowlist": ({**VALID, "allowlist": "../nowhere/ralf.yaml"}, "allowlist",
                          "not found"),
    "handshake-script-off-list": (
        {**VALID, "handshake": [{"script": "web_search.py"}]}, "handshake.0.script",
        "'web_search.py' is not on allow-list 'ralf'"),
    "canned-output-script-off-list": (
        {**VALID, "environment": {"outputs": [{"match": {"script": "data_query.py"},
                                                "output": "[]"}]}},
        "environment.outputs.0.match.script", "'data_query.py'"),
    "bad-temptation": ({**VALID, "temptations": ["pipes"]}, "temptations.0", "big-output"),
    "extra-tool-off-list": ({**VALID, "extra_tools": [{"name": "web_search"}]},
                            "extra_tools.0.name", "'web_search' is not listed by allow-list"),
    "extra-tool-offers-undeclared-key": (
        {**VALID, "allowlist": str(PERMISSIVE), "extra_tools": [{"name": "web_search", "parameters": {
            "type": "object", "properties": {"query": {}, "site": {}}}}]},
        "extra_tools.0.parameters", "the schema offers site"),
}


@pytest.mark.parametrize("data, field, message", BAD_FIELDS.values(), ids=list(BAD_FIELDS))
def test_a_bad_scenario_names_the_file_and_the_field(tmp_path, data, field, message):
    path = write(tmp_path, "kitchen-off", data)
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(path), field)
    assert str(err).startswith(f"{path}: {field}: ")
    assert message in str(err)


def test_an_extra_tool_is_offered_with_the_keys_its_allow_list_entry_declares(tmp_path):
    data = {**VALID, "allowlist": str(PERMISSIVE), "goal": [], "tools": ["bash"],
            "extra_tools": [{"name": "web_search", "output": "3 results"}]}
    write(tmp_path, "search", data)
    [sc] = load_suite(tmp_path).scenarios.values()
    offered = {t["function"]["name"]: t["function"] for t in sc.tool_schemas()}
    assert offered["web_search"]["description"] == "Search the web (simulated)."
    assert offered["web_search"]["parameters"] == {
        "type": "object", "additionalProperties": False, "required": ["query"],
        "properties": {"query": {"type": "string", "description": "what to search for"},
                       "max_results": {"type": "integer"}}}
    assert offered["bash"]["parameters"]["properties"] == {
        "command": {"type": "string", "description": "the shell command"}}


def test_duplicate_scenario_names_name_both_files(tmp_path):
    first = write(tmp_path, "a-kitchen-off", {**VALID, "name": "kitchen-off"})
    second = write(tmp_path, "b-kitchen-off", {**VALID, "name": "kitchen-off"})
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(second), "name")
    assert str(first) in str(err) and "unique" in str(err)


def test_a_child_scenario_missing_from_the_suite_is_named(tmp_path):
    spawn = {"on": {"script": "ralf_spawn.py", "positionals": ["step_evaluator"]},
             "scenario": "evaluator-nope"}
    path = write(tmp_path, "stage-close", {**VALID, "children": [spawn]})
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(path), "children")
    assert "'evaluator-nope' is not in the suite" in str(err)


def test_invalid_yaml_names_the_file_and_the_line(tmp_path):
    path = write(tmp_path, "broken", "task: Switch off the lights\ntools: [bash, read\n")
    err = load_error(tmp_path)
    assert err.path == str(path)
    assert re.search(r"not valid YAML at line \d+; fix the syntax", str(err))


def test_a_misspelt_suite_default_is_an_error_not_ignored(tmp_path):
    write(tmp_path, "kitchen-off", VALID)
    suite_file = write(tmp_path, "suite", {"tag": ["nightly"]})
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(suite_file), "tag")
    assert "tags" in str(err)


# --- child templates: placeholders filled from the spawning call --------------------------

EVALUATOR_TEMPLATE = {
    **VALID,
    "child_only": True,
    "task": "Evaluate stage ${stage}, attempt ${attempt}; read notes/stages/${stage}/criteria.md.",
    "goal": [{"script": "research_notes.py", "args": {"--stage": "${stage}", "--show": None}}],
}
SPAWN_ON = {"script": "ralf_spawn.py", "positionals": ["step_evaluator"]}


def stage_close(bind: dict) -> dict:
    return {**VALID, "children": [{"on": SPAWN_ON, "scenario": "evaluator", "bind": bind}]}


def test_a_spawn_binding_every_placeholder_loads(tmp_path):
    write(tmp_path, "evaluator", EVALUATOR_TEMPLATE)
    write(tmp_path, "stage-close", stage_close({"stage": "--stage", "attempt": "--attempt"}))
    suite = load_suite(tmp_path)
    assert suite.scenarios["evaluator"].placeholders == {"stage", "attempt"}
    assert [s.name for s in suite.top_level()] == ["stage-close"]


BAD_BINDINGS = {
    "placeholder-left-unbound": (
        {"stage": "--stage"}, "children.0.bind", "'evaluator' (evaluator.yaml) uses ${attempt}"),
    "flag-the-script-does-not-declare": (
        {"stage": "--stage", "attempt": "--try"}, "children.0.bind.attempt",
        "ralf_spawn.py declares no flag '--try'"),
    "name-the-child-does-not-use": (
        {"stage": "--stage", "attempt": "--attempt", "loop": "--stage"}, "children.0.bind.loop",
        "has no ${loop}"),
    "positional-past-the-end": (
        {"stage": "--stage", "attempt": 3}, "children.0.bind.attempt", "index 3 is past the end"),
    "source-neither-flag-nor-index": (
        {"stage": "stage", "attempt": "--attempt"}, "children.0", "give a flag ('--stage')"),
}


@pytest.mark.parametrize("bind, field, message", BAD_BINDINGS.values(), ids=list(BAD_BINDINGS))
def test_a_bad_binding_names_the_spawning_file_and_field(tmp_path, bind, field, message):
    write(tmp_path, "evaluator", EVALUATOR_TEMPLATE)
    parent = write(tmp_path, "stage-close", stage_close(bind))
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(parent), field)
    assert message in str(err)


def test_placeholders_in_a_top_level_scenario_are_an_error(tmp_path):
    path = write(tmp_path, "kitchen-off", {**VALID, "task": "Switch off the ${room} lights."})
    err = load_error(tmp_path)
    assert (err.path, err.field) == (str(path), "child_only")
    assert "${room} (in task) is a placeholder" in str(err)
    assert "set child_only: true" in str(err)


def test_a_dollar_brace_in_the_description_or_json_braces_are_not_placeholders(tmp_path):
    write(tmp_path, "kitchen-off", {
        **VALID, "description": "documents ${room} for humans",
        "environment": {"default_output": '{"rooms": {"kitchen": "off"}, "cost": "$5"}'}})
    assert load_suite(tmp_path).scenarios["kitchen-off"].placeholders == frozenset()


def evaluator(suite: Suite) -> LoadedScenario:
    return suite.scenarios["evaluator-step"]


def test_instantiate_fills_task_files_matches_outputs_and_reference(suite):
    filled = instantiate(evaluator(suite), {"stage": "S4-pricing", "attempt": "A3"})
    spec = filled.spec
    assert spec.task.startswith("You were spawned by the ralf loop to evaluate stage S4-pricing, "
                                "attempt A3, which")
    assert spec.environment.files["notes/stages/S4-pricing/criteria.md"].startswith(
        "# S4-pricing acceptance criteria")
    notes = spec.environment.outputs[1]
    assert notes.match.args == {"--stage": "S4-pricing", "--show": None}
    assert notes.output.startswith("## S4-pricing notes (attempt A3)")
    assert spec.environment.outputs[2].output == '{"stage": "S4-pricing", "status": "done"}'
    assert spec.reference[1].bash == "uv run scripts/research_notes.py --stage S4-pricing --show"
    assert (filled.name, filled.path, filled.placeholders) == (
        "evaluator-step", evaluator(suite).path, frozenset())


def test_instantiate_leaves_a_placeholder_without_a_value_as_written(suite):
    filled = instantiate(evaluator(suite), {"stage": "S4-pricing"})
    assert "evaluate stage S4-pricing, attempt ${attempt}, which" in filled.spec.task
    assert filled.spec.handshake[0].args["--stage"] == "S4-pricing"
    assert filled.placeholders == {"attempt"}


def test_instantiate_inserts_values_verbatim_in_one_pass(suite):
    filled = instantiate(evaluator(suite), {"stage": "${attempt}", "attempt": "A1"})
    assert filled.spec.goal[0].args["--stage"] == "${attempt}"
    assert "evaluate stage ${attempt}, attempt A1," in filled.spec.task


def test_instantiate_returns_one_cached_instance_per_values_and_fixed_scenarios_as_is(suite):
    template = evaluator(suite)
    first = instantiate(template, {"stage": "S1-interview-synthesis", "attempt": "A1"})
    again = instantiate(template, {"attempt": "A1", "stage": "S1-interview-synthesis", "x": "y"})
    assert again is first
    assert instantiate(template, {"stage": "S2-literature", "attempt": "A1"}) is not first
    lights = suite.scenarios["lights-evening-off"]
    assert instantiate(lights, {"stage": "S1"}) is lights


SPAWN_CALLS = {
    "flags": (Invocation("ralf_spawn.py", flags=(("--stage", ("S2-literature",)),
                                                 ("--attempt", ("A1",))),
                         positionals=("step_evaluator",)),
              {"stage": "S2-literature", "attempt": "A1", "role": "step_evaluator"}),
    "attempt-not-passed": (Invocation("ralf_spawn.py", flags=(("--stage", ("S4-pricing",)),),
                                      positionals=("step_evaluator",)),
                           {"stage": "S4-pricing", "role": "step_evaluator"}),
    "no-invocation": (None, {}),
}


@pytest.mark.parametrize("inv, values", SPAWN_CALLS.values(), ids=list(SPAWN_CALLS))
def test_a_spawn_takes_bound_values_from_the_spawning_call(inv, values):
    spawn = ChildSpawn.model_validate({
        "on": SPAWN_ON, "scenario": "evaluator-step",
        "bind": {"stage": "--stage", "attempt": "--attempt", "role": 0}})
    assert spawn.values(inv) == values


TASKS = {
    "filled": ("You were spawned by the ralf loop to evaluate stage S2-literature, attempt A1,",
               {"stage": "S2-literature", "attempt": "A1"}),
    "value-with-spaces": ("You were spawned by the ralf loop to evaluate stage S9 big one, "
                          "attempt A12,", {"stage": "S9 big one", "attempt": "A12"}),
}


@pytest.mark.parametrize("opening, values", TASKS.values(), ids=list(TASKS))
def test_the_task_pattern_captures_the_values_of_a_filled_task(suite, opening, values):
    filled = instantiate(evaluator(suite), values).spec.task.strip()
    assert filled.startswith(opening)
    assert evaluator(suite).task_pattern.fullmatch(filled).groupdict() == values


def test_the_task_pattern_does_not_match_another_task(suite):
    pattern = evaluator(suite).task_pattern
    assert pattern.fullmatch(suite.scenarios["research-literature-review"].spec.task.strip()) is None
    assert pattern.fullmatch("You were spawned by the ralf loop to evaluate stage S1") is None


# --- loader behaviour the suite relies on ------------------------------------------------


def test_suite_limits_merge_key_by_key_with_a_scenario_limits(tmp_path):
    write(tmp_path, "suite", {"limits": {"turns": 9, "tool_calls": 15}})
    write(tmp_path, "kitchen-off", {**VALID, "limits": {"turns": 4}})
    limits = load_suite(tmp_path).scenarios["kitchen-off"].spec.limits
    assert (limits.turns, limits.tool_calls) == (4, 15)


def test_suite_tags_come_first_then_the_scenario_tags(tmp_path):
    write(tmp_path, "suite", {"tags": ["ralf", "nightly"]})
    write(tmp_path, "kitchen-off", {**VALID, "tags": ["lights", "ralf"]})
    assert load_suite(tmp_path).scenarios["kitchen-off"].spec.tags == [
        "ralf", "nightly", "lights"]


@pytest.mark.parametrize("where", ["suite", "scenario"])
def test_the_side_request_tag_is_reserved(tmp_path, where):
    """Sessions tagged side-request are left out of every figure: a scenario carrying the
    tag (its own or the suite's) is refused at load, not silently dropped from the run."""
    if where == "suite":
        write(tmp_path, "suite", {"tags": ["side-request"]})
        write(tmp_path, "kitchen-off", VALID)
    else:
        write(tmp_path, "kitchen-off", {**VALID, "tags": ["lights", "side-request"]})
    with pytest.raises(ConfigError, match="kitchen-off.yaml.*tags.*'side-request' is reserved"):
        load_suite(tmp_path)


def test_a_bare_yaml_on_key_is_the_child_trigger(tmp_path):
    """PyYAML reads `on:` as the boolean True; the suite writes it bare anyway."""
    write(tmp_path, "evaluator", {**VALID, "child_only": True})
    (tmp_path / "stage.yaml").write_text(
        f"allowlist: {ALLOWLIST}\ntask: Close the stage.\n"
        "children:\n  - {on: {script: ralf_spawn.py, positionals: [step_evaluator]}, "
        "scenario: evaluator}\n",
        encoding="utf-8",
    )
    spawn = load_suite(tmp_path).scenarios["stage"].spec.children[0]
    assert (spawn.on.script, spawn.on.positionals, spawn.scenario) == (
        "ralf_spawn.py", ["step_evaluator"], "evaluator")


# --- agent-eval schema scenario ----------------------------------------------------------


def test_schema_scenario_prints_a_json_schema_with_task_required():
    result = CliRunner().invoke(main, ["schema", "scenario"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["type"] == "object"
    assert "task" in schema["required"] and "allowlist" in schema["required"]
    assert {"task", "goal", "handshake", "environment", "reference", "temptations"} <= set(
        schema["properties"])
    refs = re.findall(r'"\$ref": "#/\$defs/([^"]+)"', result.output)
    assert refs and all(ref in schema["$defs"] for ref in refs)
    temptations = schema["properties"]["temptations"]["items"]["enum"]
    assert set(temptations) == set(get_args(Temptation))
