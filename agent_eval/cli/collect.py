"""``agent-eval collect``: judge the tool calls in the telemetry agent CLIs already export."""

from __future__ import annotations

import signal
import threading

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
@db_option
def collect(allowlist_path: str, agent: str | None, port: int, host: str, label: str,
            model: str | None, idle_timeout: float, max_body: int, db: str | None) -> None:
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
    stops (Ctrl-C or SIGTERM).  Status: GET /_agent_eval/status.
    Exit codes: 0 stopped, 2 bad option, file or --db.
    """
    from agent_eval.proxy.collect import Collector, CollectServer, serve
    from agent_eval.scenario.bundled import load_policy
    from agent_eval.store import open_store

    policy = load_policy(allowlist_path, agent)
    with open_store(db) as store:
        collector = Collector(store, policy, label=label, model=model, idle_s=idle_timeout,
                              max_body=max_body, allowlist_path=str(allowlist_path))
        try:
            server = CollectServer(collector, host, port)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                              field="--port") from None
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _interrupt)
        click.echo(f"agent-eval collect: {server.base_url}/v1/logs and /v1/traces, judging "
                   f"into {store.url} (Ctrl-C stops)", err=True)
        click.echo(server.base_url)
        stats = serve(server)
    click.echo(f"run {stats.run_id}: {stats.sessions} sessions, {stats.calls} calls judged, "
               f"{stats.not_judged} not judged; {stats.requests} requests, "
               f"{stats.refused} refused", err=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
