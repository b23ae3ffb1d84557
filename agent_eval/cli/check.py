"""``agent-eval check``, ``rules`` and ``rule``: the policy engine at the command line."""

from __future__ import annotations

import io
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import click

from agent_eval import heap
from agent_eval.cli import EXIT_FAIL, EXIT_OK, main
from agent_eval.cli.options import allowlist_option, json_option
from agent_eval.cli.terminal import escape_terminal
from agent_eval.errors import ConfigError
from agent_eval.policy import (
    PRECEDENCE,
    RULES,
    Verdict,
    check_command,
    check_read,
    get_rule,
)
from agent_eval.policy.calls import DuplicateKey, arguments_cap, unique_object
from agent_eval.policy.characters import escape_hidden


def _verdict_dict(text: str, verdict: Verdict) -> dict:
    return {
        "command": text,
        "decision": verdict.decision,
        "primary": verdict.primary,
        "findings": [{"code": f.code, "message": f.message, "start": f.start, "end": f.end}
                     for f in verdict.findings],
    }


def format_verdict(text: str, verdict: Verdict) -> str:
    """The verdict for humans: decision, then each finding's line with a caret line."""
    if verdict.allowed:
        return "allow"
    rule = get_rule(verdict.primary or "")  # a deny always names its primary code
    out = [f"deny {verdict.primary} {rule.name}" if rule else f"deny {verdict.primary}"]
    shown_line = None
    for f in verdict.findings:
        line_start = text.rfind("\n", 0, f.start) + 1
        line_end = text.find("\n", f.start)
        line_end = len(text) if line_end < 0 else line_end
        # control characters are written out (never obeyed); carets follow the escaped text
        line = escape_terminal(text[line_start:line_end])
        col = len(escape_terminal(text[line_start:f.start]))
        width = max(1, len(escape_terminal(text[f.start:min(f.end, line_end)])))
        rule = get_rule(f.code)
        if (line_start, line_end) != shown_line:
            out.append(f"  {line}")
            shown_line = (line_start, line_end)
        out.append(f"  {' ' * col}{'^' * width} {f.code} {rule.name if rule else ''}: "
                   f"{escape_terminal(f.message)}")
    return "\n".join(out)


_NOT_INPUT = 'not a JSON string or an object with a string "command"'


def _batch_items(stream: BinaryIO, fmt: str, source: str, cap: int = 1 << 20
                 ) -> Iterator[list[tuple[int, str, str | None]]]:
    """Per read of the input, its complete lines as (line number, command, None), or
    (number, "", why) for a bad one: the caller answers a read's lines together and then
    flushes, so a pipe that feeds one line at a time gets its verdict at once and a file
    costs one write per chunk, not one per line.

    Lines end at ``\\n`` only: a ``\\r`` (or U+2028, U+0085) is part of the command and
    gets the library's verdict, never trimmed away.  A jsonl object with a key given
    twice is a bad line (which ``command`` was meant is ambiguous), and so is a jsonl
    line longer than ``cap`` characters (never parsed) or nested too deep to parse."""
    read = getattr(stream, "read1", stream.read)
    pending: list[bytes] = []  # an unfinished line's pieces, joined once its end comes
    number = 0
    while True:
        data = read(1 << 16)
        if data:
            lines = data.split(b"\n")
            if len(lines) == 1:
                pending.append(data)
                continue
            lines[0] = b"".join([*pending, lines[0]])
            last = lines.pop()
            pending = [last] if last else []
        else:
            lines, pending = ([b"".join(pending)] if pending else []), []
        items: list[tuple[int, str, str | None]] = []
        for raw in lines:
            number += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if items:
                    yield items  # the lines before it are answered
                raise ConfigError(f"not UTF-8 text ({exc.reason}) at line {number}",
                                  path=source) from None
            item = _batch_item(line, fmt, cap)
            if item is not None:
                items.append((number, *item))
        if items:
            yield items
        if not data:
            return


