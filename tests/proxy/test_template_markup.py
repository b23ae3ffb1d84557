"""AE511 or AE104 on relayed traffic: whose format the markup left in a reply's text is.

The proxy asks its upstream once, before it relays anything, what it serves (llama.cpp's
``/props`` and its chat template: ``agent_eval/proxy/upstream.py``), or reads the
operator's ``--stack-parser``/``--stack-template``.  Markup in the format of that template
left in ``content`` is the server's parser failing (AE511, the stack's); other markup,
or markup under a template nobody knows, is the model's (AE104).

Played over real HTTP: a loopback upstream answering ``/props`` with the Hermes-style
template the CI's llama-server serves (scripts/chat-templates/chatml-tools.jinja) and
``/v1/chat/completions`` with a wire fixture (tests/fixtures/wire/README.md names its
source: ``vllm-no-parser-tool-call-text.json``, a ``<tool_call>`` left in ``content`` by
a server whose parser did not run; ``ollama-v1-fenced-bash-text.json``, a fenced bash
block), the proxy in front, the OpenAI SDK as the client.  The user's requests reach
the upstream unchanged: the one request the proxy makes of its own is the start-up
question, made before the first user request.
"""

from __future__ import annotations

import json

import openai
import pytest
from aiohttp import web
from support.loopback import serve_in_thread
from support.proxyplay import REPO, proxy_in_thread

from agent_eval.proxy.parity import SIDE_HEADER
from agent_eval.transcript import STACK_FAULT, UPSTREAM_STACK, run_stacks

WIRE = REPO / "tests" / "fixtures" / "wire"
HERMES_TEMPLATE = (REPO / "scripts" / "chat-templates" / "chatml-tools.jinja").read_text()
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def upstream_app(reply: str, *, props: dict | None, seen: list) -> web.Application:
    """A llama.cpp-like upstream: ``/props`` (when ``props``), ``/v1/models``, and every
    chat request answered with the fixture ``reply``; ``seen`` gets each path asked."""
    raw = (WIRE / reply).read_bytes()

    async def chat(request: web.Request) -> web.Response:
        seen.append((request.path, await request.read()))
        return web.Response(body=raw, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get(SIDE_HEADER, "").encode()))
        return web.json_response({"object": "list", "data": [
            {"id": "smollm2", "object": "model", "owned_by": "llamacpp"}]},
            headers={"Server": "llama.cpp"})

    async def props_answer(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get(SIDE_HEADER, "").encode()))
        if props is None:
            raise web.HTTPNotFound()
        return web.json_response(props)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/props", props_answer)
    return app


def relay_one(store, tmp_path, reply: str, *, props: dict | None, **options):
    """One chat request through the proxy; the stored session, the run's stacks, what
    the upstream saw, and the body the client sent and the answer it got."""
    seen: list = []
    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Check the lights."}],
            "tools": TOOLS}
    with serve_in_thread(upstream_app(reply, props=props, seen=seen)) as upstream, \
            proxy_in_thread(upstream, store, tmp_path, **options) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        answer = client.chat.completions.with_raw_response.create(**body).http_response
    run = store.resolve_run("latest")
    [row] = store.session_rows([run.id])
    return store.load_session(row.id).record, run_stacks(run.fingerprint), seen, body, answer


PROPS = {"chat_template": HERMES_TEMPLATE, "build_info": "b6915-0123abc",
         "model_path": "/models/smollm2.gguf"}


def verdict(record) -> tuple:
    return ([(f.code, f.ends) for f in record.stack_faults], [c.primary for c in record.calls])


def test_the_templates_own_markup_left_in_content_is_the_parsers_fault(store, tmp_path):
    record, stacks, seen, body, answer = relay_one(
        store, tmp_path, "vllm-no-parser-tool-call-text.json", props=PROPS)
    assert verdict(record) == ([("AE511", True)], [])  # never the model's AE104
    assert record.status == "error" and record.error.startswith(STACK_FAULT + "AE511")
    stack = stacks[UPSTREAM_STACK]  # what the upstream said of itself, kept with the run
    assert stack["template_markup"] == ["<tool_call>"]
    assert stack["server"] == "llama.cpp" and stack["build"] == "b6915-0123abc"
    assert len(stack["chat_template_sha256"]) == 16
    # the start-up questions came before the user's request, which went through as sent
    paths = [p for p, _ in seen]
    assert paths[:2] == ["/v1/models", "/props"] and paths[-1] == "/v1/chat/completions"
    assert paths.count("/v1/chat/completions") == 1
    # each question tagged as the proxy's own (the side-request header)
    assert [tag for p, tag in seen if p != "/v1/chat/completions"] == [b"stack-fingerprint"] * 2
    assert json.loads(seen[-1][1]) == body
    assert answer.content == (WIRE / "vllm-no-parser-tool-call-text.json").read_bytes()


def test_without_a_template_the_same_markup_is_the_models_ae104(store, tmp_path):
    record, stacks, *_ = relay_one(store, tmp_path, "vllm-no-parser-tool-call-text.json",
                                   props=None)
    assert verdict(record) == ([], ["AE104"])
    assert record.status == "completed"
    assert "template_markup" not in stacks[UPSTREAM_STACK]


def test_the_operators_parser_note_decides_when_the_server_says_nothing(store, tmp_path):
    record, stacks, *_ = relay_one(store, tmp_path, "vllm-no-parser-tool-call-text.json",
                                   props=None, stack_notes={"parser": "hermes"})
    assert verdict(record) == ([("AE511", True)], [])
    assert stacks[UPSTREAM_STACK]["notes"] == {"parser": "hermes"}


def test_a_note_naming_another_format_wins_over_the_servers_template(store, tmp_path):
    """The operator knows better than /props (a --chat-template-file the server applies
    but a parser configured apart): a <tool_call> under a Mistral parser is the model's."""
    record, *_ = relay_one(store, tmp_path, "vllm-no-parser-tool-call-text.json",
                           props=PROPS, stack_notes={"parser": "mistral"})
    assert verdict(record) == ([], ["AE104"])


@pytest.mark.parametrize("props", [PROPS, None], ids=["hermes-template", "no-template"])
def test_markup_in_another_format_is_the_models_either_way(store, tmp_path, props):
    """A fenced bash block is no chat template's call format: the model wrote text."""
    record, *_ = relay_one(store, tmp_path, "ollama-v1-fenced-bash-text.json", props=props)
    assert verdict(record) == ([], ["AE104"])


def test_a_proxy_told_not_to_ask_asks_nothing(store, tmp_path):
    record, stacks, seen, *_ = relay_one(store, tmp_path, "vllm-no-parser-tool-call-text.json",
                                         props=PROPS, ask_upstream=False)
    assert [p for p, _ in seen] == ["/v1/chat/completions"]
    assert verdict(record) == ([], ["AE104"]) and stacks == {}
