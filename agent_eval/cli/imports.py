"""``agent-eval import``: sessions recorded by other harnesses (or server logs) into the store."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from agent_eval.cli import main
from agent_eval.cli.options import allowlist_option, db_option, stack_note_options, stack_notes
from agent_eval.cli.terminal import escape_terminal
from agent_eval.serverlogs.importing import LOG_FORMATS

TRANSCRIPT_FORMATS = ("auto", "openai", "opencode", "claude-code", "mini-swe-agent", "swe-agent",
                      "call-records", "codex", "openhands", "qwen-code", "gemini-cli")


@main.command(name="import")
@click.argument("fmt", metavar="[FORMAT]")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@allowlist_option("Allow-list YAML every imported call is judged against (transcripts; "
                  "docs/policies.md)")
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: judge every session as agent NAME (default: "
                   "each session's agent, from its system prompt, else the default agent).")
@click.option("--cli-version", "cli_version", default=None, metavar="X.Y.Z",
              help="With an agent CLI's rules: the CLI release to emulate (default: each "
                   "session's own, from its file, else the pinned one).")
@click.option("--mode", default=None, metavar="MODE",
              help="With an agent CLI's rules: its mode (default: each session's own, else "
                   "the configuration's; docs/policies.md).")
@click.option("--protocols", "protocols_path", type=click.Path(path_type=Path),
              help="Protocols YAML: the closing sequences each session must make "
                   "(docs/protocols.md); handshake completion is then reported.")
@click.option("--model", default=None, help="Model name to record, overriding the file's.")
@click.option("--label", default=None, help="Label of the new run (server logs: the stream name).")
@click.option("--year", type=int, default=None, help="vllm-log: year for its year-less dates.")
@click.option("--start", default=None, help="llamacpp-log: wall-clock time of the first line.")
@click.option("--utc-offset", default=None, help="Server logs: the server clock's offset from UTC, e.g. +02:00.")
@stack_note_options("markup left in text is the model's (AE104): a transcript keeps no "
                    "template")
@db_option
def import_(fmt: str, path: Path | None, allowlist_path: Path | None, agent: str | None,
            cli_version: str | None, mode: str | None, protocols_path: Path | None, model: str | None,
            label: str | None, year: int | None, start: str | None, utc_offset: str | None,
            stack_parser: str | None, stack_template: str | None, db: str | None) -> None:
    """Import transcripts as a new run, every tool call judged by our engine.

    FORMAT (needs --allowlist) is one of: auto (the default when FORMAT is left out: each
    file read with the format found in it, a mixed folder in one run), claude-code
    (Claude Code 1.x, 2.0, 2.1 transcripts and subagent files, stream-json), codex (Codex
    CLI rollout-*.jsonl, 0.3x to 0.169), opencode (OpenCode 1.1 storage folder, 1.2+
    opencode.db, export JSON, run stream), mini-swe-agent (0.x bare message lists, 1.x
    and 2.0-2.2 .traj.json, text or tool-call models), swe-agent (SWE-agent 0.x and 1.x
    .traj), openhands (OpenHands event streams), qwen-code (Qwen Code
    ~/.qwen/projects/*/chats/*.jsonl and subagent files), gemini-cli (Gemini CLI
    ~/.gemini/tmp/*/chats session files and subagent files), openai (chat-completions
    messages) or call-records; or vllm-log / llamacpp-log for server logs (with --year, --start,
    --utc-offset as the log needs).  (aider is not a format: its chat history holds
    no structured tool calls.)  A folder is read file by file: a file that cannot be
    read is reported and skipped, never the end of the import.  Broken JSONL lines are
    skipped with a warning (the first three shown, then a count); a broken
    single-document file is an error naming the file and line; a file holding no FORMAT
    session, or one FORMAT would misread, is an error naming the format it is, and nothing
    is stored; so is a file that holds tool calls of which its reader found none.  A
    subagent session is linked to its parent and to the call that spawned it where the
    files record it (OpenCode, Claude Code, Codex, Qwen Code, Gemini CLI).  Calls a file holds that could not be read are counted and reported.  If
    the input breaks after whole sessions were read, they stay in a run marked failed;
    Ctrl-C leaves the run marked interrupted and exits 130 (`latest` skips it).
    Prints the run id, counts per format, errors per 100 calls and how often our verdicts
    agree with the verdicts the source recorded itself.  With --protocols FILE each
    session's closing sequence is checked too (docs/protocols.md) and handshake
    completion with the most-missed step is printed.

    --allowlist also takes an agent CLI's own rules (docs/policies.md): each session is
    then judged by the CLI's matcher under its agent's rules (from its system prompt,
    else the default agent, or --agent), and calls the strict reading of those rules
    refuses are counted as leaks.

    Example: agent-eval import ~/.claude/projects --allowlist allowlists/ralf.yaml
    """
    from agent_eval.errors import ConfigError
    from agent_eval.store import open_store

    if path is None and fmt in TRANSCRIPT_FORMATS + LOG_FORMATS:
        raise click.UsageError(f"missing PATH: agent-eval import {fmt} PATH")
    if path is None:
        fmt, path = "auto", Path(fmt)
    elif fmt not in TRANSCRIPT_FORMATS + LOG_FORMATS:
        raise click.BadParameter(
            f"{fmt!r} is not one of {', '.join(TRANSCRIPT_FORMATS + LOG_FORMATS)}",
            param_hint="'[FORMAT]'")

    if fmt in LOG_FORMATS:
        from agent_eval.serverlogs import LogFormat, import_log

        log_format = cast(LogFormat, fmt)  # one of LOG_FORMATS, checked just above
        with open_store(db) as store:
            stats = import_log(store, log_format, path, label=label, year=year, start=start,
                               utc_offset=utc_offset)
        skipped = f"; {stats.already_imported} already imported, skipped" if stats.already_imported else ""
        click.echo(f"imported {stats.samples} samples and {stats.requests} requests from {path} "
                   f"as source {stats.source!r} ({stats.malformed} malformed lines){skipped}")
        if stats.hidden:
            click.echo(f"{stats.hidden} lines were hidden by journalctl as [blob data] "
                       "(llama.cpp's timing lines): export the journal again with journalctl -a")
        return
    if year is not None or start is not None or utc_offset is not None:
        raise ConfigError("--year, --start and --utc-offset apply to server logs only",
                          field="--year/--start/--utc-offset")
    if allowlist_path is None:
        raise ConfigError("--allowlist FILE is required to judge imported calls", field="--allowlist")
    from agent_eval.importers.recording import record_import
    from agent_eval.scenario.bundled import find_allowlist, load_policy

    policy = load_policy(allowlist_path, agent)
    if cli_version is not None or mode is not None:
        from dataclasses import replace

        from agent_eval.cli.policies import emulated

        if policy.agent is None:
            raise ConfigError("--cli-version and --mode apply to an agent CLI's rules, not to "
                              "an agent-eval allow-list", field="--mode")
        policy = replace(policy, setting=replace(policy.setting, version=cli_version,
                                                 mode=mode))
        emulated(policy.setting, policy.agent)  # checks both against the CLI
    allowlist_path = find_allowlist(allowlist_path)
    protocols = None
    if protocols_path is not None:
        from agent_eval.scenario.protocols import load_protocols

        protocols = load_protocols(protocols_path)
    notes = stack_notes(stack_parser, stack_template)
    warnings = _SkipWarnings()
    try:
        with open_store(db) as store, _Progress(path) as progress:
            summary = record_import(
                store, fmt, path, policy, allowlist_path=str(allowlist_path), model=model,
                label=label, on_skip=warnings.warn, on_session=progress.advance,
                on_file=progress.file_done, protocols=protocols,
                protocols_path=str(protocols_path) if protocols_path else None,
                stack_notes=notes,
            )
    except KeyboardInterrupt as exc:
        _interrupted(getattr(exc, "run_id", None))
    finally:
        warnings.close()
    _print_summary(summary)


def _interrupted(run_id: int | None) -> None:
    """Ctrl-C: say what was kept and exit 130, like ``run``."""
    import sys

    kept = (f"run {run_id} is marked interrupted (`latest` skips it); " if run_id is not None
            else "nothing was stored; ")
    click.echo(f"Interrupted: {kept}import the file again to get all of it.", err=True)
    sys.exit(130)


class _SkipWarnings:
    """Warns about the first few skipped lines, then counts the rest: a file in the wrong
    format skips every line, and hundreds of warnings would bury the one error line."""

    SHOWN = 3

    def __init__(self) -> None:
        self.count = 0
        self.path: Path | None = None

    def warn(self, path: Path, line: int, reason: str) -> None:
        if line == 0:  # a whole file passed over: always shown (the reason may quote it)
            click.echo(escape_terminal(f"Warning: {path}: {reason}"), err=True)
            return
        self.count += 1
        self.path = path
        if self.count <= self.SHOWN:
            click.echo(escape_terminal(f"Warning: {path}: line {line}: skipped: {reason}"),
                       err=True)

    def close(self) -> None:
        if self.count > self.SHOWN:
            click.echo(f"Warning: {escape_terminal(str(self.path))}: {self.count - self.SHOWN} more lines skipped "
                       f"({self.count} in all)", err=True)


def _print_summary(summary) -> None:
    rate = summary.errors_per_100
    models = ", ".join(f"{m}: {n}" for m, n in sorted(summary.models.items()))
    click.echo(f"run {summary.run_id}: imported {summary.sessions} sessions, {summary.calls} calls "
               f"({escape_terminal(models)})")
    if len(summary.formats) > 1 or summary.skipped_files:
        found = ", ".join(f"{f}: {n} sessions, {c} calls" for f, (n, c) in sorted(summary.formats.items()))
        click.echo(escape_terminal(f"  formats found: {found or 'none'}"))
    if summary.skipped_files:
        click.echo(f"  skipped {len(summary.skipped_files)} files (see the warnings above)")
    if summary.skipped_calls:
        click.echo(f"  skipped {summary.skipped_calls} calls the files hold but could not be read "
                   "(sessions tagged skipped_calls:N)")
    if summary.error_sessions:
        click.echo(f"  {summary.error_sessions} sessions in error state (excluded from the rate)")
    click.echo(f"  errors/100 calls: {rate:.2f}" if rate is not None else "  errors/100 calls: n/a")
    if summary.handshake_required:
        missed = max(summary.missed_steps.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        most = (f"; most missed step: {missed[0]} ({missed[1]} sessions)" if missed else "")
        click.echo(escape_terminal(
            f"  handshake completed: {summary.handshake_completed}/"
            f"{summary.handshake_required} sessions a protocol applied to{most}"))
    broken = [n for _, n, _ in summary.skipped_lines if n]
    if broken:
        lines = ", ".join(str(n) for n in broken[:20])
        click.echo(f"  skipped {len(broken)} broken lines: {lines}")
    if not summary.with_source:
        click.echo("  the source recorded no verdicts of its own")
        return
    click.echo(f"  agreement with source verdicts: {summary.agree}/{summary.with_source}")
    for d in summary.disagreements:
        what = d.command if d.command is not None else d.tool
        ours = f"{d.ours} {d.primary}" if d.primary else d.ours
        click.echo(escape_terminal(
            f"    {d.session} #{d.index} {what!r}: ours {ours}, source {d.source}"))
    more = summary.disagreement_count - len(summary.disagreements)
    if more > 0:
        click.echo(f"    ... and {more} more")


class _Progress:
    """A rich progress bar on stderr when it is a terminal (silent otherwise): bytes of
    the folder's files read, with sessions and calls so far."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> _Progress:
        import sys

        self._progress = None
        self._sessions = self._calls = 0
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            total = _input_bytes(self.path)
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                      TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("importing", total=total or None)
        return self

    def advance(self, record) -> None:
        self._sessions += 1
        self._calls += len(record.calls)
        if self._progress is not None and self._sessions % 20 == 0:
            self._progress.update(self._task, description=f"{self._sessions} sessions, {self._calls} calls")

    def file_done(self, path: Path, size: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=size,
                                  description=f"{self._sessions} sessions, {self._calls} calls")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()


def _input_bytes(path: Path) -> int:
    """Total size of the files a folder import will read (0 when unknown)."""
    from agent_eval.importers.auto import folder_files

    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in folder_files(path))
        return path.stat().st_size
    except OSError:
        return 0