def _batch_item(line: str, fmt: str, cap: int) -> tuple[str, str | None] | None:
    """(command, None), ("", why) for a bad line, or None for a blank one."""
    if fmt == "lines":
        return (line, None) if line else None
    if not line.strip():
        return None
    if len(line) > cap:
        return "", f"longer than the cap of {cap} characters ({len(line)}); not parsed"
    try:
        item = json.loads(line, object_pairs_hook=unique_object)
    except DuplicateKey as dup:
        return "", f"duplicate key {dup.args[0]!r}; which value was meant is ambiguous"
    except RecursionError:
        return "", "nested too deep to parse"
    except ValueError:
        item = None
    if isinstance(item, dict):
        item = item.get("command")
    return (item, None) if isinstance(item, str) else ("", _NOT_INPUT)


def _open_batch(batch: str) -> tuple[BinaryIO, str]:
    """The batch input as bytes (stdin too; lines are cut on ``\\n`` and decoded here),
    and its name."""
    if batch == "-":
        raw = getattr(sys.stdin, "buffer", None)
        if raw is None:  # a text stream without bytes under it
            return io.BytesIO(sys.stdin.read().encode("utf-8")), "<stdin>"
        return raw, "<stdin>"
    try:
        return open(batch, "rb"), batch
    except OSError as exc:
        raise ConfigError(f"cannot read batch file ({exc.strerror})", path=batch) from None


def format_harness(dual) -> str:
    """The harness's verdict beside the strict one, for a policy source."""
    h = dual.harness
    rules = ", ".join(r.label() for r in h.rules)
    line = f"harness ({escape_terminal(h.reason)}): {h.decision}"
    if rules:
        line += f" by {escape_terminal(rules)}"
    if h.quirk:
        line += f" through the {h.quirk} quirk"
    if dual.leak:
        line += f"\nleak: the harness allows it, the strict reading denies it ({dual.leak_class})"
    return line


@main.command()
@allowlist_option("Allow-list YAML", required=True)
@click.option("--agent", default=None, metavar="NAME",
              help="Which agent's rules of an agent CLI's configuration (default: its "
                   "default agent).")
@click.option("--tool", type=click.Choice(["bash", "read"]), default="bash", show_default=True,
              help="Judge TEXT as a bash command or as a read-tool path.")
@click.option("--batch", "batch", default=None, metavar="PATH",
              help="Judge every line of PATH (`-` for stdin); writes JSON lines.")
@click.option("--format", "fmt", type=click.Choice(["lines", "jsonl"]), default=None,
              help="Batch input format (default: jsonl for *.jsonl, else lines).")
@click.option("--cli-version", "cli_version", default=None, metavar="X.Y.Z",
              help="With an agent CLI's rules: the CLI release to emulate (default: the "
                   "pinned one, docs/policies.md).")
@click.option("--mode", default=None, metavar="MODE",
              help="With an agent CLI's rules: its mode (a Claude Code permission mode, "
                   "Codex's APPROVAL/SANDBOX, a Gemini CLI or Qwen Code approval mode); "
                   "default: the configuration's.")
