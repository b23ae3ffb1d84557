"""``agent-eval run`` / ``demo`` / ``sim-server`` at the command line: bad input gives one
``Error:`` line and the documented exit code (2 config, 3 unreachable server); the demo
prints both tables with a column per profile.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import EXIT_FAULT, EXIT_USAGE, main

REPO = Path(__file__).resolve().parents[2]
RALF_SUITE = REPO / "scenarios" / "ralf"
RALF_ALLOWLIST = REPO / "allowlists" / "ralf.yaml"
UNREACHABLE = "http://127.0.0.1:1/v1"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def assert_one_error_line(result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def make_suite(tmp_path: Path, allowlist_text: str | None = None) -> Path:
    """A one-scenario suite in ``tmp_path/suite``; its own allow-list when text is given."""
    suite = tmp_path / "suite"
    suite.mkdir()
    allowlist = RALF_ALLOWLIST
    if allowlist_text is not None:
        allowlist = tmp_path / "allow.yaml"
        allowlist.write_text(allowlist_text)
    (suite / "suite.yaml").write_text(f"allowlist: {allowlist}\nlimits: {{turns: 6}}\n")
    shutil.copy(RALF_SUITE / "lights-evening-off.yaml", suite / "lights-evening-off.yaml")
    return suite


def run_args(db: Path, *extra: str) -> list[str]:
    return ["run", "--base-url", UNREACHABLE, "--model", "m", "--db", str(db), *extra]


def test_broken_scenario_yaml_names_the_file_and_exits_2(tmp_path):
    suite = make_suite(tmp_path)
    (suite / "broken.yaml").write_text("task: [unclosed\n  tools: bash\n")
    result = invoke(*run_args(tmp_path / "s.db", "--suite", str(suite)))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "broken.yaml" in line


def test_broken_allowlist_names_the_file_and_exits_2(tmp_path):
    suite = make_suite(tmp_path, allowlist_text="name: x\nrunner: [uv, run\n")
    result = invoke(*run_args(tmp_path / "s.db", "--suite", str(suite)))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "allow.yaml" in line


@pytest.mark.parametrize("args", [
    pytest.param(["demo", "--profiles", "nope", "--no-report"], id="demo-profiles"),
    pytest.param(["sim-server", "--profile", "nope", "--port", "0"], id="sim-server-profile"),
])
def test_unknown_profile_exits_2_naming_the_choices(tmp_path, args):
    result = invoke(*args, *(["--db", str(tmp_path / "s.db")] if args[0] == "demo" else []))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "'nope'" in line and "disciplined" in line


def test_unreachable_base_url_exits_3_naming_the_url(tmp_path):
    result = invoke(*run_args(tmp_path / "s.db", "--suite", str(make_suite(tmp_path))))
    line = assert_one_error_line(result, EXIT_FAULT)
    assert UNREACHABLE in line


def test_base_url_without_a_scheme_is_a_config_error(tmp_path):
    result = invoke("run", "--base-url", "127.0.0.1:8000/v1", "--model", "m",
                    "--db", str(tmp_path / "s.db"))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "--base-url" in line and "'127.0.0.1:8000/v1' is not a URL" in line


def test_unreachable_server_records_no_run(tmp_path):
    from agent_eval.store import open_store

    db = tmp_path / "s.db"
    invoke(*run_args(db, "--suite", str(make_suite(tmp_path))))
    with open_store(str(db)) as store:
        assert store.list_runs() == []


@pytest.mark.parametrize("body, field", [
    pytest.param("targets:\n  - {name: a, base_url: http://127.0.0.1:1/v1, model: m, "
                 "concurrency: 0}\n", "targets.0.concurrency", id="out-of-range"),
    pytest.param("targets:\n  - {name: a, base_url: http://127.0.0.1:1/v1, model: m, "
                 "temprature: 1.0}\n", "targets.0.temprature", id="unknown-field"),
    pytest.param("targets:\n  - {name: a, model: m}\n", "targets.0.base_url",
                 id="missing-base-url"),
])
def test_config_file_with_a_bad_field_names_file_and_field_and_exits_2(tmp_path, body, field):
    config = tmp_path / "targets.yaml"
    config.write_text(body)
    result = invoke("run", "--config", str(config), "--db", str(tmp_path / "s.db"))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "targets.yaml" in line and field in line


@pytest.mark.parametrize("args", [
    pytest.param([], id="nothing"),
    pytest.param(["--base-url", UNREACHABLE], id="no-model"),
    pytest.param(["--model", "m"], id="no-base-url"),
])
def test_run_without_a_target_exits_2_saying_what_to_give(tmp_path, args):
    result = invoke("run", *args, "--db", str(tmp_path / "s.db"))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "--base-url" in line and "--config" in line


def test_resume_of_an_unknown_run_exits_2(tmp_path):
    result = invoke("run", "--resume", "42", "--db", str(tmp_path / "s.db"))
    assert_one_error_line(result, EXIT_USAGE)


@pytest.mark.e2e
def test_demo_prints_both_tables_with_a_column_per_profile(tmp_path):
    from agent_eval.sim import PROFILES

    result = invoke("demo", "--db", str(tmp_path / "demo.db"), "--no-report")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Per target" in out and "Errors per 100 tool calls by failure class" in out
    class_table = out[out.index("Errors per 100 tool calls by failure class"):]
    header = next(line for line in class_table.splitlines() if "failure class" in line
                  and "Errors per" not in line)
    assert [name for name in PROFILES if name in header] == list(PROFILES)
    assert "finished" in out


def test_a_base_url_without_v1_names_the_url_and_suggests_v1(tmp_path):
    from agent_eval.sim import run_sim_in_thread

    with run_sim_in_thread(profile="piper") as base_url:
        root = base_url.removesuffix("/v1")
        result = invoke(*["run", "--base-url", root, "--model", "piper", "--limit", "1",
                          "--db", str(tmp_path / "s.db")])
    line = assert_one_error_line(result, EXIT_USAGE)
    assert line == (f"Error: base_url: {root}/models answered 404 Not Found: "
                    "OpenAI-compatible servers answer under /v1; "
                    f"try --base-url {root}/v1")


@pytest.mark.e2e
def test_max_turns_and_tool_calls_bound_every_session_and_are_stored_in_the_run(tmp_path):
    from agent_eval.sim import run_sim_in_thread
    from agent_eval.store import open_store

    db = str(tmp_path / "s.db")
    with run_sim_in_thread(profile="disciplined") as base_url:
        result = invoke("run", "--base-url", base_url, "--model", "disciplined", "--db", db,
                        "--scenario", "lights-evening-off", "--max-turns", "2",
                        "--max-tool-calls", "1")
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        run = store.resolve_run("latest")
        assert run.config["limits"] == {"turns": 2, "tool_calls": 1}
        records = [store.load_session(row.id).record for row in store.session_rows([run.id])]
    assert [(r.status, len(r.calls)) for r in records] == [("stalled", 1)]


def test_resume_keeps_the_limits_the_run_started_with(tmp_path):
    result = invoke("run", "--resume", "1", "--max-turns", "3", "--db", str(tmp_path / "s.db"))
    assert assert_one_error_line(result, EXIT_USAGE) == (
        "Error: --max-turns/--max-tool-calls: --resume keeps the limits the run started with")


def test_a_resumed_plan_reads_the_limits_back(tmp_path):
    from agent_eval.live.client import Target
    from agent_eval.live.run import load_run_plan, start_run
    from agent_eval.scenario import load_suite
    from agent_eval.scenario.select import limit_scenarios
    from agent_eval.store import open_store

    suite = limit_scenarios(load_suite(RALF_SUITE), turns=2)
    with open_store(str(tmp_path / "s.db")) as store:
        run_id = start_run(store, suite, [Target(name="t", base_url="http://x/v1", model="m")],
                           1, label=None, server_models={})
        _, resumed, _, _ = load_run_plan(store, run_id)
    assert {sc.spec.limits.turns for sc in resumed.scenarios.values()} == {2}
    assert resumed.fingerprint == suite.fingerprint


@pytest.mark.e2e
def test_the_demo_ends_by_saying_what_to_open_next(tmp_path):
    db = str(tmp_path / "demo.db")
    result = invoke("demo", "--profiles", "piper", "--repeats", "1", "--tag", "lights",
                    "--no-report", "--db", db)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-4:] == [
        "Next:",
        f"  agent-eval view --db {db}: browse the run at http://127.0.0.1:8700/",
        f"  agent-eval sessions latest --failed --db {db}: the sessions that went wrong",
        f"  agent-eval show ID --db {db}: one session turn by turn (an id from sessions)"]


@pytest.mark.e2e
def test_run_allowlist_plays_and_judges_every_scenario_under_it_and_resume_keeps_it(tmp_path):
    """`run --allowlist` names the allow-list as proxy, import and rescore do: the bundled
    scenarios played and judged under `permissive`, which lets `| grep` through."""
    from agent_eval.policy.allowlist import load_allowlist
    from agent_eval.scenario.bundled import bundled_allowlist
    from agent_eval.sim import run_sim_in_thread
    from agent_eval.store import open_store

    db = str(tmp_path / "s.db")
    with run_sim_in_thread(profile="piper") as base_url:
        result = invoke("run", "--base-url", base_url, "--model", "piper", "--db", db,
                        "--allowlist", "permissive", "--scenario", "lights-*", "--repeats", "3")
        assert result.exit_code == 0, result.output
        with open_store(db) as store:
            run = store.resolve_run("latest")
            calls = list(store.call_rows([run.id]))
    permissive = load_allowlist(bundled_allowlist("permissive"))
    assert Path(run.config["policy"]["allowlist"]).resolve() == \
        bundled_allowlist("permissive").resolve()
    assert run.fingerprint["allowlists"] == [permissive.fingerprint]
    piped = [c for c in calls if "|" in (c.command or "")]
    assert piped, [c.command for c in calls]
    assert "allow" in {c.decision for c in piped}  # `| grep`, `| jq`: AE301 under ralf
    from agent_eval.live.run import load_run_plan

    with open_store(db) as store:
        _, suite, _, _ = load_run_plan(store, run.id)
    assert {sc.allowlist.name for sc in suite.scenarios.values()} == {"permissive"}


def test_run_allowlist_that_does_not_exist_is_one_error_line(tmp_path):
    result = invoke(*run_args(tmp_path / "s.db", "--allowlist", str(tmp_path / "nope.yaml")))
    line = assert_one_error_line(result, EXIT_USAGE)
    assert "nope.yaml" in line


def _finished_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Run ") and "finished" in line)


@pytest.mark.e2e
def test_demo_counts_the_sessions_it_stored_as_its_table_does(tmp_path):
    """Children spawned by a research stage are stored sessions too: the closing line
    counts them as the table's rows do, and says how many were spawned."""
    import json as json_module

    db = str(tmp_path / "d.db")
    args = ["demo", "--profiles", "disciplined", "--repeats", "1", "--no-report",
            "--scenario", "research-tech-radar", "--scenario", "lights-dim-office", "--db", db]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    as_json = json_module.loads(invoke(*args, "--json").stdout)
    column = as_json["targets"]["disciplined"]
    in_table = column["sessions"] + column["error_sessions"]
    assert in_table > 2  # the stage spawned at least one child
    line = _finished_line(result.stdout)
    assert f"{in_table} sessions stored" in line, line
    assert f"2 played as planned, {in_table - 2} spawned by them" in line, line


@pytest.mark.e2e
def test_one_session_is_one_session(tmp_path):
    result = invoke("demo", "--profiles", "disciplined", "--repeats", "1", "--no-report",
                    "--scenario", "lights-dim-office", "--db", str(tmp_path / "d.db"))
    assert result.exit_code == 0, result.output
    assert "1 session stored in" in _finished_line(result.stdout)
    import re

    assert not re.search(r"(?<![/\d])1 sessions", result.output)  # "1/1 sessions" is a ratio
