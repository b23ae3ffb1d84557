"""Closing protocols for imported traffic (`import --protocols`): which sessions a
protocol applies to, how far each got, the summary line, and one-line errors for a bad
file.  The sessions are OpenAI chat-completions transcripts written here by hand; the
commands are the ralf allow-list's own (the bundled scenarios' handshakes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.scenario.protocols import load_protocols, system_prompt_of
from agent_eval.store import open_store

RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")
OUTCOME = "uv run scripts/update_attempt_outcome.py --attempt A4 --outcome failure --summary 'no data'"
STATUS = "uv run scripts/update_stage_status.py --stage S5 --status awaiting_eval"
SPAWN = "uv run scripts/ralf_spawn.py step_evaluator --stage S5"
PROTOCOLS = """\
protocols:
  - name: close-attempt
    when:
      calls: {script: update_attempt_outcome.py}
    steps:
      - {script: update_attempt_outcome.py}
      - {script: update_stage_status.py, args: {--status: awaiting_eval}}
      - {script: ralf_spawn.py, positionals: [step_evaluator]}
  - name: evaluator
    when:
      system_prompt: "step evaluator"
    steps:
      - {script: update_stage_status.py, args: {--status: done}}
"""


def session(sid: str, commands: list[str], system: str = "You are a RALF worker.") -> dict:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
    for i, command in enumerate(commands):
        call_id = f"{sid}-{i}"
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
    return {"id": sid, "model": "qwen", "messages": messages}


def write(tmp_path: Path, sessions: list[dict]) -> tuple[Path, Path]:
    data = tmp_path / "sessions.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    protocols = tmp_path / "protocols.yaml"
    protocols.write_text(PROTOCOLS)
    return data, protocols


def test_import_with_protocols_stores_each_sessions_handshake_and_prints_completion(tmp_path):
    data, protocols = write(tmp_path, [
        session("full", [OUTCOME, STATUS, SPAWN]),
        session("stopped", [OUTCOME, "cat notes.txt", STATUS]),   # a denied call: no advance
        session("out-of-order", [STATUS, OUTCOME]),
        session("no-spawn", [OUTCOME, STATUS]),
        session("unrelated", ["uv run scripts/calendar.py list --date 2025-06-12"]),
        session("evaluator", [STATUS.replace("awaiting_eval", "done")],
                system="You are the step evaluator."),
    ])
    db = tmp_path / "s.db"
    result = CliRunner().invoke(main, ["import", "openai", str(data), "--allowlist", RALF,
                                       "--protocols", str(protocols), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert ("  handshake completed: 2/5 sessions a protocol applied to; most missed step: "
            "ralf_spawn.py step_evaluator (2 sessions)") in result.output.splitlines()
    with open_store(str(db)) as store:
        rows = {s.key: s for s in store.session_rows([1])}
        got = {k: (r.handshake_required, r.handshake_done, r.handshake_completed,
                   r.handshake_missed_step) for k, r in rows.items()}
        assert store.get_run(1).config["protocols_path"] == str(protocols)
    assert got == {
        "full": (3, 3, True, None),
        "stopped": (3, 2, False, "ralf_spawn.py step_evaluator"),
        "out-of-order": (3, 1, False, "update_stage_status.py --status awaiting_eval"),
        "no-spawn": (3, 2, False, "ralf_spawn.py step_evaluator"),
        "unrelated": (0, 0, False, None),
        "evaluator": (1, 1, True, None),
    }


def test_without_protocols_an_import_requires_no_handshake(tmp_path):
    data, _ = write(tmp_path, [session("full", [OUTCOME, STATUS, SPAWN])])
    db = tmp_path / "s.db"
    result = CliRunner().invoke(main, ["import", "openai", str(data), "--allowlist", RALF,
                                       "--db", str(db)])
    assert result.exit_code == 0 and "handshake" not in result.output
    with open_store(str(db)) as store:
        [row] = store.session_rows([1])
    assert row.handshake_required == 0


@pytest.mark.parametrize("text, field", [
    ("protocols: []\n", "protocols"),
    ("protocols:\n  - {name: x, when: {}, steps: [{script: a.py}]}\n", "protocols.0.when"),
    ("protocols:\n  - {name: x, when: {system_prompt: '('}, steps: [{script: a.py}]}\n",
     "protocols.0.when.system_prompt"),
    ("protocols:\n  - {name: x, when: {calls: {script: a.py}}, steps: [], extra: 1}\n",
     "protocols.0.steps"),
    ("protocols:\n  - {name: x, when: {calls: {script: a.py}}, steps: [{script: a.py}], "
     "oops: 1}\n", "protocols.0.oops"),
])
def test_a_bad_protocols_file_is_one_error_naming_the_field(tmp_path, text, field):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(field)) as caught:
        load_protocols(path)
    assert caught.value.field == field
    data, _ = write(tmp_path, [session("s", [OUTCOME])])
    result = CliRunner().invoke(main, ["import", "openai", str(data), "--allowlist", RALF,
                                       "--protocols", str(path), "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert str(path) in result.output and field in result.output


def test_the_system_prompt_is_the_first_system_or_developer_message_text():
    assert system_prompt_of([{"role": "user", "content": "u"},
                             {"role": "developer", "content": [{"type": "text", "text": "a"},
                                                               {"type": "text", "text": "b"}]}]
                            ) == "a\nb"
    assert system_prompt_of([{"role": "user", "content": "u"}]) == ""


def test_a_protocol_and_a_live_session_count_a_handshake_with_one_counter():
    """``HandshakeCount`` is the one count: in order, a step out of order not counted,
    the first step not done named as missed."""
    import ast

    from agent_eval.policy import Invocation
    from agent_eval.scenario.protocols import Protocol
    from agent_eval.scenario.spec import CallMatch, HandshakeCount

    steps = [CallMatch(script="a.py"), CallMatch(script="b.py"), CallMatch(script="c.py")]
    calls = [Invocation(script=s, subcommand=(), flags=(), positionals=())
             for s in ("b.py", "a.py", "b.py")]
    counted = HandshakeCount(steps).count(calls).result()
    assert (counted.required, counted.done, counted.completed, counted.missed_step) == \
        (3, 2, False, "c.py")
    protocol = Protocol(name="p", when={"system_prompt": "x"}, steps=steps)
    assert protocol.result(calls) == counted
    assert not HandshakeCount([]).completed
    root = Path(__file__).resolve().parents[2] / "agent_eval"
    for module in ("live/orchestrator.py", "scenario/protocols.py"):
        tree = ast.parse((root / module).read_text(encoding="utf-8"))
        assert "HandshakeCount" in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.AugAssign)
                    and isinstance(n.target, ast.Name | ast.Attribute)
                    and "done" in ast.unparse(n.target)], module
