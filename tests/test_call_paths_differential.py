"""One generated call set, one verdict per call on every path that judges foreign calls.

The calls (every profile's tools, the shell and read tools no profile declares, the
allow-list's own tools, names nobody declares; command and path keys under every
spelling, extra keys such as ``env``, ``cwd``, ``workdir``, ``user``; keys given twice,
also through a ``\\u`` escape; argv lists, wrong types, broken JSON, oversized text) go
through:

- the proxy's recorder path (``proxy.sessions.Sessions.take`` on a relayed reply);
- each importer that carries a call's raw argument text: OpenAI chat transcripts and
  Codex rollouts (``function_call`` items);
- ``rescore`` (``importers.rescore.rejudge_session``) of the proxy's and the imports'
  records;
- ``replay``'s judging of a candidate's reply (``live.replay.judge_reply``) that repeats
  each call.

Every path must give each call the same decision, primary class, finding codes and
stored command.  The suite plays a short set; ``AGENT_EVAL_DIFFERENTIAL_CALLS=20000``
plays a long one (its count is in BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_eval.call_recorder import BASH_TOOLS, READ_TOOLS, CallRecorder
from agent_eval.importers import import_sessions
from agent_eval.importers.rescore import rejudge_session
from agent_eval.live.client import ToolCallOut
from agent_eval.live.replay import judge_reply
from agent_eval.policy import load_allowlist
from agent_eval.policy.profiles import BUILTIN_TOOLS
from agent_eval.proxy import Exchange
from agent_eval.proxy.sessions import Sessions

ALLOWLIST = load_allowlist(Path(__file__).resolve().parents[1] / "allowlists" / "ralf.yaml")
CALLS = int(os.environ.get("AGENT_EVAL_DIFFERENTIAL_CALLS", "600"))
PER_SESSION = 40

TOOLS = sorted({*BUILTIN_TOOLS, *BASH_TOOLS, *READ_TOOLS, *(t.name for t in ALLOWLIST.tools),
                "local_shell", "container.exec", "emit_guidance", "Shell2", "READ"})
COMMANDS = ["uv run scripts/db_query.py --sql 'select 1'", "uv run scripts/lights.py status",
            "ls | head", "cat .env", "timeout 5 uv run scripts/lights.py status", "",
            "uv run scripts/x.py"]
PATHS = ["notes/plan.md", ".env", "notes/private copy/d.md", "notes/a.md /etc/hostname",
         "notes/x ../../secret", "/etc/passwd", "docs/.env,v", "notes/my plan.md"]
KEYS = ["command", "cmd", "path", "file_path", "filePath", "file"]
EXTRA = [("env", {"PYTHONPATH": "scratch"}), ("cwd", "scratch"), ("workdir", "."),
         ("workdir", "scratch"), ("working_directory", "/tmp"), ("user", "root"),
         ("shell", "/bin/zsh"), ("description", "d"), ("timeout", 60), ("directory", "."),
         ("dir_path", "notes"), ("type", "exec"), ("justification", "x")]


def _value(rng: random.Random, key: str):
    roll = rng.random()
    if roll < 0.08:
        return rng.choice([5, None, ["bash", "-lc", rng.choice(COMMANDS)], {"a": 1}])
    if roll < 0.12:
        return ["uv", "run", "scripts/lights.py", "status"]
    return rng.choice(COMMANDS if key in ("command", "cmd") else PATHS)


def generate(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(tool name, raw argument text) pairs."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        tool = rng.choice(TOOLS)
        if rng.random() < 0.5:  # the key a tool of its kind would take, nothing else
            spec = BUILTIN_TOOLS.get(tool) or ALLOWLIST.tool(tool)
            judged = spec.judged_key if spec is not None else None
            key = judged or rng.choice(KEYS[:2] if tool in BASH_TOOLS else KEYS[2:])
            value = rng.choice(COMMANDS if key in ("command", "cmd") else PATHS)
            if spec is not None and judged and spec.arguments[judged].holds == "argv":
                value = ["bash", "-lc", rng.choice(COMMANDS)]
            pairs = [(key, value)]
        else:
            pairs = [(key, _value(rng, key))
                     for key in rng.sample(KEYS, rng.choice([1, 1, 1, 2]))]
            pairs += rng.sample(EXTRA, rng.choice([0, 0, 1, 2]))
        rng.shuffle(pairs)
        text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
        roll = rng.random()
        if roll < 0.08:  # a key given twice
            key, value = pairs[0]
            twice = json.dumps(rng.choice(COMMANDS if key in ("command", "cmd") else PATHS))
            text = text[:-1] + f", {json.dumps(key)}: {twice}" + "}"
        elif roll < 0.12:  # a key given twice through a \u escape
            key, _ = pairs[0]
            escaped = f"\\u{ord(key[0]):04x}{key[1:]}"
            text = text[:-1] + f', "{escaped}": "uv run scripts/lights.py status"' + "}"
        elif roll < 0.14:
            text = text[: rng.randrange(1, len(text))]  # cut
        elif roll < 0.15:
            text = '{"command": "' + "a" * (6 * ALLOWLIST.strict.max_length + 4097) + '"}'
        out.append((tool, text))
    return out


def _verdicts(calls) -> list[tuple]:
    return [(c.decision, c.primary, tuple(f.code for f in c.findings), c.command) for c in calls]


def _batches(calls):
    for start in range(0, len(calls), PER_SESSION):
        yield start // PER_SESSION, calls[start:start + PER_SESSION]


def _offered(batch) -> list[str]:
    return sorted({"bash", "read", *(tool for tool, _ in batch)})


def through_proxy(calls) -> list:
    """The proxy's session records of the call set."""
    sessions = Sessions(ALLOWLIST)
    for number, batch in _batches(calls):
        tools = [{"type": "function", "function": {"name": n, "parameters": {}}}
                 for n in _offered(batch)]
        body = {"model": "m", "tools": tools, "messages": [
            {"role": "system", "content": f"system {number}"},
            {"role": "user", "content": f"task number {number}"}]}
        reply = {"model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
                 "message": {"role": "assistant", "content": "", "tool_calls": [
                     {"id": f"c{i}", "type": "function",
                      "function": {"name": tool, "arguments": text}}
                     for i, (tool, text) in enumerate(batch)]}}]}
        sessions.take(Exchange(path="/v1/chat/completions", request_body=json.dumps(body).encode(),
                               session_headers={}, started_at=datetime.now(UTC), status=200,
                               content_type="application/json",
                               response_body=bytearray(json.dumps(reply).encode()), ttft_s=0.1,
                               latency_s=0.2), 0.0)
    return sessions.close_all()


