"""Scenarios: one subagent task each, loaded and validated from ``scenarios/<suite>/*.yaml``.

A scenario says what the model is asked (``task``), under which allow-list, with which tools,
inside which simulated environment (canned script outputs, virtual files, state), what
closes it (``goal`` calls in any order, then the ordered ``handshake``), its limits, the
child scenarios some calls spawn, and a ``reference`` plan (the ideal call sequence; it
documents the task and drives the simulator's behaviour profiles, never the judging).

A suite folder may hold ``suite.yaml`` with defaults (``allowlist``, ``tags``, ``limits``,
``system_prompt``) for every scenario in it.  ``agent-eval schema scenario`` prints the
JSON Schema.  A bad file raises ``ConfigError`` naming the file, the field and the fix.

A child scenario may be a template: ``${name}`` placeholders in its text fields are filled
at spawn time from the spawning call (``ChildSpawn.bind``) by :func:`instantiate`.

Modules split along the data: ``spec`` (the file format), ``suite`` (loading, checks,
templates), ``prompt`` (what the model is shown).
"""

from typing import TYPE_CHECKING

from agent_eval import lazy_attributes

if TYPE_CHECKING:  # the names below load with their module on first use (``__getattr__``)
    from agent_eval.scenario.prompt import quote_command, render_system_prompt, tool_schemas
    from agent_eval.scenario.spec import (
        PLACEHOLDER,
        TEMPLATED_FIELDS,
        CallMatch,
        CannedOutput,
        ChildSpawn,
        Environment,
        ExtraTool,
        Limits,
        ReferenceStep,
        Scenario,
        Temptation,
    )
    from agent_eval.scenario.suite import (
        MAX_CACHED_INSTANCES,
        SUITE_DEFAULT_FIELDS,
        LoadedScenario,
        Suite,
        instantiate,
        load_suite,
    )

_HOME = {
    **dict.fromkeys(("quote_command", "render_system_prompt", "tool_schemas"), "prompt"),
    **dict.fromkeys(("PLACEHOLDER", "TEMPLATED_FIELDS", "CallMatch", "CannedOutput",
                     "ChildSpawn", "Environment", "ExtraTool", "Limits", "ReferenceStep",
                     "Scenario", "Temptation"), "spec"),
    **dict.fromkeys(("MAX_CACHED_INSTANCES", "SUITE_DEFAULT_FIELDS", "LoadedScenario", "Suite",
                     "instantiate", "load_suite"), "suite"),
}


# ``from agent_eval.scenario import Suite`` loads ``scenario.suite`` then, not before: the
# commands that only find a bundled file (``scenario.bundled``) skip the loaders.
__getattr__ = lazy_attributes(__name__, _HOME, globals())


__all__ = [
    "MAX_CACHED_INSTANCES",
    "PLACEHOLDER",
    "SUITE_DEFAULT_FIELDS",
    "TEMPLATED_FIELDS",
    "CallMatch",
    "CannedOutput",
    "ChildSpawn",
    "Environment",
    "ExtraTool",
    "Limits",
    "LoadedScenario",
    "ReferenceStep",
    "Scenario",
    "Suite",
    "Temptation",
    "instantiate",
    "load_suite",
    "quote_command",
    "render_system_prompt",
    "tool_schemas",
]
