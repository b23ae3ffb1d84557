"""A faulty model server never counts against the model.

``agent-eval run`` against the simulator with each fault knob turned up: the run still
stores every failed session as an ``error`` session with its reason (the server keeps
answering ``/v1/models``), exits 3 with one line when nothing at all was measured, and
the per-target rates are computed over the other sessions only.  Malformed tool-call arguments are the model's mistake
(AE102), not a fault.  Latency knobs show up in the stored turn timings.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.analysis.run_tables import summarize_runs
from agent_eval.cli import main
from agent_eval.sim import Faults, run_sim_in_thread
from agent_eval.store import open_store

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RALF = REPO / "scenarios" / "ralf"
SMALL = ("lights-evening-off", "calendar-week-overview", "research-market-scan-web",
         "evaluator-step")


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory) -> Path:
    """Four ralf scenarios (one spawning the evaluator child), same tasks as the bundle."""
    folder = tmp_path_factory.mktemp("suite") / "small"
    folder.mkdir()
    (folder / "suite.yaml").write_text(
        (RALF / "suite.yaml").read_text().replace(
            "../../allowlists/ralf.yaml", str(REPO / "allowlists" / "ralf.yaml")))
    for name in SMALL:
        shutil.copy(RALF / f"{name}.yaml", folder / f"{name}.yaml")
    return folder


def run_against(faults: Faults, db: Path, suite: Path, *options: str, profile="disciplined",
                config: Path | None = None):
    """Run ``suite`` against a simulator with ``faults``; (exit code, stdout, run id)."""
    with run_sim_in_thread(profile, suite=RALF, faults=faults) as base_url:
        target = (["--config", str(_config(config, base_url))] if config else
                  ["--base-url", base_url, "--model", f"sim-{profile}", "--name", profile])
        result = CliRunner().invoke(main, ["run", "--suite", str(suite), "--db", str(db),
                                           "--concurrency", "8", *target, *options])
    with open_store(str(db)) as store:
        runs = store.list_runs()
    return result, (runs[0].id if runs else None)


def _config(template: Path, base_url: str) -> Path:
    path = template.with_suffix(".filled.yaml")
    path.write_text(template.read_text().replace("BASE_URL", base_url))
    return path


FAULTS = [
    pytest.param(Faults(error_rate=1.0), (), "server error 50", id="error-500-503"),
    pytest.param(Faults(drop_rate=1.0), (), "connection dropped", id="drop"),
    pytest.param(Faults(hang_rate=1.0), ("--timeout", "0.5"), "timeout", id="hang"),
    pytest.param(Faults(truncate_rate=1.0), ("--stream",), "garbled", id="truncate-stream"),
    pytest.param(Faults(truncate_rate=1.0), (), "garbled", id="truncate-json"),
]


@pytest.mark.parametrize("faults, options, reason", FAULTS)
def test_every_failing_session_is_stored_as_error_with_its_reason(
        tmp_path, small_suite, faults, options, reason):
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    # nothing was measured: never exit 0 with an empty table, one Error line
    assert result.exit_code == 3, result.output
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert "'disciplined'" in line and reason in line
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        assert store.get_run(run_id).status == "finished"
    top = [s for s in sessions if s.parent_id is None]
    assert len(top) == 3
    assert {s.status for s in sessions} == {"error"}
    assert all(reason in s.error for s in sessions), [s.error for s in sessions]


@pytest.mark.parametrize("faults, options, reason", FAULTS[:2])
def test_error_sessions_are_excluded_from_the_target_rates(
        tmp_path, small_suite, faults, options, reason):
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    with open_store(str(tmp_path / "s.db")) as store:
        summary = summarize_runs(store, [run_id])["disciplined"]
    assert summary.error_sessions == 3
    assert summary.sessions == 0 and summary.calls == 0
    assert summary.errors.per100 is None  # no rate at all, not 100 errors per 100 calls


def test_malformed_arguments_are_the_models_error_not_a_fault(tmp_path, small_suite):
    result, run_id = run_against(Faults(malformed_args_rate=1.0), tmp_path / "s.db",
                                 small_suite)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        calls = list(store.call_rows([run_id]))
    assert "error" not in {s.status for s in sessions}
    assert calls and {(c.decision, c.primary) for c in calls} == {("deny", "AE102")}


def test_mixed_faults_give_some_error_sessions_and_rates_over_the_rest(tmp_path):
    config = tmp_path / "targets.yaml"
    config.write_text("targets:\n  - {name: piper, base_url: 'BASE_URL', model: sim-piper, "
                      "retries: 1, concurrency: 8}\n")
    result, run_id = run_against(Faults(error_rate=0.3), tmp_path / "s.db", RALF,
                                 config=config, profile="piper")
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = {s.id: s for s in store.session_rows([run_id])}
        calls = list(store.call_rows([run_id]))
        summary = summarize_runs(store, [run_id])["piper"]
    errored = {i for i, s in sessions.items() if s.status == "error"}
    assert errored and len(errored) < len(sessions)
    assert all(sessions[i].error for i in errored)
    live_calls = [c for c in calls if c.session_id not in errored]
    assert summary.error_sessions == len(errored)
    assert summary.sessions == len(sessions) - len(errored)
    assert summary.calls == len(live_calls)
    assert summary.errors.k == sum(c.decision == "deny" for c in live_calls)


@pytest.mark.parametrize("faults, stream, floor", [
    pytest.param(Faults(latency_s=0.05), False, {"latency_s": 0.05}, id="latency"),
    pytest.param(Faults(ttft_s=0.05), True, {"latency_s": 0.05, "ttft_s": 0.05}, id="ttft"),
])
def test_latency_knobs_show_in_stored_turn_timings(tmp_path, small_suite, faults, stream,
                                                   floor):
    options = ("--stream",) if stream else ()
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        turns = list(store.turn_rows([run_id]))
    assert turns
    for name, lower in floor.items():
        assert min(getattr(t, name) for t in turns) >= lower, name


# --- hostile output: never a crash, never a hung run, never a flooded disk or terminal ---

HOSTILE_FAULTS = [
    pytest.param(Faults(endless_rate=1.0), ("--deadline", "1"), "reply deadline passed",
                 id="endless-json-deadline"),
    pytest.param(Faults(endless_rate=1.0), ("--stream", "--deadline", "1"),
                 "reply deadline passed", id="endless-stream-deadline"),
    pytest.param(Faults(endless_rate=1.0, endless_pause_s=0.0),
                 ("--stream", "--max-reply-bytes", "65536"), "reply too large",
                 id="endless-stream-size-cap"),
    pytest.param(Faults(endless_rate=1.0, endless_pause_s=0.0), ("--max-reply-bytes", "65536"),
                 "reply too large", id="endless-json-size-cap"),
    pytest.param(Faults(nested_body_rate=1.0), (), "nested too deep", id="nested-body-json"),
    pytest.param(Faults(nested_body_rate=1.0), ("--stream",), "nested too deep",
                 id="nested-body-stream"),
]


@pytest.mark.parametrize("faults, options, reason", HOSTILE_FAULTS)
def test_hostile_answers_end_their_sessions_as_server_faults_and_the_run_finishes(
        tmp_path, small_suite, faults, options, reason):
    result, run_id = run_against(faults, tmp_path / "s.db", small_suite, *options)
    # every session is a server fault, so nothing was measured: exit 3 with the reason
    #, never 0 with an empty table; the run itself is whole
    assert result.exit_code == 3, result.output
    assert "produced no judged tool call" in result.output and reason in result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        summary = summarize_runs(store, [run_id])["disciplined"]
        assert store.get_run(run_id).status == "finished"
    assert {s.status for s in sessions} == {"error"}
    assert all(reason in s.error for s in sessions), [s.error for s in sessions]
    assert summary.error_sessions == 3 and summary.calls == 0  # excluded from the rates


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_invalid_utf8_in_a_reply_is_replaced_kept_and_the_calls_judged(
        tmp_path, small_suite, stream):
    options = ("--stream",) if stream else ()
    result, run_id = run_against(Faults(invalid_utf8_rate=1.0), tmp_path / "s.db",
                                 small_suite, *options)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        turns = [t for s in store.iter_sessions([run_id]) for t in s.record.turns]
        calls = list(store.call_rows([run_id]))
    assert "error" not in {s.status for s in sessions}
    assert turns and all(t.content.startswith("\ufffd\ufffd\ufffd(") for t in turns)
    assert calls and {c.decision for c in calls} == {"allow"}  # the disciplined calls


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_arguments_nested_too_deep_are_judged_malformed_not_a_crash(tmp_path, small_suite,
                                                                    stream):
    options = ("--stream",) if stream else ()
    result, run_id = run_against(Faults(nested_args_rate=1.0, nesting_depth=5_000),
                                 tmp_path / "s.db", small_suite, *options)
    assert result.exit_code == 0, result.output
    with open_store(str(tmp_path / "s.db")) as store:
        sessions = list(store.session_rows([run_id]))
        calls = list(store.call_rows([run_id]))
        stored = [c for s in store.iter_sessions([run_id]) for c in s.record.calls]
    assert "error" not in {s.status for s in sessions}
    assert calls and {(c.decision, c.primary) for c in calls} == {("deny", "AE102")}
    assert stored and all(c.arguments.startswith('{"command": [[[[') for c in stored)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_huge_reply_is_judged_and_stored_capped_with_a_marker(tmp_path, small_suite,
                                                                stream):
    from agent_eval.store.caps import STORED_TEXT_CHARS

    options = ("--stream",) if stream else ()
    db = tmp_path / "s.db"
    result, run_id = run_against(Faults(huge_reply_rate=1.0, huge_reply_chars=1_000_000), db,
                                 small_suite, *options)
    assert result.exit_code == 0, result.output
    with open_store(str(db)) as store:
        sessions = list(store.session_rows([run_id]))
        turns = [t for s in store.iter_sessions([run_id]) for t in s.record.turns]
        calls = list(store.call_rows([run_id]))
        stored = store.load_session(sessions[0].id).record
    assert "error" not in {s.status for s in sessions}
    assert calls and {c.decision for c in calls} == {"allow"}
    marker = re.compile(rf"\n\[agent-eval: stored {STORED_TEXT_CHARS} of (\d+) characters; "
                        r"the rest was cut\]$")
    assert turns and all(int(marker.search(t.content)[1]) >= 1_000_000 for t in turns)
    assert all(len(t.content) < STORED_TEXT_CHARS + 100 for t in turns)
    replies = [m for m in stored.messages if m["role"] == "assistant"]
    assert replies and all(marker.search(m["content"]) for m in replies)
    # 1 MB per reply, about 20 replies: uncapped that is over 40 MB (turns + messages)
    assert db.stat().st_size < 8_000_000


def test_terminal_escapes_in_model_text_are_shown_not_obeyed(tmp_path, small_suite):
    db = tmp_path / "s.db"
    result, run_id = run_against(Faults(control_chars_rate=1.0), db, small_suite)
    assert result.exit_code == 0, result.output
    with open_store(str(db)) as store:
        session_id = next(s.id for s in store.session_rows([run_id]) if s.parent_id is None)
        assert "\x1b[2J" in store.load_session(session_id).record.turns[0].content  # kept
    shown = CliRunner().invoke(main, ["show", str(session_id), "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "\\x1b[2J\\x1b[H\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown.output
    assert "\\x9b31m\\x0downed" in shown.output
    assert not set(shown.output) & {"\x1b", "\x07", "\x9b", "\r"}


def test_a_server_error_message_with_terminal_escapes_is_written_out_in_the_error_line(
        tmp_path):
    """The server's own message is quoted in the `Error:` line; its escapes are not obeyed."""
    import asyncio
    import threading

    from aiohttp import web

    async def refuse(request):
        return web.json_response({"object": "error", "code": 404,
                                  "message": "no such model\x1b[2J\x1b]52;c;cm0=\x07\x9b31m"},
                                 status=404)

    loop = asyncio.new_event_loop()
    box: dict = {}
    ready = threading.Event()

    async def start():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", refuse)
        box["runner"] = web.AppRunner(app, access_log=None)
        await box["runner"].setup()
        site = web.TCPSite(box["runner"], "127.0.0.1", 0)
        await site.start()
        box["port"] = site._server.sockets[0].getsockname()[1]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()),
                                              loop.run_forever()), daemon=True)
    thread.start()
    ready.wait(30)
    try:
        result = CliRunner().invoke(main, [
            "run", "--base-url", f"http://127.0.0.1:{box['port']}/v1", "--model", "m",
            "--db", str(tmp_path / "s.db")])
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
    assert result.exit_code == 3, result.output
    assert "no such model\\x1b[2J\\x1b]52;c;cm0=\\x07\\x9b31m" in result.stderr
    assert not set(result.output) & {"\x1b", "\x07", "\x9b"}