@click.argument("text", required=False)
def check(allowlist_path: Path, agent: str | None, tool: str, batch: str | None,
          fmt: str | None, cli_version: str | None, mode: str | None,
          text: str | None) -> None:
    """Judge a command (or read path) against an allow-list.

    Prints the verdict with a caret line under each finding; exits 0 when allowed,
    1 when denied, 2 on a usage or config error.

    With --batch, judges one command per input line and writes one JSON object per line
    (command, decision, primary, findings with code, message, start, end) and a summary
    on stderr; exits 0.  In jsonl format each line is a JSON string or an object with a
    "command" key, so multi-line commands fit; a line that is neither gets an object
    {"line": N, "error": ...} in the output and an Error line on stderr (blank lines are
    skipped).  Lines end at \\n only; a \\r or any other character is part of the command
    and gets exactly the library's verdict.  The output is ASCII JSON, one line per
    verdict whatever the command holds.

    --allowlist also takes an agent CLI's own rules (opencode.json, Claude Code
    settings.json, a Codex .rules file, Gemini CLI's or Qwen Code's settings.json) with --agent NAME: the verdict is then the strict
    reading of that agent's rules, and the CLI's own verdict is printed beside it (in
    --batch, as "harness" and "leak").

    Example: agent-eval check --allowlist allowlists/ralf.yaml 'ls | head'
    """
    from agent_eval.cli.policies import emulated, make_setting
    from agent_eval.policy.sources import judge_command as dual_command
    from agent_eval.policy.sources import judge_read as dual_read
    from agent_eval.policy.sources import resolve_policy

    setting = make_setting("/project", "/home/user", "version", cli_version, mode)
    resolved = resolve_policy(allowlist_path, agent, setting)
    source_agent = resolved.agent
    if source_agent is None and (cli_version or mode):
        raise ConfigError("--cli-version and --mode apply to an agent CLI's rules, not to an "
                          "agent-eval allow-list", field="--mode")
    emulation = emulated(setting, source_agent) if source_agent is not None else None

    def judge(value: str):
        if source_agent is None:
            return (check_read if tool == "read" else check_command)(value, resolved.allowlist), None
        dual = (dual_read if tool == "read" else dual_command)(source_agent, value,
                                                               resolved.setting)
        return dual.strict, dual

    if batch is None:
        if text is None:
            raise ConfigError("give TEXT to judge, or --batch PATH", field="check")
        verdict, dual = judge(text)
        click.echo(format_verdict(text, verdict))
        if dual is not None:
            click.echo(format_harness(dual))
            click.echo(f"emulated: {escape_terminal(emulation or '')}")
        sys.exit(EXIT_OK if verdict.allowed else EXIT_FAIL)
    if text is not None:
        raise ConfigError("give either TEXT or --batch, not both", field="--batch")
    fmt = fmt or ("jsonl" if batch.endswith(".jsonl") else "lines")
    stream, source = _open_batch(batch)
    heap.settle()  # set up: the collector back on, what was built frozen
    counts: Counter[str] = Counter()
    bad_lines = 0
    out = sys.stdout
    try:
        for items in _batch_items(stream, fmt, source, arguments_cap(resolved.allowlist)):
            rows = []
            for number, command, problem in items:
                if problem is not None:
                    bad_lines += 1
                    click.echo(f"Error: {source}: line {number}: {problem}; line skipped",
                               err=True)
                    rows.append(json.dumps({"line": number, "error": problem}))
                    continue
                verdict, dual = judge(command)
                counts[verdict.primary or "allow"] += 1
                row = _verdict_dict(command, verdict)
                if dual is not None:
                    row["harness"] = dual.harness.decision
                    row["leak"] = dual.leak
                rows.append(json.dumps(row))  # ASCII: one line, always
            out.write("\n".join(rows) + "\n")
            out.flush()  # the lines of one read answered together
    finally:
        if batch != "-":
            stream.close()
    total = sum(counts.values())
    parts = [f"{code} {n}" for code, n in sorted(counts.items()) if code != "allow"]
    summary = f"judged {total}: allow {counts['allow']}, deny {total - counts['allow']}"
    click.echo(summary + (f" ({', '.join(parts)})" if parts else ""), err=True)
    if emulation is not None:
        click.echo(f"emulated: {escape_terminal(emulation)}", err=True)
    if bad_lines:
        click.echo(f"{bad_lines} input line(s) skipped: not valid input", err=True)
    sys.exit(EXIT_OK)


@main.command()
@json_option("the registry as JSON")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the registry as a Markdown page (docs/rules.md).")
def rules(as_json: bool, as_markdown: bool) -> None:
    """List every rule: code, name, scope, status and summary.

    Example: agent-eval rules --json
    """
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in RULES.values()], indent=2,
                              ensure_ascii=False))
        return
    if as_markdown:
        click.echo(rules_markdown(), nl=False)
        return
    from agent_eval.cli.terminal import text_width
    from agent_eval.linewrap import fit_lines

    width = max(len(r.name) for r in RULES.values())
    statuses = {r.code: _status_text(r) for r in RULES.values()}
    status_width = max(map(len, statuses.values()))
    rows = [f"{r.code}  {r.name:<{width}}  {r.scope:<10}  {statuses[r.code]:<{status_width}}  "
            f"{r.summary}" for r in RULES.values()]
    summary_at = len(rows[0]) - len(next(iter(RULES.values())).summary)
    for line in fit_lines(rows, text_width(), indent=" " * summary_at):
        click.echo(line)


