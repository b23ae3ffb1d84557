"""Type-confused transcripts: a string where an object is expected (a message that is a
string, ``tool_calls`` a string, ``arguments`` a list), a list where text is expected, a
number past 64 bits, a lone surrogate.  Every reader reads them as far as they go and
every import stores what it read; should a reader still fail on a record, the import
says one ``Error:`` line naming the file and the line, keeps the sessions read before it
and marks its run failed (never ``running`` for ever, never a traceback).

The fuzz takes 60 examples per seed; ``AGENT_EVAL_FUZZ_EXAMPLES=20000`` for a long run."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.importers.reading import guarded
from agent_eval.importers.recording import record_import
from agent_eval.policy import load_allowlist

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "allowlists" / "ralf.yaml"
CLIENTS = REPO / "tests" / "fixtures" / "clients"
ALLOWLIST = load_allowlist(RALF)


def openai_session(sid: str, command: str = "uv run scripts/lights.py status") -> dict:
    return {"id": sid, "model": "qwen-27b", "title": "t",
            "tools": [{"type": "function", "function": {"name": "bash"}}],
            "messages": [
                {"role": "system", "content": "sys"}, {"role": "user", "content": "do it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "bash", "arguments": json.dumps({"command": command})}},
                    {"id": "c2", "type": "function",
                     "function": {"name": "read", "arguments": json.dumps({"path": "notes/a.md"})}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "x"}]},
                {"role": "assistant", "content": "done", "finish_reason": "stop"}]}


CALL_RECORDS = [
    {"source_repo": "r", "model": "m", "session_id": "s1", "turn": i, "tool": tool,
     "command": command, "args_json": args, "result_status": "ok", "result_excerpt": "x"}
    for i, (tool, command, args) in enumerate([
        ("bash", "ls", None), ("swe-agent-shell", "cat x", None), ("tmux_keystrokes", "ls\n", None),
        ("__format_error__", "bad reply", None), ("book_flight", None, '{"a": 1}')])
]

OPENCODE_EXPORT = {
    "info": {"id": "ses_1", "title": "t", "time": {"created": 1795304433000, "updated": 1795304435000},
             "model": {"id": "fake-model"}},
    "messages": [
        {"info": {"role": "user", "id": "m1"}, "parts": [{"type": "text", "text": "do it"}]},
        {"info": {"role": "assistant", "id": "m2", "modelID": "fake-model",
                  "tokens": {"input": 100, "output": 10, "cache": {"read": 0}},
                  "time": {"created": 1795304433548, "completed": 1795304435918}},
         "parts": [{"type": "text", "text": "running"},
                   {"type": "tool", "tool": "bash", "callID": "call_0",
                    "state": {"status": "completed", "input": {"command": "ls | head -5"},
                              "output": "a\nb"}},
                   {"type": "tool", "tool": "read", "callID": "call_1",
                    "state": {"status": "error", "input": {"filePath": ".env"},
                              "error": "The user rejected permission to use this tool"}}]}],
}


OPENCODE_STREAM = [
    {"type": "step_start", "timestamp": 1795304460890, "sessionID": "ses_2",
     "part": {"id": "p1", "messageID": "m1", "sessionID": "ses_2", "type": "step-start"}},
    {"type": "tool_use", "timestamp": 1795304461009, "sessionID": "ses_2",
     "part": {"type": "tool", "tool": "bash", "callID": "call_0", "messageID": "m1",
              "state": {"status": "error", "input": {"command": "ls -la | head -5"},
                        "error": "The user rejected permission to use this specific tool call."}}},
    {"type": "text", "timestamp": 1795304461100, "sessionID": "ses_2",
     "part": {"type": "text", "text": "cannot list", "messageID": "m1"}},
]


def _lines(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _fixture(*parts: str) -> str:
    return (CLIENTS.joinpath(*parts)).read_text(encoding="utf-8")


SEEDS: dict[str, tuple[str, str, str]] = {
    # id: (format, file name, text)
    "openai-jsonl": ("openai", "s.jsonl", _lines(openai_session("a"), openai_session("b", "ls"))),
    "openai-json": ("openai", "s.json", json.dumps([openai_session("a"), openai_session("b")])),
    "call-records": ("call-records", "c.jsonl", _lines(*CALL_RECORDS)),
    "opencode-export": ("opencode", "o.json", json.dumps(OPENCODE_EXPORT)),
    "opencode-stream": ("opencode", "o.jsonl", _lines(*OPENCODE_STREAM)),
    "claude-code": ("claude-code", "c.jsonl", _fixture("claude-code", "claude_with_rejection.jsonl")),
    "codex": ("codex", "rollout-x.jsonl", _fixture("codex", "rollout-0.77-escalation.jsonl")),
    "codex-0.89": ("codex", "rollout-y.jsonl",
                   (REPO / "tests" / "fixtures" / "constructed" / "codex-0.89-shapes.jsonl")
                   .read_text(encoding="utf-8")),
    "mini-swe-agent": ("mini-swe-agent", "m.traj.json",
                       _fixture("mini-swe-agent", "local-12300cf4.traj.json")),
    "swe-agent": ("swe-agent", "s.traj", _fixture("swe-agent", "function_calling_simple.traj")),
    "openhands": ("openhands", "o.json", _fixture("openhands", "basic@964478c2.json")),
}

CONFUSED = st.one_of(
    st.text(max_size=6), st.just(""), st.just("\ud800"), st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True),
    st.lists(st.one_of(st.text(max_size=3), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3), st.integers()), max_size=2),
)
"""What a confused writer puts where something else belongs."""


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _replace(value, path, new):
    if not path:
        return new
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return value


def _records(fmt_file: str, text: str) -> tuple[bool, list]:
    if fmt_file.endswith(".jsonl"):
        return True, [json.loads(line) for line in text.splitlines() if line.strip()]
    return False, [json.loads(text)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from agent_eval.store import open_store

    with open_store(str(tmp_path_factory.mktemp("confused") / "store.db")) as opened:
        yield opened


@pytest.mark.parametrize("seed", list(SEEDS))
@settings(max_examples=int(os.environ.get("AGENT_EVAL_FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_reader_raises_on_type_confused_records_and_every_import_stores(
        store, tmp_path, seed, data):
    fmt, name, text = SEEDS[seed]
    jsonl, records = _records(name, text)
    records = copy.deepcopy(records)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        i = data.draw(st.integers(0, len(records) - 1), label="record")
        paths = list(_paths(records[i]))
        path = paths[data.draw(st.integers(0, len(paths) - 1), label="node")]
        records[i] = _replace(records[i], path, data.draw(CONFUSED, label="value"))
    file = tmp_path / name
    body = _lines(*records) if jsonl else json.dumps(records[0])
    file.write_text(body, encoding="utf-8", errors="surrogatepass")
    before = {r.id for r in store.list_runs(limit=1000)}
    try:
        record_import(store, fmt, file, ALLOWLIST, on_skip=lambda *a: None)
    except ConfigError as exc:
        # a record that is not this format at all is refused in words; a reader that
        # could not read one would say "the ... reader cannot read": none may
        assert "reader cannot read" not in str(exc), str(exc)
    new = [r for r in store.list_runs(limit=1000) if r.id not in before]
    assert all(r.status in ("finished", "failed") for r in new)


# the exact inputs: a message that is a string, tool_calls a string, arguments a list

GOOD = openai_session("good")


@pytest.mark.parametrize("confused, calls", [
    pytest.param({"id": "b", "model": "m", "messages": ["hello", {"role": "user", "content": "x"}]},
                 0, id="message-is-a-string"),
    pytest.param({"id": "b", "model": "m", "messages": [
        {"role": "assistant", "content": None, "tool_calls": "bash ls"}]}, 0,
        id="tool_calls-is-a-string"),
    pytest.param({"id": "b", "model": "m", "messages": [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "function": {"name": "bash", "arguments": ["ls"]}}]}]}, 1,
        id="arguments-is-a-list"),
])
def test_the_named_confusions_import_every_session_they_hold(store, tmp_path, confused, calls):
    path = tmp_path / "confused.jsonl"
    path.write_text(_lines(GOOD, confused))
    summary = record_import(store, "openai", path, ALLOWLIST)
    assert summary.sessions == 2 and summary.calls == 2 + calls
    run = store.get_run(summary.run_id)
    assert run.status == "finished"
    rows = {row.key: row for row in store.session_rows([run.id])}
    assert rows["b"].n_calls == calls


def failing_reader(path, *, model, on_skip=None):
    """A reader that reads two sessions, then meets a record it cannot read (line 3)."""
    from agent_eval.importers.openai import read_sessions

    for n, session in enumerate(read_sessions(path, model=model, on_skip=on_skip)):
        if n == 2:
            raise TypeError("string indices must be integers, not 'str'")
        yield session


def test_a_reader_that_still_fails_is_one_error_line_and_a_failed_run(tmp_path, monkeypatch):
    """The net under every reader: what was read stays, the run is failed, one line says
    which file and which line."""
    import agent_eval.importers as importers

    monkeypatch.setitem(importers.FORMATS, "openai", failing_reader)
    path = tmp_path / "three.jsonl"
    path.write_text(_lines(openai_session("a"), openai_session("b"), openai_session("c")))
    db = str(tmp_path / "s.db")
    result = CliRunner().invoke(main, ["import", "openai", str(path), "--allowlist", str(RALF),
                                       "--db", db])
    assert result.exit_code == 2
    [line] = result.output.splitlines()  # one line, no traceback
    assert (f"Error: {path}: line 3: a record the openai reader cannot read (TypeError: "
            "string indices must be integers, not 'str'); fix or remove it and import again; "
            "run 1 keeps the 2 whole sessions read before the error (status failed)") == line
    from agent_eval.store import open_store

    with open_store(db) as opened:
        [run] = opened.list_runs()
        assert run.status == "failed"
        assert sorted(r.key for r in opened.session_rows([run.id])) == ["a", "b"]


def test_guarded_names_no_line_in_a_json_document(tmp_path):
    def broken():
        yield from ()
        raise AttributeError("'str' object has no attribute 'get'")

    with pytest.raises(ConfigError, match="cannot read") as caught:
        list(guarded(broken(), tmp_path / "t.json", "openhands"))
    assert str(caught.value) == (f"{tmp_path / 't.json'}: a record the openhands reader cannot "
                                 "read (AttributeError: 'str' object has no attribute 'get'); "
                                 "fix or remove it and import again")


def test_numbers_past_64_bits_and_lists_for_text_are_stored_as_none_and_json(store, tmp_path):
    session = openai_session("n")
    session["messages"][2]["finish_reason"] = ["tool_calls"]
    session["messages"][5]["finish_reason"] = 10**30
    path = tmp_path / "n.json"
    path.write_text(json.dumps(session))
    summary = record_import(store, "openai", path, ALLOWLIST)
    [row] = store.session_rows([summary.run_id])
    turns = store.load_session(row.id).record.turns
    assert [t.finish_reason for t in turns] == ['["tool_calls"]', str(10**30)]


@pytest.mark.parametrize("escaped", [False, True], ids=["in-arguments", "in-the-file"])
def test_a_lone_surrogate_is_judged_as_it_came_and_stored_as_u_fffd(store, tmp_path, escaped):
    """An allowed shape holding a lone surrogate is denied (AE202: not UTF-8), never
    allowed as the U+FFFD it is stored as; the rest of the session is kept."""
    session = openai_session("s", 'uv run scripts/db_query.py --sql "select \ud800"')
    session["messages"][1]["content"] = "do it \udc00"
    text = _lines(session)
    if escaped:  # the command's escape once (a trajectory's action), not twice
        text = text.replace("\\\\ud800", "\\ud800")
    path = tmp_path / "s.jsonl"
    path.write_text(text)
    summary = record_import(store, "openai", path, ALLOWLIST)
    [row] = store.session_rows([summary.run_id])
    stored = store.load_session(row.id).record
    bash = stored.calls[0]
    assert (bash.decision, bash.primary) == ("deny", "AE202")
    assert bash.command == 'uv run scripts/db_query.py --sql "select \ufffd"'
    assert stored.messages[1]["content"] == "do it \ufffd"


@pytest.mark.parametrize("value", ["x", 1, []], ids=["string", "number", "list"])
def test_an_openhands_model_response_tool_call_that_is_not_an_object_is_passed_over(tmp_path, value):
    """The example the fuzzer found: ``tool_call_metadata.model_response.choices[0]
    .message.tool_calls[0]`` replaced by a string made the reader raise."""
    from agent_eval.importers import read_sessions

    fmt, name, text = SEEDS["openhands"]
    events = json.loads(text)
    events[1]["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"][0] = value
    path = tmp_path / name
    path.write_text(json.dumps(events))
    [session] = read_sessions(fmt, path)
    assert len(session.calls) == 2
