"""`agent-eval import`: a run in the store, a summary with source agreement, exit 2 on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.importers.recording import record_import
from agent_eval.policy import load_allowlist

RALF = str(Path(__file__).resolve().parents[2] / "allowlists" / "ralf.yaml")
OPENCODE_ROWS = "format-fixtures/opencode-1.18.34/opencode-db-rows.session-message-part.json"


def _import(*args: str):
    return CliRunner().invoke(main, ["import", *args], catch_exceptions=False)


def test_import_prints_run_counts_rate_and_agreement(corpora, tmp_path):
    result = _import("opencode", str(corpora / OPENCODE_ROWS), "--allowlist", RALF,
                     "--db", str(tmp_path / "s.db"), "--label", "oc")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "run 1: imported 2 sessions, 7 calls (fake-model: 2)"
    assert "  errors/100 calls: 100.00" in lines
    assert "  agreement with source verdicts: 4/7" in lines
    assert "    ses_dff8461d3ffeDr7la2xY78gPRB #5 'cat missing_file.txt': ours deny AE307, source allow" in lines


def test_import_writes_a_run_of_kind_import_with_every_call(corpora, store):
    summary = record_import(store, "opencode", corpora / OPENCODE_ROWS, load_allowlist(RALF))
    run = store.get_run(summary.run_id)
    assert (run.kind, run.status, run.config["format"]) == ("import", "finished", "opencode")
    calls = list(store.call_rows([summary.run_id]))
    assert len(calls) == 7
    assert sorted(c.source_decision for c in calls) == ["allow"] * 3 + ["deny"] * 4
    [target] = store.run_targets(summary.run_id)
    assert target.name == "fake-model"


def test_import_stored_session_reads_back_whole(corpora, store):
    summary = record_import(store, "claude-code", corpora / "format-fixtures/claude-code-2.1.330/transcript.jsonl",
                            load_allowlist(RALF))
    [row] = store.session_rows([summary.run_id])
    record = store.load_session(row.id).record
    assert [c.tool for c in record.calls] == ["Bash", "Read", "Bash", "Bash", "Read", "execute_command", "Bash"]
    assert record.calls[3].source_reason.startswith("rule:cliArg")
    assert record.source == "claude-code"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["openai", "missing.json", "--allowlist", RALF], "missing.json: file not found"),
        (["openai", "{empty}", "--allowlist", RALF], "empty.json: line 1: empty file"),
        (["openai", "{empty}"], "--allowlist: --allowlist FILE is required"),
    ],
    ids=["missing-file", "empty-file", "no-allowlist"],
)
def test_bad_input_exits_2_with_one_error_line(tmp_path, args, message):
    (tmp_path / "empty.json").write_text("")
    args = [a.replace("{empty}", str(tmp_path / "empty.json")) for a in args]
    result = CliRunner().invoke(main, ["import", *args, "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert message in result.output
    assert result.output.count("Error:") == 1 and "Traceback" not in result.output


def test_unknown_format_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["import", "cursor", "x.json", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert "'cursor' is not one of" in result.output


def test_broken_jsonl_line_is_warned_and_the_rest_imported(tmp_path):
    good = ('{"id": "a", "model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": '
            '[{"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}}]}]}')
    path = tmp_path / "s.jsonl"
    path.write_text(good + "\n" + good[:30] + "\n" + good.replace('"a"', '"b"') + "\n")
    result = CliRunner().invoke(
        main, ["import", "openai", str(path), "--allowlist", RALF, "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0
    assert f"Warning: {path}: line 2: skipped: not valid JSON" in result.stderr
    assert "imported 2 sessions, 2 calls" in result.stdout
    assert "skipped 1 broken lines: 2" in result.stdout


def test_server_log_formats_dispatch_to_the_log_importer(tmp_path):
    log = Path(__file__).resolve().parents[1] / "serverlogs" / "fixtures" / "vllm_v1.log"
    result = _import("vllm-log", str(log), "--year", "2025", "--db", str(tmp_path / "s.db"))
    assert result.exit_code == 0
    assert result.output.startswith("imported 2 samples and 1 requests from ")


def test_server_log_options_are_refused_for_transcripts(corpora, tmp_path):
    result = CliRunner().invoke(main, ["import", "opencode", str(corpora / OPENCODE_ROWS), "--allowlist", RALF,
                                       "--year", "2025", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert "apply to server logs only" in result.output
