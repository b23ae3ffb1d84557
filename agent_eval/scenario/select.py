"""Choosing which scenarios of a suite a run plays: ``run --scenario GLOB --tag T
--exclude GLOB --limit N``.

Rules, applied in this order to the top-level scenarios (child-only scenarios are always
kept, since a selected parent may spawn them):

1. ``include`` globs (``fnmatch`` on the scenario name): keep those matching any; none
   given keeps all;
2. ``tags``: keep those carrying any of the tags; none given keeps all;
3. ``exclude`` globs: drop those matching any;
4. ``limit``: the first N left, in name order.

A selection that leaves nothing is a ConfigError naming the options and the choices.

Example::

    select_scenarios(suite, include=["research-*"], exclude=["*-web"], limit=2)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path

from agent_eval.errors import ConfigError
from agent_eval.scenario.suite import Suite


def limit_scenarios(suite: Suite, *, turns: int | None = None,
                    tool_calls: int | None = None) -> Suite:
    """``suite`` with every scenario's turn and tool-call limits replaced by those given
    (``run --max-turns N --max-tool-calls M``: bound a slow model without editing the
    suite); the suite's fingerprint changes with them."""
    given = {k: v for k, v in (("turns", turns), ("tool_calls", tool_calls)) if v is not None}
    if not given:
        return suite
    scenarios = {
        name: replace(sc, spec=sc.spec.model_copy(
            update={"limits": sc.spec.limits.model_copy(update=given)}))
        for name, sc in suite.scenarios.items()
    }
    return replace(suite, scenarios=scenarios, limits={**(suite.limits or {}), **given})


def select_scenarios(suite: Suite, *, include: Sequence[str] = (), tags: Sequence[str] = (),
                     exclude: Sequence[str] = (), limit: int | None = None) -> Suite:
    """``suite`` with only the selected top-level scenarios (and every child-only one)."""
    if not (include or tags or exclude or limit):
        return suite
    chosen = sorted(sc.name for sc in suite.top_level())
    if include:
        chosen = [n for n in chosen if any(fnmatchcase(n, g) for g in include)]
    if tags:
        chosen = [n for n in chosen if set(tags) & set(suite.scenarios[n].spec.tags)]
    if exclude:
        chosen = [n for n in chosen if not any(fnmatchcase(n, g) for g in exclude)]
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        asked = " ".join([*(f"--scenario {g}" for g in include), *(f"--tag {t}" for t in tags),
                          *(f"--exclude {g}" for g in exclude)])
        known = sorted({t for sc in suite.top_level() for t in sc.spec.tags})
        raise ConfigError(
            f"no scenario of suite {suite.name!r} is selected by {asked or '--limit'}; "
            f"scenario names look like {sorted(s.name for s in suite.top_level())[0]!r}, "
            f"tags are: {', '.join(known) or 'none'}",
            field="--scenario",
        )
    keep = set(chosen)
    scenarios = {name: sc for name, sc in suite.scenarios.items()
                 if name in keep or sc.spec.child_only}
    return replace(suite, scenarios=scenarios)


def load_selected_suite(suite: str | Path | None, *, allowlist: str | None = None,
                        agent: str | None = None, include: Sequence[str] = (),
                        tags: Sequence[str] = (), exclude: Sequence[str] = (),
                        limit: int | None = None, turns: int | None = None,
                        tool_calls: int | None = None) -> Suite:
    """The scenarios ``run`` plays, in one call from its options: the suite (a path or a
    bundled name; the bundled suite when none), judged under ``allowlist`` (and its
    ``agent``, for an agent CLI's config) instead of its own allow-lists when given, the
    selection (:func:`select_scenarios`) and the limits (:func:`limit_scenarios`).  A
    bad allow-list is reported before the suite is read, as ``run`` always did."""
    from agent_eval.scenario.bundled import bundled_suite, find_suite, load_policy
    from agent_eval.scenario.suite import load_suite

    policy = load_policy(allowlist, agent) if allowlist else None
    loaded = load_suite(find_suite(suite) if suite else bundled_suite(), policy)
    chosen = select_scenarios(loaded, include=include, tags=tags, exclude=exclude, limit=limit)
    return limit_scenarios(chosen, turns=turns, tool_calls=tool_calls)
