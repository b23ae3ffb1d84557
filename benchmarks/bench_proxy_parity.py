"""What ``proxy --stream-parity`` costs the recorder per streamed turn (docs/proxy.md).

The relay's work is the same with and without it (the twin never passes the relay), so
this measures the recorder's side alone, in process: each streamed Chat Completions
exchange read and judged (``Sessions.take``), and with parity also its twin's body built
(``parity_twin``) and the twin's whole answer read against the stream (``parity``, AE510).
No HTTP: the twin's answer is a canned whole reply, so the upstream's second generation
(the real cost, on the server) is not in it; it is one more request per twinned turn.

    python benchmarks/bench_proxy_parity.py --turns 2000 --rounds 3

Prints, per mode, the turns, upstream requests per turn, and the recorder's CPU per turn
(``time.process_time``, lowest of the interleaved rounds).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from agent_eval.policy import load_allowlist
from agent_eval.proxy import Exchange
from agent_eval.proxy.parity import ParityAnswer
from agent_eval.proxy.sessions import Sessions

REPO = Path(__file__).resolve().parents[1]
ARGS = json.dumps({"command": "uv run scripts/lights.py off --room office"})


def _chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> str:
    body: dict = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                  "choices": [] if delta is None else [
                      {"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


STREAM = "".join([
    _chunk({"role": "assistant", "content": None}),
    _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                            "function": {"name": "bash", "arguments": ""}}]}),
    *(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS[i:i + 8]}}]})
      for i in range(0, len(ARGS), 8)),
    _chunk({}, "tool_calls"),
    _chunk(usage={"prompt_tokens": 1500, "completion_tokens": 20}),
    "data: [DONE]\n\n"]).encode()
WHOLE = json.dumps({"id": "c2", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_2", "type": "function",
             "function": {"name": "bash", "arguments": ARGS}}]}}],
    "usage": {"prompt_tokens": 1500, "completion_tokens": 20}}).encode()
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def exchange(n: int) -> Exchange:
    body = {"model": "m", "stream": True, "temperature": 0, "tools": TOOLS,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": f"You are agent {n}. " + "x" * 2000},
                         {"role": "user", "content": "Turn the office lights off."}]}
    return Exchange(path="/v1/chat/completions", request_body=json.dumps(body).encode(),
                    session_headers={}, started_at=datetime.now(UTC), status=200,
                    content_type="text/event-stream", response_body=bytearray(STREAM),
                    ttft_s=0.1, latency_s=0.5)


def one_round(turns: int, parity: bool) -> tuple[float, int]:
    sessions = Sessions(load_allowlist(REPO / "allowlists" / "ralf.yaml"))
    items = [exchange(n) for n in range(turns)]
    requests = 0
    start = time.process_time()
    for n, ex in enumerate(items):
        sessions.take(ex, float(n))
        requests += 1
        if parity:
            twin = sessions.parity_twin()
            if twin is not None:
                requests += 1
                key, index, _, _ = twin
                sessions.parity(ParityAnswer(key, index, 200, WHOLE))
    cpu = time.process_time() - start
    assert parity is False or sessions.parity_unjudged == 0
    return cpu, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[bool, tuple[float, int]] = {}
    for _ in range(args.rounds):
        for parity in (False, True):  # interleaved
            cpu, requests = one_round(args.turns, parity)
            if parity not in best or cpu < best[parity][0]:
                best[parity] = (cpu, requests)
    base = best[False][0]
    print("| mode | turns | upstream requests/turn | recorder CPU ms/turn | ÷ plain |")
    print("|---|---|---|---|---|")
    for parity, (cpu, requests) in best.items():
        print(f"| {'--stream-parity' if parity else 'plain'} | {args.turns} | "
              f"{requests / args.turns:.2f} | {1000 * cpu / args.turns:.3f} | "
              f"{cpu / base:.2f} |")


if __name__ == "__main__":
    main()
