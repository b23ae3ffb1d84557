"""``agent-eval proxy``: record and judge a real stack's traffic in front of its server."""

from __future__ import annotations

import asyncio
import signal

import click

from agent_eval.cli import main
from agent_eval.cli.options import allowlist_option, db_option, stack_note_options, stack_notes
from agent_eval.errors import ConfigError


@main.command()
@click.option("--upstream", required=True, metavar="URL",
              help="The model server's base URL, e.g. http://127.0.0.1:8000/v1.")
@allowlist_option("Allow-list YAML every tool call is judged against", required=True)
@click.option("--agent", default=None, metavar="NAME",
              help="With an agent CLI's rules: judge every session as agent NAME (default: "
                   "per session, the x-agent-eval-agent header, else the agent whose prompt "
                   "the system prompt holds, else the default agent).")
@click.option("--port", type=click.IntRange(0, 65535), default=8100, show_default=True,
              help="Port to listen on (0: a free one, printed).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--label", default="proxy", show_default=True, help="Label of the run.")
@click.option("--idle-timeout", type=click.FloatRange(min=0.1), default=600.0,
              show_default=True, help="Seconds without a request that close a session.")
@click.option("--journal", default="agent-eval-proxy.journal", show_default=True,
              type=click.Path(dir_okay=False),
              help="File holding closed sessions while the store is down.")
@click.option("--protocols", "protocols_path", type=click.Path(dir_okay=False),
              help="Protocols YAML: closing sequences each session must make "
                   "(docs/protocols.md).")
@click.option("--otel-endpoint", metavar="URL",
              help="Also export each turn and tool call as OpenTelemetry spans (GenAI "
                   "conventions) to this OTLP/HTTP traces URL, e.g. "
                   "http://127.0.0.1:4318/v1/traces. Needs: pip install 'agent-eval[otel]'.")
@click.option("--keep-requests-days", type=click.IntRange(min=0), default=0,
              show_default=True, metavar="DAYS",
              help="Delete stored prompt texts (kept for replay) that no turn used in this "
                   "many days, at start and hourly; 0 keeps them for ever.")
@click.option("--client-timeout", type=click.FloatRange(min=0.1), default=60.0,
              show_default=True, metavar="SECONDS",
              help="Seconds a client may take to send a request's headers (from connecting "
                   "or the previous answer's end: also how long an idle connection is "
                   "kept), and again its body (then a 408).")
@stack_note_options("the chat template the upstream reports (llama.cpp's /props), "
                    "read once at start")
@click.option("--stream-parity", is_flag=True,
              help="After each streamed chat turn whose decoding repeats itself "
                   "(temperature 0 or a seed) was relayed, ask the upstream its whole "
                   "twin (stream: false) as a side request and record a streamed reply "
                   "that differs as AE510; one twin at a time, a second generation per "
                   "twinned turn on the server (docs/proxy.md).")
