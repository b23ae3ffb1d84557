"""``agent-eval show``: one session's drill-down in the terminal, for the SSH case.

Renders the same :class:`~agent_eval.report.pages.SessionPage` the HTML report renders,
with rich: model text is passed as ``Text`` (never parsed as console markup) with its
control characters written out (``terminal.escape_terminal``), spans are underlined with
``Text.stylize`` at the finding's offsets.
"""

from __future__ import annotations

import re

import click
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from agent_eval.cli import main
from agent_eval.cli.options import db_option, json_option
from agent_eval.cli.terminal import escape_terminal as esc
from agent_eval.cli.terminal import table_console

REASONING_CHARS = 300
OUTPUT_CHARS = 600
REASON_CHARS = 160
DECISION_STYLE = {"allow": "bold green", "deny": "bold red"}
STATUS_STYLE = {"completed": "green", "stalled": "yellow", "abandoned": "magenta",
                "error": "bold red"}  # fmt: skip
NEXT_STYLE = {"pivot": "green", "retry-denied": "red", "repeat": "bold red",
              "abandon": "magenta"}  # fmt: skip


@main.command()
@click.argument("ref", metavar="[RUN] SESSION")
@click.argument("session_ref", metavar="", required=False)
@click.option("--full", is_flag=True, help="Do not truncate reasoning and outputs.")
@json_option("the session (every turn, call, verdict and finding) as JSON")
@db_option
def show(ref: str, session_ref: str | None, full: bool, as_json: bool, db: str | None) -> None:
    """Show one stored session turn by turn: verdicts, underlined spans, what came back.

    Example:

    \b
        agent-eval show 42 --db runs.db
        agent-eval show latest
        agent-eval show label:nightly research-tech-radar
        agent-eval show 12 disciplined/lights-evening-off/0

    One argument: a session id, or `latest` (the newest session of the newest run).  Two:
    a RUN (an id, `latest` or `label:NAME`) and, within it, a session id, a session key
    (`target/scenario/repeat`) or a scenario name (its first session).

    The header gives run, target, scenario, status and handshake; each reply shows its
    reasoning (dimmed, truncated unless --full), content, and every tool call with its
    verdict, the offending span underlined, the output or denial the model saw and what it
    did next.  On imported sessions the verdict the source harness recorded sits beside
    ours ("source: allow (reason)", DISAGREES when it differs), and the output is the one
    the source recorded.  Exit codes: 0 shown, 2 no such session or a bad --db.
    """
    from agent_eval.report.pages import build_session_page
    from agent_eval.store import open_store
    from agent_eval.transcript import run_stacks, stack_line, target_stack

    with open_store(db, create=False) as store:
        session_id = resolve_session(store, ref, session_ref)
        page = build_session_page(store.load_session(session_id), {})
        stack = target_stack(run_stacks(store.get_run(page.run_id).fingerprint), page.target)
        if stack is not None:
            import dataclasses

            page = dataclasses.replace(page, stack=stack_line(stack))
    if as_json:
        import dataclasses
        import json

        click.echo(json.dumps(dataclasses.asdict(page), indent=2, default=str))
        return
    console = table_console(120)
    for block in render_session(page, full=full):
        console.print(block)


def resolve_session(store, ref: str, session_ref: str | None) -> int:
    """The session id that ``show REF [SESSION]`` names (rules in its --help)."""
    from agent_eval.errors import ConfigError

    if session_ref is None:
        if ref.isdigit() and len(ref) <= 10:
            return int(ref)  # the store says whether it exists
        if ref.isdigit():
            raise ConfigError(f"no session with id {ref[:24]} in this store", field="session")
        if ref != "latest":
            raise ConfigError(f"{ref!r} is not a session id; give an id, `latest`, or "
                              "RUN SESSION", field="show")
        run = store.resolve_run("latest")
        ids = [s.id for s in store.session_rows([run.id])]
        if not ids:
            raise ConfigError(f"run {run.id} has no session yet", field="show")
        return max(ids)
    run = store.resolve_run(ref)
    rows = list(store.session_rows([run.id]))
    if session_ref.isdigit() and any(s.id == int(session_ref) for s in rows):
        return int(session_ref)
    for s in sorted(rows, key=lambda r: r.id):
        if session_ref in (s.key, s.scenario):
            return s.id
    keys = ", ".join(sorted({s.key for s in rows})[:3])
    raise ConfigError(f"run {run.id} has no session {session_ref!r}; give a session id, a "
                      f"key such as {keys or 'target/scenario/0'}, or a scenario name",
                      field="show")


