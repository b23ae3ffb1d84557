"""Runs: a run's life in the store, one writer for every source.

Every source of runs writes through this layer: live runs, ``--resume``, workers and
replay through the run recorder (``recorder.py``: the lease, one writer thread, the
status when the run ends), imports, ``collect`` and rescore through batches of whole
sessions (``writer.py``: :class:`SessionBatches`), the proxy through a
:class:`RunWriter` of its own.  Only this layer calls the store's run writes
(``create_run``, ``set_run_status``, ``record_sessions``, ``finish_run_if_done``), so a
run's status means one thing whoever wrote it; tests/test_layers.py checks it.
"""

from agent_eval.runs.recorder import (
    Counts,
    Handed,
    RunRecorder,
    SessionWriter,
    WorkerRecorder,
)
from agent_eval.runs.writer import (
    RunCounts,
    RunSpec,
    RunWriter,
    SessionBatches,
    TargetDefaults,
)

__all__ = [
    "Counts",
    "Handed",
    "RunCounts",
    "RunRecorder",
    "RunSpec",
    "RunWriter",
    "SessionBatches",
    "SessionWriter",
    "TargetDefaults",
    "WorkerRecorder",
]
