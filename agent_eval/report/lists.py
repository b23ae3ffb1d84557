"""The static report's pre-filtered lists (``lists/*.html``): what a class cell, a
scenario cell or "failed sessions" opens, one section per column.

File names come from registry codes and from positions (``scenario-3.html``), never from
text a model or a suite wrote.  A report holds one list per class found, one per
scenario and one of failed sessions, so its file count follows the suite, not the run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from agent_eval.policy import RULES, get_rule
from agent_eval.report.pages import LISTS_DIR, call_href

COMMAND_CHARS = 160


@dataclass(frozen=True, slots=True)
class ListCell:
    text: str
    href: str | None = None
    # a command shown around the span its finding points at: (before, span, after), the
    # span drawn marked; ``text`` is then the whole shown text
    mark: tuple[str, str, str] | None = None


@dataclass(frozen=True, slots=True)
class ListSection:
    column: str
    anchor: str  # "col-<n>", n the column's position in the index
    rows: tuple[tuple[ListCell, ...], ...]


@dataclass(frozen=True, slots=True)
class StaticList:
    title: str
    intro: str
    head: tuple[str, ...]
    sections: tuple[ListSection, ...]


SESSION_HEAD = ("session", "scenario", "repeat", "status", "calls", "denials", "handshake")
CALL_HEAD = ("call", "session", "scenario", "#", "next", "command")


def class_file(code: str) -> str:
    return f"class-{code}.html" if code in RULES else "class-other.html"


def scenario_file(position: int) -> str:
    return f"scenario-{int(position)}.html"


def list_href(name: str, column: int | None = None) -> str:
    return f"{LISTS_DIR}/{name}" + (f"#col-{column}" if column is not None else "")


def failed_list(items: Iterable, columns: tuple[str, ...]) -> StaticList:
    rows = [i for i in items if i.failed]
    return StaticList(
        "Failed sessions",
        "Sessions that did not complete, left their handshake open, or hold a denied call.",
        SESSION_HEAD, _sections(columns, rows, lambda i: i.column, _session_cells))


def scenario_lists(items: Iterable, scenarios: list[str], columns: tuple[str, ...]
                   ) -> dict[str, StaticList]:
    by_scenario = defaultdict(list)
    for item in items:
        by_scenario[item.link.scenario].append(item)
    out = {}
    for name in scenarios:
        ordered = sorted(by_scenario.get(name, []), key=lambda i: (not i.failed, i.link.id))
        out[name] = StaticList(
            f"Scenario {name}", "Its sessions, failed first.", SESSION_HEAD,
            _sections(columns, ordered, lambda i: i.column, _session_cells))
    return out


def class_lists(denied: Iterable, column_of: dict[int, str], columns: tuple[str, ...]
                ) -> dict[str, StaticList]:
    """Per primary class: its denied calls (error sessions left out), per column."""
    by_code = defaultdict(list)
    for call in denied:
        if call.session_id in column_of:
            by_code[call.primary or "other"].append(call)
    out = {}
    for code, calls in by_code.items():
        rule = get_rule(code)
        title = f"{code} {rule.name}" if rule else f"{code}"
        intro = (f"{rule.summary} Its denied calls, per target." if rule
                 else "Denied calls of this class, per target.")
        out[code] = StaticList(title, intro, CALL_HEAD,
                               _sections(columns, calls, lambda c: column_of[c.session_id],
                                         _call_cells))
    return out


def _sections(columns, rows, column_of, cells) -> tuple[ListSection, ...]:
    grouped = defaultdict(list)
    for row in rows:
        grouped[column_of(row)].append(cells(row))
    return tuple(ListSection(col, f"col-{n}", tuple(grouped[col]))
                 for n, col in enumerate(columns) if grouped.get(col))


def _session_cells(item) -> tuple[ListCell, ...]:
    href = "../" + item.link.href
    return (ListCell(str(item.link.id), href), ListCell(item.link.scenario),
            ListCell(str(item.repeat)), ListCell(item.status_text, href),
            ListCell(str(item.calls)), ListCell(str(item.denials)), ListCell(item.handshake))


def _call_cells(call) -> tuple[ListCell, ...]:
    href = "../" + call_href(call.session_id, call.index, from_dir=None)
    command = call.command or ""
    if len(command) > COMMAND_CHARS:
        command = command[: COMMAND_CHARS - 1] + "…"
    return (ListCell(f"{call.session_id}/{call.index}", href), ListCell(str(call.session_id)),
            ListCell(call.scenario), ListCell(str(call.index)), ListCell(call.next_action or ""),
            ListCell(command, href))