def render_session(page, *, full: bool = False) -> list:
    """The rich renderables of a session page, top to bottom."""
    limit_r = None if full else REASONING_CHARS
    limit_o = None if full else OUTPUT_CHARS
    head = Text()
    head.append(f"session {page.id}", style="bold")
    head.append(f"  run {page.run_id}  target ")
    head.append(esc(page.target), style="bold")
    head.append("  scenario ")
    head.append(esc(page.scenario), style="bold")
    head.append(f"  repeat {page.repeat}\nstatus ")
    head.append(esc(page.status), style=STATUS_STYLE.get(page.status, ""))
    head.append(f"  handshake {esc(page.handshake_text)}  calls {page.calls}  denials {page.denials}")
    if page.error:  # a fault, or why a session the context window cut short ended
        error = page.status == "error"
        head.append("\nerror: " if error else "ended: ", style="bold red" if error else "yellow")
        head.append(esc(page.error))
    if page.stack:  # which serving stack carried the replies (the run's fingerprint)
        head.append("\nstack: ", style="bold")
        head.append(esc(page.stack))
    for f in page.stack_faults:  # the server's, never the model's errors (AE5xx)
        head.append(f"\nstack fault, reply {f.turn}: {f.code} {f.name}: ", style="magenta")
        head.append(esc(f.message))
        if f.raw:
            head.append(f"\n  wire: {esc(_clip(f.raw, limit_o))}", style="dim")
    if page.offered_tools:  # the tools its client offered (calls are checked on them)
        head.append(f"\noffered tools ({len(page.offered_tools)}, list "
                    f"{page.offered_hash[:12]}): ", style="bold")
        head.append(esc(", ".join(page.offered_tools), one_line=True))
    if page.completeness:  # a session from telemetry: what it could prove
        head.append("\ntelemetry: ", style="bold")
        head.append(page.completeness)
    if page.policy_agent:  # judged under an agent CLI's rules (docs/policies.md)
        head.append(f"\njudged as agent {esc(page.policy_agent, one_line=True)} of the agent "
                    f"CLI's rules (chosen by {esc(page.policy_agent_via or '', one_line=True)})")
        if page.policy_emulation:
            head.append(f"\nemulated {esc(page.policy_emulation, one_line=True)}")
    if page.parent:
        head.append(f"\nparent session {page.parent.id}")
    if page.children:
        head.append("\nchild sessions " + ", ".join(str(c.id) for c in page.children))
    blocks: list = [Panel(head, title="agent-eval show", expand=False)]
    blocks.append(Text.assemble(("task: ", "bold"), esc(_clip(reflow(page.task), limit_o))))
    for turn in page.turns:
        blocks.append(_turn_panel(turn, limit_r, limit_o))
    return blocks


def _turn_panel(turn, limit_r, limit_o) -> Panel:
    parts: list = []
    if turn.reasoning:
        parts.append(Text(esc(_clip(turn.reasoning, limit_r)), style="dim italic"))
    if turn.content:
        parts.append(Text(esc(turn.content)))
    for call in turn.calls:
        line = Text()
        line.append(f"{call.decision:<5}", style=DECISION_STYLE.get(call.decision, ""))
        line.append(f" {esc(call.tool)}")
        if call.primary:
            line.append(f"  {call.primary} {call.primary_name or ''}".rstrip(), style="red")
        if call.source_decision:
            line.append("  source: ")
            line.append(esc(call.source_decision, one_line=True),
                        style=DECISION_STYLE.get(call.source_decision, ""))
            if call.source_reason:
                limit = None if limit_o is None else REASON_CHARS
                line.append(f" ({esc(_clip(call.source_reason, limit))})")
            if call.disagrees:
                line.append("  DISAGREES", style="bold black on yellow")
        if call.leak:
            line.append(f"  leak {call.leak} {call.leak_name or ''}".rstrip(),
                        style="bold magenta")
        parts.append(line)
        command = Text("  $ ")
        offset = len(command)
        pos = 0
        for seg in call.segments:
            shown = esc(seg.text)  # escaped per segment, so the spans stay on their text
            command.append(shown)
            if seg.marked:
                command.stylize("underline bold red", offset + pos, offset + pos + len(shown))
            pos += len(shown)
        parts.append(command)
        for f in call.findings:
            parts.append(Text(f"    {f.code} {f.name or ''}: {esc(f.message)}", style="red"))
        parts.append(Text.assemble((f"  {call.output_label}: ", "bold"),
                                   (esc(_clip(call.output, limit_o)), "")))
        if call.child:
            parts.append(Text(f"  spawned session {call.child.id}", style="cyan"))
        if call.next_action:
            parts.append(Text(f"  → next: {call.next_action}",
                              style=NEXT_STYLE.get(call.next_action, "")))
    title = f"reply {turn.index}" + ("  (every call denied)" if turn.burned else "")
    return Panel(Group(*parts) if parts else Text("(empty reply)", style="dim"),
                 title=title, title_align="left", border_style="red" if turn.burned else "")


_LINE_BREAK = re.compile(r"(?<=\S)[ \t]*\n(?![ \t]*(?:\n|[-*•]\s|\d+[.)]\s))[ \t]*(?=\S)")


def reflow(text: str) -> str:
    """A task's line breaks made spaces, so the terminal wraps it once: a scenario's YAML
    breaks its lines at ~90 columns, and at 80 every such line was wrapped again.  Blank
    lines (paragraphs) and list items keep their breaks (pure)."""
    return _LINE_BREAK.sub(" ", text)


def _clip(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"… (+{len(text) - limit} characters)"
