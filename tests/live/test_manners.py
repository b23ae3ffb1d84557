"""Shared-server manners: one cap on
the requests in flight to a server across every target of a process, a 429/503 that
pauses every request to that server for its ``Retry-After``, and a limit that halves when
the server queues (time to first token, vLLM's ``num_requests_waiting``) and comes back
one step at a time.  The end-to-end tests play the real CLI and client against the
simulator's busy-server knobs (``Faults.slots``, ``max_in_flight``) over HTTP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner
from support.loopback import serve_in_thread

from agent_eval.cli import main
from agent_eval.live import manners
from agent_eval.live.client import ModelClient, Target
from agent_eval.live.manners import ServerGate, metrics_url, requests_waiting, server_gate
from agent_eval.sim import Faults, create_app
from agent_eval.sim.server import STATE
from agent_eval.store import open_store

VLLM_METRICS = """# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 2.0
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 8.0
"""
LIGHTS = ("lights-evening-off", "lights-dim-office", "lights-status-report",
          "calendar-week-overview", "calendar-move-standup", "strategy-weekly-review")


def test_vllm_queue_gauge_is_summed_over_engines_and_absent_elsewhere():
    assert requests_waiting(VLLM_METRICS) == 5.0
    assert requests_waiting("# llama.cpp\nllamacpp:requests_processing 1\n") is None
    assert metrics_url("http://gpu:8000/v1") == "http://gpu:8000/metrics"


def test_slots_past_the_cap_wait_in_turn_and_a_pause_holds_every_request():
    """Twenty requests through a gate capped at three: never more than three in flight,
    every one served, the waiting ones in the order they came; then a busy answer's
    pause holds a request that would have had room until the pause is over."""

    async def play() -> tuple[int, list[int], float, float]:
        gate = ServerGate(cap=3, adaptive=False)
        most, order = 0, []

        async def request(n: int) -> None:
            nonlocal most
            async with gate.slot():
                most = max(most, gate.in_flight)
                order.append(n)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(request(n) for n in range(20)))
        assert gate.in_flight == 0
        gate.busy(0.2, 0.0)
        start = asyncio.get_running_loop().time()
        async with gate.slot():
            waited = asyncio.get_running_loop().time() - start
        return most, order, waited, gate.limit

    most, order, waited, limit = asyncio.run(play())
    assert most == 3
    assert order == list(range(20))
    assert waited >= 0.19
    assert limit == 1  # the busy answer halved the limit (3 // 2)


def test_a_slow_reply_halves_the_limit_and_fast_ones_restore_it_one_step_at_a_time():
    gate = ServerGate(cap=8)
    gate.in_flight = 8
    gate.observe(0, 0.1)  # the fastest seen
    gate.observe(0, 0.9)  # 9x slower, past 0.1 * 3 and 0.1 + 0.25: a queue
    assert (gate.limit, gate.cuts) == (4, 1)
    gate.observe(0, 5.0)  # sent before the cut: measures the old load, ignored
    assert gate.limit == 4
    for _ in range(4):
        gate.observe(1, 0.1)
    assert gate.limit == 5  # one step after `limit` fast replies
    for _ in range(100):
        gate.observe(1, 0.1)
    assert gate.limit == 8  # never past the cap


def test_a_busy_answer_pauses_the_server_for_its_retry_after_and_the_limit_comes_back():
    gate = ServerGate()
    gate.in_flight = gate.peak = 6
    gate.busy(retry_after_s=2.0, backoff_s=0.1)
    assert gate.limit == 3 and gate.paused_until > 0
    for _ in range(3 + 4 + 5 + 6):  # replies not streamed: no time to first token
        gate.observe(1, None)
    assert gate.limit is None  # past the demand seen before the cut: no limit again


def test_targets_on_one_server_share_one_gate_and_the_largest_cap():
    async def gates():
        a = server_gate("http://127.0.0.1:8000/v1", cap=2, adaptive=True)
        b = server_gate("http://127.0.0.1:8000/v1/", cap=3, adaptive=True)
        c = server_gate("http://127.0.0.1:9000/v1", cap=None, adaptive=True)
        return a, b, c

    a, b, c = asyncio.run(gates())
    assert a is b and a.limit == 3 and c is not a and c.limit is None


def sim(**faults) -> tuple:
    app = create_app("disciplined", faults=Faults(**faults))
    return app, app[STATE]


def suite_of(tmp_path: Path, names=LIGHTS) -> Path:
    from test_run_fail_fast import suite_of as copy_suite
    return copy_suite(tmp_path, names)


def targets(path: Path, url: str, **knobs) -> Path:
    extra = "".join(f", {k}: {v}" for k, v in knobs.items())
    path.write_text("targets:\n" + "".join(
        f"  - {{name: {name}, base_url: '{url}', model: sim-disciplined, concurrency: 4{extra}}}\n"
        for name in ("a", "b")))
    return path


def play(tmp_path: Path, config: Path, names=LIGHTS):
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--suite",
                                       str(suite_of(tmp_path, names)), "--db",
                                       str(tmp_path / "m.db")])
    with open_store(str(tmp_path / "m.db")) as store:
        [run] = store.list_runs()
        return result, list(store.session_rows([run.id]))


def test_two_targets_on_one_server_keep_to_its_limit_together(tmp_path):
    """8 sessions could be in flight (2 targets x 4); the server's limit of 2 holds across
    both, so a server that answers 429 past 2 in flight never has to."""
    app, state = sim(max_in_flight=2, latency_s=0.02)
    with serve_in_thread(app) as url:
        result, sessions = play(tmp_path, targets(tmp_path / "t.yaml", url, server_limit=2))
    assert result.exit_code == 0, result.output
    assert len(sessions) == 2 * len(LIGHTS)
    assert all(s.status != "error" for s in sessions)
    assert state.busy_answers == 0 and 1 <= state.peak_in_flight <= 2


def test_a_server_that_answers_503_with_retry_after_is_waited_for_not_failed(tmp_path):
    """No limit set: the first burst meets 503 + Retry-After; the whole process pauses and
    slows down instead of burning its retries, and no session ends `error`."""
    app, state = sim(max_in_flight=1, busy_status=503, retry_after_s=0.1, latency_s=0.02)
    with serve_in_thread(app) as url:
        result, sessions = play(tmp_path, targets(tmp_path / "t.yaml", url, retries=8), LIGHTS[:3])
    assert result.exit_code == 0, result.output
    assert len(sessions) == 2 * 3
    assert [s.error for s in sessions if s.status == "error"] == []
    assert state.busy_answers >= 1


def test_requests_queued_at_a_vllm_server_cut_the_limit(monkeypatch):
    """The simulator queues past one slot and shows the queue on /metrics as vLLM does;
    the client's gate reads it and halves its limit while the queue lasts."""
    monkeypatch.setattr(manners, "METRICS_EVERY_S", 0.05)
    app, state = sim(slots=1, latency_s=0.1)

    async def burst(url: str) -> ServerGate:
        target = Target(name="q", base_url=url, model="sim-disciplined", concurrency=8)
        async with ModelClient(target) as client:
            messages = [{"role": "user", "content": "Dim the office lights to 30%."}]
            await asyncio.gather(*(client.complete(messages) for _ in range(16)))
            return client._gate()

    with serve_in_thread(app) as url:
        gate = asyncio.run(burst(url))
    assert gate.cuts >= 1 and gate.limit is not None and gate.limit < 8
    assert state.peak_in_flight <= 8
