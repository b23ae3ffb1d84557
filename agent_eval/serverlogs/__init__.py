"""Inference-server logs: what the server saw, next to what the model did.

Parsing is pure (``vllm``, ``llamacpp``: lines in, :class:`Sample`/:class:`Request` out,
never an exception on content); bucketing is pure (``tables``: the ``perf`` tables and
useful work per minute, definitions in its docstring); ``importing`` is the only part
that touches files and the store.  Speed is reported only next to reliability: see
docs/design.md, "Speed matters only next to reliability".
"""

from agent_eval.serverlogs.importing import LOG_FORMATS, ImportStats, LogFormat, import_log
from agent_eval.serverlogs.llamacpp import parse_llamacpp_log
from agent_eval.serverlogs.records import CHAT_PATH, LogStats, Request, Sample
from agent_eval.serverlogs.speed import (
    CompletionsRow,
    GenerationRow,
    PerfTables,
    PrefillRow,
    UsefulWork,
    busy_generation_tps,
    perf_tables,
    useful_work,
)
from agent_eval.serverlogs.vllm import parse_vllm_log

__all__ = [
    "CHAT_PATH",
    "LOG_FORMATS",
    "CompletionsRow",
    "GenerationRow",
    "ImportStats",
    "LogFormat",
    "LogStats",
    "PerfTables",
    "PrefillRow",
    "Request",
    "Sample",
    "UsefulWork",
    "busy_generation_tps",
    "import_log",
    "parse_llamacpp_log",
    "parse_vllm_log",
    "perf_tables",
    "useful_work",
]
