"""Stack faults on imported traffic: a Chat Completions record that keeps the server's
finish reason and usage (and the request's ``max_tokens``) is read as a live run reads
the same reply (agent_eval/stack_reading.py), so a call the stack cut is a truncation
(AE501, the stack's), never the model's AE102."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval.importers import import_sessions
from agent_eval.policy import load_allowlist
from agent_eval.transcript import TRUNCATED

RALF = Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml"
CUT = "{\"command\": \"uv run scripts/db_query.py --sql \\\"SELECT"
WHOLE = json.dumps({"command": "uv run scripts/db_query.py --sql 'select 1'"})


def session(*replies: tuple[str, str, int], max_tokens: int | None = 48) -> dict:
    """One OpenAI-format session object: each reply is (arguments, finish reason,
    completion tokens), answered by a tool message."""
    messages: list[dict] = [{"role": "user", "content": "Open attempts for stage S2."}]
    for n, (arguments, finish, tokens) in enumerate(replies):
        messages += [
            {"role": "assistant", "content": None, "finish_reason": finish,
             "usage": {"prompt_tokens": 1200, "completion_tokens": tokens},
             "tool_calls": [{"id": f"call-{n}", "type": "function",
                             "function": {"name": "bash", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": f"call-{n}", "content": "ok"}]
    obj = {"id": "s1", "model": "gemma3", "messages": messages}
    if max_tokens is not None:
        obj["max_tokens"] = max_tokens
    return obj


def imported(tmp_path: Path, obj: dict):
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    [record] = import_sessions("openai", path, load_allowlist(RALF))
    return record


@pytest.mark.parametrize("finish", ["tool_calls", "length"], ids=["llama-cpp-python", "vllm"])
def test_an_imported_cut_is_the_stacks_truncation_not_ae102(tmp_path, finish):
    record = imported(tmp_path, session((CUT, finish, 48)))
    assert [(f.code, f.ends) for f in record.stack_faults] == [("AE501", True)]
    assert record.calls == []  # the cut call is not judged: never the model's AE102
    assert record.status == "error" and record.error.startswith(TRUNCATED)
    assert record.messages[1]["tool_calls"][0]["function"]["arguments"] == CUT


def test_an_imported_cut_under_the_cap_is_the_models_malformed_call(tmp_path):
    record = imported(tmp_path, session((CUT, "tool_calls", 30)))
    assert record.stack_faults == [] and record.status == "completed"
    assert [c.primary for c in record.calls] == ["AE102"]


def test_a_cut_the_session_went_on_past_is_counted_and_the_rest_judged(tmp_path):
    record = imported(tmp_path, session((CUT, "tool_calls", 48), (WHOLE, "tool_calls", 30)))
    assert [(f.turn_index, f.code) for f in record.stack_faults] == [(0, "AE501")]
    assert record.status == "completed"
    assert [(c.turn_index, c.decision) for c in record.calls] == [(1, "allow")]


def test_without_max_tokens_only_a_length_finish_tells_a_cut(tmp_path):
    record = imported(tmp_path, session((CUT, "tool_calls", 48), max_tokens=None))
    assert record.stack_faults == [] and [c.primary for c in record.calls] == ["AE102"]
    record = imported(tmp_path, session((CUT, "length", 48), max_tokens=None))
    assert [f.code for f in record.stack_faults] == ["AE501"] and record.calls == []


# Markup left in a reply's text: the reply the vLLM fixture holds (a Hermes <tool_call> a
# server whose parser did not run left in content, tests/fixtures/wire/README.md), kept by
# an OpenAI-format transcript as the assistant message with its finish reason and usage.
WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"


def markup_session(fixture: str) -> dict:
    reply = json.loads((WIRE / fixture).read_text())
    choice = reply["choices"][0]
    message = {"role": "assistant", "content": choice["message"]["content"],
               "finish_reason": choice["finish_reason"], "usage": reply["usage"]}
    return {"id": "s1", "model": reply["model"], "messages": [
        {"role": "user", "content": "Check the lights."}, message]}


def imported_with(tmp_path: Path, obj: dict, markers: frozenset[str] | None):
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(obj) + "\n", encoding="utf-8")
    [record] = import_sessions("openai", path, load_allowlist(RALF), template_markers=markers)
    return record


def test_imported_markup_in_the_noted_templates_format_is_the_parsers_ae511(tmp_path):
    from agent_eval.transcript import STACK_FAULT
    from agent_eval.wire.markup import parser_markers

    record = imported_with(tmp_path, markup_session("vllm-no-parser-tool-call-text.json"),
                           parser_markers("hermes"))
    assert [(f.code, f.ends) for f in record.stack_faults] == [("AE511", True)]
    assert record.calls == []  # never the model's AE104
    assert record.status == "error" and record.error.startswith(STACK_FAULT + "AE511")


@pytest.mark.parametrize("parser", [None, "mistral"], ids=["no-notes", "other-format"])
def test_imported_markup_without_the_templates_format_is_the_models_ae104(tmp_path, parser):
    """As the proxy judges the same reply relayed: one AE104 call, the markup's span."""
    from agent_eval.wire.markup import parser_markers

    record = imported_with(tmp_path, markup_session("vllm-no-parser-tool-call-text.json"),
                           parser_markers(parser))
    assert record.stack_faults == [] and record.status == "completed"
    [call] = record.calls
    assert (call.primary, call.turn_index, call.index) == ("AE104", 0, 0)
    assert call.command.startswith("<tool_call>")


def test_a_fenced_block_is_the_models_under_any_template(tmp_path):
    from agent_eval.wire.markup import parser_markers

    record = imported_with(tmp_path, markup_session("ollama-v1-fenced-bash-text.json"),
                           parser_markers("hermes"))
    assert record.stack_faults == [] and [c.primary for c in record.calls] == ["AE104"]


def test_import_cli_takes_the_stack_notes_and_keeps_them(tmp_path):
    from click.testing import CliRunner

    from agent_eval.cli import main
    from agent_eval.store import open_store

    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(markup_session("vllm-no-parser-tool-call-text.json")) + "\n")
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main, ["import", "openai", str(path), "--allowlist", str(RALF),
                                       "--stack-parser", "hermes", "--db", db])
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        run = store.resolve_run("latest")
        [row] = store.session_rows([run.id])
        info = store.get_run(run.id)
    assert row.stack_faults == (("AE511", True),)
    assert info.config["stack"] == {"parser": "hermes"}
    result = CliRunner().invoke(main, ["import", "openai", str(path), "--allowlist", str(RALF),
                                       "--stack-parser", "my-own", "--db", db])
    assert result.exit_code == 0, result.output
    assert "name no known call format" in result.output