def test_a_run_that_lost_most_sessions_to_server_faults_warns_and_fails_the_gate(
        tmp_path, small_suite):
    # a `sim-server --error-rate 0.85`-style run: most sessions lost to server errors (here
    # 0.4 a request, no retries: 0.85 loses every multi-turn session and `run` exits 3);
    # before, `run` exited 0 without a word and `gate --max-error-rate 10` printed PASS
    # over the few calls left
    config = tmp_path / "targets.yaml"
    config.write_text("targets:\n  - {name: piper, base_url: 'BASE_URL', model: sim-piper, "
                      "retries: 0, concurrency: 8}\n")
    db = tmp_path / "s.db"
    result, run_id = run_against(Faults(error_rate=0.4), db, small_suite, "--repeats", "10",
                                 config=config, profile="piper")
    with open_store(str(db)) as store:
        [coverage] = store.session_coverage(run_id).values()
    lost = coverage.lost["server fault"]
    assert (coverage.planned, coverage.played) == (30, 30)  # 3 top-level scenarios, 10 repeats
    assert coverage.judged > 0 and lost > 3 and coverage.judged + lost == 30
    assert result.exit_code == 0, result.output
    assert f"Warning: target 'piper': {lost} of 30 sessions ended in a server fault" \
        in result.stderr
    gated = CliRunner().invoke(main, ["gate", "--run", str(run_id), "--db", str(db),
                                      "--max-error-rate", "10"])
    assert gated.exit_code == 1, gated.output
    assert (f"FAIL  piper: coverage >= 90%: judged {coverage.judged} of 30 sessions planned "
            f"({100 * coverage.judged / 30:.0f}%); lost {lost}: server fault {lost}: below 90%"
            in gated.stdout)
    assert "PASS  piper: errors/100" not in gated.stdout
