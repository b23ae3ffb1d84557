"""``agent-eval sim-server``: run the simulated model server in the foreground."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import click

from agent_eval.cli import main

if TYPE_CHECKING:
    from agent_eval.sim import SimServer


@main.command("sim-server")
@click.option("--profile", default="disciplined", show_default=True,
              help="Default behaviour profile: disciplined, piper, wrapper, inventor.")
@click.option("--port", type=int, default=8000, show_default=True, help="0 picks a free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback only.")
@click.option("--suite", type=click.Path(), default=None,
              help="Scenario folder the simulator knows (default: the bundled scenarios/ralf).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--model-name", default=None, help="Serve the default profile under this name.")
@click.option("--latency", type=float, default=0.0, help="Seconds added to every answer.")
@click.option("--ttft", type=float, default=0.0, help="Seconds before the first token.")
@click.option("--error-rate", type=float, default=0.0, help="Share answered 500/503.")
@click.option("--hang-rate", type=float, default=0.0, help="Share never answered.")
@click.option("--truncate-rate", type=float, default=0.0, help="Share cut off mid-answer.")
@click.option("--malformed-args-rate", type=float, default=0.0,
              help="Share whose tool-call arguments are not JSON.")
@click.option("--drop-rate", type=float, default=0.0,
              help="Share whose connection is closed without an answer.")
@click.option("--stack", type=click.Choice(["vllm", "llamacpp", "sglang", "ollama"]),
              default=None, help="Play this server family's stack faults (AE5xx).")
@click.option("--stack-rate", type=float, default=0.0,
              help="Share of replies on which the stack's faults are played.")
def sim_server(profile: str, port: int, host: str, suite: str | None, seed: int,
               model_name: str | None, latency: float, ttft: float, error_rate: float,
               hang_rate: float, truncate_rate: float, malformed_args_rate: float,
               drop_rate: float, stack: str | None, stack_rate: float) -> None:
    """Serve a simulated model on loopback, OpenAI-compatible, until Ctrl-C.

    The request's `model` picks a profile (`sim-piper`, ...); other names get --profile.
    A `+STACK` suffix (`sim-disciplined+llamacpp`) plays that server family's stack
    faults on --stack-rate of the replies, whatever --stack says.
    Example:

        agent-eval sim-server --profile piper --port 8001 --error-rate 0.05
        agent-eval sim-server --stack llamacpp --stack-rate 0.2
    """
    from agent_eval.sim import Faults, SimServer, get_profile

    faults = Faults(latency_s=latency, ttft_s=ttft, error_rate=error_rate,
                    hang_rate=hang_rate, truncate_rate=truncate_rate,
                    malformed_args_rate=malformed_args_rate, drop_rate=drop_rate,
                    stack=stack or "", stack_rate=stack_rate)
    server = SimServer(get_profile(profile), suite=suite, seed=seed, faults=faults,
                       model_name=model_name, host=host, port=port)
    try:
        asyncio.run(_serve(server))
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


async def _serve(server: SimServer) -> None:
    await server.start()
    click.echo(f"serving simulated models at {server.base_url}  (Ctrl-C stops)", err=True)
    click.echo(server.base_url)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
