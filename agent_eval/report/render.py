"""HTML rendering: one jinja2 Environment, autoescape on for every template.

Pages render from their context record alone (``page``) plus a few constant tables
(column heads, the next-action wording).  Nothing here marks a string safe: model text
is escaped by autoescape; the SVG charts arrive as ``Markup`` built from escaped parts.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from agent_eval.policy import RULES
from agent_eval.report import index as index_mod
from agent_eval.report import throughput
from agent_eval.report.agreement import AGREEMENT_HEAD, MAX_DISAGREEMENTS
from agent_eval.report.index import IndexPage
from agent_eval.report.pages import RulePage, SessionPage

TEMPLATES = Path(__file__).parent / "templates"

NEXT_ACTION_TEXT = {
    "pivot": "the next call was allowed",
    "retry-denied": "the next call was denied too, with a different command",
    "repeat": "the model sent the identical denied call again",
    "abandon": "no further call in the session",
}


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        next_text=NEXT_ACTION_TEXT,
        target_head=index_mod.TARGET_HEAD,
        handshake_head=index_mod.HANDSHAKE_HEAD,
        recovery_head=index_mod.RECOVERY_HEAD,
        exit_head=index_mod.EXIT_HEAD,
        speed_head=index_mod.SPEED_HEAD,
        repeat_head=index_mod.REPEAT_HEAD,
        agreement_head=AGREEMENT_HEAD,
        max_disagreements=MAX_DISAGREEMENTS,
        generation_head=throughput.GENERATION_HEAD,
        prefill_head=throughput.PREFILL_HEAD,
        completions_head=throughput.COMPLETIONS_HEAD,
        work_head=throughput.WORK_HEAD,
        rule_codes=tuple(RULES),
        rule_text={code: f"{rule.summary} {rule.why}" for code, rule in RULES.items()},
    )
    return env


def render_index(page: IndexPage) -> str:
    return environment().get_template("index.html").render(page=page)


def render_session(page: SessionPage) -> str:
    return environment().get_template("session.html").render(page=page)


def render_rule(page: RulePage) -> str:
    return environment().get_template("rule.html").render(page=page)


def render_session_batch(pages: list[SessionPage]) -> str:
    """One ``sessions/<first>-<last>.html``: a section per session."""
    return environment().get_template("session_batch.html").render(
        pages=pages, first=pages[0].id, last=pages[-1].id)


def render_list(page) -> str:
    return environment().get_template("static_list.html").render(page=page)
