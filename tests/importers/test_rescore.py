"""Re-scoring a stored run under another allow-list: a new linked run, no model called."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from support.factories import add_run
from support.real_corpora import MINI_SWE, OPENCODE, need

from agent_eval.cli import main
from agent_eval.importers.recording import record_import
from agent_eval.importers.rescore import rescore, rescore_run
from agent_eval.policy import allowlist_from_dict, load_allowlist

ROOT = Path(__file__).resolve().parents[2]
RALF = ROOT / "allowlists" / "ralf.yaml"
EXPORT = f"{OPENCODE}/opencode-export.json"

LOOSE = {
    "name": "loose",
    "programs": {"cat": {"positionals": [{"name": "file", "variadic": True}]}},
    "read": {"roots": ["/tmp/ocproj/"], "allow_absolute": True},
}


@pytest.fixture
def imported(store):
    return record_import(store, "opencode", need(EXPORT), load_allowlist(RALF)).run_id


def test_rescore_writes_a_new_run_linked_to_the_old(store, imported):
    new = rescore_run(store, imported, allowlist_from_dict(LOOSE))
    run = store.get_run(new)
    assert (run.kind, run.parent_run_id, run.status) == ("rescore", imported, "finished")
    assert run.config["allowlist"] == "loose"
    assert run.fingerprint["allowlist"] == allowlist_from_dict(LOOSE).fingerprint


def test_rescore_under_a_looser_list_allows_what_it_now_permits(store, imported):
    result = rescore(store, imported, allowlist_from_dict(LOOSE))
    calls = sorted(store.call_rows([result.run_id]), key=lambda c: c.index)
    assert [c.decision for c in calls] == ["deny", "allow", "deny", "deny", "deny", "allow"]
    assert [c.primary for c in calls] == ["AE301", None, "AE307", "AE320", "AE101", None]
    assert result.changed == 2
    assert (result.before.errors_per_100, result.after.errors_per_100) == (100.0, pytest.approx(400 / 6))


def test_rescore_recomputes_next_actions(store, imported):
    new = rescore_run(store, imported, allowlist_from_dict(LOOSE))
    calls = sorted(store.call_rows([new]), key=lambda c: c.index)
    assert [c.next_action for c in calls] == ["pivot", None, "retry-denied", "retry-denied", "pivot", None]


def test_rescore_keeps_what_the_model_saw(store, imported):
    new = rescore_run(store, imported, allowlist_from_dict(LOOSE))
    [old_row] = store.session_rows([imported])
    [new_row] = store.session_rows([new])
    old, fresh = store.load_session(old_row.id).record, store.load_session(new_row.id).record
    assert [c.output for c in fresh.calls] == [c.output for c in old.calls]
    assert [c.source_decision for c in fresh.calls] == [c.source_decision for c in old.calls]
    assert (fresh.key, fresh.target, fresh.messages) == (old.key, old.target, old.messages)


def test_rescore_under_the_same_list_changes_nothing(store, imported):
    result = rescore(store, imported, load_allowlist(RALF))
    assert result.changed == 0
    assert result.before.denied == result.after.denied == 6


def test_rescore_cli_prints_new_run_and_rates(tmp_path):
    export = need(EXPORT)
    db = str(tmp_path / "s.db")
    runner = CliRunner()
    assert runner.invoke(main, ["import", "opencode", str(export), "--allowlist", str(RALF), "--db", db]).exit_code == 0
    loose = tmp_path / "loose.yaml"
    loose.write_text("name: loose\nprograms: {cat: {positionals: [{name: file, variadic: true}]}}\n"
                     "read: {roots: [/tmp/ocproj/], allow_absolute: true}\n")
    result = runner.invoke(main, ["rescore", "1", "--allowlist", str(loose), "--db", db])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "run 2: rescored run 1 under loose: 6 calls, 2 changed verdict",
        "  errors/100 calls: 100.00 -> 66.67",
    ]


def test_rescore_of_a_missing_run_exits_2(tmp_path):
    result = CliRunner().invoke(main, ["rescore", "99", "--allowlist", str(RALF), "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    assert result.output.startswith("Error: ")


def test_rescore_judges_live_calls_as_emitted(store):
    from agent_eval.transcript import CallRecord, SessionRecord

    calls = [
        CallRecord(index=0, turn_index=0, tool="bash", arguments='{"command": "cat notes/a.md"}',
                   decision="deny", primary="AE307", command="cat notes/a.md", output="denied"),
        CallRecord(index=1, turn_index=1, tool="bash", arguments="not json", decision="deny",
                   primary="AE102", output="denied"),
    ]
    run = add_run(store, [SessionRecord(key="qwen/s/0", target="qwen", scenario="s", calls=calls)],
                  label="live")
    result = rescore(store, run, allowlist_from_dict(LOOSE))
    fresh = sorted(store.call_rows([result.run_id]), key=lambda c: c.index)
    assert [(c.decision, c.primary) for c in fresh] == [("allow", None), ("deny", "AE102")]
    assert result.changed == 1


def test_rescore_of_imported_format_errors_stays_malformed(store):
    mini = need(MINI_SWE)
    old = record_import(store, "mini-swe-agent", mini, load_allowlist(RALF)).run_id
    new = rescore_run(store, old, allowlist_from_dict(LOOSE))
    primaries = {c.index: c.primary for c in store.call_rows([new])}
    assert (primaries[9], primaries[15]) == ("AE102", "AE102")
