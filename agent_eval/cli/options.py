"""Options shared by several commands, declared once: ``--db`` (:data:`db_option`),
``--json`` (:func:`json_option`), a stored run (:func:`run_argument`), the sampling and client
knobs of ``run`` and ``replay`` (:func:`sampling_options`), the scenario selection of ``run``
and ``demo`` (:func:`selection_options`), the gate's interval checks that ``gate`` judges
and ``run --until-decided`` plays until they are decided (:func:`check_options`), and
``--allowlist`` (:func:`allowlist_option`).

``ALLOWLIST`` is the one way a command reads ``--allowlist``: a file that exists is taken
as it is; otherwise a bundled allow-list's name (``ralf``) or its path in a clone
(``allowlists/ralf.yaml``) reaches the bundled file wherever agent-eval is installed
(``scenario.bundled.find_allowlist``).  An unknown name comes back unchanged, for the
loader's one-line error naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db",
    "db",
    metavar="URL",
    envvar="AGENT_EVAL_DB",
    default=None,
    help="Store: a SQLite file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB "
    "[env AGENT_EVAL_DB; default agent_eval.db].",
)
"""The ``--db URL`` option, the same on every command: ``@db_option`` passes ``db``
(None when neither the option nor ``$AGENT_EVAL_DB`` is given) for ``open_store(db)``."""


def json_option(what: str) -> Callable[[F], F]:
    """``--json`` (passed as ``as_json``): ``what`` says what it prints, e.g. "the rows as
    JSON"."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what}.")


def run_argument(name: str = "run_ref", *, required: bool = True) -> Callable[[F], F]:
    """A stored run named as every command names one: an id, ``latest`` or
    ``label:NAME`` (``Store.resolve_run``)."""
    return click.argument(name, metavar="RUN" if required else "[RUN]", required=required)


# (flag, parameter type, what it is when `run` sends it, the request field a replay overrides)
SAMPLING: tuple[tuple[str, Any, str, str], ...] = (
    ("--temperature", float, "Sampling temperature (typical agent setting: 1.0).",
     "temperature"),
    ("--top-p", float, "Nucleus sampling (typical agent setting: 0.95).", "top_p"),
    ("--top-k", int, "Top-k, sent in the body as vLLM accepts it.", "top_k"),
    ("--min-p", float, "Min-p, sent in the body.", "min_p"),
    ("--presence-penalty", float, "Presence penalty (typical agent setting: 1.5).",
     "presence penalty"),
    ("--repetition-penalty", float, "Repetition penalty, in the body.", "repetition penalty"),
    ("--max-tokens", int, "Max tokens per reply.", "max_tokens"),
)


def sampling_options(*, override: bool = False) -> Callable[[F], F]:
    """The sampling knobs and the client's own (``--stream``, ``--timeout``,
    ``--api-key-env``), as ``run`` sends them, or (``override``) as ``replay`` puts them in
    place of a stored request's values."""
    options = [click.option(flag, type=kind,
                            help=f"Override the stored {field}." if override else what)
               for flag, kind, what, field in SAMPLING]
    options.insert(6, click.option(
        "--enable-thinking/--disable-thinking", default=None,
        help="Override chat_template_kwargs.enable_thinking." if override
        else "chat_template_kwargs.enable_thinking for Qwen templates."))
    options += [
        click.option("--stream/--no-stream", default=False, show_default=True,
                     help="Stream replies (measures time to first token; what the model "
                          "sees is the same)."),
        click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
                     help="Seconds before a request counts as a server fault."),
        click.option("--api-key-env", metavar="VAR",
                     help="Environment variable holding the API key (never stored)."),
    ]
    return _stack(options)


def selection_options(f: F) -> F:
    """``--scenario GLOB --tag T --exclude GLOB --limit N``: which of a suite's scenarios
    to play (rules: scenario/select.py)."""
    return _stack([
        click.option("--scenario", "include", multiple=True, metavar="GLOB",
                     help="Play only scenarios whose name matches (repeatable), e.g. "
                          "'research-*'."),
        click.option("--tag", "tags", multiple=True, metavar="TAG",
                     help="Play only scenarios with any of these tags (repeatable)."),
        click.option("--exclude", multiple=True, metavar="GLOB",
                     help="Skip scenarios whose name matches (repeatable)."),
        click.option("--limit", type=click.IntRange(1), default=None, metavar="N",
                     help="Play at most N scenarios (the first N by name, after the "
                          "filters)."),
    ])(f)


