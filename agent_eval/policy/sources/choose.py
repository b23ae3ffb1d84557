"""Which agent's rules judge a session: named by the client, recognised by its system
prompt, or the configuration's default agent.  Pure.

A proxied session comes from one agent of a multi-agent stack; its calls are judged by
that agent's rules, so an email agent calling the lights script is refused as it was.
The choice is made once per session and stored with it (``Choice.via``), so a report can
say which rules judged a session and how they were picked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_eval.policy.sources.model import AgentPolicy, PolicySource

Via = Literal["header", "prompt", "default", "scenario", "option"]
"""How the agent was chosen: ``header`` the client named it (``X-Agent-Eval-Agent``),
``prompt`` the session's system prompt holds that agent's own prompt, ``default`` the
configuration's default agent (nothing else said), ``scenario`` a scenario's ``agent:``,
``option`` the operator's ``--agent``."""

AGENT_HEADER = "x-agent-eval-agent"
"""The request header a client sets to name its agent (any case)."""

MIN_PROMPT = 12
"""An agent prompt shorter than this (characters, stripped) is not matched: too short to
tell agents apart."""


@dataclass(frozen=True, slots=True)
class Choice:
    agent: AgentPolicy
    via: Via


def choose_agent(source: PolicySource, *, named: str | None = None,
                 system_prompt: str | None = None) -> Choice:
    """The agent whose rules judge a session.

    ``named`` (the client's header) wins when the configuration has that agent; else the
    agent whose own prompt (stripped) occurs in ``system_prompt``, the longest when
    several do (a prompt that contains another is the more specific); else the default
    agent.  Never raises: an unknown name falls through to the prompt and the default."""
    if named is not None and named in source.agents:
        return Choice(source.agents[named], "header")
    if system_prompt:
        found = [a for a in source.agents.values()
                 if a.prompt and len(a.prompt.strip()) >= MIN_PROMPT
                 and a.prompt.strip() in system_prompt]
        if found:
            best = max(found, key=lambda a: (len((a.prompt or "").strip()), a.name))
            return Choice(best, "prompt")
    return Choice(source.agent(None), "default")
