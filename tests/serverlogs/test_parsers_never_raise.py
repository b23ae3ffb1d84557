"""Property: no input line makes a parser raise, and every vLLM line is accounted for once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.serverlogs import LogStats, parse_llamacpp_log, parse_vllm_log

# Real fragments mixed with noise, so generated lines often come close to the real shapes.
FRAGMENTS = [
    "INFO 08-01 12:00:10 [loggers.py:118] ", "(APIServer pid=1) ", "Engine 000: ",
    "Avg prompt throughput: 1.5 tokens/s, ", "Avg generation throughput: 2 tokens/s, ",
    "Running: 3 reqs, ", "Waiting: 1 reqs, ", "KV cache usage: 5.0%", "Prefix cache hit rate: ",
    "GPU: 4.00%, CPU: 0.00%", 'INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "prompt eval time =  1.0 ms /  2 tokens ( 0.5 ms per token, 2000.0 tokens per second)",
    "       eval time =  1.0 ms /  2 runs   ( 0.5 ms per token, 2000.0 tokens per second)",
    "      total time = 2.0 ms /  4 tokens", "slot launch_slot_: id  1 | task 2 |",
    "slot      release: id  1 | task 2 |", "srv  log_server_r: request: POST /v1/chat/completions 1 200",
    "1.02.003.004 I ", "\x1b[1;36m", "\x00", "\n", "nan", "99-99 ",
]  # fmt: skip
line = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=20), max_size=6).map("".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(line, max_size=20))
def test_vllm_parser_accounts_for_every_line(lines):
    stats = LogStats()
    records = list(parse_vllm_log(lines, year=2025, stats=stats))
    assert len(records) == stats.samples + stats.requests
    assert stats.lines == len(lines)
    assert stats.samples + stats.requests + stats.ignored + stats.malformed + stats.untimed == len(
        lines
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(line, max_size=20))
def test_llamacpp_parser_never_raises(lines):
    stats = LogStats()
    records = list(parse_llamacpp_log(lines, stats=stats))
    assert len(records) == stats.samples + stats.requests
    assert stats.lines == len(lines)