@db_option
def proxy(upstream: str, allowlist_path: str, agent: str | None, port: int, host: str, label: str,
          idle_timeout: float, journal: str, protocols_path: str | None,
          otel_endpoint: str | None, keep_requests_days: int, client_timeout: float,
          stack_parser: str | None, stack_template: str | None, stream_parity: bool,
          db: str | None) -> None:
    """Relay an agent stack's traffic to its model server unchanged; judge every tool call.

    Point the stack's base URL at the proxy and change nothing else.  Every request and
    answer passes through untouched (streams chunk by chunk); once a reply has been sent,
    its tool calls are judged against the allow-list and the conversation is stored as a
    session of a run of kind `proxy` when it has been idle for --idle-timeout seconds (or
    when the proxy stops), so report, view, gate, compare and show work on it.
    Authorization headers are forwarded and never stored or logged.  Example:

    \b
        agent-eval proxy --upstream http://127.0.0.1:8000/v1 --allowlist allowlists/ralf.yaml
        # then: OPENAI_BASE_URL=http://127.0.0.1:8100/v1 your-agent ...

    Judging and storing run in a second process, so the relay's process only relays.
    With --otel-endpoint, every stored turn and tool call is also sent as a span
    (`chat MODEL`, `execute_tool TOOL`, the verdict as `agent_eval.decision`).
    Each prompt text is stored once however many turns repeat it; --keep-requests-days N
    also deletes the texts unused for N days (the store's, not only this run's: turns
    older than that can then no longer be replayed, and replay says so).
    A client that does not send a request's headers, or its body, within
    --client-timeout seconds is disconnected (a 408 for the body), so trickling
    connections cannot hold memory.  A user and password in --upstream, and the values of
    its query parameters named like credentials (key, token, secret, password, auth,
    signature, session: shown as ***), are never shown, logged, stored or sent (the relay
    asks the upstream's origin, with the client's own path and query).
    --allowlist also takes an agent CLI's own rules (docs/policies.md): each session is
    judged by its agent's rules (the client's x-agent-eval-agent header, else the agent
    whose own prompt its system prompt holds, else the default agent; each stored session
    says which and how) under that CLI's matcher, and the calls the strict reading of the
    rules refuses are counted as leaks.
    Before relaying anything the proxy asks the upstream once what it serves
    (/v1/models, llama.cpp's /props with its chat template, vLLM's /version; no
    credentials sent): kept in the run's fingerprint, and the template's call format
    (or the one --stack-parser / --stack-template names) tells markup left in a reply's
    text as the parser's fault (AE511) from the model's (AE104).
    Status: GET /_agent_eval/status.  Stop with Ctrl-C, SIGTERM or SIGHUP, to the process
    or to its process group (open sessions are written then).
    Exit codes: 0 stopped, 2 bad option, file or --db.
    """
    from agent_eval.proxy.recorder import by_protocol
    from agent_eval.proxy.recorder_process import RecorderConfig, RecorderProcess
    from agent_eval.proxy.relay import public_url
    from agent_eval.store import open_store

    if not upstream.startswith(("http://", "https://")):
        raise ConfigError(f"{public_url(upstream)!r} is not an http(s) URL", field="--upstream")
    from yarl import URL

    try:
        URL(upstream).origin()
    except ValueError as exc:  # its text names no part of the URL
        raise ConfigError(f"{public_url(upstream)!r} is not a valid URL ({exc})",
                          field="--upstream") from None
    upstream = public_url(upstream)
    if otel_endpoint is not None:
        from agent_eval.proxy.otel import check_otel

        check_otel(otel_endpoint)
    from agent_eval.scenario.bundled import load_policy

    load_policy(allowlist_path, agent)  # the operator's mistakes are reported here, not in the child
    if protocols_path is not None:
        from agent_eval.scenario.protocols import load_protocols

        load_protocols(protocols_path)
    notes = stack_notes(stack_parser, stack_template)
    store = open_store(db)
    db_url = store.url
    store.close()
    recorder = RecorderProcess(RecorderConfig(
        db=db, allowlist_path=str(allowlist_path), agent=agent, upstream=upstream, label=label,
        idle_s=idle_timeout, journal=journal, protocols_path=protocols_path,
        otel_endpoint=otel_endpoint, keep_requests_days=keep_requests_days,
        stack_notes=tuple(notes.items()), stream_parity=stream_parity))
    from agent_eval.proxy.loop import run
    from agent_eval.proxy.recorder_process import STOPPING

    for sig in STOPPING:  # until the loop takes them over: a stop while starting
        signal.signal(sig, _interrupt)
    try:
        recorder.start()
        run(_serve(recorder, upstream, host, port, db_url, client_timeout))
    except KeyboardInterrupt:
        pass
    finally:
        for sig in STOPPING:  # a second signal must not cut the drain short
            signal.signal(sig, signal.SIG_IGN)
        recorder.stop()
    stats = recorder.status()
    died = recorder.exitcode is not None and recorder.exitcode < 0
    if died and stats["run_id"] is not None:
        _mark_interrupted(db, stats["run_id"])
    _say(f"run {stats['run_id']}: {stats['stored_sessions']} sessions, "
         f"{stats['stored_turns']} turns stored; {stats['journaled_sessions']} sessions "
         f"in the journal; {stats['lost_turns']} turns not recorded"
         + (f" ({stats['journal_errors']} journal writes refused by the file system)"
            if stats.get("journal_errors") else "")
         + f"; exchanges by protocol: {by_protocol(stats)}"
         + (f"; the recorder process was killed (signal {-(recorder.exitcode or 0)}): the "
            f"{stats['open_sessions']} sessions it held open are lost and the run is marked "
            "interrupted" if died else ""))
    if stats.get("truncations"):  # as `run` warns: the stack's cut, never the model's
        _say(f"Warning: {stats['truncations']} tool call(s) cut at the request's max_tokens "
             "were counted apart as truncations (AE501, the serving stack's), not as the "
             "model's malformed arguments; raise the client's max_tokens")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _mark_interrupted(db: str | None, run_id: int) -> None:
    from agent_eval.runs import RunWriter
    from agent_eval.store import open_store

    try:
        with open_store(db, create=False) as store:
            RunWriter(store, run_id).set_status("interrupted")
    except Exception as exc:  # the store is down: the exit line still says what was lost
        _say(f"warning: run {run_id} could not be marked interrupted: "
             f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}")


def _say(line: str) -> None:
    """One line on stderr; a terminal that is gone (SIGHUP) must not turn the end of a
    clean stop into a traceback."""
    try:
        click.echo(line, err=True)
    except OSError:
        pass


async def _serve(recorder, upstream: str, host: str, port: int, db_url: str,
                 client_timeout: float) -> None:
    from agent_eval.proxy import running_proxy

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    from agent_eval.proxy.recorder_process import STOPPING

    for sig in STOPPING:
        loop.add_signal_handler(sig, stop.set)
    async with running_proxy(recorder, upstream, host=host, port=port,
                             client_timeout_s=client_timeout) as server:
        click.echo(f"agent-eval proxy: {server.base_url} -> {upstream}, judging into "
                   f"{db_url} run {recorder.run_id} (Ctrl-C stops)", err=True)
        click.echo(server.base_url)
        if host not in ("127.0.0.1", "localhost", "::1"):
            click.echo(f"warning: listening on {host}, not loopback: anyone who can reach "
                       "this port can use the model server through it", err=True)
        await stop.wait()
