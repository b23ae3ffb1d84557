"""What a server log says, as records: throughput samples, served requests, parse counts.

Timestamps are naive ``datetime`` values taken *as written in the log*.  vLLM and
llama.cpp print the server's local wall clock without a zone; we do not guess one.  The
store reads naive values as UTC, so a log from a server whose clock is not UTC should be
imported with ``utc_offset`` (see :func:`agent_eval.serverlogs.import_log`) before it is
joined with a run's window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Sample:
    """One periodic throughput line: the server's own view of one logging interval.

    ``prompt_tps`` and ``generation_tps`` are the tokens/s the server averaged over the
    interval that ends at ``ts`` (vLLM logs one every 10 s by default).  ``running`` and
    ``waiting`` are request counts at ``ts``.  Percentages are 0–100.  Fields a given
    server version does not print are ``None``.  ``raw`` keeps the line for drill-down.
    """

    ts: datetime
    source: str
    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int | None = None
    swapped: int | None = None
    kv_cache_pct: float | None = None
    prefix_hit_pct: float | None = None
    raw: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request the server answered, from its access log line.

    ``duration_s`` is ``None`` when the log does not say how long the request took
    (uvicorn access lines never do).
    """

    ts: datetime
    source: str
    method: str
    path: str
    status: int
    duration_s: float | None = None

    @property
    def is_completion(self) -> bool:
        """A successful chat completion: the unit of "completions per minute".

        Any path ending in ``/chat/completions`` is that endpoint: llama.cpp also serves it
        without ``/v1`` (clients whose base URL lacks it call ``/chat/completions``), and a
        gateway in front of vLLM may add a prefix (``/openai/v1/chat/completions``).
        """
        return (self.method == "POST" and self.status == 200
                and self.path.endswith("/chat/completions"))


CHAT_PATH = "/v1/chat/completions"


@dataclass(slots=True)
class LogStats:
    """Counts kept while a log is parsed, so nothing is dropped silently.

    ``ignored`` lines are of no interest (startup chatter, other requests' logs).
    ``malformed`` lines looked like a throughput, timing or access line but could not be
    read in full (truncated, a field missing, a bad date); their 1-based line numbers are
    kept, the first 20 of them, in ``malformed_lines``.  ``untimed`` access lines came
    before any timestamp they could borrow and were dropped.  ``hidden`` lines are
    ones a journal export printed as ``[101B blob data]`` instead of their text
    (``journalctl`` does so, unless run with ``-a``, for a line holding a control
    character, as llama.cpp's timing lines can): what they said is lost.
    """

    lines: int = 0
    samples: int = 0
    requests: int = 0
    ignored: int = 0
    malformed: int = 0
    untimed: int = 0
    hidden: int = 0
    malformed_lines: list[int] = field(default_factory=list)

    def note_malformed(self, lineno: int) -> None:
        self.malformed += 1
        if len(self.malformed_lines) < 20:
            self.malformed_lines.append(lineno)
