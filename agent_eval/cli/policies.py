"""``agent-eval policy audit`` and ``policy convert``: an agent CLI's own rules, per agent.

Thin commands over ``agent_eval.policy.sources``: this module only finds the calls to
audit (the bundled red-team corpus, a file of calls or a transcript, a stored run) and
formats what the library answers.  docs/policies.md explains the formats and the leaks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import click

from agent_eval.cli import main
from agent_eval.cli.options import allowlist_option, db_option, json_option
from agent_eval.cli.terminal import escape_terminal
from agent_eval.errors import ConfigError

REDTEAM = "redteam"


@main.group()
def policy() -> None:
    """Audit and convert the permission rules an agent CLI already enforces.

    Example: agent-eval policy audit opencode.json --agent build
    """


def setting_options(func):
    options = [
        click.option("--workdir", default="/project", show_default=True, metavar="DIR",
                     help="The CLI's work directory, for paths the rules compare."),
        click.option("--home", default="/home/user", show_default=True, metavar="DIR",
                     help="The home directory `~` and $HOME stand for in the rules."),
        click.option("--quirks", default="version", show_default=True, metavar="LIST",
                     help="Emulated matcher quirks: version (those reported for the "
                          "emulated release), all, none, or names joined by commas "
                          "(docs/policies.md lists them)."),
        click.option("--cli-version", "cli_version", default=None, metavar="X.Y.Z",
                     help="The CLI release to emulate (default: the pinned one, "
                          "docs/policies.md)."),
        click.option("--mode", default=None, metavar="MODE",
                     help="The CLI's mode: a Claude Code permission mode (default, "
                          "acceptEdits, plan, bypassPermissions, dontAsk, auto) or Codex's "
                          "APPROVAL/SANDBOX (never/workspace-write), a Gemini CLI or Qwen "
                          "Code approval mode (default, yolo...); default: the "
                          "configuration's, else the CLI's unattended default."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def make_setting(workdir: str, home: str, quirks: str, cli_version: str | None = None,
                 mode: str | None = None):
    from agent_eval.policy.sources import Setting
    from agent_eval.policy.sources.emulation import QUIRK_NAMES, version_key

    if not workdir.startswith("/") or not home.startswith("/"):
        raise ConfigError("must be an absolute folder path", field="--workdir/--home")
    if cli_version is not None:
        version_key(cli_version)
    chosen: frozenset[str] | None
    if quirks == "version":
        chosen = None
    elif quirks == "all":
        chosen = frozenset(QUIRK_NAMES)
    elif quirks == "none":
        chosen = frozenset()
    else:
        chosen = frozenset(q.strip() for q in quirks.split(",") if q.strip())
        unknown = sorted(chosen - set(QUIRK_NAMES))
        if unknown:
            raise ConfigError(f"unknown quirk {unknown[0]!r}; known: {', '.join(QUIRK_NAMES)}, "
                              "or version / all / none", field="--quirks")
    return Setting(workdir=workdir.rstrip("/") or "/", home=home.rstrip("/") or "/",
                   quirks=chosen, version=cli_version, mode=mode)


def emulated(setting, agent) -> str:
    """`claude-code 2.1.332, mode default`: what a verdict assumed (checks --mode)."""
    from agent_eval.policy.sources.emulation import check_mode, check_release

    if setting.mode is not None:
        check_mode(agent.harness, setting.mode)
    emulation = setting.emulation(agent)
    check_release(emulation.harness, emulation.version, emulation.mode,
                  "--mode" if setting.mode is not None else "the configuration's mode")
    return emulation.describe()


# -- where the calls come from ------------------------------------------------------------


def _call_from(item: Any, where: str):
    from agent_eval.policy.sources.audit import AuditCall

    if isinstance(item, str):
        return AuditCall("bash", item, where=where)
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("command"), str):
        return AuditCall("bash", item["command"], where=where)
    for key in ("path", "filePath", "file_path"):
        if isinstance(item.get(key), str):
            return AuditCall("read", item[key], where=where)
    if isinstance(item.get("tool"), str) and "arguments" in item:
        arguments = item["arguments"]
        if isinstance(arguments, (str, dict)):
            return AuditCall("call", tool=item["tool"], arguments=arguments, where=where)
    return None


def _jsonl_calls(path: Path, stream) -> Iterator:
    for number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            click.echo(f"Error: {escape_terminal(str(path))}: line {number}: not JSON; "
                       "line skipped", err=True)
            continue
        call = _call_from(item, f"line {number}")
        if call is None:
            click.echo(f"Error: {escape_terminal(str(path))}: line {number}: not a call "
                       '(a JSON string, or an object with "command", "path" or "tool" and '
                       '"arguments"); line skipped', err=True)
            continue
        yield call


def _redteam_calls() -> list:
    text = resources.files("agent_eval").joinpath("data/redteam/leak-probes.jsonl").read_text(
        encoding="utf-8")
    calls = []
    for number, line in enumerate(text.splitlines(), 1):
        call = _call_from(json.loads(line), f"probe {number}")
        if call is not None:
            calls.append(call)
    return calls


def _is_calls_jsonl(path: Path) -> bool:
    """A JSONL file whose first line is a call (not a transcript the importers read)."""
    try:
        with open(path, encoding="utf-8") as stream:
            for line in stream:
                if line.strip():
                    item = json.loads(line)
                    return isinstance(item, str) or (isinstance(item, dict) and (
                        {"command", "path", "filePath", "file_path"} & set(item)
                        or {"tool", "arguments"} <= set(item))
                        and "type" not in item and "role" not in item)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return False


def _file_calls(path: Path) -> list:
    from agent_eval.importers import read_sessions
    from agent_eval.policy.sources.audit import AuditCall

    if path.suffix == ".txt":
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read calls ({exc})", path=str(path)) from None
        return [AuditCall("bash", line, where=f"line {i}") for i, line in enumerate(lines, 1)
                if line]
    if path.is_file() and _is_calls_jsonl(path):
        with open(path, encoding="utf-8", errors="replace") as stream:
            return list(_jsonl_calls(path, stream))
    calls = []
    for session in read_sessions("auto", path):
        for index, call in enumerate(session.calls):
            where = f"session {session.id} call {index}"
            if call.kind in ("bash", "read") and call.text is not None:
                calls.append(AuditCall(call.kind, call.text, where=where))
            else:
                calls.append(AuditCall("call", tool=call.tool, arguments=call.arguments,
                                       where=where))
    return calls


def _run_calls(ref: str, db: str | None) -> tuple[list, str]:
    from agent_eval.importers.reading import kind_of_tool
    from agent_eval.policy.sources.audit import AuditCall
    from agent_eval.store import open_store

    calls = []
    with open_store(db, create=False) as store:
        run = store.resolve_run(ref)
        for row in store.session_rows([run.id]):
            record = store.load_session(row.id).record
            for call in record.calls:
                where = f"session {row.id} call {call.index}"
                kind = kind_of_tool(call.tool)
                if kind in ("bash", "read") and call.command is not None:
                    calls.append(AuditCall(kind, call.command, where=where))
                else:
                    calls.append(AuditCall("call", tool=call.tool, arguments=call.arguments,
                                           where=where))
    return calls, f"run {run.id}"


def load_calls(ref: str | None, db: str | None) -> tuple[list, str]:
    """The calls to audit and a name for where they came from."""
    if ref is None or ref == REDTEAM:
        return _redteam_calls(), "the bundled red-team corpus"
    path = Path(ref)
    if path.exists():
        return _file_calls(path), str(path)
    if ref == "latest" or ref.startswith("label:") or ref.isdigit():
        return _run_calls(ref, db)
    raise ConfigError("is neither a file, `redteam`, nor a run (an id, latest or label:NAME)",
                      field=f"--calls {ref}")


# -- commands -----------------------------------------------------------------------------


def _print_report(report) -> None:
    from agent_eval.policy import get_rule

    click.echo(f"agent {escape_terminal(report.agent)} ({report.harness}): {report.calls} "
               f"calls, harness allowed {report.harness_allowed}, strict allowed "
               f"{report.strict_allowed}, leaks {report.leak_count}")
    if not report.leak_count:
        return
    click.echo("  leaks by class:")
    for code, n in sorted(report.by_class.items(), key=lambda kv: (-kv[1], kv[0])):
        rule = get_rule(code)
        click.echo(f"    {code}  {n:>5}  {rule.name if rule else ''}")
    click.echo("  rules responsible:")
    for label, n in report.by_rule.most_common(20):
        click.echo(f"    {n:>5}  {escape_terminal(label)}")
    for quirk, n in report.by_quirk.most_common():
        click.echo(f"    {n:>5}  through the {quirk} quirk")
    click.echo("  leaks:")
    for leak in report.leaks[:50]:
        text = leak.text.replace("\n", "⏎")
        text = text if len(text) <= 120 else text[:117] + "..."
        via = f" via {leak.quirk}" if leak.quirk else ""
        click.echo(f"    {leak.code} {escape_terminal(leak.where)}: "
                   f"{escape_terminal(text)}{via}")
    if report.leak_count > 50:
        click.echo(f"    ... {report.leak_count - 50} more (--json lists up to 200)")


@policy.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Audit this agent (repeatable; default: every agent of CONFIG).")
@click.option("--calls", "calls_ref", default=None, metavar="RUN|FILE",
              help="The calls: a stored run (id, latest, label:NAME), a file (JSONL of "
                   "calls, .txt of commands, or a transcript the importers read), or "
                   "`redteam` (the bundled corpus, the default).")
@setting_options
@json_option("the reports as JSON")
@db_option
def audit(config: Path, agents: tuple[str, ...], calls_ref: str | None, workdir: str,
          home: str, quirks: str, cli_version: str | None, mode: str | None, as_json: bool,
          db: str | None) -> None:
    """List the leaks of an agent CLI's rules: calls its matcher lets through that the
    strict reading of the same rules refuses, by class and by the rule responsible.

    CONFIG is an opencode.json, a Claude Code settings.json, a Codex .rules file (or
    folder), Gemini CLI's settings.json or policy .toml, or Qwen Code's settings.json.  Every call is judged twice: by the CLI's own matcher, emulated with its
    documented quirks, and strictly (an allowed pattern admits only plain words where its
    wildcard is).  Exit codes: 0 audited (leaks or not), 2 bad config or input.

    Example: agent-eval policy audit .claude/settings.json --calls session.jsonl
    """
    from agent_eval.policy.sources import load_policy_source
    from agent_eval.policy.sources.audit import audit as audit_calls

    setting = make_setting(workdir, home, quirks, cli_version, mode)
    source = load_policy_source(config, home=setting.home)
    names = list(agents) or list(source.agents)
    for name in names:
        if name not in source.agents:
            raise ConfigError(f"{config} has no agent {name!r}; its agents: "
                              f"{', '.join(source.agents)}", field="--agent")
    emulations = {name: emulated(setting, source.agents[name]) for name in names}
    calls, origin = load_calls(calls_ref, db)
    reports = [audit_calls(source.agents[name], calls, setting) for name in names]
    if as_json:
        click.echo(json.dumps({"config": str(config), "harness": source.harness,
                               "calls_from": origin, "calls": len(calls),
                               "agents": [{**r.as_dict(), "emulated": setting.emulation(
                                   source.agents[r.agent]).as_dict()} for r in reports]},
                              indent=2))
        return
    click.echo(f"{escape_terminal(str(config))} ({source.harness}), {len(calls)} calls from "
               f"{escape_terminal(origin)}")
    for report in reports:
        click.echo(f"emulated: {escape_terminal(emulations[report.agent])}")
        _print_report(report)


@policy.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Convert this agent (repeatable; default: every agent of CONFIG).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Write one <config>-<agent>.yaml per agent into this folder "
                                 "instead of printing them.")
@click.option("--workdir", default="/project", show_default=True, metavar="DIR",
              help="The CLI's work directory, for read rules written as absolute paths.")
def convert(config: Path, agents: tuple[str, ...], out_dir: Path | None, workdir: str) -> None:
    """Write the agent-eval allow-list equivalent to each agent's rules, and say what
    cannot be expressed.

    Printed as YAML documents (one per agent, `---` between them) with the notes as
    comments, or written into --out.  The notes also go to stderr.  Exit codes: 0
    written, 2 bad config.

    Example: agent-eval policy convert opencode.json --agent build > build.yaml
    """
    import yaml

    from agent_eval.policy.sources import convert_agent, load_policy_source

    source = load_policy_source(config)
    names = list(agents) or list(source.agents)
    docs = []
    for name in names:
        if name not in source.agents:
            raise ConfigError(f"{config} has no agent {name!r}; its agents: "
                              f"{', '.join(source.agents)}", field="--agent")
        conversion = convert_agent(source.agents[name], config_name=config.stem,
                                   workdir=workdir)
        conversion.allowlist()  # the output must load as an allow-list
        notes = list(source.notes) + conversion.notes
        head = [f"# agent {name} of {config} ({source.harness})"]
        head += [f"# cannot be expressed exactly: {n}" for n in notes] or \
            ["# every rule expressed"]
        text = "\n".join(head) + "\n" + yaml.safe_dump(conversion.data, sort_keys=False,
                                                       allow_unicode=True)
        for note in notes:
            click.echo(f"{name}: {escape_terminal(note)}", err=True)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / f"{conversion.data['name']}.yaml"
            target.write_text(text, encoding="utf-8")
            click.echo(f"wrote {escape_terminal(str(target))}", err=True)
        docs.append(text)
    if out_dir is None:
        sys.stdout.write("---\n".join(docs))


@policy.command()
@allowlist_option("Show the profiles as this allow-list has them (some switched off, its "
                  "own added)", default="the built-in ones", agent_rules=False)
@json_option("the profiles as JSON")
def profiles(allowlist_path: Path | None, as_json: bool) -> None:
    """List the tool profiles: each agent CLI's shell, read and subagent tools, with every
    argument key they take and how it is judged.

    Calls the proxy relays and `import` reads are judged by these (docs/profiles.md): a
    CLI's shell tool exactly as the allow-list's bash, its read tool as read, a working
    directory as a read path, a sandbox or background switch as AE106/AE107, any other key
    AE105.  An allow-list switches a profile off (`profiles: {codex: false}`) or adds one.

    Example: agent-eval policy profiles --allowlist ralf
    """
    from agent_eval.policy import AllowList
    from agent_eval.policy.profiles import BUILTIN
    from agent_eval.policy.sources import resolve_allowlist

    allowlist = (resolve_allowlist(allowlist_path)
                 if allowlist_path is not None else AllowList(name="built-in"))
    active = allowlist.active_profiles
    off = [name for name in BUILTIN if name not in active]
    if as_json:
        click.echo(json.dumps({
            "allowlist": allowlist.name, "switched_off": off,
            "profiles": {name: p.model_dump(mode="json", exclude_defaults=True)
                         for name, p in active.items()}}, indent=2))
        return
    from agent_eval.cli.terminal import text_width
    from agent_eval.linewrap import fit_lines

    lines = []
    for name, profile in active.items():
        lines.append(f"{name}: {escape_terminal(profile.description)}")
        for tool in profile.tools:
            keys = ", ".join(_key_text(k, a) for k, a in tool.arguments.items())
            lines.append(f"  {escape_terminal(tool.name)} ({tool.kind}): "
                         f"{escape_terminal(keys)}")
    if off:
        lines.append(f"switched off by {escape_terminal(allowlist.name)}: {', '.join(off)}")
    for line in fit_lines(lines, text_width()):
        click.echo(line)


def _key_text(key: str, arg: Any) -> str:
    """One argument key as `policy profiles` shows it: `command*` (required), `workdir:path`,
    `run_in_background:AE107`..."""
    from agent_eval.policy.rules import code_for

    if arg.holds == "absent":
        role = code_for(arg.denial)
    else:
        role = arg.holds if arg.holds != "value" else arg.type
    return f"{key}{'*' if arg.required else ''}:{role}"


# -- explain and diff ---------------------------------------------------------------------


def _one_agent(config: Path, agent: str | None, setting):
    from agent_eval.policy.sources import load_policy_source

    source = load_policy_source(config, home=setting.home)
    try:
        chosen = source.agent(agent)
    except KeyError:
        raise ConfigError(f"{config} has no agent {agent!r}; its agents: "
                          f"{', '.join(source.agents)}", field="--agent") from None
    emulated(setting, chosen)  # checks --mode against the CLI
    return source, chosen


@policy.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("text")
@click.option("--agent", default=None, metavar="NAME",
              help="Which agent's rules (default: the configuration's default agent).")
@click.option("--tool", type=click.Choice(["bash", "read"]), default="bash", show_default=True,
              help="Explain TEXT as a bash command or as a read-tool path.")
@setting_options
@json_option("the explanation as JSON")
def explain(config: Path, text: str, agent: str | None, tool: str, workdir: str, home: str,
            quirks: str, cli_version: str | None, mode: str | None, as_json: bool) -> None:
    """Say why an agent CLI's rules decide a command as they do: the rule and the file it
    is in, the release and mode emulated, what the command was cut into, and the strict
    reading of the same rules.

    Exit codes: 0 explained (whatever the verdict), 2 bad config or option.

    Example: agent-eval policy explain .claude/settings.json 'cd src && ls > files.txt'
    """
    from agent_eval.policy.sources.explain import explain as explain_call

    setting = make_setting(workdir, home, quirks, cli_version, mode)
    source, chosen = _one_agent(config, agent, setting)
    found = explain_call(chosen, text, setting, tool)
    if as_json:
        click.echo(json.dumps(found.as_dict(), indent=2))
        return
    esc = escape_terminal
    h, strict = found.dual.harness, found.dual.strict
    click.echo(f"{esc(str(config))} ({source.harness}), agent {esc(chosen.name)}")
    click.echo(f"emulated: {esc(found.emulation.describe())}; behaviours: "
               f"{esc(', '.join(sorted(found.emulation.behaviours)) or 'none')}")
    click.echo(f"parse: {esc(found.cut)}")
    for part in found.parse:
        click.echo(f"  {esc(part)}")
    click.echo(f"harness: {h.decision} ({esc(h.reason)})")
    for rule in h.rules:
        origin = rule.origin if rule.origin.startswith(chosen.source) else \
            f"{chosen.source} {rule.origin}".strip()
        click.echo(f"  by {esc(rule.label())}  [{esc(origin)}]")
    if h.quirk:
        click.echo(f"  through the {h.quirk} behaviour")
    if not h.rules:
        click.echo("  by no rule: the CLI's default in this mode")
    click.echo(f"strict: {strict.decision}" + (f" {strict.primary}" if strict.primary else ""))
    for finding in strict.findings:
        click.echo(f"  {finding.code}: {esc(finding.message)}")
    if found.dual.leak:
        click.echo(f"leak: the CLI lets it through, the strict reading refuses it "
                   f"({found.dual.leak_class})")


@policy.command()
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--calls", "calls_ref", default=None, metavar="RUN|FILE",
              help="The calls: a stored run (id, latest, label:NAME), a file (JSONL of "
                   "calls, .txt of commands, or a transcript), or `redteam` (the default).")
@click.option("--agent", default=None, metavar="NAME",
              help="Which agent of both configurations (default: each one's default).")
@setting_options
@json_option("the changes as JSON")
@db_option
def diff(old: Path, new: Path, calls_ref: str | None, agent: str | None, workdir: str,
         home: str, quirks: str, cli_version: str | None, mode: str | None, as_json: bool,
         db: str | None) -> None:
    """Show what a change of an agent CLI's rules would have changed on recorded calls:
    calls newly allowed, newly refused, leaks opened and closed.

    OLD and NEW are two versions of the same configuration (opencode.json, Claude Code
    settings.json, Codex .rules, Gemini CLI or Qwen Code settings.json), for reviewing a settings change before it ships.  Exit
    codes: 0 compared, 2 bad config or input.

    Example: agent-eval policy diff old/settings.json .claude/settings.json --calls latest
    """
    from agent_eval.policy.sources.explain import diff_calls

    setting = make_setting(workdir, home, quirks, cli_version, mode)
    old_source, old_agent = _one_agent(old, agent, setting)
    new_source, new_agent = _one_agent(new, agent, setting)
    if old_source.harness != new_source.harness:
        raise ConfigError(f"OLD is {old_source.harness} rules and NEW {new_source.harness} "
                          "rules; compare two versions of one CLI's configuration",
                          field="policy diff")
    calls, origin = load_calls(calls_ref, db)
    found = diff_calls(old_agent, new_agent, calls, setting)
    described = setting.emulation(new_agent).describe()
    if as_json:
        click.echo(json.dumps({"old": str(old), "new": str(new), "calls_from": origin,
                               "emulated": described, **found.as_dict()}, indent=2))
        return
    esc = escape_terminal
    click.echo(f"{esc(str(old))} -> {esc(str(new))} ({new_source.harness}), {found.calls} "
               f"calls from {esc(origin)}; emulated: {esc(described)}")
    for title, changes in (("newly allowed", found.newly_allowed),
                           ("newly refused", found.newly_refused),
                           ("leaks opened", found.leaks_opened),
                           ("leaks closed", found.leaks_closed),
                           ("otherwise changed", found.other)):
        click.echo(f"{title}: {len(changes)}")
        for change in changes[:50]:
            text = change.text.replace("\n", "⏎")
            text = text if len(text) <= 100 else text[:97] + "..."
            leak = change.new_leak or change.old_leak
            click.echo(f"  {esc(change.where)}: {esc(text)}  {change.old} -> {change.new}"
                       + (f" ({leak})" if leak else "")
                       + (f" by {esc(', '.join(change.rules))}" if change.rules else ""))

