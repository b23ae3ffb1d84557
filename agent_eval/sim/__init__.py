"""``agent_eval.sim``: a simulated model server, the test double for CI and the demo.

An OpenAI-compatible HTTP server on loopback (``/v1/models``, ``/v1/chat/completions``,
streaming and not) that answers like vLLM with ``--tool-call-parser`` and
``--reasoning-parser``: parsed tool calls, reasoning text and usage.  Seeded behaviour
profiles play the failure classes of docs/design.md over a scenario suite; fault knobs play a
server that is slow, failing, hanging, truncating or dropping connections.  It never
executes anything.  Public surface::

    PROFILES: dict[str, Profile];  get_profile(name) -> Profile
    Faults(latency_s, ttft_s, error_rate, hang_rate, truncate_rate,
           malformed_args_rate, drop_rate)
    create_app(profile, *, suite=None, seed=0, faults=None, model_name=None) -> web.Application
    SimServer(profile, *, suite, seed, faults, model_name, host, port)   # async with
    run_sim_in_thread(profile, ...)  -> context manager yielding the base URL
    MUTATIONS: dict[str, Mutation]   # AE code -> how a profile writes that mistake
"""

from agent_eval.sim.behaviour import Reply, plan_reply
from agent_eval.sim.mutations import MUTATIONS, Mutation, PlannedCall, Step
from agent_eval.sim.profiles import PROFILES, REACTIONS, Profile, Reaction, get_profile
from agent_eval.sim.server import (
    DEFAULT_SUITE,
    SEED_HEADER,
    Faults,
    SimServer,
    create_app,
    run_sim_in_thread,
)

__all__ = [
    "DEFAULT_SUITE",
    "MUTATIONS",
    "PROFILES",
    "REACTIONS",
    "SEED_HEADER",
    "Faults",
    "Mutation",
    "PlannedCall",
    "Profile",
    "Reaction",
    "Reply",
    "SimServer",
    "Step",
    "create_app",
    "get_profile",
    "plan_reply",
    "run_sim_in_thread",
]
