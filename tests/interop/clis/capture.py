"""One agent CLI, confined, through the current ``agent-eval proxy`` to an upstream, with
both sides of the proxy recorded byte for byte:

    CLI (sandbox) -> [Relay: what the CLI sent] -> agent-eval proxy
                  -> [Relay: what reached the upstream] -> upstream

The upstream is ``agent-eval sim-server`` (``upstream="sim"``, which speaks every CLI's
protocol) or the scripted ``upstream.CaptureUpstream`` in the CLI's protocol
(``upstream="capture"``).

As a script it writes the fixtures of tests/fixtures/clis/ (the README there says how):

    cd tests/interop && python -m clis.capture opencode --out ../fixtures/clis/opencode
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .catalog import (
    CLIS,
    CLIS_DIR,
    CWD,
    REPO,
    TELEMETRY_PORT,
    AgentCli,
    Invocation,
    with_telemetry,
)
from .sandbox import Connection, Outcome, Relay, Sandbox
from .upstream import READ_FILE, READ_TEXT, CaptureUpstream, serve_capture
from .wire import Exchange, exchanges

ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
PROMPT = ("Run the shell command `ls -la`, then read the file notes.txt, then delegate "
          "a short subtask to a subagent, then report what you found.")


@dataclass
class Capture:
    """A finished run: the CLI's outcome and both sides of the proxy, as bytes."""

    cli: AgentCli
    invocation: Invocation
    outcome: Outcome
    client_side: list[Connection]  # CLI <-> proxy
    upstream_side: list[Connection]  # proxy <-> upstream
    proxy_said: str  # the proxy's stdout and stderr, its exit line included
    home: Path  # the CLI's HOME on the host (valid until the context closes)
    upstream: CaptureUpstream | None = None  # the scripted upstream, when it was that
    upstream_kind: str = "capture"  # "capture" or "sim"
    started: str = field(default_factory=lambda: datetime.date.today().isoformat())
    collect_said: str = ""  # ``agent-eval collect``'s output, when telemetry was on
    telemetry: list[Connection] = field(default_factory=list)  # CLI <-> collector

    def client_exchanges(self) -> list[Exchange]:
        """What the CLI sent and got, in the order the requests started."""
        return sorted((x for c in self.client_side for x in exchanges(c)),
                      key=lambda x: x.started)

    def upstream_exchanges(self) -> list[Exchange]:
        """What reached the upstream on the CLI's behalf: every exchange but the proxy's
        own questions (:meth:`proxy_questions`)."""
        return [x for x in self._upstream_all() if not _proxy_own(x)]

    def proxy_questions(self) -> list[Exchange]:
        """The proxy's own requests to the upstream (its start-up questions of the
        serving stack: ``agent_eval.proxy.upstream``), tagged with the side-request
        header."""
        return [x for x in self._upstream_all() if _proxy_own(x)]

    def _upstream_all(self) -> list[Exchange]:
        return sorted((x for c in self.upstream_side for x in exchanges(c)),
                      key=lambda x: x.started)

    def relayed(self) -> list[tuple[Exchange, Exchange | None]]:
        """Each client exchange with the upstream exchange that carried the same request
        (method, target and body byte for byte), or None when none did."""
        unused = self.upstream_exchanges()
        out = []
        for mine in self.client_exchanges():
            twin = next((u for u in unused if u.request.body == mine.request.body
                         and u.request.method == mine.request.method
                         and u.request.target == mine.request.target), None)
            if twin is not None:
                unused.remove(twin)
            out.append((mine, twin))
        return out


