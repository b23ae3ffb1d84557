"""``import`` judging Claude Code and Codex transcripts under those CLIs' own rules.

Each call gets the verdict the CLI's matcher gives under the configuration (what the
model was refused) and keeps the strict reading's class when the CLI let through what
the strict reading of the same rules refuses (a leak).  Expected verdicts follow the
CLIs' documentation (docs/policies.md): Claude Code's deny > ask > allow, ``Bash(p:*)``
a prefix followed by a blank or nothing, redirections removed before matching, ``ask``
blocking in an unattended stack, and the reported quirks (``Bash(cd:*)``,
``Bash(echo *)``); Codex's prefix rules, the strictest matching decision winning, a
plain chain checked command by command, ``prompt`` (and no rule at all) blocking.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.store import open_store

POLICIES = Path(__file__).resolve().parents[1] / "fixtures" / "policies"


def claude_transcript(path: Path, commands: list[str]) -> Path:
    """A Claude Code 2.0 transcript (the shape of tests/fixtures/clients/claude-code)
    whose assistant runs ``commands`` with the Bash tool, one per reply."""
    lines = [{"type": "user", "uuid": "u0", "parentUuid": None, "sessionId": "cc-1",
              "timestamp": "2025-12-03T10:00:00.000Z", "cwd": "/home/testuser/project",
              "version": "2.0.75", "message": {"role": "user", "content": "Tidy the repo"}}]
    parent = "u0"
    for i, command in enumerate(commands):
        lines.append({"type": "assistant", "uuid": f"a{i}", "parentUuid": parent,
                      "sessionId": "cc-1", "timestamp": f"2025-12-03T10:00:{i * 2 + 1:02d}.000Z",
                      "requestId": f"req_{i}", "message": {
                          "id": f"msg_{i}", "type": "message", "role": "assistant",
                          "model": "claude-sonnet-4-20250514",
                          "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                                       "input": {"command": command}}],
                          "stop_reason": "tool_use",
                          "usage": {"input_tokens": 100, "output_tokens": 20}}})
        lines.append({"type": "user", "uuid": f"u{i + 1}", "parentUuid": f"a{i}",
                      "sessionId": "cc-1", "timestamp": f"2025-12-03T10:00:{i * 2 + 2:02d}.000Z",
                      "message": {"role": "user", "content": [
                          {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}]}})
        parent = f"u{i + 1}"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def codex_rollout(path: Path, commands: list[str]) -> Path:
    """A Codex CLI 0.77 rollout (the shape of tests/fixtures/clients/codex) whose model
    runs ``commands`` with the shell tool."""
    lines = [
        {"timestamp": "2025-01-04T09:00:00.000Z", "type": "session_meta", "payload": {
            "id": "codex-1", "timestamp": "2025-01-04T09:00:00.000Z", "cwd": "/home/u/p",
            "originator": "codex_cli_rs", "cli_version": "0.77.0", "source": "cli",
            "model_provider": "openai"}},
        {"timestamp": "2025-01-04T09:00:01.000Z", "type": "turn_context", "payload": {
            "cwd": "/home/u/p", "approval_policy": "never", "model": "gpt-5-codex"}},
        {"timestamp": "2025-01-04T09:00:02.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Query the stage table"}]}},
    ]
    for i, command in enumerate(commands):
        lines.append({"timestamp": f"2025-01-04T09:00:{i * 2 + 3:02d}.000Z",
                      "type": "response_item", "payload": {
                          "type": "function_call", "name": "shell", "call_id": f"call_{i}",
                          "arguments": json.dumps({"command": command})}})
        lines.append({"timestamp": f"2025-01-04T09:00:{i * 2 + 4:02d}.000Z",
                      "type": "response_item", "payload": {
                          "type": "function_call_output", "call_id": f"call_{i}",
                          "output": "ok"}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def imported(db: str, fmt: str, path: Path, policy: Path, *extra: str):
    result = CliRunner().invoke(main, ["import", fmt, str(path), "--allowlist", str(policy),
                                       "--db", db, "--label", "judged", *extra])
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        run_id = store.resolve_run("label:judged").id
        calls = [(c.command, c.decision, c.primary, c.leak) for c in store.call_rows([run_id])]
        [row] = store.session_rows([run_id])
        record = store.load_session(row.id).record
        [whole] = store.summarize([run_id], "all").values()
    return calls, (record.policy_agent, record.policy_agent_via), whole


def test_claude_code_settings_judge_an_import_of_claude_codes_transcripts(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(POLICIES / "claude-code", project)
    settings = project / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["permissions"]["allow"] += ["Bash(cd:*)", "Bash(echo *)"]  # the reported rules
    settings.write_text(json.dumps(data))
    transcript = claude_transcript(tmp_path / "session.jsonl", [
        "npm run lint",                                   # Bash(npm run lint): allow
        "npm run test --watch",                           # Bash(npm run test:*): allow
        "ls -la > files.txt",                             # redirection dropped: Bash(ls *)
        "git push origin main",                           # Bash(git push:*): ask, blocked
        "curl https://example.com",                       # Bash(curl:*): deny
        "git diff HEAD && curl https://example.com",      # a part denied: denied
        "cd /some/path && python3 script.py",             # cd-chain quirk: ran
        'echo "test" && ls',                              # whole-command-prefix quirk: ran
    ])
    calls, chosen, whole = imported(str(tmp_path / "runs.db"), "claude-code", transcript,
                                    settings)
    assert calls == [
        ("npm run lint", "allow", None, None),
        ("npm run test --watch", "allow", None, None),
        ("ls -la > files.txt", "allow", None, "AE303"),
        ("git push origin main", "deny", "AE307", None),
        ("curl https://example.com", "deny", "AE307", None),
        ("git diff HEAD && curl https://example.com", "deny", "AE304", None),
        ("cd /some/path && python3 script.py", "allow", None, "AE304"),
        ('echo "test" && ls', "allow", None, "AE304"),
    ]
    assert chosen == ("main", "default")  # no system prompt in the file: the main session
    assert (whole.errors.k, whole.leaks) == (3, {"AE304": 2, "AE303": 1})


def test_a_codex_rules_file_judges_an_import_of_codex_rollouts(tmp_path):
    rollout = codex_rollout(tmp_path / "rollout-2025-01-04T09-00-00-codex-1.jsonl", [
        "uv run scripts/db_query.py --sql 'SELECT 1'",       # the allow rule's prefix
        "uv run scripts/db_query.py --sql x && uv run scripts/fetch_context.py --no-attach",
        "uv run python -c 'print(1)'",                       # forbidden
        "git push",                                          # prompt: rejected (never)
        "ls -la",                                            # no rule: ran in the sandbox
    ])
    calls, chosen, whole = imported(str(tmp_path / "runs.db"), "codex", rollout,
                                    POLICIES / "codex" / "seed.rules")
    assert calls == [
        ("uv run scripts/db_query.py --sql 'SELECT 1'", "allow", None, None),
        ("uv run scripts/db_query.py --sql x && uv run scripts/fetch_context.py --no-attach",
         "allow", None, "AE304"),                            # each part allowed; a chain
        ("uv run python -c 'print(1)'", "deny", "AE308", None),
        ("git push", "deny", "AE307", None),
        ("ls -la", "allow", None, "AE307"),                  # a real leak
    ]
    assert chosen == ("default", "default")
    assert (whole.calls, whole.errors.k, whole.leaks) == (5, 2, {"AE304": 1, "AE307": 1})


def test_rescore_under_a_policy_source_keeps_each_sessions_agent(tmp_path):
    db = str(tmp_path / "runs.db")
    transcript = claude_transcript(tmp_path / "session.jsonl", ["ls -la > files.txt"])
    settings = POLICIES / "claude-code" / ".claude" / "settings.json"
    imported(db, "claude-code", transcript, POLICIES / "codex" / "seed.rules")
    result = CliRunner().invoke(main, ["rescore", "label:judged", "--allowlist", str(settings),
                                       "--db", db, "--label", "rescored"])
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        run_id = store.resolve_run("label:rescored").id
        # the stored session names no Claude Code release: the pinned one asks
        assert [(c.decision, c.leak) for c in store.call_rows([run_id])] == [("deny", None)]
        [row] = store.session_rows([run_id])
        assert row.policy_agent == "main"


def test_an_agent_the_configuration_does_not_name_is_one_error_line(tmp_path):
    transcript = claude_transcript(tmp_path / "session.jsonl", ["ls"])
    result = CliRunner().invoke(main, [
        "import", "claude-code", str(transcript), "--db", str(tmp_path / "runs.db"),
        "--allowlist", str(POLICIES / "opencode-seed" / "opencode.json"), "--agent", "mail"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: --agent: tests/fixtures/policies/opencode-seed/opencode.json has no agent "
        "'mail'; its agents: build, plan, orchestrator, email, lights, research"
        .replace("tests/fixtures/policies", str(POLICIES))]


def test_the_operators_agent_judges_every_imported_session(tmp_path):
    transcript = claude_transcript(tmp_path / "session.jsonl",
                                   ["uv run scripts/email_search.py --query march"])
    seed = POLICIES / "opencode-seed" / "opencode.json"
    for agent, decision in (("email", "allow"), ("lights", "deny")):
        db = str(tmp_path / f"{agent}.db")
        calls, chosen, _ = imported(db, "claude-code", transcript, seed, "--agent", agent)
        assert [c[1] for c in calls] == [decision]
        assert chosen == (agent, "option")


# --- the files the real CLIs wrote (tests/fixtures/clis), under those CLIs' own rules ----

CLIS = Path(__file__).resolve().parents[1] / "fixtures" / "clis"


def stored_calls(db: str) -> list[tuple[str, str | None, str, str | None]]:
    with open_store(db) as store:
        run_id = store.resolve_run("label:judged").id
        return [(c.tool, c.command, c.decision, c.primary)
                for c in sorted(store.call_rows([run_id]), key=lambda c: (c.session_id, c.index))]


def test_claude_code_settings_judge_the_session_claude_code_wrote(tmp_path):
    """Claude Code 2.1.332's own files (a main session and its subagent's): `Bash(ls *)`
    allows `ls -la`; reading notes.txt in the session's working directory needs no rule
    (the file's `cwd`, /home/agent/project, not a default); the `Agent` call needs no
    approval; the subagent's `echo` matches no rule but is read-only, which that release
    runs unasked."""
    sessions = CLIS / "claude-code" / "sessions" / ".claude" / "projects" / "-home-agent-project"
    db = str(tmp_path / "runs.db")
    result = CliRunner().invoke(main, [
        "import", "claude-code", str(sessions), "--db", db, "--label", "judged",
        "--allowlist", str(POLICIES / "claude-code" / ".claude" / "settings.json")])
    assert result.exit_code == 0, result.output
    assert stored_calls(db) == [
        ("Bash", "ls -la", "allow", None),
        ("Read", "/home/agent/project/notes.txt", "allow", None),
        ("Agent", None, "allow", None),
        ("Bash", "echo subagent shell call", "allow", None),  # read-only: runs unasked
    ]


def test_a_codex_rules_file_judges_the_rollouts_codex_wrote(tmp_path):
    """Codex 0.169's own rollouts (main thread and spawned agent) under the seed rules:
    no rule names `ls`, `cat` or `echo`, so in the rollouts' mode (approval and sandbox
    from their turn_context) each ran inside the sandbox; the multi-agent tools are not
    gated by the rules.  Each stored session says what was emulated."""
    rollouts = CLIS / "codex" / "sessions" / ".codex" / "sessions"
    db = str(tmp_path / "runs.db")
    result = CliRunner().invoke(main, [
        "import", "codex", str(rollouts), "--db", db, "--label", "judged",
        "--allowlist", str(POLICIES / "codex" / "seed.rules")])
    assert result.exit_code == 0, result.output
    assert stored_calls(db) == [
        ("exec_command", "ls -la", "allow", None),           # no rule: ran sandboxed
        ("exec_command", "cat notes.txt", "allow", None),
        ("multi_agent_v1.spawn_agent", None, "allow", None),
        ("multi_agent_v1.wait_agent", None, "allow", None),
        ("exec_command", "echo subagent shell call", "allow", None),
    ]
    with open_store(db) as store:
        run_id = store.resolve_run("label:judged").id
        assert {store.load_session(row.id).record.policy_emulation
                for row in store.session_rows([run_id])} == {
            "codex 0.169.0, mode never/danger-full-access"}  # the rollouts' turn_context


def test_the_transcripts_release_is_emulated_unless_a_flag_names_one(tmp_path):
    """A Claude Code 2.0.75 transcript keeps that release's cd-chain quirk; --cli-version
    judges it as the pinned release instead, and each stored session says which."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(cd:*)"]}}))
    transcript = claude_transcript(tmp_path / "session.jsonl",
                                   ["cd /some/path && python3 script.py"])
    found = {}
    for label, extra in (("own", ()), ("flag", ("--cli-version", "2.1.332", "--mode",
                                                "dontAsk"))):
        db = str(tmp_path / f"{label}.db")
        calls, *_ = imported(db, "claude-code", transcript, settings, *extra)
        with open_store(db) as store:
            [row] = store.session_rows([store.resolve_run("label:judged").id])
            found[label] = ([(c[1], c[3]) for c in calls],
                            store.load_session(row.id).record.policy_emulation)
    assert found == {"own": ([("allow", "AE304")], "claude-code 2.0.75, mode default"),
                     "flag": ([("deny", None)], "claude-code 2.1.332, mode dontAsk")}


def test_a_mode_the_cli_does_not_have_is_one_error_line_on_import(tmp_path):
    transcript = claude_transcript(tmp_path / "session.jsonl", ["ls"])
    result = CliRunner().invoke(main, [
        "import", "claude-code", str(transcript), "--db", str(tmp_path / "runs.db"),
        "--allowlist", str(POLICIES / "claude-code" / ".claude" / "settings.json"),
        "--mode", "never/read-only"])
    assert result.exit_code == 2
    assert result.output.startswith("Error: --mode: Claude Code has no mode")
