"""``agent-eval view``: the local web viewer over the store."""

from __future__ import annotations

import click

from agent_eval.cli import main
from agent_eval.cli.options import db_option


@main.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8700, show_default=True,
              help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback lets other machines read the store.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests addressed to this host name (repeatable); "
                   "localhost, the loopback addresses and --host are always answered.")
@db_option
def view(port: int, host: str, allow_hosts: tuple[str, ...], db: str | None) -> None:
    """Browse the store in a local web app: runs, a run's tables, calls, sessions, compare.

    Example:

        agent-eval view --db runs.db            # then open http://127.0.0.1:8700/

    Every number on a run page links to the calls or sessions behind it; lists filter,
    sort and page in the URL (paste one into a bug report), failed first; a session page
    underlines the offending span, shows the rule's text and steps to the previous or
    next failed session of the same list; /compare?a=RUN&b=RUN lines two runs up.  Pages
    of a running run refresh themselves.  Read-only on the store, no script, nothing
    fetched from outside.  Binds loopback unless --host says otherwise (and then says
    so).  Only requests whose Host header names the viewer are answered (others get a
    403), so a web page that points its own name at this machine (DNS rebinding) cannot
    read it: localhost, the loopback addresses, --host (and any IP address when --host
    is 0.0.0.0 or ::); to open it by another name, add --allow-host NAME.  Stop with
    Ctrl-C.  A --port in use is one `Error:` line (--port 0 picks a free port and
    prints it).  Exit codes: 0 stopped, 2 bad --db or option, or the port in use.
    """
    from agent_eval.store import open_store
    from agent_eval.view import bind, serve
    from agent_eval.view.app import LOOPBACK

    store = open_store(db, create=False)
    try:
        sock = bind(host, port)
    except BaseException:
        store.close()
        raise
    port = sock.getsockname()[1]
    click.echo(f"agent-eval view: http://{_url_host(host)}:{port}/ over {store.url} "
               "(read-only; Ctrl-C stops)")
    if host not in LOOPBACK:
        click.echo(f"warning: listening on {host}, not loopback: anyone who can reach this "
                   f"machine on port {port} can read every stored transcript", err=True)
    try:
        serve(store, host=host, sock=sock, allow_hosts=allow_hosts)
    finally:
        store.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