@contextmanager
def _process(argv: list[str], logs: Path, name: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start ``argv`` (an agent-eval command that prints its base URL on stdout's first
    line), yield it and that URL; stop it with SIGINT (SIGKILL after 60 s)."""
    err = (logs / f"{name}.stderr").open("wb")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                            start_new_session=True)
    try:
        url = (proc.stdout.readline() if proc.stdout else "").strip()
        if not url.startswith("http://"):
            proc.kill()
            raise RuntimeError(f"{name} did not start: {url!r} "
                               f"{(logs / f'{name}.stderr').read_text()[-2000:]}")
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        err.close()


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@contextmanager
def capture(name: str, *, upstream: str = "capture", prompt: str = PROMPT,
            work: Path, timeout: float = 120.0, keep: bool = False,
            allowlist: Path = ALLOWLIST, telemetry: bool = False) -> Iterator[Capture]:
    """Run CLI ``name`` once with ``prompt``; yield the ``Capture`` while its sandbox folder
    still exists.  ``work`` holds the proxy's store and the servers' logs; the proxy judges
    under ``allowlist``.  ``telemetry``: the CLI also exports its OpenTelemetry events
    (``catalog.with_telemetry``) to ``agent-eval collect`` (store ``work/collect.db``,
    label ``otlp-NAME``, the same allow-list), reached as a second port of the sandbox."""
    cli = CLIS[name]
    agent_eval = shutil.which("agent-eval") or str(Path(sys.executable).with_name("agent-eval"))
    with ExitStack() as stack:
        served: CaptureUpstream | None = None
        if upstream == "sim":
            _, sim_url = stack.enter_context(_process(
                [agent_eval, "sim-server", "--port", "0"], work, "sim-server"))
            upstream_port = _port(sim_url)
        else:
            upstream_port, served = stack.enter_context(serve_capture(CWD))
        tap = Relay.tcp(upstream_port)
        stack.callback(tap.close)
        proxy, proxy_url = stack.enter_context(_process(
            [agent_eval, "proxy", "--upstream", f"http://127.0.0.1:{tap.listen_port}/v1",
             # sessions close when the proxy stops: an idle timeout shorter than a CLI's
             # slowest step (OpenCode took 9 s over one failing command) splits a session
             "--allowlist", str(allowlist), "--port", "0", "--idle-timeout", "600",
             "--label", f"cli-{name}", "--journal", str(work / "proxy.journal"),
             "--db", f"sqlite:///{work / 'proxy.db'}"], work, "proxy"))
        extra: dict[int, int] = {}
        collector = None
        if telemetry:
            collector, collect_url = stack.enter_context(_process(
                [agent_eval, "collect", "--allowlist", str(allowlist), "--port", "0",
                 "--idle-timeout", "600", "--label", f"otlp-{name}",
                 "--db", f"sqlite:///{work / 'collect.db'}"], work, "collect"))
            extra[TELEMETRY_PORT] = _port(collect_url)
        box = stack.enter_context(Sandbox(_port(proxy_url), clis_dir=CLIS_DIR, keep=keep,
                                          extra_ports=extra))
        (box.home / "project" / READ_FILE).write_text(READ_TEXT)
        invocation = cli.prepare(box.home, box.base_url, prompt)
        if telemetry:
            invocation = with_telemetry(name, box.home, invocation)
        outcome = box.run(invocation.argv, invocation.env, timeout=timeout,
                          stdin=invocation.stdin.encode())
        proxy.send_signal(signal.SIGINT)
        said, _ = proxy.communicate(timeout=60)
        said += (work / "proxy.stderr").read_text()  # its exit line is on stderr
        collect_said = ""
        if collector is not None:  # stopping it stores every open session
            collector.send_signal(signal.SIGINT)
            collect_said, _ = collector.communicate(timeout=120)
            collect_said += (work / "collect.stderr").read_text()
        yield Capture(cli, invocation, outcome, box.relay.connections, tap.connections,
                      said, box.home, served, upstream, collect_said=collect_said,
                      telemetry=box.extra_relays[TELEMETRY_PORT].connections if telemetry
                      else [])


def main(argv: list[str] | None = None) -> int:
    from .fixtures import write_fixtures

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cli", choices=sorted(CLIS))
    parser.add_argument("--out", type=Path, required=True, help="fixture folder to (re)write")
    parser.add_argument("--upstream", choices=("capture", "sim"), default="capture")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"clis-capture-{args.cli}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with capture(args.cli, upstream=args.upstream, work=work) as run:
        print(f"exit {run.outcome.returncode}; proxy: {run.proxy_said.strip().splitlines()[-1:]}")
        write_fixtures(run, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _proxy_own(exchange: Exchange) -> bool:
    from agent_eval.proxy.parity import SIDE_HEADER

    return exchange.request.header(SIDE_HEADER) is not None