@main.command()
@click.argument("code")
@json_option("the rule as JSON")
def rule(code: str, as_json: bool) -> None:
    """Print one rule in full: summary, why it matters, bad and good examples.

    CODE is a rule's code or its name, as the filters take them.  Example:

    \b
        agent-eval rule AE301
        agent-eval rule pipe-to-filter
    """
    from agent_eval.cli.options import rule_code

    found = get_rule(rule_code(code, "CODE"))
    if found is None:
        raise ConfigError(f"unknown rule code {code!r}; `agent-eval rules` lists them",
                          field="CODE")
    if as_json:
        click.echo(json.dumps(found.as_dict(), indent=2, ensure_ascii=False))
        return
    from agent_eval.cli.terminal import text_width
    from agent_eval.linewrap import fit_lines

    # the prose wraps at the terminal; the examples stay whole, as commands to copy
    lines = fit_lines([f"{found.code} {found.name}", "", found.summary, "", f"Why: {found.why}",
                       f"Scope: {found.scope}; status: {_status_text(found)}"
                       + ("" if found.emitted_by_engine else
                          "; decided outside the policy engine")], text_width(), indent="")
    for title, examples in (("Bad", found.bad), ("Good", found.good)):
        lines += ["", f"{title}:"]
        for ex in examples:
            shown = escape_hidden(ex.text) if ex.text else '""'
            limit = 800 if ex.kind == "wire" else 200  # an exchange is the whole example
            if len(shown) > limit:
                shown = shown[:limit] + "..."
            prefix = {"call": f"call {ex.tool} ", "read": "read ", "reply": "reply: ",
                      "session": "session: ", "wire": "wire: "}.get(ex.kind, "$ ")
            lines.append(f"  {prefix}{shown}")
    click.echo("\n".join(lines))


def _status_text(rule) -> str:
    """``stable``; ``deprecated -> AE3xx`` when a successor is named."""
    return rule.status + (f" -> {rule.replaced_by}" if rule.replaced_by else "")


def rules_markdown() -> str:
    """The registry as one Markdown page; ``docs/rules.md`` is this output."""
    from agent_eval.policy import REDIRECTS, RULE_STATUSES

    out = ["# Failure classes (AE rules)", "",
           "Generated from the rule registry by `agent-eval rules --markdown`; do not edit.",
           "A denied call counts once, under the first of its codes in this precedence: "
           + ", ".join(PRECEDENCE) + ".",
           "Stack faults (scope `stack`, AE5xx) are what the serving stack lost or mangled, "
           "read from the wire: never a model error, counted apart (stack faults per 100 "
           "calls); their examples are whole exchanges (request settings and reply).",
           "Each rule has a status, in this order of its life: " + ", ".join(RULE_STATUSES)
           + ". A preview rule's class may still move; a deprecated one is still emitted and "
           "names its successor; a removed one is never emitted, and its code or name "
           "reaches its successor through a redirect (never another rule's). Rules by "
           "status: " + "; ".join(
               f"{status} {sum(r.status == status for r in RULES.values())}"
               for status in RULE_STATUSES) + ".", ""]
    if REDIRECTS:
        out += ["## Redirects", "", *(f"- `{old}` -> {new}" for old, new in REDIRECTS.items()),
                ""]
    for r in RULES.values():
        out += [f"## {r.code} `{r.name}`", "", r.summary, "", f"**Why it matters.** {r.why}", "",
                f"Scope: {r.scope}; status: {_status_text(r)}.", ""]
        for title, examples in (("Bad", r.bad), ("Good", r.good)):
            if examples:
                out.append(f"{title} examples:")
                out.append("")
                out += [f"- {_md_example(e)}" for e in examples]
                out.append("")
    return "\n".join(out)


def _md_example(example) -> str:
    text = escape_hidden(example.text.replace("\n", "⏎"))
    if len(text) > 160 and example.kind != "wire":
        text = f"{text[:120]}… ({len(example.text)} characters)"
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    where = f"{example.tool}: " if example.tool else ""
    return f"{where}{fence}{pad}{text}{pad}{fence}"
