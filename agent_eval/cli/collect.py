"""``agent-eval collect``: judge the tool calls in the telemetry agent CLIs already export."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from agent_eval.cli import main
from agent_eval.cli.options import allowlist_option, db_option
from agent_eval.errors import ConfigError


@main.command()
@allowlist_option("Allow-list YAML every tool call is judged against", required=True)
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: judge every session as agent NAME.")
@click.option("--port", type=click.IntRange(0, 65535), default=4318, show_default=True,
              help="Port to listen on (0: a free one, printed); 4318 is OTLP/HTTP's.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--label", default="collect", show_default=True, help="Label of the run.")
@click.option("--model", default=None, help="Model name to store when the telemetry names none.")
@click.option("--idle-timeout", type=click.FloatRange(min=0.1), default=600.0,
              show_default=True, help="Seconds without an event that close a session.")
@click.option("--max-body", type=click.IntRange(min=1024), default=16 * 1024 * 1024,
              show_default=True, metavar="BYTES",
              help="Largest request body accepted, compressed or inflated (then a 413).")
@click.option("--journal", default="agent-eval-collect.journal", show_default=True,
              metavar="PATH",
              help="Where sessions wait while the store is down, and (PATH.open) the "
                   "accepted events of the open sessions; a start on the journal of a killed "
                   "receiver writes what it had accepted.")
@db_option
def collect(allowlist_path: str, agent: str | None, port: int, host: str, label: str,
            model: str | None, idle_timeout: float, max_body: int, journal: str,
            db: str | None) -> None:
    """Receive OpenTelemetry logs and traces (OTLP/HTTP); judge every tool call.

    For teams that cannot put `proxy` in front of their model but already export their
    agents' telemetry.  Reads OpenTelemetry GenAI `execute_tool` spans and the native
    tool events of Claude Code (`claude_code.tool_decision` / `tool_result`), Codex
    (`codex.tool_decision` / `tool_result`) and Gemini CLI (`gemini_cli.tool_call`);
    stitches them into sessions by session id and stores them as a run (format `otlp`)
    judged like an import, the CLI's own decision and its source kept beside ours.  A call
    whose arguments are absent or may be cut (Claude Code cuts values at 512 characters)
    is not judged: kept in the transcript with the reason, counted in the session's
    `skipped_calls:N` tag, never counted as allowed (show, runs, report and viewer say
    how many).  Where a GenAI emitter sends the tools offered (gen_ai.tool.definitions),
    each call is also checked against its own tool's schema (AE108).  Reads OTLP/JSON,
    and OTLP/protobuf with the otel extra (pip install 'agent-eval[otel]'; without it a
    415 says so); bodies with a Content-Length or chunked; /v1/metrics answered, not read.
    Example:

    \b
        agent-eval collect --allowlist allowlists/ralf.yaml --port 4318
        # then: OTEL_EXPORTER_OTLP_PROTOCOL=http/json \\
        #       OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 claude ...

    Sessions are stored when idle for --idle-timeout seconds and when the receiver
    stops: SIGTERM, SIGINT (Ctrl-C) or SIGHUP, to the process or its group, ends the
    request being served and stores every open session; the run ends `finished`.
    Durable like `proxy`: a batch is answered 200 only once its events are in the
    journal's open part (else 503, and the exporter sends it again); while the store is
    down, sessions go to the journal and are written when it answers.  After a SIGKILL,
    the next `collect` on the same --journal (and --db) writes the sessions the killed
    one had accepted into its run and marks that run `interrupted`.
    Status: GET /_agent_eval/status.
    Exit codes: 0 stopped, 2 bad option, file or --db.
    """
    from agent_eval.proxy.collect import Collector, CollectServer, serve
    from agent_eval.proxy.recorder_process import STOPPING
    from agent_eval.scenario.bundled import load_policy
    from agent_eval.store import open_store

    policy = load_policy(allowlist_path, agent)
    with open_store(db) as store:
        collector = Collector(store, policy, label=label, model=model, idle_s=idle_timeout,
                              max_body=max_body, allowlist_path=str(allowlist_path),
                              journal=journal)
        if collector.stats.recovered:
            _say(f"agent-eval collect: {collector.stats.recovered} sessions a killed receiver "
                 f"had accepted were written from {journal}.open; its run is marked "
                 "interrupted")
        try:
            server = CollectServer(collector, host, port)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                              field="--port") from None
        if threading.current_thread() is threading.main_thread():
            for sig in STOPPING:
                signal.signal(sig, lambda signum, frame: _stop(server))
        click.echo(f"agent-eval collect: {server.base_url}/v1/logs and /v1/traces, judging "
                   f"into {store.url} (Ctrl-C stops)", err=True)
        click.echo(server.base_url)
        stats = serve(server)
    _say(f"run {stats.run_id}: {stats.sessions} sessions, {stats.calls} calls judged, "
         f"{stats.not_judged} not judged; {collector.journaled} sessions in the journal; "
         f"{collector.lost} not recorded; {stats.requests} requests, {stats.refused} refused")


def _stop(server: Any) -> None:
    """A stopping signal: the serving loop ends after the request it serves (from
    another thread: ``shutdown`` waits for the loop); a second signal does nothing."""
    from agent_eval.proxy.recorder_process import STOPPING

    for sig in STOPPING:
        signal.signal(sig, signal.SIG_IGN)
    threading.Thread(target=server.shutdown, daemon=True).start()


def _say(line: str) -> None:
    """One line on stderr; a terminal that is gone (SIGHUP) must not turn a clean stop
    into a traceback."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass
