"""The stack fingerprint (live/stackprint.py): which serving stack produced a run's
replies, stored in the run's fingerprint, shown by ``show`` and the report, and named by
``compare`` when two runs' stacks differ."""

from __future__ import annotations

import hashlib

import pytest
from support.factories import add_run
from test_run_e2e import SUITE, agent_eval_cli

from agent_eval.errors import ConfigError
from agent_eval.live.stackprint import stack_fingerprint
from agent_eval.live.targets import StackNotes, Target, load_run_config
from agent_eval.live.workers import comparable
from agent_eval.sim import run_sim_in_thread
from agent_eval.store import open_store
from agent_eval.transcript import CallRecord, SessionRecord, run_stacks, stack_changes, stack_line

TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"


def llama_server(**changes) -> Target:
    settings = {"max_tokens": 512, "stream": True, "tool_choice": "required",
                "extra_body": {"parallel_tool_calls": False},
                "stack": StackNotes(parser="jinja", quantization="Q4_K_M"), **changes}
    return Target(name="q", base_url="http://127.0.0.1:8080/v1", model="q", **settings)


def test_a_llama_server_stack_keeps_its_build_template_hash_settings_and_notes():
    identity = {"server_header": "llama.cpp", "props": {
        "build_info": "b6123-abc", "chat_template": TEMPLATE}}
    models = {"data": [{"id": "q", "owned_by": "llamacpp", "created": 1}]}
    stack = stack_fingerprint(llama_server(), identity, models)
    assert stack == {
        "server": "llama.cpp", "owned_by": ["llamacpp"], "build": "b6123-abc",
        "chat_template_sha256": hashlib.sha256(TEMPLATE.encode()).hexdigest()[:16],
        "template_markup": [],  # it writes no call format: markup is the model's own
        "request": {"tool_choice": "required", "parallel_tool_calls": False, "stream": True,
                    "max_tokens": 512},
        "notes": {"parser": "jinja", "quantization": "Q4_K_M"}}
    assert stack_line(stack).startswith("server llama.cpp · build b6123-abc · owned by "
                                        "llamacpp · template ")


def test_the_template_hash_changes_when_the_template_does():
    one = stack_fingerprint(llama_server(), {"props": {"chat_template": TEMPLATE}})
    two = stack_fingerprint(llama_server(), {"props": {"chat_template": TEMPLATE + " "}})
    (change,) = stack_changes(one, two)
    assert change.startswith("chat_template_sha256: ")


def test_stack_changes_name_each_setting_that_moved():
    a = stack_fingerprint(llama_server())
    b = stack_fingerprint(llama_server(max_tokens=4096, stack=StackNotes(parser="none")))
    assert stack_changes(a, b) == ["max_tokens: 512 -> 4096", "parser: jinja -> none",
                                   "quantization: Q4_K_M -> –"]
    assert stack_changes(a, a) == [] and stack_changes(None, a) == []


def test_a_worker_is_not_refused_for_the_planners_probe_of_the_stack():
    fingerprint = {"suite": "x", "stacks": {"q": {"server": "llama.cpp"}}}
    assert comparable(fingerprint) == {"suite": "x"}


def test_a_targets_file_with_unknown_stack_notes_is_a_config_error(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("targets:\n  - {name: q, base_url: 'http://127.0.0.1:1/v1', model: q, "
                    "stack: {parser: hermes, kernel: x}}\n")
    with pytest.raises(ConfigError, match="kernel"):
        load_run_config(path)


@pytest.mark.e2e
def test_a_run_stores_its_stack_and_show_and_compare_say_it(tmp_path):
    db = str(tmp_path / "runs.db")
    with run_sim_in_thread("disciplined", suite=SUITE) as base_url:
        for label, parser in (("a", "qwen3_coder"), ("b", "hermes")):
            targets = tmp_path / f"{label}.yaml"
            targets.write_text(
                "targets:\n"
                f"  - {{name: qwen, base_url: '{base_url}', model: sim-disciplined, "
                f"max_tokens: 2048, stack: {{parser: {parser}, quantization: AWQ}}}}\n")
            done = agent_eval_cli("run", "--config", str(targets), "--suite", str(SUITE),
                                  "--repeats", "1", "--tag", "lights", "--label", label,
                                  "--db", db)
            assert done.returncode == 0, done.stdout + done.stderr
    with open_store(db) as store:
        run = store.resolve_run("label:b")
        (stack,) = run_stacks(run.fingerprint).values()
        session_id = next(iter(store.session_rows([run.id]))).id
    assert stack["request"] == {"tool_choice": "auto", "stream": False, "max_tokens": 2048}
    assert stack["notes"] == {"parser": "hermes", "quantization": "AWQ"}
    assert "aiohttp" in stack["server"]  # the simulator's Server header
    shown = agent_eval_cli("show", str(session_id), "--db", db)
    assert "stack: server " in shown.stdout and "parser hermes" in shown.stdout
    compared = agent_eval_cli("compare", "label:a", "label:b", "--db", db)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert ("the serving stacks differ (b against a): parser: qwen3_coder -> hermes"
            in " ".join(compared.stdout.split()))


def test_the_report_names_each_targets_stack(tmp_path):
    from agent_eval.report import write_report

    with open_store(str(tmp_path / "s.db")) as store:
        run = add_run(store, [SessionRecord(key="a", target="q", scenario="s", calls=[
            CallRecord(index=0, turn_index=0, tool="bash", arguments="{}", decision="allow")])],
            label="n", suite="s", base_url="http://x/v1", status="finished", fingerprint={
                "stacks": {"q": stack_fingerprint(llama_server(), {"server_header": "llama.cpp"})}})
        html = (write_report(store, [run], tmp_path / "r")).read_text(encoding="utf-8")
    assert "Serving stacks of run 1: q: server llama.cpp · tool_choice required" in html


def test_runs_json_gives_each_runs_stack_faults_and_stacks(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.transcript import StackFaultRecord

    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        add_run(store, [SessionRecord(
            key="a", target="q", scenario="s", status="error", error="cut",
            stack_faults=[StackFaultRecord(0, "AE501", "cut", ends=True)])],
            label="n", suite="s", base_url="http://x/v1", fingerprint={
                "stacks": {"q": stack_fingerprint(llama_server(), {"server_header": "llama.cpp"})}})
    out = CliRunner().invoke(main, ["runs", "--json", "--db", db])
    assert out.exit_code == 0, out.output
    import json

    (row,) = json.loads(out.output)
    assert row["stack_faults"] == 1 and row["errors"] == 0
    assert row["stacks"]["q"].startswith("server llama.cpp · tool_choice required")


def test_the_template_format_comes_from_the_notes_else_the_servers_template():
    import asyncio

    from agent_eval.live.client import ModelClient, Target
    from agent_eval.live.targets import StackNotes

    class Props(ModelClient):
        async def server_identity(self):
            self.asked = getattr(self, "asked", 0) + 1
            return {"props": {"chat_template": "{% for m in messages %}<tool_call>"
                                               "{{ m }}</tool_call>{% endfor %}"}}

    async def markers(notes):
        client = Props(Target(name="t", base_url="http://127.0.0.1:9/v1", model="m",
                              stack=notes))
        try:
            first, second = await client.template_markers(), await client.template_markers()
            assert first == second
            return first, getattr(client, "asked", 0)
        finally:
            await client.aclose()

    assert asyncio.run(markers(StackNotes(parser="mistral"))) == (frozenset({"[TOOL_CALLS]"}), 0)
    assert asyncio.run(markers(StackNotes(template="qwen3_coder")))[0] == frozenset(
        {"<tool_call>", "<function="})
    assert asyncio.run(markers(None)) == (frozenset({"<tool_call>"}), 1)  # read once
    assert asyncio.run(markers(StackNotes(parser="my-own"))) == (frozenset({"<tool_call>"}), 1)


def test_the_runs_table_and_the_viewers_run_page_show_each_runs_stack(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.transcript import stack_mark
    from agent_eval.view.app import environment
    from agent_eval.view.overview import build_run_page, build_runs_page

    db = str(tmp_path / "s.db")
    jinja = stack_fingerprint(llama_server(), {"server_header": "llama.cpp", "props": {
        "chat_template": TEMPLATE}})
    other = stack_fingerprint(llama_server(), {"server_header": "llama.cpp", "props": {
        "chat_template": TEMPLATE + "<tool_call>"}})
    with open_store(db) as store:
        for label, stack in (("a", jinja), ("b", jinja), ("c", other)):
            add_run(store, label=label, suite="s", fingerprint={"stacks": {"q": stack}},
                    targets=("q",), base_url="http://x/v1", status="finished")
        runs_page = build_runs_page(store, {})
        run_page = build_run_page(store, 3)
    same, changed = stack_mark(jinja), stack_mark(other)
    assert same.startswith("llama.cpp ") and same != changed  # the template moved
    out = CliRunner().invoke(main, ["runs", "--db", db], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    rows = {line.split("│")[2].strip(): line for line in out.output.splitlines()
            if line.startswith("│")}
    assert same in rows["a"] and same in rows["b"] and changed in rows["c"]
    head = list(runs_page.rows[0])
    assert head[5].text == changed  # the viewer's runs list: the same column
    assert run_page.run.stacks == (("q", changed, stack_line(other)),)
    html = environment().get_template("run.html").render(page=run_page)
    assert f"<b>q</b> <code>{changed}</code> server llama.cpp" in html