def _by_task(records) -> list[list[tuple]]:
    """Each record's verdicts, in the order of the batches (by their task's number)."""
    def number(record):
        for message in record.messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str) and content.startswith("task number "):
                return int(content.rsplit(" ", 1)[1])
        raise AssertionError("a session without its task")
    return [_verdicts(r.calls) for r in sorted(records, key=number)]


def _openai_file(calls, path: Path) -> Path:
    with path.open("w") as out:
        for number, batch in _batches(calls):
            messages = [{"role": "system", "content": f"system {number}"},
                        {"role": "user", "content": f"task number {number}"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": f"c{i}", "type": "function",
                             "function": {"name": tool, "arguments": text}}
                            for i, (tool, text) in enumerate(batch)]}]
            out.write(json.dumps({"id": f"s{number}", "model": "m", "messages": messages}) + "\n")
    return path


def _codex_folder(calls, folder: Path) -> Path:
    folder.mkdir()
    for number, batch in _batches(calls):
        sid = f"00000000-0000-0000-0000-{number:012d}"
        lines = [
            {"timestamp": "2026-05-11T08:27:17.490Z", "type": "session_meta",
             "payload": {"id": sid, "timestamp": "2026-05-11T08:26:55.042Z", "cwd": "/w",
                         "originator": "codex_exec", "cli_version": "0.169.0"}},
            {"timestamp": "2026-05-11T08:27:18.000Z", "type": "response_item",
             "payload": {"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": f"task number {number}"}]}},
            *({"timestamp": "2026-05-11T08:27:19.000Z", "type": "response_item",
               "payload": {"type": "function_call", "name": tool, "arguments": text,
                           "call_id": f"c{i}"}} for i, (tool, text) in enumerate(batch)),
        ]
        (folder / f"rollout-2026-05-11T11-26-55-{sid}.jsonl").write_text(
            "\n".join(json.dumps(line) for line in lines) + "\n")
    return folder


def through_replay(calls) -> list[list[tuple]]:
    recorder = CallRecorder(ALLOWLIST, foreign=True)
    out = []
    for _, batch in _batches(calls):
        reply = SimpleNamespace(tool_calls=[ToolCallOut(f"c{i}", tool, text)
                                            for i, (tool, text) in enumerate(batch)], markup=[])
        out.append(_verdicts(judge_reply(reply, recorder, _offered(batch))))
    return out


def _rescored(records) -> list[list[tuple]]:
    recorder = CallRecorder(ALLOWLIST, foreign=True)
    return _by_task([rejudge_session(r, recorder) for r in records])


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("differential")
    calls = generate(CALLS)
    proxied = through_proxy(calls)
    found = {"proxy": _by_task(proxied), "replay": through_replay(calls),
             "rescore of proxy": _rescored(proxied)}
    openai = list(import_sessions("openai", _openai_file(calls, tmp / "chats.jsonl"), ALLOWLIST))
    codex = list(import_sessions("codex", _codex_folder(calls, tmp / "codex"), ALLOWLIST))
    found["import openai"] = _by_task(openai)
    found["import codex"] = _by_task(codex)
    found["rescore of import openai"] = _rescored(openai)
    found["rescore of import codex"] = _rescored(codex)
    return calls, found


def test_the_call_set_covers_every_kind_of_verdict(paths):
    calls, found = paths
    assert len(calls) == CALLS
    verdicts = [v for batch in found["proxy"] for v in batch]
    assert len(verdicts) == CALLS
    classes = {primary for _, primary, *_ in verdicts}
    assert {None, "AE101", "AE102", "AE103", "AE105", "AE202", "AE301", "AE307",
            "AE320"} <= classes


@pytest.mark.parametrize("path", ["replay", "rescore of proxy", "import openai", "import codex",
                                  "rescore of import openai", "rescore of import codex"])
def test_every_path_gives_each_call_the_proxys_verdict(paths, path):
    calls, found = paths
    flat_calls = [c for _, batch in _batches(calls) for c in batch]
    proxy = [v for batch in found["proxy"] for v in batch]
    other = [v for batch in found[path] for v in batch]
    assert len(other) == len(proxy)
    disagree = [(flat_calls[i][0], flat_calls[i][1][:120], proxy[i], other[i])
                for i in range(len(proxy)) if proxy[i] != other[i]]
    assert not disagree, f"{len(disagree)} disagreements, first: {disagree[:5]}"
