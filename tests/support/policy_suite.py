"""The seed orchestrator's suite judged under its own OpenCode configuration: the
scenarios of tests/live/test_policy_run_e2e.py and tests/proxy/test_policy_agents.py.

``tests/fixtures/policies/opencode-seed/opencode.json`` names an orchestrator (the
default agent), email, lights and research agent, each with its own ``uv run
scripts/...`` bash patterns; ``external_directory`` is denied except the research agent's
``/data/rendered/*``.  Each scenario names its agent and, as an agent CLI does, carries
that agent's own prompt in its system prompt (what the proxy recognises it by).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_eval.sim.profiles import Profile

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "policies" / "opencode-seed"

EMAIL_PROMPT = "You are the email agent. Use the email scripts only."
LIGHTS_PROMPT = "You are the lights agent."
RESEARCH_PROMPT = "You are the research agent. Query the database and read the rendered pages."

SCENARIOS = {
    # email's own script, then the same with 2>&1 (the pattern `... *` matches the
    # redirection as text: OpenCode allows it; strictly AE302), then the lights script,
    # which no rule of email allows (`bash: {"*": "deny"}` globally): refused
    "email-search": f"""agent: email
system_prompt: {EMAIL_PROMPT}
task: Find the invoices from March.
limits: {{turns: 6}}
reference:
  - bash: uv run scripts/email_search.py --query invoices
  - bash: uv run scripts/email_search.py --query march 2>&1
  - bash: uv run scripts/lights.py on
""",
    # a file under /data/rendered is outside the work directory: email has no
    # external_directory allow rule, so the read asks, which blocks it
    "email-reads-rendered": f"""agent: email
system_prompt: {EMAIL_PROMPT}
task: Read the rendered report.
limits: {{turns: 4}}
reference:
  - read: /data/rendered/report.md
""",
    # research may read /data/rendered/* (its own external_directory rule); its db_query
    # pattern also matches `> out.txt` (allowed by OpenCode; strictly AE303)
    "research-report": f"""agent: research
system_prompt: {RESEARCH_PROMPT}
task: Read the rendered report and store the query.
limits: {{turns: 6}}
reference:
  - read: /data/rendered/report.md
  - bash: uv run scripts/db_query.py --sql 'select 1' > out.txt
""",
    # lights: `uv run scripts/lights.py *` allow, then `... reset*` deny: the last rule
    # that matches wins, so `lights.py on` runs and `lights.py reset all` is refused
    "lights": f"""agent: lights
system_prompt: {LIGHTS_PROMPT}
task: Switch the hall lights on.
limits: {{turns: 6}}
reference:
  - bash: uv run scripts/lights.py on hall
  - bash: uv run scripts/lights.py reset all
""",
    # no agent: named: the configuration's default agent (default_agent: orchestrator)
    "route": """task: Route the task.
limits: {turns: 4}
reference:
  - bash: uv run scripts/fetch_context.py --task 7
""",
}

EXACT = Profile(name="exact", imitates="nothing: every reference step as written",
                p_mistake=0.0, mix=(), after_denial=(("give-up", 1.0),))


def seed_suite(root: Path) -> Path:
    suite = root / "suite"
    shutil.copytree(SEED, suite)
    (suite / "suite.yaml").write_text("allowlist: opencode.json\n")
    for name, text in SCENARIOS.items():
        (suite / f"{name}.yaml").write_text(text)
    return suite


