"""A plain openai-SDK agent loop as the client: the stack a user points at the proxy with
nothing changed but the base URL.  Its turns are one session, linked by continuation,
every call judged, and the API key it sends is nowhere in the store."""

from __future__ import annotations

import json

import openai
from support.proxyplay import REPO, proxy_in_thread

from agent_eval.scenario import load_suite
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store

API_KEY = "sk-proxy-test-0123456789abcdef"


def agent_loop(base_url: str, turns: int = 4) -> int:
    """The canonical SDK loop: call, append the reply as the SDK dumps it, answer every
    tool call, again.  Returns the number of calls the model made."""
    sc = load_suite(REPO / "scenarios" / "ralf").scenarios["db-open-attempts"]
    client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
    messages: list[dict] = [{"role": "system", "content": sc.system_prompt()},
                            {"role": "user", "content": sc.spec.task}]
    made = 0
    for _ in range(turns):
        reply = client.chat.completions.create(model="sim-disciplined", messages=messages,
                                               tools=sc.tool_schemas())
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            made += 1
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": json.dumps({"ok": True})})
    client.close()
    return made


def test_an_openai_sdk_agent_loop_is_one_judged_session(tmp_path):
    db = tmp_path / "proxy.db"
    with open_store(str(db)) as store:
        with run_sim_in_thread("disciplined") as upstream, \
                proxy_in_thread(upstream, store, tmp_path) as proxy:
            made = agent_loop(proxy.base_url)
        [row] = store.session_rows([store.resolve_run("latest").id])
        session = store.load_session(row.id)
    assert made >= 1 and len(session.record.calls) == made
    assert row.scenario == "db-open-attempts"  # the bundled task it plays, not system-<hash>
    assert len(session.record.turns) >= 2
    assert set(session.record.tags) == {"link:new", "link:continuation"}
    assert all(c.decision in ("allow", "deny") for c in session.record.calls)
    assert API_KEY.encode() not in db.read_bytes()