def check_options(f: F) -> F:
    """The gate's interval checks, ``--max-error-rate X --max-class CODE=X --baseline RUN
    --max-regression X``: what ``gate`` judges a run on, and what ``run --until-decided``
    plays repeats until decided (``analysis.gate_stored.IntervalChecks`` reads them, for both)."""
    return _stack([
        click.option("--max-error-rate", type=float, metavar="X",
                     help="Pass a target only when its 95% interval of errors per 100 tool "
                          "calls ends at or below X; fail it when the interval starts "
                          "above X."),
        click.option("--max-class", "max_class", multiple=True, metavar="CODE=X",
                     help="The same for failure class CODE, X calls per 100; repeatable."),
        click.option("--baseline", "baseline_ref", metavar="RUN",
                     help="Compare with this run: an id, `latest` or `label:NAME` (the "
                          "newest run with that label other than the run judged)."),
        click.option("--max-regression", type=float, metavar="X",
                     help="With --baseline: the rise in errors/100 allowed, a margin > 0; "
                          "pass when the 95% interval of the rise ends at or below X, fail "
                          "when it starts above X [default 2]."),
    ])(f)


def _stack(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """The options applied so that ``--help`` lists them in the order given."""
    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


def stack_note_options(where: str) -> Callable[[F], F]:
    """``--stack-parser`` and ``--stack-template``: the operator's notes on the serving
    stack (a targets file's ``stack.parser`` and ``stack.template``), kept with the run;
    a known call format they name tells a parser's failure (AE511) from the model's
    wrong format (AE104).  ``where``: what else says the format when neither does."""
    return _stack([
        click.option("--stack-parser", default=None, metavar="NAME",
                     help="The server's tool-call parser (vLLM's --tool-call-parser name: "
                          "hermes, qwen3_coder, mistral, llama3_json...): a call in its "
                          "format left in a reply's text is the parser's fault (AE511), "
                          f"not the model's (AE104). Else {where}."),
        click.option("--stack-template", default=None, metavar="NAME",
                     help="The chat template's call format or name (hermes, qwen3_coder, "
                          "mistral, llama3, deepseek, kimi, granite), kept with the run and "
                          "read like --stack-parser when that is not given."),
    ])


def stack_notes(parser: str | None, template: str | None) -> dict[str, str]:
    """The notes ``stack_note_options`` took (each at most 200 characters, as a targets
    file's); a warning on stderr when they name no known call format."""
    from agent_eval.wire.markup import TEMPLATE_FORMATS, notes_markers

    notes = {k: v for k, v in (("parser", parser), ("template", template)) if v}
    for key, value in notes.items():
        if len(value) > 200:
            raise click.BadParameter("at most 200 characters", param_hint=f"--stack-{key}")
    if notes and notes_markers(notes) is None:
        click.echo(f"warning: --stack-parser/--stack-template name no known call format "
                   f"({', '.join(TEMPLATE_FORMATS)}); kept as notes only", err=True)
    return notes


class AllowlistPath(click.ParamType):
    name = "allowlist"

    def convert(self, value: str, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        from agent_eval.scenario.bundled import find_allowlist

        return find_allowlist(value)


ALLOWLIST = AllowlistPath()

AGENT_RULES = ("an agent CLI's rules: opencode.json, Claude Code settings.json, Codex .rules, "
               "Gemini CLI or Qwen Code settings.json")


def allowlist_option(what: str, *, required: bool = False, default: str | None = None,
                     agent_rules: bool = True) -> Callable[[F], F]:
    """``--allowlist`` (passed as ``allowlist_path``, read by :data:`ALLOWLIST`), the same
    on every command: ``what`` says what it judges ("Allow-list YAML every tool call is
    judged against"); ``agent_rules``: an agent CLI's rules are taken too (named in the
    help the same way everywhere); ``default``: what an absent option means."""
    text = what + (f", or {AGENT_RULES}" if agent_rules else "")
    text += f" [default: {default}]." if default else "."
    return click.option("--allowlist", "allowlist_path", required=required, default=None,
                        type=ALLOWLIST, help=text)


def rule_code(value: str, field: str) -> str:
    """The code of the rule ``value`` names (a code in any case, or a rule name such as
    ``pipe-to-filter``); a ConfigError saying "no such code" with a did-you-mean when it
    names none."""
    from agent_eval.errors import ConfigError
    from agent_eval.policy import find_rule, near_rules

    found = find_rule(value)
    if found is not None:
        return found.code
    near = near_rules(value)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ConfigError(f"no such code or rule name {value!r}: {hint}`agent-eval rules` lists "
                      "them", field=field)


def known_name(value: str, known: list[str], what: str, field: str) -> str:
    """``value`` when it is one of ``known`` (a run's targets, scenarios); otherwise a
    ConfigError "no such target" naming the nearest and the ones there are."""
    import difflib

    from agent_eval.errors import ConfigError

    if value in known:
        return value
    near = difflib.get_close_matches(value, known, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}? " if near else ""
    listed = ", ".join(sorted(known)[:12]) + (", …" if len(known) > 12 else "")
    raise ConfigError(f"no such {what} {value!r}: {hint}this run has: {listed or 'none'}",
                      field=field)
